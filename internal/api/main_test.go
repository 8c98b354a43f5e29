package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codecell/codecell/internal/api"
	"github.com/codecell/codecell/internal/audit"
	"github.com/codecell/codecell/internal/cgroup"
	"github.com/codecell/codecell/internal/doctor"
	"github.com/codecell/codecell/internal/jail"
	"github.com/codecell/codecell/internal/jupyter"
	"github.com/codecell/codecell/internal/metrics"
	"github.com/codecell/codecell/internal/sandbox"
)

func TestMain(m *testing.M) {
	jail.RunHelperIfRequested()
	code := m.Run()
	// Each test process has its own cgroup parent, so that two runs at once
	// cannot kill each other's kernels; it goes when the process ends.
	if host, err := cgroup.Detect(); err == nil {
		if g, err := host.Open(cgroupParent); err == nil {
			g.Remove()
		}
	}
	os.Exit(code)
}

var cgroupParent = fmt.Sprintf("%s-%d", "codecell-apitest", os.Getpid())

// testServer is a real API server on loopback, with real jails.
type testServer struct {
	*httptest.Server
	mgr *sandbox.Manager
	key string
	dir string
}

type serverOpts struct {
	key         string
	maxSessions int
	python      string
	maxBody     int64
	bodyTimeout time.Duration
	backend     string          // api.Config.CodeBackend
	remote      *jupyter.Server // sandbox.Config.Remote
	metrics     bool
	audit       *audit.Log
	logger      *slog.Logger
}

func newServer(t testing.TB, o serverOpts) *testServer {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: sandboxes get their own host uid, cgroup and loop-mounted disk")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("needs bubblewrap: apt-get install bubblewrap")
	}
	host, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o711)
	}
	// CODECELL_TEST_PYTHON_MODE=spawn runs the API tests against spawned kernels.
	mode, err := sandbox.ParsePythonMode(os.Getenv("CODECELL_TEST_PYTHON_MODE"))
	if err != nil {
		t.Fatal(err)
	}
	specs, _ := jupyter.FindKernelSpecs(jupyter.DataDirs())
	cfg := sandbox.Config{
		KernelSpecs:  specs,
		Remote:       o.remote,
		PythonMode:   mode,
		DataDir:      filepath.Join(dir, "data"),
		Cgroups:      host,
		CgroupParent: cgroupParent,
		MaxSessions:  o.maxSessions,
		Python:       o.python,
		Limits:       sandbox.Limits{MemoryBytes: 2 << 30, Pids: 512, DiskBytes: 64 << 20},
	}
	mgr := sandbox.NewManager(sandbox.ManagerConfig{Sandbox: cfg, MaxSandboxes: 5})
	rt := doctor.ProbeRuntimes(cfg)
	var m *metrics.Metrics
	if o.metrics {
		m = metrics.New(metrics.Sources{Sandboxes: func() int { return len(mgr.List()) }})
	}
	h := api.New(api.Config{Manager: mgr, APIKey: o.key, MaxBodyBytes: o.maxBody, BodyTimeout: o.bodyTimeout, Version: "test", CodeBackend: o.backend,
		Metrics: m, Audit: o.audit, Logger: o.logger,
		Layers: doctor.Prerequisites(cfg, rt), Runtimes: &rt})
	ts := &testServer{Server: httptest.NewServer(h), mgr: mgr, key: o.key, dir: dir}
	t.Cleanup(func() {
		ts.Close()
		if err := mgr.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return ts
}

// reply is a decoded response.
type reply struct {
	status int
	body   map[string]any
	raw    []byte
}

func (r reply) data() map[string]any {
	d, _ := r.body["data"].(map[string]any)
	return d
}

// do sends a request with a JSON body (nil: none) and the server's key.
func (ts *testServer) do(t testing.TB, method, path string, body any) reply {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, ok := body.(string)
		if !ok {
			j, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			b = string(j)
		}
		rd = strings.NewReader(b)
	}
	req, err := http.NewRequest(method, ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if ts.key != "" {
		req.Header.Set("Authorization", "Bearer "+ts.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, raw: raw}
	json.Unmarshal(raw, &r.body)
	return r
}

// must is do that fails the test unless the status is want.
func (ts *testServer) must(t testing.TB, want int, method, path string, body any) reply {
	t.Helper()
	r := ts.do(t, method, path, body)
	if r.status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, want, bytes.TrimSpace(r.raw))
	}
	return r
}

func str(v any) string { return fmt.Sprint(v) }

var _ = time.Second
