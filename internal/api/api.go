// Package api serves codecell over HTTP: the routes, request and response
// shapes of the AIO Sandbox API (v1, and v2 as its guide describes it), the
// sandboxes API, and what a multi-tenant server needs around them: API keys,
// body limits and errors that name the problem. Handlers only translate
// between HTTP and the sandbox and files packages, which do the work.
//
// Every route is served twice: unscoped (/v1/..., /v2/...) for the default
// sandbox, so codecell stands in for one AIO container, and under
// /sandboxes/{sandbox_id}/ for any sandbox, so an SDK given that base URL
// works unchanged.
package api

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/codecell/codecell/internal/audit"
	"github.com/codecell/codecell/internal/doctor"
	"github.com/codecell/codecell/internal/files"
	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/llm"
	"github.com/codecell/codecell/internal/metrics"
	"github.com/codecell/codecell/internal/observe"
	"github.com/codecell/codecell/internal/sandbox"
)

// Config configures the API.
type Config struct {
	Manager *sandbox.Manager
	// APIKey, if set, is required on every route but /health.
	APIKey string
	// MaxBodyBytes bounds JSON request bodies; 0 means 16 MiB.
	MaxBodyBytes int64
	// DefaultTimeout and MaxTimeout bound executions; 0 means 30s and 900s.
	DefaultTimeout, MaxTimeout time.Duration
	// BodyTimeout bounds how long a client may take to send a JSON body
	// (uploads get 15 times as long); 0 means one minute.
	BodyTimeout time.Duration
	// Version is reported by the info routes.
	Version string
	// Layers are the isolation checks reported by /v1/capabilities.
	Layers []doctor.Check
	// Runtimes are the interpreters as probed; nil probes them here.
	Runtimes *doctor.Runtimes
	// CodeBackend is BackendAuto (""), BackendNative or BackendKernel.
	CodeBackend string
	// Render bounds results asked for with output_format "llm".
	Render llm.Options
	// MCP, if set, is served at /mcp (behind the API key like every route).
	MCP http.Handler
	// Metrics, if set, are recorded and served at /metrics.
	Metrics *metrics.Metrics
	// Audit, if set, gets a line per execution.
	Audit  *audit.Log
	Logger *slog.Logger
}

// Server is the HTTP API.
type Server struct {
	cfg      Config
	log      *slog.Logger
	mux      *http.ServeMux
	runtime  runtimes
	remote   remoteProbe
	recorder *observe.Recorder
	keyID    string // audit.KeyID(cfg.APIKey), for the audit log
	docCache
}

// New returns the API handler.
func New(cfg Config) *Server {
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, 16<<20)
	cfg.DefaultTimeout = cmp.Or(cfg.DefaultTimeout, 30*time.Second)
	cfg.MaxTimeout = cmp.Or(cfg.MaxTimeout, 900*time.Second)
	cfg.BodyTimeout = cmp.Or(cfg.BodyTimeout, time.Minute)
	if cfg.Runtimes == nil {
		rt := doctor.ProbeRuntimes(cfg.Manager.Config().Sandbox)
		cfg.Runtimes = &rt
	}
	s := &Server{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()), mux: http.NewServeMux(), runtime: newRuntimes(*cfg.Runtimes)}
	s.recorder = &observe.Recorder{Metrics: cfg.Metrics, Audit: cfg.Audit, Logger: s.log}
	s.keyID = audit.KeyID(cfg.APIKey)
	s.routes()
	return s
}

// sandboxHandler handles a route of one sandbox.
type sandboxHandler func(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error

// handle registers h for pattern ("METHOD /path") on the default sandbox
// and under /sandboxes/{sandbox_id} for every sandbox.
func (s *Server) handle(pattern string, h sandboxHandler) {
	method, path, _ := strings.Cut(pattern, " ")
	s.mux.Handle(pattern, s.errors(func(w http.ResponseWriter, r *http.Request) error {
		sb, err := s.cfg.Manager.Default(r.Context())
		if err != nil {
			return err
		}
		return h(w, r, sb)
	}))
	s.mux.Handle(method+" /sandboxes/{sandbox_id}"+path, s.errors(func(w http.ResponseWriter, r *http.Request) error {
		id := r.PathValue("sandbox_id")
		sb, err := s.cfg.Manager.Get(id)
		if err != nil && id == sandbox.DefaultID {
			sb, err = s.cfg.Manager.Default(r.Context())
		}
		if err != nil {
			return err
		}
		return h(w, r, sb)
	}))
}

// handleServer registers a route that is not about one sandbox.
func (s *Server) handleServer(pattern string, h func(w http.ResponseWriter, r *http.Request) error) {
	s.mux.Handle(pattern, s.errors(h))
}

// ServeHTTP authenticates, bounds the body and routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	// A request id from the client (or a proxy) is kept; else one is made.
	id := r.Header.Get("X-Request-Id")
	if id == "" || len(id) > 128 {
		id = newRequestID()
	}
	sw.Header().Set("X-Request-Id", id)
	defer func() {
		route := cmp.Or(r.Pattern, "unmatched")
		status := cmp.Or(sw.status, http.StatusOK)
		d := time.Since(start)
		level := slog.LevelInfo
		if (route == "GET /health" || route == "GET /metrics") && status == http.StatusOK {
			level = slog.LevelDebug // probes and scrapes, every few seconds
		}
		s.log.Log(r.Context(), level, "request", "id", id, "method", r.Method, "path", r.URL.Path, "route", route,
			"status", status, "bytes", sw.bytes, "duration", d)
		if m := s.cfg.Metrics; m != nil {
			m.HTTPRequests.WithLabelValues(route, strconv.Itoa(status)).Inc()
			m.HTTPSeconds.WithLabelValues(route).Observe(d.Seconds())
		}
	}()
	if r.URL.Path != "/health" && !s.authorized(r) {
		writeError(sw, http.StatusUnauthorized, "missing or wrong API key: send it as `Authorization: Bearer KEY` or `X-API-Key: KEY`")
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		if !isUpload(r) {
			r.Body = http.MaxBytesReader(sw, r.Body, s.cfg.MaxBodyBytes)
		}
		// A client sending its body slowly (slowloris) is cut off; the
		// deadline ends with the body, so long executions are unaffected.
		rc := http.NewResponseController(sw)
		timeout := s.cfg.BodyTimeout
		if isUpload(r) {
			timeout *= 15
		}
		rc.SetReadDeadline(time.Now().Add(timeout))
		r.Body = &deadlineBody{ReadCloser: r.Body, clear: func() { rc.SetReadDeadline(time.Time{}) }}
	}
	s.mux.ServeHTTP(sw, r)
}

// deadlineBody clears the connection's read deadline once the whole body
// is read: a deadline left in place would cancel the request when it passed.
// After any other error it stays, so that the server's own draining of an
// unread body cannot wait forever either.
type deadlineBody struct {
	io.ReadCloser
	clear   func()
	done    bool
	expired bool // the deadline passed: whatever a reader made of that, it is a 408
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		b.clear()
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		b.expired = true
	}
	return n, err
}

// isUpload is decided by the route alone: a Content-Type must not lift a
// JSON route's body limit.
func isUpload(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/upload")
}

func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	key := r.Header.Get("X-API-Key")
	if key == "" {
		key = r.Header.Get("X-AIO-API-Key")
	}
	if key == "" {
		if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			key = strings.TrimSpace(v)
		}
	}
	return key != "" && subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.APIKey)) == 1
}

type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func newRequestID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// envelope is the AIO reply: {success, message, data}.
type envelope struct {
	Success bool   `json:"success"`
	Message string `json:"message"`
	Data    any    `json:"data"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// ok replies with data in a successful envelope.
func ok(w http.ResponseWriter, data any) error {
	writeJSON(w, http.StatusOK, envelope{Success: true, Message: "ok", Data: data})
	return nil
}

// httpError is an error with the status and message a client sees.
type httpError struct {
	status  int
	message string
	detail  []fieldError // 422 only
}

func (e *httpError) Error() string { return e.message }

// fieldError is one FastAPI-style validation error.
type fieldError struct {
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
	Type string `json:"type"`
}

func errorf(status int, format string, args ...any) error {
	return &httpError{status: status, message: fmt.Sprintf(format, args...)}
}

// invalid is a 422 for one field of the body.
func invalid(field, msg, typ string) error {
	return &httpError{status: http.StatusUnprocessableEntity, message: field + ": " + msg,
		detail: []fieldError{{Loc: []any{"body", field}, Msg: msg, Type: typ}}}
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"success": false, "message": msg, "data": nil, "detail": msg})
}

// errors turns a handler's error into a reply with the right status.
func (s *Server) errors(h func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		if b, ok := r.Body.(*deadlineBody); ok && b.expired {
			// A multipart reader, for one, reports a cut-off header as
			// malformed.
			err = os.ErrDeadlineExceeded
		}
		he := asHTTPError(err)
		if he.status >= 500 && he.status != http.StatusServiceUnavailable && he.status != http.StatusInsufficientStorage {
			s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		if he.detail != nil {
			writeJSON(w, he.status, map[string]any{"success": false, "message": he.message, "data": nil, "detail": he.detail})
			return
		}
		writeError(w, he.status, he.message)
	})
}

// asHTTPError is err as the client sees it.
func asHTTPError(err error) *httpError {
	var he *httpError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &he):
		return he
	case errors.As(err, &tooBig):
		return &httpError{status: http.StatusRequestEntityTooLarge, message: fmt.Sprintf("request body larger than %d bytes", tooBig.Limit)}
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The net error names the connection's addresses: not for clients.
		return &httpError{status: http.StatusRequestTimeout, message: "the request body came too slowly: send it within the server's body timeout"}
	}
	return &httpError{status: statusOf(err), message: err.Error()}
}

// statusOf maps the errors of the packages below to HTTP statuses.
func statusOf(err error) int {
	switch {
	case errors.Is(err, files.ErrNoSpace), errors.Is(err, sandbox.ErrNoSpace), errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return http.StatusInsufficientStorage
	case errors.Is(err, files.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, files.ErrOutside), errors.Is(err, files.ErrInvalidPath), errors.Is(err, files.ErrRoot),
		errors.Is(err, files.ErrIsDir), errors.Is(err, files.ErrNotDir), errors.Is(err, files.ErrNotRegular),
		errors.Is(err, files.ErrNotEmpty), errors.Is(err, files.ErrNoMatch), errors.Is(err, files.ErrInvalidArgument):
		return http.StatusBadRequest
	case errors.Is(err, os.ErrPermission):
		return http.StatusForbidden
	case errors.Is(err, sandbox.ErrNotFound), errors.Is(err, sandbox.ErrNoSession), errors.Is(err, os.ErrNotExist):
		return http.StatusNotFound
	case errors.Is(err, sandbox.ErrExists), errors.Is(err, os.ErrExist), errors.Is(err, sandbox.ErrSessionLost):
		return http.StatusConflict
	case errors.Is(err, sandbox.ErrCapacity), errors.Is(err, kernel.ErrBusy):
		return http.StatusTooManyRequests
	case errors.Is(err, sandbox.ErrInvalidID), errors.Is(err, sandbox.ErrNoKernel), errors.Is(err, kernel.ErrUnsupported),
		errors.Is(err, sandbox.ErrBadTimeout):
		return http.StatusUnprocessableEntity
	case errors.Is(err, sandbox.ErrClosed):
		return http.StatusServiceUnavailable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return 499 // the client went away
	}
	return http.StatusInternalServerError
}

// expectedKind names what a Go type takes, in JSON terms.
func expectedKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// decode reads a JSON body into v, naming the field of a type error the way
// FastAPI does, so clients of the AIO API see the errors they expect.
func decode(r *http.Request, v any) error {
	if r.Body == nil {
		return invalid("body", "a JSON body is required", "missing")
	}
	// Read to the end, so that the body's read deadline is cleared.
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			return invalid(cmp.Or(te.Field, "body"), fmt.Sprintf("expected %s, got a JSON %s", expectedKind(te.Type), te.Value), "type_error")
		case len(bytes.TrimSpace(b)) == 0:
			return invalid("body", "a JSON body is required", "missing")
		case errors.As(err, &se):
			return invalid("body", fmt.Sprintf("the body is not valid JSON: %v", err), "json_invalid")
		}
		return invalid("body", err.Error(), "value_error")
	}
	return nil
}
