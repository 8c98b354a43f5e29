package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Completion is what a kernel offers to complete at a cursor, as Jupyter's
// complete_reply has it: Matches replace the code from CursorStart to
// CursorEnd. Positions count Unicode code points, as Jupyter does.
type Completion struct {
	Matches     []string       `json:"matches"`
	CursorStart int            `json:"cursor_start"`
	CursorEnd   int            `json:"cursor_end"`
	Metadata    map[string]any `json:"metadata"`
}

// Inspection is what a kernel knows about the name at a cursor, as
// Jupyter's inspect_reply has it: Data is a MIME bundle (text/plain at least).
type Inspection struct {
	Found    bool           `json:"found"`
	Data     map[string]any `json:"data"`
	Metadata map[string]any `json:"metadata"`
}

// assistTimeout bounds the wait for a completion or inspection: they run
// in the kernel's thread, where user code (a property, __getattr__) may be
// slow.
const assistTimeout = 10 * time.Second

// Complete asks for completions of code at cursorPos.
func (k *Kernel) Complete(ctx context.Context, code string, cursorPos int) (*Completion, error) {
	var c Completion
	if err := k.call(ctx, map[string]any{"type": "complete", "code": code, "cursor_pos": cursorPos}, &c); err != nil {
		return nil, fmt.Errorf("complete: %w", err)
	}
	if c.Matches == nil {
		c.Matches = []string{}
	}
	return &c, nil
}

// Inspect asks what the name at cursorPos is; detail 0 is a summary, 1
// adds the source where the language can.
func (k *Kernel) Inspect(ctx context.Context, code string, cursorPos, detail int) (*Inspection, error) {
	var in Inspection
	if err := k.call(ctx, map[string]any{"type": "inspect", "code": code, "cursor_pos": cursorPos, "detail_level": detail}, &in); err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	if in.Data == nil {
		in.Data = map[string]any{}
	}
	return &in, nil
}

// call sends a request that is not a cell and decodes its reply. Like a
// cell it needs the kernel to itself: ErrBusy while one runs.
func (k *Kernel) call(ctx context.Context, msg map[string]any, reply any) error {
	if !k.mu.TryLock() {
		return ErrBusy
	}
	defer k.mu.Unlock()
	if k.dead != nil {
		return fmt.Errorf("%w: %w", ErrDead, k.dead)
	}
	k.cellSeq++
	id := fmt.Sprintf("c%d", k.cellSeq)
	msg["id"] = id
	msg["code"] = validUTF8(msg["code"].(string))
	oomBefore := k.oomKills()
	if err := k.send(msg); err != nil {
		k.dead = err
		return fmt.Errorf("%w: %w", ErrDead, err)
	}
	timer := time.NewTimer(assistTimeout)
	defer timer.Stop()
	for {
		select {
		case f, ok := <-k.frames:
			if !ok {
				k.dead = k.death(oomBefore)
				return fmt.Errorf("%w: %w", ErrDead, k.dead)
			}
			if f.ID == id && f.Type == "reply" {
				return json.Unmarshal(f.Reply, reply)
			}
		case <-timer.C:
			// A late reply is dropped by whatever reads frames next: its id
			// is not theirs.
			return fmt.Errorf("the kernel did not answer within %v", assistTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
