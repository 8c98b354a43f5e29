package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

func TestSessions(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxSessions = 2
	sb := newSandbox(t, cfg, sandbox.Options{})
	ctx := context.Background()

	py, created, err := sb.OpenSession(kernel.Python, "s1", true)
	if err != nil || !created {
		t.Fatalf("OpenSession = %v, %v", created, err)
	}
	js, _, err := sb.OpenSession(kernel.JavaScript, "s1", true)
	if err != nil || js == py {
		t.Fatalf("the same id in another language must be another session: %v", err)
	}
	if _, _, err := sb.OpenSession(kernel.Python, "s2", true); !errors.Is(err, sandbox.ErrCapacity) {
		t.Errorf("third session: %v, want ErrCapacity", err)
	}
	if _, _, err := sb.OpenSession(kernel.Python, "nope", false); !errors.Is(err, sandbox.ErrNoSession) {
		t.Errorf("unknown session: %v, want ErrNoSession", err)
	}
	if _, _, err := sb.OpenSession(kernel.Python, "a/b", true); !errors.Is(err, sandbox.ErrInvalidID) {
		t.Errorf("bad id: %v, want ErrInvalidID", err)
	}

	if r, err := py.Execute(ctx, kernel.Request{Code: "x = 1"}); err != nil || r.Status != kernel.StatusOK {
		t.Fatalf("execute: %v %v", r, err)
	}
	// A kernel killed from outside is replaced on the next execution.
	pid := kernelPid(t, py)
	r, err := py.Execute(ctx, kernel.Request{Code: "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"})
	if err != nil || !r.Restarted || r.Error() == nil || r.Error().Ename != kernel.EnameKernelDied {
		t.Fatalf("killed kernel: %+v %v", r, err)
	}
	r, err = py.Execute(ctx, kernel.Request{Code: "'x' in globals()"})
	if err != nil || r.Status != kernel.StatusOK || r.Outputs[0].Data["text/plain"] != "False" || kernelPid(t, py) == pid {
		t.Errorf("after a restart: %+v %v", r, err)
	}

	// Idle sessions are reaped with their processes.
	if n := sb.ReapIdle(time.Hour); n != 0 {
		t.Errorf("reaped %d busy-enough sessions", n)
	}
	pid = kernelPid(t, py)
	time.Sleep(20 * time.Millisecond)
	if n := sb.ReapIdle(10 * time.Millisecond); n != 2 {
		t.Errorf("reaped %d sessions, want 2", n)
	}
	if len(sb.Sessions("")) != 0 {
		t.Errorf("sessions left: %v", sb.Sessions(""))
	}
	if _, err := py.Execute(ctx, kernel.Request{Code: "1"}); !errors.Is(err, sandbox.ErrNoSession) {
		t.Errorf("executing on an ended session: %v", err)
	}
	if pid != 0 && processAlive(pid) {
		t.Errorf("the reaped kernel %d still runs", pid)
	}
}

// Executions queued on one session run in arrival order.
func TestSessionOrder(t *testing.T) {
	cfg := testConfig(t)
	sb := newSandbox(t, cfg, sandbox.Options{})
	sess, _, _ := sb.OpenSession(kernel.Python, "order", true)
	ctx := context.Background()
	sess.Execute(ctx, kernel.Request{Code: "import time; order = []"})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess.Execute(ctx, kernel.Request{Code: "time.sleep(0.02); order.append(" + string(rune('0'+i)) + ")"})
		}()
		time.Sleep(15 * time.Millisecond) // arrive one after the other
	}
	wg.Wait()
	r, _ := sess.Execute(ctx, kernel.Request{Code: "order"})
	if got := r.Outputs[0].Data["text/plain"]; got != "[0, 1, 2, 3, 4, 5, 6, 7]" {
		t.Errorf("order = %v", got)
	}
}

func kernelPid(t *testing.T, s *sandbox.Session) int {
	t.Helper()
	r, err := s.Execute(context.Background(), kernel.Request{Code: "1"})
	if err != nil || r.Status != kernel.StatusOK {
		t.Fatalf("pid: %+v %v", r, err)
	}
	return s.HostPid()
}

// processAlive reports whether pid runs (a zombie does not).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b), ") Z ")
}
