package api_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codecell/codecell/internal/jupyter"
)

// TestJupyterKernelName: kernel_name picks a kernelspec, an unknown one is
// a 422 that lists what there is, and the info route lists them all.
func TestJupyterKernelName(t *testing.T) {
	ts := newServer(t, serverOpts{})
	info := ts.must(t, 200, "GET", "/v1/jupyter/info", nil).data()
	if names := info["available_kernels"].([]any); len(names) < 2 || names[0] != "python3" || !strings.Contains(strings.Join(strs(names), ","), "ir") {
		t.Errorf("available_kernels = %v, want python3 first and ir", names)
	}
	r := ts.must(t, 422, "POST", "/v1/jupyter/execute", map[string]any{"code": "1", "kernel_name": "cobol"})
	if !strings.Contains(string(r.raw), `\"ir\"`) || !strings.Contains(string(r.raw), "cobol") {
		t.Errorf("unknown kernel: %s", r.raw)
	}

	// R, in a session, as a one-shot, and streamed.
	ts.must(t, 200, "POST", "/v1/jupyter/execute", map[string]any{"code": "x <- 41", "kernel_name": "ir", "session_id": "r"})
	r = ts.must(t, 200, "POST", "/v1/jupyter/execute", map[string]any{"code": "x + 1", "kernel_name": "ir", "session_id": "r"})
	if d := r.data(); d["kernel_name"] != "ir" || !strings.Contains(string(r.raw), `[1] 42`) {
		t.Errorf("R session: %s", r.raw)
	}
	if r := ts.must(t, 200, "GET", "/v1/jupyter/sessions", nil); !strings.Contains(string(r.raw), `"kernel_name":"ir"`) {
		t.Errorf("sessions: %s", r.raw)
	}
	ch, _ := ts.stream(t, "/v1/jupyter/execute", map[string]any{"kernel_name": "ir", "timeout": 30,
		"code": "cat('first\\n')\nwhile (!file.exists('/tmp/go-r')) Sys.sleep(0.05)\ncat('second\\n')"}, true)
	if ev := <-ch; ev.name != "output" || ev.data["text"] != "first\n" {
		t.Fatalf("first event %+v", ev)
	}
	ts.must(t, 200, "POST", "/v1/file/write", map[string]any{"file": "/tmp/go-r", "content": "go"})
	var names []string
	for ev := range ch {
		names = append(names, ev.name)
	}
	if strings.Join(names, ",") != "output,done" {
		t.Errorf("events after the first: %v", names)
	}
	// Completion on the R session, through the Jupyter route.
	c := ts.must(t, 200, "POST", "/v1/jupyter/sessions/r/complete", map[string]any{"code": "summ"}).data()
	if !strings.Contains(strings.Join(strs(c["matches"].([]any)), " "), "summary") {
		t.Errorf("R completion: %v", c)
	}
}

func strs(a []any) []string {
	out := make([]string, len(a))
	for i, v := range a {
		out[i], _ = v.(string)
	}
	return out
}

// TestJupyterFullDisk: a Jupyter kernel that cannot have its run directory,
// or its connection file in it (which of the two runs out depends on how
// the disk filled), because the sandbox filled its own disk is a 507 that
// names no host path.
func TestJupyterFullDisk(t *testing.T) {
	ts := newServer(t, serverOpts{})
	ts.must(t, 201, "POST", "/v2/sandboxes", map[string]any{"id": "full", "limits": map[string]any{"disk_mb": 16}})
	// Filled to the last block by a session that stays, so that nothing
	// of its kernel's is freed meanwhile.
	ts.must(t, 200, "POST", "/sandboxes/full/v2/code/execute", map[string]any{"language": "python", "session_id": "filler",
		"code": "import os\nfor make in (lambda i: open(f'/tmp/f{i}', 'wb').write(b'x' * 4096), lambda i: os.mkdir(f'/tmp/d{i}')):\n" +
			"    try:\n        for i in range(1 << 20):\n            make(i)\n    except OSError as e:\n        print(e)"})
	r := ts.must(t, 507, "POST", "/sandboxes/full/v1/jupyter/execute", map[string]any{"code": "1", "kernel_name": "ir"})
	if msg := string(r.raw); !strings.Contains(msg, "run directory") || strings.Contains(msg, "sandboxes/full") {
		t.Errorf("a kernel start on a full disk: %s", msg)
	}
}

// TestCodeBackendKernel: --code-backend kernel runs Python on the code
// routes in ipykernel, in a jail.
func TestCodeBackendKernel(t *testing.T) {
	ts := newServer(t, serverOpts{backend: "kernel"})
	if b := ts.must(t, 200, "GET", "/v1/capabilities", nil).data()["code_interpreter"].(map[string]any)["backend"]; b != "kernel" {
		t.Errorf("backend %v, want kernel", b)
	}
	ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "session_id": "k", "code": "x = 41"})
	r := ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "session_id": "k",
		"code": "import sys, os\n('ipykernel' in sys.modules, os.getuid(), x + 1)"})
	if !strings.Contains(string(r.raw), "(True, 1000, 42)") {
		t.Errorf("not ipykernel in a jail: %s", r.raw)
	}
	if r := ts.must(t, 200, "GET", "/v2/code/sessions/k", nil); r.data()["alive"] != true {
		t.Errorf("session: %s", r.raw)
	}
}

// TestRemoteJupyter: with a reachable Jupyter server configured, Python on
// the code routes runs there (the test's own server, on loopback).
func TestRemoteJupyter(t *testing.T) {
	base, token := startJupyterServer(t)
	srv, err := jupyter.NewServer(base, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for srv.Ping(ctx) != nil {
		if ctx.Err() != nil {
			t.Fatal("the Jupyter server never answered")
		}
		time.Sleep(100 * time.Millisecond)
	}
	ts := newServer(t, serverOpts{remote: srv})
	if b := ts.must(t, 200, "GET", "/v1/jupyter/info", nil).data()["backend"]; b != "remote" {
		t.Errorf("backend %v, want remote", b)
	}
	ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "session_id": "rem", "code": "y = 41"})
	r := ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "session_id": "rem",
		"code": "import os\nprint(os.environ.get('CODECELL_TEST_REMOTE'))\ny + 1"})
	if d := r.data(); d["stdout"] != "here\n" || !strings.Contains(string(r.raw), `"text/plain":"42"`) {
		t.Errorf("remote execution: %s", r.raw)
	}
	// One-shot runs and streaming work the same way.
	ch, _ := ts.stream(t, "/v2/code/execute", map[string]any{"language": "python", "code": "print('a')\n6 * 7"}, true)
	var got []string
	for ev := range ch {
		got = append(got, ev.name)
	}
	if strings.Join(got, ",") != "output,output,done" {
		t.Errorf("remote stream: %v", got)
	}
}

// TestRemoteComesUp: with the auto backend, a Python session made while the
// remote server was down stays on the native driver with its state once
// the server is up, while new work goes to the server.
func TestRemoteComesUp(t *testing.T) {
	base, token, start := jupyterServer(t)
	srv, err := jupyter.NewServer(base, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := newServer(t, serverOpts{remote: srv})
	ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "session_id": "n", "code": "x = 41"})
	start()
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		if ts.must(t, 200, "GET", "/v1/jupyter/info", nil).data()["backend"] == "remote" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the remote server never became the backend")
		}
	}
	r := ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "session_id": "n",
		"code": "import os\nprint(os.environ.get('CODECELL_TEST_REMOTE'))\nx + 1"})
	if d := r.data(); d["stdout"] != "None\n" || !strings.Contains(string(r.raw), `"text/plain":"42"`) {
		t.Errorf("the native session after the remote came up: %s", r.raw)
	}
	r = ts.must(t, 200, "POST", "/v1/jupyter/execute", map[string]any{"session_id": "n", "code": "x + 2"})
	if !strings.Contains(string(r.raw), `"text/plain":"43"`) {
		t.Errorf("the native session on the Jupyter route after the remote came up: %s", r.raw)
	}
	r = ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "code": "import os\nprint(os.environ.get('CODECELL_TEST_REMOTE'))"})
	if d := r.data(); d["stdout"] != "here\n" {
		t.Errorf("a one-shot run once the remote is up: %s", r.raw)
	}
}

// startJupyterServer starts a Jupyter Server on a free loopback port, with
// CODECELL_TEST_REMOTE=here in its kernels' environment.
func startJupyterServer(t *testing.T) (base, token string) {
	t.Helper()
	base, token, start := jupyterServer(t)
	start()
	return base, token
}

// jupyterServer is startJupyterServer, started later by start.
func jupyterServer(t *testing.T) (base, token string, start func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	b := make([]byte, 16)
	rand.Read(b)
	token = hex.EncodeToString(b)
	dir := t.TempDir()
	cmd := exec.Command("/usr/bin/python3", "-m", "jupyter_server", "--no-browser", "--allow-root", "--port-retries=0",
		"--ServerApp.token="+token, "--ServerApp.port="+port, "--ServerApp.ip=127.0.0.1", "--ServerApp.root_dir="+dir)
	cmd.Env = append(os.Environ(), "HOME="+dir, "JUPYTER_CONFIG_DIR="+filepath.Join(dir, "config"), "JUPYTER_DATA_DIR="+filepath.Join(dir, "data"),
		"JUPYTER_RUNTIME_DIR="+filepath.Join(dir, "runtime"), "IPYTHONDIR="+filepath.Join(dir, "ipython"), "CODECELL_TEST_REMOTE=here")
	start = func() {
		t.Helper()
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting jupyter_server (python3-jupyter-server): %v", err)
		}
		t.Cleanup(func() {
			syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
		})
	}
	return "http://127.0.0.1:" + port, token, start
}
