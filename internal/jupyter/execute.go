package jupyter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ExecuteOptions configures one Execute.
type ExecuteOptions struct {
	// Silent asks the kernel to publish no output and not to count the
	// execution.
	Silent bool
	// StoreHistory defaults to true, or false when Silent.
	StoreHistory *bool
	// Stdin, if set, answers the code's requests for input (Python's
	// input()); without it the kernel refuses them. It runs on a goroutine
	// of its own and should return when Execute's context is done. io.EOF
	// answers the end of input ("\x04", which ipykernel raises as
	// EOFError). If it fails otherwise, Execute returns its error and the
	// kernel keeps waiting for input until it is interrupted.
	Stdin func(prompt string, password bool) (string, error)
	// ContinueOnError sends stop_on_error false. By default a kernel
	// whose cell fails aborts the execute requests queued behind it; but
	// ipykernel ends that abort on a zero-delay timer, so it also aborts a
	// request sent right after the error reply arrived. A client that runs
	// cells one at a time should set it for every cell.
	ContinueOnError bool
}

// ExecuteReply is the content of an execute_reply. Status is "ok", "error"
// (Ename, Evalue and Traceback say which) or "aborted" (an earlier cell in
// the queue failed).
type ExecuteReply struct {
	Status         string           `json:"status"`
	ExecutionCount int              `json:"execution_count"`
	Ename          string           `json:"ename"`
	Evalue         string           `json:"evalue"`
	Traceback      []string         `json:"traceback"`
	Payload        []map[string]any `json:"payload"`
}

// stdinAnswer is what ExecuteOptions.Stdin returned for one input_request.
type stdinAnswer struct {
	request Header
	value   string
	err     error
}

// Execute runs code and returns its reply once all its output arrived: the
// reply on shell and the idle status on iopub come on different sockets, in
// no fixed order, so Execute waits for both. onIOPub, if not nil, is called
// with each iopub message of this request (stream, display_data,
// update_display_data, execute_input, execute_result, error, clear_output,
// status) in the order they arrived, on Execute's goroutine. It should be
// quick: while it runs, iopub is not read, and a kernel drops what it
// publishes beyond its socket's high-water mark (1000 messages).
//
// A cell that fails is not an error: the reply's Status is "error". If ctx
// is done first, Execute returns ctx.Err() and the code keeps running; the
// caller decides whether to interrupt it.
func (c *Client) Execute(ctx context.Context, code string, opts ExecuteOptions, onIOPub func(Message)) (ExecuteReply, error) {
	reply, err := c.execute(ctx, code, opts, onIOPub)
	if err != nil {
		return ExecuteReply{}, fmt.Errorf("jupyter: execute: %w", err)
	}
	return reply, nil
}

func (c *Client) execute(ctx context.Context, code string, opts ExecuteOptions, onIOPub func(Message)) (ExecuteReply, error) {
	storeHistory := !opts.Silent
	if opts.StoreHistory != nil {
		storeHistory = *opts.StoreHistory
	}
	req := struct {
		Code            string         `json:"code"`
		Silent          bool           `json:"silent"`
		StoreHistory    bool           `json:"store_history"`
		UserExpressions map[string]any `json:"user_expressions"`
		AllowStdin      bool           `json:"allow_stdin"`
		StopOnError     bool           `json:"stop_on_error"`
	}{code, opts.Silent, storeHistory, map[string]any{}, opts.Stdin != nil, !opts.ContinueOnError}
	m, err := c.newMessage(Shell, "execute_request", req)
	if err != nil {
		return ExecuteReply{}, err
	}
	w := c.wait(m.Header.MsgID)
	defer c.unwait(w, m.Header.MsgID)
	if err := c.send(ctx, m); err != nil {
		return ExecuteReply{}, err
	}

	var reply ExecuteReply
	replied, idle := false, false
	answers := make(chan stdinAnswer, 1) // the kernel asks for one input at a time
	for !replied || !idle {
		var r *Message
		select {
		case a := <-answers:
			if errors.Is(a.err, io.EOF) {
				a.value, a.err = "\x04", nil
			}
			if a.err != nil {
				return ExecuteReply{}, fmt.Errorf("reading stdin: %w", a.err)
			}
			if err := c.answerInput(ctx, a); err != nil {
				return ExecuteReply{}, err
			}
			continue
		case r = <-w.ch:
		case <-ctx.Done():
			return ExecuteReply{}, ctx.Err()
		case <-c.done:
			return ExecuteReply{}, ErrClosed
		case <-c.lost[Shell].done:
			if r, err = w.drain(c.lost[Shell].err); err != nil {
				return ExecuteReply{}, err
			}
		case <-c.lost[IOPub].done:
			if r, err = w.drain(c.lost[IOPub].err); err != nil {
				return ExecuteReply{}, err
			}
		}
		switch {
		case r.Channel == IOPub:
			if onIOPub != nil {
				onIOPub(*r)
			}
			var st struct {
				ExecutionState string `json:"execution_state"`
			}
			if r.Header.MsgType == "status" && json.Unmarshal(r.Content, &st) == nil && st.ExecutionState == "idle" {
				idle = true
			}
		case r.Channel == Shell && r.Header.MsgType == "execute_reply":
			if err := json.Unmarshal(r.Content, &reply); err != nil {
				return ExecuteReply{}, fmt.Errorf("decoding execute_reply: %w", err)
			}
			replied = true
		case r.Channel == Stdin && r.Header.MsgType == "input_request" && opts.Stdin != nil:
			var in struct {
				Prompt   string `json:"prompt"`
				Password bool   `json:"password"`
			}
			if err := json.Unmarshal(r.Content, &in); err != nil {
				return ExecuteReply{}, fmt.Errorf("decoding input_request: %w", err)
			}
			go func(h Header) {
				v, err := opts.Stdin(in.Prompt, in.Password)
				select {
				case answers <- stdinAnswer{request: h, value: v, err: err}:
				case <-w.done:
				}
			}(r.Header)
		}
	}
	return reply, nil
}

// answerInput sends the input_reply for a.
func (c *Client) answerInput(ctx context.Context, a stdinAnswer) error {
	m, err := c.newMessage(Stdin, "input_reply", struct {
		Value string `json:"value"`
	}{a.value})
	if err != nil {
		return err
	}
	m.ParentHeader = a.request
	if err := c.send(ctx, m); err != nil {
		return fmt.Errorf("answering input_request: %w", err)
	}
	return nil
}
