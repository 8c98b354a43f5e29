package jupyter

import (
	"context"
	"crypto/rand"
	"fmt"
)

// KernelInfoReply is the content of a kernel_info_reply.
type KernelInfoReply struct {
	Status                string       `json:"status"`
	ProtocolVersion       string       `json:"protocol_version"`
	Implementation        string       `json:"implementation"`
	ImplementationVersion string       `json:"implementation_version"`
	LanguageInfo          LanguageInfo `json:"language_info"`
	Banner                string       `json:"banner"`
}

// LanguageInfo describes a kernel's language.
type LanguageInfo struct {
	Name          string `json:"name"`
	Version       string `json:"version"`
	Mimetype      string `json:"mimetype"`
	FileExtension string `json:"file_extension"`
}

// KernelInfo asks the kernel about itself and its language.
func (c *Client) KernelInfo(ctx context.Context) (KernelInfoReply, error) {
	var r KernelInfoReply
	if err := c.request(ctx, Shell, "kernel_info_request", struct{}{}, &r); err != nil {
		return KernelInfoReply{}, fmt.Errorf("jupyter: kernel info: %w", err)
	}
	return r, nil
}

// CompleteReply is the content of a complete_reply. The matches replace
// the code from CursorStart to CursorEnd, counted in code points.
type CompleteReply struct {
	Matches     []string       `json:"matches"`
	CursorStart int            `json:"cursor_start"`
	CursorEnd   int            `json:"cursor_end"`
	Metadata    map[string]any `json:"metadata"`
	Status      string         `json:"status"`
}

// Complete asks for completions of code at cursorPos. Positions in the
// protocol (5.2 and later) count Unicode code points, not bytes: for the
// byte offset i, pass utf8.RuneCountInString(code[:i]).
func (c *Client) Complete(ctx context.Context, code string, cursorPos int) (CompleteReply, error) {
	req := struct {
		Code      string `json:"code"`
		CursorPos int    `json:"cursor_pos"`
	}{code, cursorPos}
	var r CompleteReply
	if err := c.request(ctx, Shell, "complete_request", req, &r); err != nil {
		return CompleteReply{}, fmt.Errorf("jupyter: complete: %w", err)
	}
	return r, nil
}

// InspectReply is the content of an inspect_reply: Data is a mime bundle.
type InspectReply struct {
	Found    bool           `json:"found"`
	Data     map[string]any `json:"data"`
	Metadata map[string]any `json:"metadata"`
	Status   string         `json:"status"`
}

// Inspect asks for information about the object at cursorPos in code (in
// code points, as for Complete). detailLevel is 0 or 1 (more detail, such
// as source code).
func (c *Client) Inspect(ctx context.Context, code string, cursorPos, detailLevel int) (InspectReply, error) {
	req := struct {
		Code        string `json:"code"`
		CursorPos   int    `json:"cursor_pos"`
		DetailLevel int    `json:"detail_level"`
	}{code, cursorPos, detailLevel}
	var r InspectReply
	if err := c.request(ctx, Shell, "inspect_request", req, &r); err != nil {
		return InspectReply{}, fmt.Errorf("jupyter: inspect: %w", err)
	}
	return r, nil
}

// Interrupt interrupts the code the kernel is running. For a local kernel
// it sends interrupt_request on control, which is for kernelspecs whose
// interrupt_mode is "message"; for "signal" the caller sends SIGINT itself.
// ipykernel honours both, and answers the message by signalling its
// process group if it leads one, so it must not share the server's. For a
// Jupyter Server kernel it uses the server's REST API.
func (c *Client) Interrupt(ctx context.Context) error {
	if c.server != nil {
		return c.server.Interrupt(ctx, c.kernelID)
	}
	if err := c.request(ctx, Control, "interrupt_request", struct{}{}, &struct{}{}); err != nil {
		return fmt.Errorf("jupyter: interrupt: %w", err)
	}
	return nil
}

// Shutdown asks the kernel to shut down (a local kernel then exits; with
// restart, whoever started it is to start it again) and waits for its
// answer. For a Jupyter Server kernel it uses the REST API, so the server
// knows: DELETE, or restart.
func (c *Client) Shutdown(ctx context.Context, restart bool) error {
	if c.server != nil {
		if restart {
			return c.server.Restart(ctx, c.kernelID)
		}
		return c.server.Shutdown(ctx, c.kernelID)
	}
	req := struct {
		Restart bool `json:"restart"`
	}{restart}
	if err := c.request(ctx, Control, "shutdown_request", req, &struct{}{}); err != nil {
		return fmt.Errorf("jupyter: shutdown: %w", err)
	}
	return nil
}

// Heartbeat checks that the kernel is alive: one ping and its echo on the
// heartbeat channel, which the kernel answers even while it runs code. For
// a Jupyter Server kernel it asks the server, which watches the heartbeat
// itself, whether the kernel exists and is not dead.
func (c *Client) Heartbeat(ctx context.Context) error {
	if c.server != nil {
		return c.server.alive(ctx, c.kernelID)
	}
	ping := &Message{Channel: Heartbeat, Header: Header{MsgID: rand.Text()}}
	w := c.wait(ping.Header.MsgID)
	defer c.unwait(w, ping.Header.MsgID)
	if err := c.send(ctx, ping); err != nil {
		return fmt.Errorf("jupyter: heartbeat: %w", err)
	}
	if _, err := c.next(ctx, w, Heartbeat, Heartbeat); err != nil {
		return fmt.Errorf("jupyter: heartbeat: %w", err)
	}
	return nil
}
