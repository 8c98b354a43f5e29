package api

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/codecell/codecell/internal/files"
	"github.com/codecell/codecell/internal/jail"
	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/llm"
	"github.com/codecell/codecell/internal/sandbox"
)

// execRequest is what every execute route asks for, once decoded.
type execRequest struct {
	lang      kernel.Language
	code      string
	timeout   time.Duration
	sessionID string // "" with !stateful: a one-shot run
	stateful  bool   // a session even without an id (one is made up)
	cwd       string
	stdin     string
	files     map[string]string // written into cwd before the run
	onOutput  func(kernel.Output)
	detached  bool // see kernel.Request.Detached
	llm       bool // reply shaped for a language model (output_format "llm")
}

// execOutcome is what every execute route replies from.
type execOutcome struct {
	*kernel.Result
	sessionID *string // nil for a one-shot run
	restarted bool
	written   []files.FileInfo // what the code wrote; only with execRequest.llm
}

// execute runs a request in sb: in its session if it names one (created on
// first use), else in a fresh kernel discarded afterwards.
func (s *Server) execute(ctx context.Context, sb *sandbox.Sandbox, req execRequest) (*execOutcome, error) {
	req.lang = s.resolveSession(ctx, sb, req.lang, req.sessionID)
	if err := s.runtime.check(req.lang); err != nil {
		return nil, err
	}
	for name, content := range req.files {
		if err := sb.WriteFile(path.Join(cwdOr(req.cwd), name), strings.NewReader(content)); err != nil {
			return nil, errorf(http.StatusUnprocessableEntity, "files: %v", err)
		}
	}
	kreq := kernel.Request{Code: req.code, Timeout: req.timeout, Cwd: req.cwd, Stdin: req.stdin, OnOutput: req.onOutput, Detached: req.detached}
	start := time.Now()
	var o *execOutcome
	var queueWait time.Duration
	var err error
	defer func() { s.observe(sb, req, o, err, start, queueWait) }()
	if req.sessionID == "" && !req.stateful {
		var res *kernel.Result
		if res, err = sb.RunRequest(ctx, req.lang, kreq); err != nil {
			return nil, err
		}
		o = &execOutcome{Result: res}
	} else {
		var sess *sandbox.Session
		if sess, _, err = sb.OpenSession(req.lang, req.sessionID, true); err != nil {
			return nil, err
		}
		var res *sandbox.Result
		if res, err = sess.Execute(ctx, kreq); err != nil {
			return nil, err
		}
		id := sess.ID
		o = &execOutcome{Result: res.Result, sessionID: &id, restarted: res.Restarted}
		queueWait = res.QueueWait
	}
	if req.llm || s.cfg.Audit != nil {
		if req.detached {
			ctx = context.WithoutCancel(ctx) // the cell ran for the record, client or not
		}
		o.written, _, _ = sb.Files().Changed(ctx, start, 0)
	}
	return o, nil
}

// outputFormat reads output_format: "json" (the default) or "llm".
func outputFormat(v *string) (bool, error) {
	switch deref(v) {
	case "", "json":
		return false, nil
	case "llm":
		return true, nil
	}
	return false, invalid("output_format", fmt.Sprintf("unknown output format %q: use json or llm", *v), "value_error")
}

// llmData replaces a reply's outputs with their rendering for a language
// model: text and downscaled images, a summary, the files written.
func (s *Server) llmData(o *execOutcome, data map[string]any) map[string]any {
	written := make([]llm.File, len(o.written))
	for i, f := range o.written {
		written[i] = llm.File{Path: f.Path, Size: f.Size, Modified: f.ModTime}
	}
	r := llm.Render(o.Result, written, s.cfg.Render)
	outs := make([]map[string]any, 0, len(r.Blocks))
	for _, b := range r.Blocks {
		if b.Kind == "image" {
			outs = append(outs, map[string]any{"output_type": "image", "mime_type": b.MIME, "data": b.Data, "width": b.Width, "height": b.Height})
		} else {
			outs = append(outs, map[string]any{"output_type": "text", "text": b.Text})
		}
	}
	for _, raw := range []string{"stdout", "stderr", "traceback"} {
		delete(data, raw) // in the text already, cut to fit
	}
	data["outputs"] = outs
	data["summary"] = r.Summary
	data["cut"] = r.Cut
	data["files_written"] = written
	return data
}

func cwdOr(cwd string) string {
	if cwd == "" {
		return jail.HomeDir
	}
	return cwd
}

// timeout checks a request's timeout in seconds (nil: the default).
func (s *Server) timeout(field string, secs *float64) (time.Duration, error) {
	if secs == nil {
		return s.cfg.DefaultTimeout, nil
	}
	max := s.cfg.MaxTimeout.Seconds()
	if math.IsNaN(*secs) || *secs <= 0 || *secs > max {
		return 0, invalid(field, fmt.Sprintf("must be more than 0 and at most %g seconds", max), "value_error.number")
	}
	return time.Duration(*secs * float64(time.Second)), nil
}

// language checks a request's language against the two codecell runs.
func language(field, v string) (kernel.Language, error) {
	switch v {
	case "python":
		return kernel.Python, nil
	case "javascript":
		return kernel.JavaScript, nil
	case "":
		return "", invalid(field, "field required", "missing")
	}
	return "", invalid(field, fmt.Sprintf("unsupported language %q: use 'python' or 'javascript'", v), "enum")
}

// required reports a missing string field.
func required(field string, v *string) error {
	if v == nil {
		return invalid(field, "field required", "missing")
	}
	return nil
}

// outputsV1 gives every output the nine keys of the v1 schema.
func outputsV1(outs []kernel.Output) []map[string]any {
	list := make([]map[string]any, len(outs))
	for i, o := range outs {
		list[i] = o.V1()
	}
	return list
}

// usage is what every execution reports it used.
type usage struct {
	WallTimeMS      int64 `json:"wall_time_ms"`
	CPUTimeMS       int64 `json:"cpu_time_ms"`
	PeakMemoryBytes int64 `json:"peak_memory_bytes"`
}

func usageOf(u kernel.Usage) usage {
	return usage{WallTimeMS: u.WallTime.Milliseconds(), CPUTimeMS: u.CPUTime.Milliseconds(), PeakMemoryBytes: u.PeakMemoryBytes}
}

// common returns the fields every execution reply shares.
func (o *execOutcome) common() map[string]any {
	m := map[string]any{
		"status":            o.Status,
		"execution_count":   o.ExecutionCount,
		"session_id":        o.sessionID,
		"usage":             usageOf(o.Usage),
		"truncated":         o.Truncated,
		"session_restarted": o.restarted,
	}
	if o.restarted {
		m["message"] = "the kernel died (" + o.Error().Ename + "); the session starts a fresh kernel on its next execution and its state is lost"
	}
	return m
}

// exitCode is what a one-shot process would have exited with.
func (o *execOutcome) exitCode() int {
	switch o.Status {
	case kernel.StatusOK:
		return 0
	case kernel.StatusTimeout:
		return 124
	}
	return 1
}

// tracebackLines is the first error's traceback, or nil.
func (o *execOutcome) tracebackLines() []string {
	if e := o.Error(); e != nil && e.Traceback != nil {
		return e.Traceback
	}
	return nil
}

// replyExec sends data with the envelope's success and message set from
// the status: an exception or a timeout is a 200 with success false.
func replyExec(w http.ResponseWriter, o *execOutcome, data any) error {
	writeJSON(w, http.StatusOK, execEnvelope(o, data))
	return nil
}

func execEnvelope(o *execOutcome, data any) envelope {
	msg := "ok"
	switch o.Status {
	case kernel.StatusError:
		msg = "the code raised an error"
		if e := o.Error(); e != nil {
			msg = e.Ename + ": " + e.Evalue
		}
	case kernel.StatusTimeout:
		msg = "the code did not finish within its timeout"
	}
	return envelope{Success: o.Status == kernel.StatusOK, Message: msg, Data: data}
}
