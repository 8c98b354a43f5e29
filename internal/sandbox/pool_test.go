package sandbox_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

// waitPool waits until lang's pool has n kernels ready.
func waitPool(t *testing.T, sb *sandbox.Sandbox, lang kernel.Language, n int) sandbox.PoolStats {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		st := sb.PoolStats()[lang]
		if st.Ready == n {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s pool never had %d ready: %+v", lang, n, st)
		}
	}
}

func TestWarmPool(t *testing.T) {
	cfg := testConfig(t)
	cfg.Prewarm = map[kernel.Language]int{kernel.Python: 1, kernel.JavaScript: 1}
	sb := newSandbox(t, cfg, sandbox.Options{})
	ctx := context.Background()
	for _, lang := range []kernel.Language{kernel.Python, kernel.JavaScript} {
		waitPool(t, sb, lang, 1)
		// A one-shot run takes the warm kernel, which is then discarded.
		res, err := sb.Run(ctx, lang, "1 + 1", 0)
		if err != nil || res.Status != kernel.StatusOK || res.Outputs[0].Data["text/plain"] != "2" {
			t.Fatalf("%s run: %+v %v", lang, res, err)
		}
		if st := sb.PoolStats()[lang]; st.Served != 1 {
			t.Errorf("%s: served %d, want 1", lang, st.Served)
		}
		// The pool refills with a fresh kernel: no state of the run.
		waitPool(t, sb, lang, 1)
		sess, _, _ := sb.OpenSession(lang, "s", true)
		r, err := sess.Execute(ctx, kernel.Request{Code: "typeof x === 'undefined'"})
		if lang == kernel.Python {
			r, err = sess.Execute(ctx, kernel.Request{Code: "'x' in globals()"})
		}
		if err != nil || r.Status != kernel.StatusOK {
			t.Fatalf("%s session: %+v %v", lang, r, err)
		}
		if st := sb.PoolStats()[lang]; st.Served != 2 {
			t.Errorf("%s: served %d after a session, want 2", lang, st.Served)
		}
	}

	// A warm kernel that died while it waited is never handed out.
	waitPool(t, sb, kernel.Python, 1)
	pids, _ := sb.Cgroup().Pids()
	busy := map[int]bool{}
	for _, s := range sb.Sessions("") {
		busy[s.HostPid()] = true
	}
	for _, pid := range pids {
		if !busy[pid] {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	time.Sleep(100 * time.Millisecond)
	served := sb.PoolStats()[kernel.Python].Served
	res, err := sb.Run(ctx, kernel.Python, "print('fresh')", 0)
	if err != nil || res.Text("stdout") != "fresh\n" {
		t.Fatalf("run after the warm kernel died: %+v %v", res, err)
	}
	if st := sb.PoolStats()[kernel.Python]; st.Served != served {
		t.Errorf("a dead warm kernel was handed out: %+v", st)
	}
}
