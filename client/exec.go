package client

import (
	"bufio"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
	"time"
)

// Language is what code is written in.
type Language string

// The languages every codecell server runs.
const (
	Python     Language = "python"
	JavaScript Language = "javascript"
)

// Statuses of a Result.
const (
	StatusOK      = "ok"
	StatusError   = "error"   // the code raised an exception, or its kernel died
	StatusTimeout = "timeout" // the code did not finish within its timeout
)

// ExecuteRequest is code to run.
type ExecuteRequest struct {
	Language Language
	Code     string
	// SessionID names a session that keeps state between executions; it is
	// created on first use. Empty: a fresh interpreter, discarded after.
	SessionID string
	// Timeout bounds the execution; 0 means the server's default (30s).
	Timeout time.Duration
	// Cwd is the working directory; empty means /home/user.
	Cwd string
}

func (r ExecuteRequest) body() map[string]any {
	b := map[string]any{"language": r.Language, "code": r.Code}
	if r.SessionID != "" {
		b["session_id"] = r.SessionID
	}
	if r.Timeout != 0 {
		b["timeout"] = r.Timeout.Seconds()
	}
	if r.Cwd != "" {
		b["cwd"] = r.Cwd
	}
	return b
}

// Result is what an execution produced.
type Result struct {
	Status         string `json:"status"` // StatusOK, StatusError or StatusTimeout
	ExecutionCount int    `json:"execution_count"`
	// SessionID is the session the code ran in; empty for a one-shot run.
	SessionID string   `json:"session_id"`
	Outputs   []Output `json:"outputs"`
	// Stdout and Stderr are the text of the stream outputs.
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	// ExitCode is what a process would have exited with: 0, 1, or 124 on a
	// timeout.
	ExitCode int   `json:"exit_code"`
	Usage    Usage `json:"usage"`
	// Truncated reports that outputs beyond the sandbox's limit were cut.
	Truncated bool `json:"truncated"`
	// SessionRestarted reports that the session's kernel died during the
	// execution (out of memory, say): its state is lost, and Message says why.
	SessionRestarted bool `json:"session_restarted"`
	// Message is the server's summary: "ok", the exception, or why the
	// session restarted.
	Message string `json:"message"`
}

// Usage is what an execution used.
type Usage struct {
	WallTime        time.Duration
	CPUTime         time.Duration
	PeakMemoryBytes int64
}

// UnmarshalJSON reads the server's {wall_time_ms, cpu_time_ms, peak_memory_bytes}.
func (u *Usage) UnmarshalJSON(b []byte) error {
	var v struct {
		WallTimeMS      int64 `json:"wall_time_ms"`
		CPUTimeMS       int64 `json:"cpu_time_ms"`
		PeakMemoryBytes int64 `json:"peak_memory_bytes"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*u = Usage{time.Duration(v.WallTimeMS) * time.Millisecond, time.Duration(v.CPUTimeMS) * time.Millisecond, v.PeakMemoryBytes}
	return nil
}

// Output is one Jupyter output. OutputType says which fields are set:
// "stream" (Name stdout or stderr, Text), "execute_result" (the value of the
// cell's last expression: Data, Metadata, ExecutionCount), "display_data"
// (a figure or other rich output: Data, Metadata) or "error" (Ename,
// Evalue, Traceback).
type Output struct {
	OutputType string `json:"output_type"`
	Name       string `json:"name,omitempty"`
	Text       string `json:"text,omitempty"`
	// Data maps MIME types to content: text/plain, text/html and
	// image/svg+xml as strings, image/png and image/jpeg in base64,
	// application/json as decoded JSON.
	Data           map[string]any `json:"data,omitempty"`
	Metadata       map[string]any `json:"metadata,omitempty"`
	ExecutionCount *int           `json:"execution_count,omitempty"`
	Ename          string         `json:"ename,omitempty"`
	Evalue         string         `json:"evalue,omitempty"`
	Traceback      []string       `json:"traceback,omitempty"`
}

// PNG returns the output's image/png data, decoded.
func (o Output) PNG() ([]byte, error) {
	return o.image("image/png")
}

func (o Output) image(mimeType string) ([]byte, error) {
	s, ok := o.Data[mimeType].(string)
	if !ok {
		return nil, fmt.Errorf("%s output has no %s data", o.OutputType, mimeType)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("decoding %s output: %w", mimeType, err)
	}
	return b, nil
}

// Text returns the text/plain of the cell's value (its execute_result), as
// a notebook shows it after the cell, or "" if the cell had no value.
func (r *Result) Text() string {
	for _, o := range r.Outputs {
		if o.OutputType == "execute_result" {
			s, _ := o.Data["text/plain"].(string)
			return s
		}
	}
	return ""
}

// Err returns nil if the code ran to the end (Status is StatusOK), and
// otherwise a *CodeError describing its exception or timeout.
func (r *Result) Err() error {
	if r.Status == StatusOK {
		return nil
	}
	e := &CodeError{Status: r.Status, Ename: r.Status, Evalue: r.Message}
	for _, o := range r.Outputs {
		if o.OutputType == "error" {
			e.Ename, e.Evalue, e.Traceback = o.Ename, o.Evalue, o.Traceback
			break
		}
	}
	return e
}

// CodeError is the exception, or timeout, that ended an execution.
type CodeError struct {
	Status    string // StatusError or StatusTimeout
	Ename     string // the exception's class, such as ZeroDivisionError
	Evalue    string
	Traceback []string
}

func (e *CodeError) Error() string {
	if e.Evalue == "" {
		return e.Ename
	}
	return e.Ename + ": " + e.Evalue
}

// Execute runs code and returns what it produced (POST /v2/code/execute).
// Code that raises an exception is not an error: see Result.Err.
func (c *Client) Execute(ctx context.Context, req ExecuteRequest) (*Result, error) {
	var res Result
	msg, err := c.call(ctx, "POST", sandboxRoute, "/v2/code/execute", nil, req.body(), &res)
	if err != nil {
		return nil, err
	}
	if res.Message == "" {
		res.Message = msg
	}
	return &res, nil
}

// ExecuteStream is Execute with outputs delivered as the code produces
// them: fn is called, in order and before ExecuteStream returns, with each
// output as it arrives (adjacent stream text arrives in pieces that the
// Result's Outputs hold merged). The execution goes on if ctx ends; only
// the wait for it stops.
func (c *Client) ExecuteStream(ctx context.Context, req ExecuteRequest, fn func(Output)) (*Result, error) {
	if fn == nil {
		fn = func(Output) {}
	}
	hreq, err := c.newRequest(ctx, "POST", sandboxRoute, "/v2/code/execute", nil, req.body())
	if err != nil {
		return nil, fmt.Errorf("POST /v2/code/execute: %w", err)
	}
	hreq.Header.Set("Accept", "text/event-stream")
	resp, err := c.send(hreq)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		// A server (or proxy) that does not stream: the whole result at once.
		var res Result
		msg, err := decodeEnvelope(hreq, resp.Body, &res)
		if err != nil {
			return nil, err
		}
		res.Message = cmp.Or(res.Message, msg)
		for _, o := range res.Outputs {
			fn(o)
		}
		return &res, nil
	}
	res, err := readStream(resp.Body, fn)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", hreq.Method, hreq.URL.Path, err)
	}
	return res, nil
}

// readStream reads an execution's events: fn gets each output, the done
// event is the result and an error event an *APIError.
func readStream(r io.Reader, fn func(Output)) (*Result, error) {
	events := newEventReader(r)
	for {
		name, data, err := events.next()
		if err == io.EOF {
			return nil, errors.New("the stream ended without a result")
		} else if err != nil {
			return nil, err
		}
		switch name {
		case "output":
			var o Output
			if err := json.Unmarshal(data, &o); err != nil {
				return nil, fmt.Errorf("decoding an output event: %w", err)
			}
			fn(o)
		case "done":
			var env envelope
			var res Result
			if err := json.Unmarshal(data, &env); err != nil {
				return nil, fmt.Errorf("decoding the done event: %w", err)
			}
			if err := json.Unmarshal(env.Data, &res); err != nil {
				return nil, fmt.Errorf("decoding the done event's data: %w", err)
			}
			res.Message = cmp.Or(res.Message, env.Message)
			return &res, nil
		case "error":
			var ev struct {
				Status  int    `json:"status"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal(data, &ev); err != nil {
				return nil, fmt.Errorf("decoding the error event: %w", err)
			}
			return nil, &APIError{StatusCode: ev.Status, Message: ev.Message}
		}
		// Other events are for newer clients: skipped.
	}
}

// eventReader reads Server-Sent Events. Lines may be of any length: an
// output event carries a whole image.
type eventReader struct{ r *bufio.Reader }

func newEventReader(r io.Reader) *eventReader { return &eventReader{bufio.NewReader(r)} }

// next returns the next event's name ("message" if it has none) and data
// (its data lines joined with "\n"); io.EOF at the end of the stream.
func (e *eventReader) next() (name string, data []byte, err error) {
	var lines []string
	for {
		line, err := e.r.ReadString('\n')
		if err != nil && (err != io.EOF || line == "") {
			if err == io.EOF && lines != nil {
				err = io.ErrUnexpectedEOF
			}
			return "", nil, err
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			if lines == nil && name == "" {
				continue // a blank line between events, or after a comment
			}
			return cmp.Or(name, "message"), []byte(strings.Join(lines, "\n")), nil
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "": // a comment, such as a keep-alive
		case "event":
			name = value
		case "data":
			lines = append(lines, value)
		}
	}
}
