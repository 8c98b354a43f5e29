package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/codecell/codecell/internal/doctor"
	"github.com/codecell/codecell/internal/sandbox"
)

// FuzzDecode sends arbitrary bytes as the body of every route of the table
// that takes a JSON body (uploads aside: they are multipart), through the
// real handlers, on a server that cannot run anything: no interpreter, a
// closed manager, and a nil sandbox. A handler either rejects the body with a
// 422 that names a field, or gets past its validation to the point where it
// would run code or touch the sandbox, which fuzzOutcome recognises. Nothing
// else is allowed: no other status, no other panic, no 5xx for any bytes
// (invalid UTF-8 included).
func FuzzDecode(f *testing.F) {
	for _, b := range []string{
		// Realistic bodies (README, AIO SDKs).
		`{"language":"python","code":"print(1)"}`,
		`{"language": "python", "session_id": "s1", "code": "import pandas as pd", "timeout": 30, "stream": true}`,
		`{"language":"javascript","code":"1+1","output_format":"llm","cwd":"/tmp","stateful":true}`,
		`{"code":"print(1)","kernel_name":"python3","timeout":5.5}`,
		`{"code":"console.log(1)","files":{"a.js":"x"},"stdin":"in","version":"v20"}`,
		`{"code":"imp","cursor_pos":3,"detail_level":1}`,
		`{"id":"sb-1","ttl_seconds":60,"labels":{"team":"a"},"limits":{"memory_mb":256,"cpus":0.5,"timeout_seconds":10}}`,
		`{"max_idle_time":60,"cwd":"/home/user"}`,
		`{"file":"/home/user/a.txt","start_line":0,"end_line":10}`,
		`{"file":"a.bin","content":"aGVsbG8=","encoding":"base64"}`,
		`{"path":".","pattern":"TODO","include":"*.py","max_file_size":"1M","type":"py","context_before":2}`,
		`{"path":".","pattern":"**/*.go","exclude":["vendor"],"max_results":10,"sort_by":"size"}`,
		`{"command":"str_replace","path":"a.py","old_str":"x","new_str":"y","replace_mode":"FIRST"}`,
		`{"source":"a","destination":"b","overwrite":true}`, `{"src":"a","dst":"/tmp/b","recursive":true}`,
		// Missing, empty and null.
		``, ` `, `{}`, `null`, `{"code":null}`, `{"language":"","code":""}`, `{"path":""}`,
		// Wrong types, for every kind of field.
		`{"code": 5}`, `{"language": ["python"], "code": "x"}`, `{"language":"python","code":"x","timeout":"30"}`,
		`{"code":"x","stream":"yes"}`, `{"code":"x","files":["a"]}`, `{"code":"x","files":{"a":1}}`,
		`{"labels":{"a":{}}}`, `{"limits":{"memory_mb":1.5}}`, `{"limits":[]}`, `{"cursor_pos":"1","code":"x"}`,
		`{"path":".","pattern":"x","include":[1]}`, `{"path":".","pattern":"x","max_file_size":"lots"}`,
		`{"command":"view","path":"a","view_range":"1-2"}`, `5`, `"python"`, `[]`, `[{"code":"x"}]`, `true`,
		// Out of range and huge numbers.
		`{"language":"python","code":"x","timeout":0}`, `{"language":"python","code":"x","timeout":-1}`,
		`{"language":"python","code":"x","timeout":1e309}`, `{"language":"python","code":"x","timeout":1e308}`,
		`{"code":"x","cursor_pos":99999999999999999999}`, `{"code":"x","cursor_pos":-1,"detail_level":2}`,
		`{"ttl_seconds":-0.0}`, `{"limits":{"pids":9223372036854775807,"disk_mb":-1}}`, `{"max_idle_time":0}`,
		`{"file":"a","start_line":5,"end_line":1}`, `{"path":".","pattern":"x","context_after":21,"offset":-1}`,
		`{"path":".","pattern":"x","max_file_size":"99999999999999999999G"}`,
		// Unknown values of enums.
		`{"language":"ruby","code":"x"}`, `{"language":"python","code":"x","output_format":"xml"}`,
		`{"code":"x","kernel_name":"../../bin/sh"}`, `{"file":"a","content":"x","encoding":"utf-16"}`,
		`{"command":"rm","path":"a"}`, `{"path":"a","sort_by":"owner"}`, `{"path":".","pattern":"x","type":"cobol"}`,
		`{"command":"view","path":"a","page_range":[1,2]}`, `{"path":".","pattern":"x","multiline":true}`,
		// Syntax: truncated, trailing garbage, deep nesting, BOM, NUL.
		`{"language":"python","code":"print(1)"`, `{"language":"python","code":"print(1)"}}`, `{"a":}`, `{`, `}`,
		`{"language":"python","code":"print(1)"} {"x":1}`, strings.Repeat("[", 10000), strings.Repeat(`{"a":`, 10000),
		"\ufeff{\"language\":\"python\",\"code\":\"print(1)\"}", "{\"code\":\"x\"}\x00", `{"code":"\u0000"}`,
		`{"code":"\ud800"}`, `{'code':'x'}`, `{"code":"x",}`, `{"CODE":"x","Language":"python"}`, `{"code":"x","code":5}`,
		// Invalid UTF-8 in strings and keys.
		"{\"language\":\"python\",\"code\":\"\xff\xfe\"}", "{\"language\":\"\xc0\xaf\",\"code\":\"x\"}",
		"{\"\xff\":1}", "{\"path\":\"\xed\xa0\x80\",\"pattern\":\"\xff\"}", "\xff\xfe{}",
	} {
		f.Add([]byte(b))
	}
	s := fuzzServer(f)
	var routes []route
	var execute route // for the body limit
	for _, r := range s.table() {
		if r.body != nil && !strings.HasSuffix(r.pattern, "/upload") {
			routes = append(routes, r)
		}
		if r.pattern == "POST /v2/code/execute" {
			execute = r
		}
	}
	if execute.sb == nil {
		f.Fatal("no POST /v2/code/execute in the route table")
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, rt := range routes {
			panicked, err := callRoute(s, rt, body, -1)
			fuzzOutcome(t, rt, body, err, panicked)
		}
		// One byte over the limit is a 413, whatever the body is.
		if len(body) > 0 {
			panicked, err := callRoute(s, execute, body, int64(len(body)-1))
			if panicked != "" || err == nil || asHTTPError(err).status != http.StatusRequestEntityTooLarge {
				t.Errorf("%s with a body over the limit: %v, panic %s", execute.pattern, err, panicked)
			}
		}
	})
}

// errNoInterpreter makes execution impossible: handlers stop with a 503
// "no interpreter" at the first step after validation.
var errNoInterpreter = errors.New("disabled for fuzzing")

// fuzzServer is New's defaults with no interpreter and a closed manager, so
// that no route can start a kernel or create a sandbox.
func fuzzServer(f *testing.F) *Server {
	mgr := sandbox.NewManager(sandbox.ManagerConfig{})
	if err := mgr.Shutdown(context.Background()); err != nil {
		f.Fatal(err)
	}
	none := doctor.Runtime{Path: "/nonexistent", Err: errNoInterpreter}
	return New(Config{Manager: mgr, Runtimes: &doctor.Runtimes{Python: none, Node: none}})
}

// callRoute calls rt's handler with body, as ServeHTTP would have bounded
// it when limit >= 0, and a nil sandbox. It returns the handler's error, or
// its panic with the stack ("sandbox" if it faulted on the nil sandbox).
func callRoute(s *Server, rt route, body []byte, limit int64) (panicked string, err error) {
	method, target, _ := strings.Cut(rt.pattern, " ")
	r := httptest.NewRequest(method, target, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	if limit >= 0 {
		r.Body = http.MaxBytesReader(w, r.Body, limit)
	}
	defer func() {
		if v := recover(); v != nil {
			stack := string(debug.Stack())
			panicked = fmt.Sprintf("%v\n%s", v, stack)
			if re, ok := v.(runtime.Error); ok && strings.Contains(re.Error(), "nil pointer") && usesSandbox(stack) {
				panicked = "sandbox"
			}
		}
	}()
	if rt.sb != nil {
		return "", rt.sb(w, r, nil)
	}
	return "", rt.srv(w, r)
}

// usesSandbox reports whether a nil-pointer panic's stack faulted in a
// method of *sandbox.Sandbox (under standard library frames such as
// runtime's or a mutex's): the handler accepted its body and went on to use
// the (nil) sandbox.
func usesSandbox(stack string) bool {
	const module = "github.com/codecell/codecell/"
	lines := strings.Split(stack, "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "panic(") })
	for _, l := range lines[i+1:] {
		if strings.HasPrefix(l, module) {
			return strings.HasPrefix(l, module+"internal/sandbox.(*Sandbox).")
		}
	}
	return false
}

// fuzzOutcome checks what a handler did with body.
func fuzzOutcome(t *testing.T, rt route, body []byte, err error, panicked string) {
	t.Helper()
	switch {
	case panicked == "sandbox": // past validation: about to use the sandbox
		return
	case panicked != "":
		t.Fatalf("%s %q: panic: %s", rt.pattern, body, panicked)
	case err == nil:
		t.Fatalf("%s %q: succeeded without a sandbox", rt.pattern, body)
	}
	he := asHTTPError(err)
	switch {
	case errors.Is(err, sandbox.ErrNoSession), // past validation: looking the session up
		errors.Is(err, sandbox.ErrClosed), // past validation: creating the sandbox
		he.status == http.StatusServiceUnavailable && strings.HasPrefix(he.message, "no interpreter"): // about to run code
		return
	}
	var e *httpError
	if !errors.As(err, &e) || e.status != http.StatusUnprocessableEntity {
		t.Fatalf("%s %q: %v (status %d), want a 422 *httpError", rt.pattern, body, err, he.status)
	}
	if len(e.detail) != 1 || len(e.detail[0].Loc) != 2 || e.detail[0].Loc[0] != "body" || e.detail[0].Msg == "" {
		t.Fatalf("%s %q: 422 detail %+v does not locate one field", rt.pattern, body, e.detail)
	}
	field, _ := e.detail[0].Loc[1].(string)
	if field == "" || e.message != field+": "+e.detail[0].Msg {
		t.Fatalf("%s %q: 422 message %q does not name the field %q", rt.pattern, body, e.message, field)
	}
	// The field is the body itself, a field the schema documents, or a key
	// the client sent (a type error can only be about a key that is there).
	keys, isObject := topKeys(body)
	sent := slices.ContainsFunc(keys, func(k string) bool { return strings.EqualFold(k, strings.SplitN(field, ".", 2)[0]) })
	switch {
	case e.detail[0].Type == "type_error" && isObject && !sent:
		t.Fatalf("%s %q: type error names %q, which the body does not have", rt.pattern, body, field)
	case e.detail[0].Type == "type_error" && !isObject && json.Valid(body) && field != "body":
		t.Fatalf("%s %q: a body that is not an object is reported as field %q", rt.pattern, body, field)
	case field != "body" && !sent && !documented(rt.body, field):
		t.Fatalf("%s %q: 422 names %q, neither sent nor documented", rt.pattern, body, field)
	}
}

// topKeys returns the keys of body if it is a JSON object.
func topKeys(body []byte) ([]string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m == nil {
		return nil, false
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	return keys, true
}

// documented reports whether field ("a" or "a.b") is a property of the
// route's body schema.
func documented(s schema, field string) bool {
	for name := range strings.SplitSeq(field, ".") {
		props, _ := s["properties"].(map[string]any)
		p, ok := props[name].(schema)
		if !ok {
			return false
		}
		s = p
	}
	return true
}
