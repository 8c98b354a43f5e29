package client

import (
	"context"
	"net/url"
	"time"
)

// Session is a kernel that keeps state between executions. Session ids are
// per language: a Python and a JavaScript session may share one. The
// methods that take a session's id and language look it up in that
// language, or with an empty one among Python sessions first, then
// JavaScript ones; an unknown session is an *APIError with status 404.
type Session struct {
	ID             string    `json:"session_id"`
	Language       Language  `json:"language"`
	Cwd            string    `json:"cwd"`
	CreatedAt      time.Time `json:"created_at"`
	LastUsedAt     time.Time `json:"last_used_at"`
	ExecutionCount int       `json:"execution_count"`
	Busy           bool      `json:"busy"`  // an execution is running
	Alive          bool      `json:"alive"` // its kernel is running
}

// sessionPath is the path of a session, or of an action on it.
func sessionPath(id, action string) string {
	p := "/v2/code/sessions/" + url.PathEscape(id)
	if action != "" {
		p += "/" + action
	}
	return p
}

func langQuery(lang Language) url.Values {
	if lang == "" {
		return nil
	}
	return url.Values{"language": {string(lang)}}
}

// CreateSession starts a session's kernel, so that its first execution is
// fast; an empty id is made up by the server. A session that exists already
// is returned as it is. (Execute also creates a session on first use.)
func (c *Client) CreateSession(ctx context.Context, lang Language, id string) (*Session, error) {
	body := map[string]any{"language": lang}
	if id != "" {
		body["session_id"] = id
	}
	var out struct {
		Session Session `json:"session"`
	}
	if _, err := c.call(ctx, "POST", sandboxRoute, "/v2/code/sessions", nil, body, &out); err != nil {
		return nil, err
	}
	return &out.Session, nil
}

// ListSessions lists the sandbox's sessions of lang, or of every language
// if lang is empty.
func (c *Client) ListSessions(ctx context.Context, lang Language) ([]Session, error) {
	var out struct {
		Sessions []Session `json:"sessions"`
	}
	if _, err := c.call(ctx, "GET", sandboxRoute, "/v2/code/sessions", langQuery(lang), nil, &out); err != nil {
		return nil, err
	}
	return out.Sessions, nil
}

// GetSession describes a session.
func (c *Client) GetSession(ctx context.Context, id string, lang Language) (*Session, error) {
	var s Session
	if _, err := c.call(ctx, "GET", sandboxRoute, sessionPath(id, ""), langQuery(lang), nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// DeleteSession ends a session at once, stopping any execution in it.
func (c *Client) DeleteSession(ctx context.Context, id string, lang Language) error {
	_, err := c.call(ctx, "DELETE", sandboxRoute, sessionPath(id, ""), langQuery(lang), nil, nil)
	return err
}

// Interrupt stops the session's running execution, which ends with
// KeyboardInterrupt (Python) or its JavaScript equivalent; the session
// keeps its state. It reports whether an execution was running.
func (c *Client) Interrupt(ctx context.Context, id string, lang Language) (bool, error) {
	var out struct {
		Interrupted bool `json:"interrupted"`
	}
	if _, err := c.call(ctx, "POST", sandboxRoute, sessionPath(id, "interrupt"), langQuery(lang), nil, &out); err != nil {
		return false, err
	}
	return out.Interrupted, nil
}

// Restart replaces the session's kernel with a fresh one: its variables
// are gone, its files stay.
func (c *Client) Restart(ctx context.Context, id string, lang Language) (*Session, error) {
	var s Session
	if _, err := c.call(ctx, "POST", sandboxRoute, sessionPath(id, "restart"), langQuery(lang), nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Completion is what may be typed at a cursor (Jupyter's complete_reply).
type Completion struct {
	Matches []string `json:"matches"`
	// CursorStart and CursorEnd delimit, in code points, the text of code a
	// match replaces.
	CursorStart int            `json:"cursor_start"`
	CursorEnd   int            `json:"cursor_end"`
	Metadata    map[string]any `json:"metadata"`
}

// Inspection is what the name at a cursor is (Jupyter's inspect_reply).
type Inspection struct {
	Found bool `json:"found"`
	// Data maps MIME types to the description: text/plain always.
	Data     map[string]any `json:"data"`
	Metadata map[string]any `json:"metadata"`
}

func assistBody(code string, cursorPos int) map[string]any {
	b := map[string]any{"code": code}
	if cursorPos >= 0 {
		b["cursor_pos"] = cursorPos
	}
	return b
}

// Complete returns the completions at cursorPos in code, counted in code
// points (runes), in the session's namespace; a negative cursorPos means
// the end of code.
func (c *Client) Complete(ctx context.Context, id string, lang Language, code string, cursorPos int) (*Completion, error) {
	var out Completion
	if _, err := c.call(ctx, "POST", sandboxRoute, sessionPath(id, "complete"), langQuery(lang), assistBody(code, cursorPos), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Inspect describes the name at cursorPos in code (as Complete counts it),
// in the session's namespace: detailLevel 0 is a summary, 1 adds the source
// where there is one.
func (c *Client) Inspect(ctx context.Context, id string, lang Language, code string, cursorPos, detailLevel int) (*Inspection, error) {
	body := assistBody(code, cursorPos)
	body["detail_level"] = detailLevel
	var out Inspection
	if _, err := c.call(ctx, "POST", sandboxRoute, sessionPath(id, "inspect"), langQuery(lang), body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
