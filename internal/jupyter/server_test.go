package jupyter

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startServer starts a Jupyter Server on a free loopback port with a
// random token, and stops it when t ends.
func startServer(t *testing.T) (baseURL, token string) {
	t.Helper()
	if _, err := os.Stat("/usr/lib/python3/dist-packages/jupyter_server"); err != nil {
		t.Skip("python3-jupyter-server is not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	token = newKey()
	dir := t.TempDir()
	log, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command("/usr/bin/python3", "-m", "jupyter_server",
		"--no-browser", "--allow-root", "--port-retries=0",
		"--ServerApp.token="+token,
		"--ServerApp.port="+strconv.Itoa(port),
		"--ServerApp.ip=127.0.0.1",
		"--ServerApp.root_dir="+dir)
	// Keep the server's and its kernels' files out of the real home.
	cmd.Env = append(os.Environ(), "HOME="+dir, "JUPYTER_CONFIG_DIR="+dir+"/config",
		"JUPYTER_DATA_DIR="+dir+"/data", "JUPYTER_RUNTIME_DIR="+dir+"/runtime", "IPYTHONDIR="+dir+"/ipython")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		// SIGTERM lets the server shut its kernels down.
		syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			t.Logf("server output:\n%s", out)
		}
	})
	return "http://127.0.0.1:" + strconv.Itoa(port), token
}

// waitPing waits until the server answers.
func waitPing(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		err := s.Ping(ctx)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("server never answered: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestServer(t *testing.T) {
	t.Parallel()
	base, token := startServer(t)
	hc := &http.Client{Transport: &http.Transport{}}
	s, err := NewServer(base+"/", token, hc)
	if err != nil {
		t.Fatal(err)
	}
	waitPing(t, s)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	def, specs, err := s.KernelSpecs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if py, ok := specs["python3"]; !ok || def == "" || py.Language != "python" || len(py.Argv) == 0 {
		t.Fatalf("KernelSpecs = %q, %+v", def, specs)
	}

	id, err := s.StartKernel(ctx, "python3")
	if err != nil {
		t.Fatal(err)
	}
	// The connection outlives the context it was made with.
	connectCtx, cancelConnect := context.WithCancel(ctx)
	c, err := s.Connect(connectCtx, id)
	cancelConnect()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	t.Run("KernelInfo", func(t *testing.T) { testKernelInfo(t, c) })
	t.Run("State", func(t *testing.T) { testState(t, c) })
	t.Run("Streams", func(t *testing.T) { testStreams(t, c) })
	t.Run("Stdin", func(t *testing.T) { testStdin(t, c) })
	t.Run("Complete", func(t *testing.T) { testComplete(t, c) })
	t.Run("Heartbeat", func(t *testing.T) { testHeartbeat(t, c) })
	t.Run("Interrupt", func(t *testing.T) { testInterrupt(t, c) })
	t.Run("Shutdown", func(t *testing.T) {
		if err := c.Shutdown(ctx, false); err != nil {
			t.Fatal(err)
		}
		var se *StatusError
		if err := s.Interrupt(ctx, id); !errors.As(err, &se) || se.StatusCode != http.StatusNotFound {
			t.Errorf("Interrupt after shutdown = %v, want 404", err)
		}
		if err := c.Heartbeat(ctx); err == nil {
			t.Error("Heartbeat after shutdown succeeded")
		}
		if err := c.Close(); err != nil {
			t.Errorf("Close after shutdown: %v", err)
		}
	})

	t.Run("WrongToken", func(t *testing.T) {
		bad, err := NewServer(base, "wrong", hc)
		if err != nil {
			t.Fatal(err)
		}
		for name, err := range map[string]error{
			"Ping":    bad.Ping(ctx),
			"Connect": func() error { _, err := bad.Connect(ctx, id); return err }(),
		} {
			var se *StatusError
			if !errors.As(err, &se) || (se.StatusCode != 401 && se.StatusCode != 403) ||
				!strings.Contains(err.Error(), strconv.Itoa(se.StatusCode)) {
				t.Errorf("%s with a wrong token = %v, want a 401 or 403", name, err)
			}
		}
	})
}

// TestServerClientGoroutines checks that closing a websocket Client stops
// its goroutines. Not parallel: it counts the goroutines of the binary.
func TestServerClientGoroutines(t *testing.T) {
	base, token := startServer(t)
	tr := &http.Transport{}
	s, err := NewServer(base, token, &http.Client{Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	waitPing(t, s)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	id, err := s.StartKernel(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()
	before := runtime.NumGoroutine()

	c, err := s.Connect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	run(t, c, "print(1)", ExecuteOptions{})
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	tr.CloseIdleConnections()
	waitGoroutines(t, before)
}

func TestNewServer(t *testing.T) {
	tests := []struct {
		url  string
		ok   bool
		want string // URL of /api/status
	}{
		{"http://127.0.0.1:8888", true, "http://127.0.0.1:8888/api/status"},
		{"https://h.example/jupyter/", true, "https://h.example/jupyter/api/status"},
		{"ftp://h.example", false, ""},
		{"127.0.0.1:8888", false, ""},
		{"http://", false, ""},
	}
	for _, tt := range tests {
		s, err := NewServer(tt.url, "t", nil)
		if (err == nil) != tt.ok {
			t.Errorf("NewServer(%q) = %v, want ok %v", tt.url, err, tt.ok)
			continue
		}
		if err == nil && s.url("/api/status").String() != tt.want {
			t.Errorf("NewServer(%q): status URL %s, want %s", tt.url, s.url("/api/status"), tt.want)
		}
	}
}
