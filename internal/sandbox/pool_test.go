package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

// waitPool waits until lang's pool has n kernels ready.
func waitPool(t *testing.T, sb *sandbox.Sandbox, pool string, n int) sandbox.PoolStats {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		st := sb.PoolStats()[pool]
		if st.Ready == n {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s pool never had %d ready: %+v", pool, n, st)
		}
	}
}

func TestWarmPool(t *testing.T) {
	cfg := testConfig(t)
	cfg.Prewarm = map[kernel.Language]int{kernel.Python: 1, kernel.JavaScript: 1}
	sb := newSandbox(t, cfg, sandbox.Options{})
	ctx := context.Background()
	for _, tt := range []struct {
		lang    kernel.Language
		pool    string // the one-shot takes a kernel from this pool
		oneShot string
		session string // a new session takes a kernel from this pool
		fresh   string // true in a kernel that never ran anything
	}{
		{kernel.Python, "python/bare", "1 + 1", "python/data", "'x' not in globals()"},
		{kernel.Python, "python/data", "import pandas; 1 + 1", "python/data", "'x' not in globals()"},
		{kernel.JavaScript, "javascript/bare", "1 + 1", "javascript/bare", "typeof x === 'undefined'"},
	} {
		served := waitPool(t, sb, tt.pool, 1).Served
		res, err := sb.Run(ctx, tt.lang, tt.oneShot+"\nx = 1\n1 + 1", 0)
		if tt.lang == kernel.JavaScript {
			res, err = sb.Run(ctx, tt.lang, "var x = 1; 1 + 1", 0)
		}
		if err != nil || res.Status != kernel.StatusOK || res.Outputs[0].Data["text/plain"] != "2" {
			t.Fatalf("%s run: %+v %v", tt.pool, res, err)
		}
		if st := sb.PoolStats()[tt.pool]; st.Served != served+1 {
			t.Errorf("%s: served %d, want %d", tt.pool, st.Served, served+1)
		}
		// Pools refill with fresh kernels: no state of the run, count 1.
		served = waitPool(t, sb, tt.session, 1).Served
		sess, _, _ := sb.OpenSession(tt.lang, "s-"+string(tt.lang), true)
		r, err := sess.Execute(ctx, kernel.Request{Code: tt.fresh})
		if err != nil || r.Status != kernel.StatusOK || r.Outputs[0].Data["text/plain"] != map[kernel.Language]string{kernel.Python: "True", kernel.JavaScript: "true"}[tt.lang] || r.ExecutionCount != 1 {
			t.Fatalf("%s session: %+v %v", tt.session, r, err)
		}
		if st := sb.PoolStats()[tt.session]; st.Served != served+1 {
			t.Errorf("%s: served %d after a session, want %d", tt.session, st.Served, served+1)
		}
		// Warm kernels wait at low priority; a kernel in use runs at normal priority.
		if n := niceOf(t, sess.HostPid()); n != 0 {
			t.Errorf("%s: the session's kernel runs at nice %d", tt.session, n)
		}
		waitPool(t, sb, tt.session, 1)
		low := 0
		pids, _ := sb.Cgroup().Pids()
		for _, pid := range pids {
			if niceOf(t, pid) == 10 {
				low++
			}
		}
		if low == 0 {
			t.Errorf("no warm kernel process at nice 10")
		}
		sb.EndSession(tt.lang, sess.ID)
	}

	// A warm kernel that died while it waited is never handed out.
	waitPool(t, sb, "python/bare", 1)
	pids, _ := sb.Cgroup().Pids()
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	time.Sleep(100 * time.Millisecond)
	served := sb.PoolStats()["python/bare"].Served
	res, err := sb.Run(ctx, kernel.Python, "print('fresh')", 0)
	if err != nil || res.Text("stdout") != "fresh\n" {
		t.Fatalf("run after the warm kernel died: %+v %v", res, err)
	}
	if st := sb.PoolStats()["python/bare"]; st.Served != served {
		t.Errorf("a dead warm kernel was handed out: %+v", st)
	}
}

// niceOf is the nice value of pid (field 19 of /proc/<pid>/stat).
func niceOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -100
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	n, _ := strconv.Atoi(f[16])
	return n
}
