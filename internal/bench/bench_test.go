package bench

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/codecell/codecell/internal/cgroup"
	"github.com/codecell/codecell/internal/jail"
	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

func TestMain(m *testing.M) {
	jail.RunHelperIfRequested()
	os.Exit(m.Run())
}

// TestRun runs every scenario small: each must produce its rows from
// checked results, and its baselines must run.
func TestRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for sandboxes")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("needs bubblewrap")
	}
	host, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := Run(context.Background(), Config{
		Sandbox: sandbox.Config{Cgroups: host, CgroupParent: "codecell-benchtest",
			Prewarm: map[kernel.Language]int{kernel.Python: 1, kernel.JavaScript: 1}},
		Cells: 5, NewSessions: 1, OneShots: 2, Sessions: 2, Throughput: time.Second, Density: 3, DensityPerSandbox: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.Scenario] = true
		// Host memory is a difference of two readings: noise at this size.
		if r.Value <= 0 && !strings.HasPrefix(r.Metric, "host memory") {
			t.Errorf("%s %s: value %v", r.Scenario, r.Metric, r.Value)
		}
		if r.BaselineName != "" && r.Baseline <= 0 {
			t.Errorf("%s %s: baseline %q did not run", r.Scenario, r.Metric, r.BaselineName)
		}
	}
	for _, s := range []string{"session-cell", "new-session", "one-shot", "memory", "throughput", "density"} {
		if !seen[s] {
			t.Errorf("no rows for %s", s)
		}
	}
}

// TestSoak: a short soak; no errors but 429s, and nothing left behind.
func TestSoak(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for sandboxes")
	}
	host, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	res, err := Soak(context.Background(), SoakConfig{
		Sandbox: sandbox.Config{Cgroups: host, CgroupParent: "codecell-soaktest",
			Prewarm: map[kernel.Language]int{kernel.Python: 1, kernel.JavaScript: 1}},
		Clients: 6, Duration: 8 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests < 12 || len(res.ByOp) != 6 {
		t.Errorf("too little done: %+v", res)
	}
	for status, n := range res.ByStatus {
		if status != 200 && status != 429 {
			t.Errorf("%d requests got %d: %v", n, status, res.Errors)
		}
	}
	if len(res.Errors) > 0 {
		t.Errorf("errors: %v", res.Errors)
	}
	if len(res.Leaks) > 0 {
		t.Errorf("left behind: %v", res.Leaks)
	}
}
