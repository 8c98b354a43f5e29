package api_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The seed's one-shot and session examples, verbatim in substance.
func TestSeedExamples(t *testing.T) {
	ts := newServer(t, serverOpts{})
	py := ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "code": "print(sum([1,2,3]))"}).data()
	js := ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "javascript", "code": "console.log([1,2,3].reduce((a,b)=>a+b))"}).data()
	if py["stdout"] != "6\n" || js["stdout"] != "6\n" || py["session_id"] != nil || py["exit_code"] != 0.0 {
		t.Errorf("one-shot: python %v, javascript %v", py, js)
	}
	outs := py["outputs"].([]any)
	if o := outs[0].(map[string]any); len(o) != 3 || o["output_type"] != "stream" || o["name"] != "stdout" {
		t.Errorf("v2 output carries keys it does not use: %v", o)
	}
	for _, u := range []string{"wall_time_ms", "cpu_time_ms", "peak_memory_bytes"} {
		if _, ok := py["usage"].(map[string]any)[u]; !ok {
			t.Errorf("usage lacks %s: %v", u, py["usage"])
		}
	}

	// The same id names two sessions, one per language.
	ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "code": "x = 21", "session_id": "s1"})
	ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "javascript", "code": "globalThis.n = 41", "session_id": "s1"})
	r := ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "code": "print(x * 2)", "session_id": "s1"}).data()
	if r["stdout"] != "42\n" || r["session_id"] != "s1" {
		t.Errorf("python session: %v", r)
	}
	r = ts.must(t, 200, "POST", "/v1/nodejs/execute", map[string]any{"code": "console.log(n + 1)", "session_id": "s1"}).data()
	if r["stdout"] != "42\n" {
		t.Errorf("javascript session through the nodejs route: %v", r)
	}
	// The Python session is the same through the jupyter route.
	r = ts.must(t, 200, "POST", "/v1/jupyter/execute", map[string]any{"code": "x", "session_id": "s1"}).data()
	if o := r["outputs"].([]any)[0].(map[string]any); o["data"].(map[string]any)["text/plain"] != "21" || len(o) != 9 {
		t.Errorf("jupyter route on the code session, v1 output with nine keys: %v", o)
	}
}

func TestExecutionStatuses(t *testing.T) {
	ts := newServer(t, serverOpts{})
	tests := []struct {
		path   string
		body   map[string]any
		status string
		exit   float64
	}{
		{"/v1/code/execute", map[string]any{"language": "python", "code": "1/0"}, "error", 1},
		{"/v1/code/execute", map[string]any{"language": "javascript", "code": "throw new Error('x')"}, "error", 1},
		{"/v1/code/execute", map[string]any{"language": "python", "code": "import time; time.sleep(5)", "timeout": 1}, "timeout", 124},
		{"/v1/nodejs/execute", map[string]any{"code": "while (true) {}", "timeout": 1}, "timeout", 124},
	}
	for _, tt := range tests {
		r := ts.must(t, 200, "POST", tt.path, tt.body)
		d := r.data()
		if r.body["success"] != false || d["status"] != tt.status || d["exit_code"] != tt.exit {
			t.Errorf("%v: success %v status %v exit %v", tt.body, r.body["success"], d["status"], d["exit_code"])
		}
	}
	// v1 code replies carry the traceback of an error at the top level too.
	d := ts.must(t, 200, "POST", "/v1/code/execute", map[string]any{"language": "python", "code": "raise KeyError('k')"}).data()
	if tb, _ := d["traceback"].([]any); len(tb) == 0 || !strings.Contains(fmt.Sprint(tb), "KeyError") {
		t.Errorf("traceback = %v", d["traceback"])
	}
}

// A session whose cell cannot be interrupted is restarted, and says so.
func TestTimeoutRestartsSession(t *testing.T) {
	ts := newServer(t, serverOpts{})
	body := func(code string, timeout float64) map[string]any {
		return map[string]any{"language": "python", "code": code, "session_id": "r", "timeout": timeout}
	}
	ts.must(t, 200, "POST", "/v2/code/execute", body("kept = 1", 10))
	d := ts.must(t, 200, "POST", "/v2/code/execute", body("import time\nwhile True:\n    try: time.sleep(1)\n    except KeyboardInterrupt: pass", 1)).data()
	if d["status"] != "timeout" || d["session_restarted"] != true || !strings.Contains(str(d["message"]), "state is lost") {
		t.Fatalf("stubborn cell: %v", d)
	}
	d = ts.must(t, 200, "POST", "/v2/code/execute", body("'kept' in globals()", 10)).data()
	if d["status"] != "ok" || d["outputs"].([]any)[0].(map[string]any)["data"].(map[string]any)["text/plain"] != "False" {
		t.Errorf("after the restart: %v", d)
	}
}

func TestBadRequests(t *testing.T) {
	ts := newServer(t, serverOpts{maxBody: 1 << 10})
	tests := []struct {
		name, method, path string
		body               any
		status             int
		loc                string
	}{
		{"missing code", "POST", "/v1/code/execute", map[string]any{"language": "python"}, 422, "code"},
		{"code not a string", "POST", "/v2/code/execute", map[string]any{"language": "python", "code": 1}, 422, "code"},
		{"unsupported language", "POST", "/v2/code/execute", map[string]any{"language": "ruby", "code": "1"}, 422, "language"},
		{"missing language", "POST", "/v1/code/execute", map[string]any{"code": "1"}, 422, "language"},
		{"timeout too long", "POST", "/v1/code/execute", map[string]any{"language": "python", "code": "1", "timeout": 901}, 422, "timeout"},
		{"timeout negative", "POST", "/v1/nodejs/execute", map[string]any{"code": "1", "timeout": -1}, 422, "timeout"},
		{"timeout a string", "POST", "/v1/jupyter/execute", map[string]any{"code": "1", "timeout": "10"}, 422, "timeout"},
		{"not JSON", "POST", "/v2/code/execute", "{language: python", 422, "body"},
		{"JSON array", "POST", "/v2/code/execute", "[1]", 422, "body"},
		{"no body", "POST", "/v2/code/execute", nil, 422, "body"},
		{"unknown kernel", "POST", "/v1/jupyter/execute", map[string]any{"code": "1", "kernel_name": "cobol"}, 422, "kernel_name"},
		{"bad session id", "POST", "/v2/code/execute", map[string]any{"language": "python", "code": "1", "session_id": "../x"}, 422, ""},
		{"body too large", "POST", "/v2/code/execute", map[string]any{"language": "python", "code": strings.Repeat("#", 2<<10)}, 413, ""},
		{"unknown session", "GET", "/v2/code/sessions/nope", nil, 404, ""},
		{"unknown node session", "DELETE", "/v1/nodejs/sessions/nope", nil, 404, ""},
		{"unknown jupyter session", "DELETE", "/v1/jupyter/sessions/nope", nil, 404, ""},
		{"unknown sandbox", "POST", "/sandboxes/nope/v2/code/execute", map[string]any{"language": "python", "code": "1"}, 404, ""},
		{"unknown route", "GET", "/v1/nope", nil, 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ts.do(t, tt.method, tt.path, tt.body)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.raw)
			}
			if tt.loc == "" {
				return
			}
			detail, _ := r.body["detail"].([]any)
			if len(detail) == 0 || !slices.Contains(detail[0].(map[string]any)["loc"].([]any), any(tt.loc)) {
				t.Errorf("detail %v does not locate %q", r.body["detail"], tt.loc)
			}
		})
	}
}

// Sessions run in parallel, each with its own state; one session's
// executions run one after the other, in arrival order.
func TestParallelSessions(t *testing.T) {
	ts := newServer(t, serverOpts{maxSessions: 20})
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lang, set, get := "python", fmt.Sprintf("v = %d", i), "print(v)"
			if i%2 == 1 {
				lang, set, get = "javascript", fmt.Sprintf("var v = %d", i), "console.log(v)"
			}
			id := fmt.Sprintf("p%d", i)
			for _, code := range []string{set, get} {
				r := ts.do(t, "POST", "/v2/code/execute", map[string]any{"language": lang, "code": code, "session_id": id})
				if r.status != 200 || r.data()["status"] != "ok" {
					errs <- fmt.Errorf("session %s: %d %s", id, r.status, r.raw)
					return
				}
				if code == get && r.data()["stdout"] != fmt.Sprintf("%d\n", i) {
					errs <- fmt.Errorf("session %s has v = %q", id, r.data()["stdout"])
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if r := ts.must(t, 200, "GET", "/v2/code/sessions", nil); len(r.data()["sessions"].([]any)) != n {
		t.Errorf("%d sessions listed, want %d", len(r.data()["sessions"].([]any)), n)
	}
	// A 21st session is refused, nothing is evicted.
	r := ts.do(t, "POST", "/v2/code/execute", map[string]any{"language": "python", "code": "1", "session_id": "one-too-many"})
	if r.status != http.StatusTooManyRequests {
		t.Errorf("session over capacity: %d %s", r.status, r.raw)
	}

	// Same session: appends from concurrent requests never interleave.
	ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "code": "log = []", "session_id": "p0"})
	var wg2 sync.WaitGroup
	for i := range 5 {
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			ts.do(t, "POST", "/v2/code/execute", map[string]any{"language": "python", "session_id": "p0",
				"code": fmt.Sprintf("import time\nlog.append('start %d'); time.sleep(0.05); log.append('end %d')", i, i)})
		}()
	}
	wg2.Wait()
	d := ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "code": "print(log)", "session_id": "p0"}).data()
	var log []string
	for _, f := range strings.Split(strings.Trim(strings.TrimSpace(str(d["stdout"])), "[]"), ", ") {
		log = append(log, strings.Trim(f, "'"))
	}
	if len(log) != 10 {
		t.Fatalf("log = %v", log)
	}
	for i := 0; i < len(log); i += 2 {
		if strings.TrimPrefix(log[i], "start ") != strings.TrimPrefix(log[i+1], "end ") {
			t.Errorf("executions interleaved: %v", log)
		}
	}
}

func TestSessionRoutes(t *testing.T) {
	ts := newServer(t, serverOpts{})
	// Jupyter.
	id := ts.must(t, 200, "POST", "/v1/jupyter/sessions/create", map[string]any{}).data()["session_id"].(string)
	ts.must(t, 200, "POST", "/v1/jupyter/execute", map[string]any{"code": "a = 5", "session_id": id})
	if s := ts.must(t, 200, "GET", "/v1/jupyter/sessions", nil).data()["sessions"].(map[string]any); s[id] == nil {
		t.Errorf("jupyter sessions: %v", s)
	}
	info := ts.must(t, 200, "GET", "/v1/jupyter/info", nil).data()
	if info["default_kernel"] != "python3" || info["active_sessions"] != 1.0 {
		t.Errorf("jupyter info: %v", info)
	}
	ts.must(t, 200, "DELETE", "/v1/jupyter/sessions/"+id, nil)
	ts.must(t, 404, "DELETE", "/v1/jupyter/sessions/"+id, nil)
	ts.must(t, 200, "POST", "/v1/jupyter/sessions/create", map[string]any{"session_id": "j2"})
	ts.must(t, 200, "DELETE", "/v1/jupyter/sessions", nil)
	if s := ts.must(t, 200, "GET", "/v1/jupyter/sessions", nil).data()["sessions"].(map[string]any); len(s) != 0 {
		t.Errorf("sessions after DELETE all: %v", s)
	}

	// Node.js.
	c := ts.must(t, 200, "POST", "/v1/nodejs/sessions", map[string]any{"session_id": "n1", "max_idle_time": 60}).data()
	if c["created"] != true || c["session"].(map[string]any)["max_idle_time"] != 60.0 {
		t.Errorf("node session create: %v", c)
	}
	ts.must(t, 200, "PATCH", "/v1/nodejs/sessions/n1", map[string]any{"cwd": "/tmp"})
	d := ts.must(t, 200, "POST", "/v1/nodejs/execute", map[string]any{"code": "process.cwd()", "session_id": "n1"}).data()
	if d["outputs"].([]any)[0].(map[string]any)["data"].(map[string]any)["text/plain"] != "'/tmp'" {
		t.Errorf("cwd of the session: %v", d["outputs"])
	}
	if s := ts.must(t, 200, "GET", "/v1/nodejs/sessions/n1", nil).data()["session"].(map[string]any); s["cwd"] != "/tmp" {
		t.Errorf("node session: %v", s)
	}
	ts.must(t, 200, "GET", "/v1/nodejs/sessions", nil)
	if v := ts.must(t, 200, "GET", "/v1/nodejs/info", nil).data()["node_version"]; !strings.HasPrefix(str(v), "v") {
		t.Errorf("node_version %v", v)
	}
	ts.must(t, 200, "DELETE", "/v1/nodejs/sessions/n1", nil)
	// stdin and files of a one-shot run.
	d = ts.must(t, 200, "POST", "/v1/nodejs/execute", map[string]any{"code": "let s = ''; for await (const c of process.stdin) s += c; s + require('fs').readFileSync('in.txt', 'utf8')",
		"stdin": "from stdin, ", "files": map[string]string{"in.txt": "from a file"}}).data()
	if d["outputs"].([]any)[0].(map[string]any)["data"].(map[string]any)["text/plain"] != "'from stdin, from a file'" {
		t.Errorf("stdin and files: %v", d)
	}

	// v2 code sessions.
	ts.must(t, 200, "POST", "/v2/code/sessions", map[string]any{"language": "javascript", "session_id": "c1"})
	ts.must(t, 200, "GET", "/v2/code/sessions/c1?language=javascript", nil)
	ts.must(t, 404, "GET", "/v2/code/sessions/c1?language=python", nil)
	ts.must(t, 200, "DELETE", "/v2/code/sessions/c1", nil)
	ts.must(t, 404, "GET", "/v2/code/sessions/c1", nil)

	// Info routes.
	langs := ts.must(t, 200, "GET", "/v1/code/info", nil).data()["languages"].([]any)
	if len(langs) != 2 || langs[0].(map[string]any)["max_timeout"] != 900.0 {
		t.Errorf("code info: %v", langs)
	}
	caps := ts.must(t, 200, "GET", "/v1/capabilities", nil).data()
	if caps["code_interpreter"].(map[string]any)["backend"] != "native" || caps["isolation"].(map[string]any)["seccomp"] == nil {
		t.Errorf("capabilities: %v", caps)
	}
	v2 := ts.must(t, 200, "GET", "/v2/sandbox", nil).data()
	if v2["capabilities"].(map[string]any)["code_interpreter"] == nil || v2["id"] != "default" {
		t.Errorf("v2 sandbox: %v", v2)
	}
	v1 := ts.must(t, 200, "GET", "/v1/sandbox", nil).body
	if v1["home_dir"] != "/home/user" || v1["detail"] == nil {
		t.Errorf("v1 sandbox: %v", v1)
	}
}

func TestAuth(t *testing.T) {
	ts := newServer(t, serverOpts{key: "s3cret"})
	ts.must(t, 200, "GET", "/v1/code/info", nil)
	for _, h := range []struct{ name, value string }{
		{"", ""},
		{"Authorization", "Bearer wrong"},
		{"X-API-Key", "S3CRET"},
	} {
		req, _ := http.NewRequest("GET", ts.URL+"/v1/code/info", nil)
		if h.name != "" {
			req.Header.Set(h.name, h.value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("%s %q: status %d, want 401", h.name, h.value, resp.StatusCode)
		}
	}
	for _, h := range []string{"X-API-Key", "X-AIO-API-Key"} {
		req, _ := http.NewRequest("GET", ts.URL+"/sandboxes/default/v1/code/info", nil)
		req.Header.Set(h, "s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: status %d", h, resp.StatusCode)
		}
	}
	resp, err := http.Get(ts.URL + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("/health without a key: %v %v", resp.StatusCode, err)
	}
}

func TestNoInterpreter(t *testing.T) {
	ts := newServer(t, serverOpts{python: "/nonexistent/python3"})
	r := ts.do(t, "POST", "/v2/code/execute", map[string]any{"language": "python", "code": "1"})
	if r.status != 503 || !strings.Contains(str(r.body["message"]), "/nonexistent/python3") {
		t.Errorf("status %d: %s", r.status, r.raw)
	}
	ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "javascript", "code": "1"})
}

// Two sandboxes: each has its own sessions; neither sees the other.
func TestSandboxes(t *testing.T) {
	ts := newServer(t, serverOpts{})
	a := ts.must(t, 201, "POST", "/v2/sandboxes", map[string]any{"id": "alpha", "labels": map[string]string{"team": "x"},
		"ttl_seconds": 3600, "limits": map[string]any{"memory_mb": 256, "pids": 64}}).data()
	if a["limits"].(map[string]any)["memory_mb"] != 256.0 || a["expires_at"] == nil || a["base_path"] != "/sandboxes/alpha" {
		t.Errorf("created: %v", a)
	}
	ts.must(t, 201, "POST", "/v2/sandboxes", map[string]any{"id": "beta"})
	ts.must(t, 409, "POST", "/v2/sandboxes", map[string]any{"id": "beta"})
	ts.must(t, 422, "POST", "/v2/sandboxes", map[string]any{"limits": map[string]any{"memory_mb": 1 << 20}})
	ts.must(t, 422, "POST", "/v2/sandboxes", map[string]any{"id": "../etc"})

	if l := ts.must(t, 200, "GET", "/v2/sandboxes?label=team=x", nil).data()["sandboxes"].([]any); len(l) != 1 {
		t.Errorf("label filter: %v", l)
	}
	ts.must(t, 200, "POST", "/sandboxes/alpha/v2/code/execute", map[string]any{"language": "python", "code": "open('/tmp/mine', 'w').write('alpha secret'); v = 'a'", "session_id": "s"})
	d := ts.must(t, 200, "POST", "/sandboxes/beta/v2/code/execute", map[string]any{"language": "python", "session_id": "s",
		"code": "import os; print(os.path.exists('/tmp/mine'), 'v' in globals())"}).data()
	if d["stdout"] != "False False\n" {
		t.Errorf("beta sees alpha: %v", d["stdout"])
	}
	// The memory limit given at creation holds.
	d = ts.must(t, 200, "POST", "/sandboxes/alpha/v2/code/execute", map[string]any{"language": "python", "code": "b = bytearray(400 << 20)"}).data()
	if d["status"] != "error" || !strings.Contains(fmt.Sprint(d["outputs"]), "OutOfMemory") {
		t.Errorf("400 MiB in a 256 MiB sandbox: %v", d)
	}
	// Its usage counts the OOM kill (also once the one-shot kernel's cgroup is gone).
	time.Sleep(500 * time.Millisecond)
	if u := ts.must(t, 200, "GET", "/v2/sandboxes/alpha", nil).data()["usage"].(map[string]any); u["oom_kills"] != 1.0 || u["executions"] != 2.0 {
		t.Errorf("usage after an OOM kill: %v", u)
	}
	ts.must(t, 200, "DELETE", "/v2/sandboxes/alpha", nil)
	ts.must(t, 404, "GET", "/v2/sandboxes/alpha", nil)
	ts.must(t, 404, "POST", "/sandboxes/alpha/v2/code/execute", map[string]any{"language": "python", "code": "1"})
}

// A client that sends its body slowly is cut off at the body deadline,
// while a long execution after a quick body is not.
func TestSlowClient(t *testing.T) {
	ts := newServer(t, serverOpts{bodyTimeout: time.Second})
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v2/code/execute HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"lang")
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	reply, err := io.ReadAll(conn)
	if len(reply) == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the server still waits for the slow body")
	}
	if !bytes.HasPrefix(reply, []byte("HTTP/1.1 408")) {
		t.Errorf("slow body: %s, want 408", reply)
	}
	// An upload has 15 times as long, then a 408 that names no address,
	// even when it stalls between two parts.
	up, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	fmt.Fprintf(up, "POST /v2/fs/upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 1000\r\n\r\n"+
		"--b\r\nContent-Disposition: form-data; name=\"path\"\r\n\r\n/tmp/slow.txt\r\n--b\r\nContent-Disp")
	up.SetReadDeadline(time.Now().Add(60 * time.Second))
	reply, _ = io.ReadAll(up)
	if !bytes.HasPrefix(reply, []byte("HTTP/1.1 408")) || bytes.Contains(reply, []byte("127.0.0.1")) {
		t.Errorf("slow upload: %s, want a 408 without addresses", reply)
	}
	d := ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "code": "import time; time.sleep(2.5); print('done')"}).data()
	if d["stdout"] != "done\n" {
		t.Errorf("an execution longer than the body deadline: %v", d)
	}
}
