package kernel

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/codecell/codecell/internal/jail"
	"github.com/codecell/codecell/internal/jupyter"
)

// A run directory on a full disk (the sandbox's own, filled by its code)
// fails the start with ENOSPC and without the host path. Needs root, to
// mount a tiny tmpfs.
func TestStartJupyterFullRunDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	run := t.TempDir()
	if err := unix.Mount("tmpfs", run, "tmpfs", 0, "size=4k"); err != nil {
		t.Fatalf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(run, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(run, "fill"), make([]byte, 64<<10), 0o600); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the tmpfs: %v", err)
	}
	_, err := StartJupyter(context.Background(), JupyterConfig{
		KernelSpec: jupyter.KernelSpec{Name: "python3", Argv: []string{"/bin/true"}},
		Spec:       jail.Spec{Run: run},
	})
	if !errors.Is(err, ErrStartup) || !errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), run) {
		t.Errorf("start on a full run directory: %v", err)
	}
}
