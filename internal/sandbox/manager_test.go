package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codecell/codecell/internal/sandbox"
)

func TestManager(t *testing.T) {
	cfg := testConfig(t)
	m := sandbox.NewManager(sandbox.ManagerConfig{Sandbox: cfg, MaxSandboxes: 2, SessionIdle: 40 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer m.Shutdown(context.Background())

	def, err := m.Default(ctx)
	if err != nil || def.ID() != sandbox.DefaultID {
		t.Fatalf("Default = %v, %v", def, err)
	}
	if again, _ := m.Default(ctx); again != def {
		t.Error("Default made a second default sandbox")
	}
	short, err := m.Create(ctx, sandbox.Options{ID: "short", TTL: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if short.UID() == def.UID() {
		t.Error("two sandboxes share a uid")
	}
	if _, err := m.Create(ctx, sandbox.Options{}); !errors.Is(err, sandbox.ErrCapacity) {
		t.Errorf("third sandbox: %v, want ErrCapacity", err)
	}
	if _, err := m.Create(ctx, sandbox.Options{ID: "short"}); !errors.Is(err, sandbox.ErrExists) {
		t.Errorf("same id twice: %v, want ErrExists", err)
	}

	// The TTL ends the sandbox, and its files, once the reaper runs.
	go m.Run(ctx)
	shortDir := filepath.Dir(short.Home())
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := m.Get("short")
		if _, statErr := os.Stat(shortDir); errors.Is(err, sandbox.ErrNotFound) && errors.Is(statErr, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the expired sandbox is still there")
		}
	}

	// Shutdown keeps the files; the same id re-opened keeps uid and files.
	if err := def.WriteFile("/home/user/kept.txt", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	uid := def.UID()
	if err := m.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, sandbox.Options{}); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Create after Shutdown: %v", err)
	}
	m2 := sandbox.NewManager(sandbox.ManagerConfig{Sandbox: cfg})
	def2, err := m2.Default(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { def2.Destroy(context.Background()) })
	b, err := os.ReadFile(filepath.Join(def2.Home(), "kept.txt"))
	if def2.UID() != uid || err != nil || string(b) != "kept" {
		t.Errorf("re-opened default: uid %d (was %d), kept.txt %q %v", def2.UID(), uid, b, err)
	}
}
