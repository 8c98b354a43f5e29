package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codecell/codecell/internal/cgroup"
	"github.com/codecell/codecell/internal/jail"
	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

// The test binary doubles as the jail helper, as codecell's main does.
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

var cgroupParent = fmt.Sprintf("%s-%d", "codecell-test", os.Getpid())

// requireJail skips only where the host truly cannot jail: these tests need
// root (own uids, cgroups, loop mounts) and bubblewrap. CI runs as root.
func requireJail(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: sandboxes get their own host uid, cgroup and loop-mounted disk")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("needs bubblewrap: apt-get install bubblewrap")
	}
}

// testConfig is a sandbox configuration with a fresh data directory.
func testConfig(t testing.TB) sandbox.Config {
	t.Helper()
	requireJail(t)
	host, err := cgroup.Detect()
	if err != nil {
		t.Fatalf("cgroups: %v", err)
	}
	dir := t.TempDir()
	// t.TempDir is 0700 under a 0700 parent; sandbox uids must traverse it.
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o711)
	}
	// CODECELL_TEST_PYTHON_MODE=spawn runs the whole suite against kernels
	// started as new interpreters rather than forked from a zygote (`make
	// test` runs it both ways).
	mode, err := sandbox.ParsePythonMode(os.Getenv("CODECELL_TEST_PYTHON_MODE"))
	if err != nil {
		t.Fatal(err)
	}
	return sandbox.Config{
		PythonMode:   mode,
		DataDir:      filepath.Join(dir, "data"),
		Cgroups:      host,
		CgroupParent: cgroupParent,
		Limits: sandbox.Limits{
			MemoryBytes:    512 << 20,
			Pids:           128,
			DiskBytes:      64 << 20,
			DefaultTimeout: 20 * time.Second,
		},
	}
}

var sandboxSeq atomic.Int64

// sandboxID makes a valid, unique sandbox id from the test's name.
func sandboxID(t testing.TB) string {
	name := regexp.MustCompile(`[^A-Za-z0-9_-]+`).ReplaceAllString(t.Name(), "-")
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return fmt.Sprintf("%s-%d-%d", name, os.Getpid(), sandboxSeq.Add(1))
}

// newSandbox creates a sandbox destroyed at the end of the test.
func newSandbox(t testing.TB, cfg sandbox.Config, opt sandbox.Options) *sandbox.Sandbox {
	t.Helper()
	if opt.ID == "" {
		opt.ID = sandboxID(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := sandbox.Create(ctx, cfg, opt)
	if err != nil {
		t.Fatalf("creating sandbox: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Destroy(context.Background()); err != nil {
			t.Errorf("destroying sandbox: %v", err)
		}
	})
	return sb
}

// startKernel starts a session closed at the end of the test.
func startKernel(t testing.TB, sb *sandbox.Sandbox, lang kernel.Language) *sandbox.Kernel {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k, err := sb.StartKernel(ctx, lang)
	if err != nil {
		t.Fatalf("starting %s kernel: %v", lang, err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

// execute runs one cell and fails the test on an infrastructure error.
func execute(t testing.TB, k *sandbox.Kernel, code string, timeout time.Duration) *kernel.Result {
	t.Helper()
	res, err := k.Execute(context.Background(), code, timeout)
	if err != nil {
		t.Fatalf("executing %q: %v", code, err)
	}
	return res
}

// run executes code once in a fresh kernel of sb.
func run(t testing.TB, sb *sandbox.Sandbox, lang kernel.Language, code string) *kernel.Result {
	t.Helper()
	res, err := sb.Run(context.Background(), lang, code, 0)
	if err != nil {
		t.Fatalf("running %q: %v", code, err)
	}
	return res
}
