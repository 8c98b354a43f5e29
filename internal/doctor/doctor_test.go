package doctor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/codecell/codecell/internal/jail"
	"github.com/codecell/codecell/internal/sandbox"
)

func TestMain(m *testing.M) {
	jail.RunHelperIfRequested()
	os.Exit(m.Run())
}

// TestEveryLayerActive runs the doctor on this host, which CI sets up fully:
// every layer must be reported active, the live probe included.
func TestEveryLayerActive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("needs bubblewrap")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o711)
	os.Chmod(filepath.Dir(dir), 0o711)
	checks := Run(context.Background(), sandbox.Config{DataDir: filepath.Join(dir, "data")})
	seen := map[string]bool{}
	for _, c := range checks {
		seen[c.Layer] = true
		if !c.OK {
			t.Errorf("%s: %s (fix: %s)", c.Layer, c.Detail, c.Fix)
		}
	}
	for _, layer := range []string{"bubblewrap", "seccomp", "cgroups", "disk quota", "python", "javascript", "namespaces", "identity", "capabilities", "no_new_privs", "seccomp filter", "network", "limits"} {
		if !seen[layer] {
			t.Errorf("no check for %s", layer)
		}
	}
}

// TestMissingLayerSkipsProbe: a missing prerequisite is reported with a fix
// and no jail is attempted.
func TestMissingLayerSkipsProbe(t *testing.T) {
	checks := Run(context.Background(), sandbox.Config{Python: "/nonexistent/python3"})
	var python, live *Check
	for i := range checks {
		switch checks[i].Layer {
		case "python":
			python = &checks[i]
		case "live jail":
			live = &checks[i]
		}
	}
	if python == nil || python.OK || python.Fix == "" {
		t.Fatalf("python check = %+v, want missing with a fix", python)
	}
	if live == nil || live.OK {
		t.Fatalf("live jail = %+v, want not attempted", live)
	}
}
