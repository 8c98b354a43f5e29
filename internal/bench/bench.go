// Package bench measures codecell against the targets of its performance
// work and against baselines run on the same machine in the same run:
// ipykernel driven by jupyter_client, and plain Python processes. Every
// scenario checks the results it gets back, so a fast failure never counts.
package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codecell/codecell/internal/api"
	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

// Config selects the scenarios' sizes.
type Config struct {
	// Sandbox is the configuration of the server under test; DataDir is
	// replaced by a fresh directory.
	Sandbox sandbox.Config
	// Cells is the number of session cells timed; 0 means 300.
	Cells int
	// NewSessions is the number of new sessions timed; 0 means 10.
	NewSessions int
	// OneShots is the number of one-shot runs timed; 0 means 30.
	OneShots int
	// Sessions is the number of live sessions for the memory scenario; 0 means 50.
	Sessions int
	// Throughput is how long one-shot runs are sustained; 0 means 10s.
	Throughput time.Duration
	// Density is the number of live sessions of the density scenario,
	// spread over sandboxes of DensityPerSandbox each; 0 skips it.
	Density           int
	DensityPerSandbox int
	// Python is the interpreter of the baselines; "" means /usr/bin/python3.
	Python string
	Logger *slog.Logger
}

// Row is one measured figure.
type Row struct {
	Scenario string  `json:"scenario"`
	Metric   string  `json:"metric"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	// Baseline is the same work done the reference way, in the same run.
	Baseline     float64 `json:"baseline,omitempty"`
	BaselineName string  `json:"baseline_name,omitempty"`
	// Target is the goal; Met says whether Value reaches it.
	Target string `json:"target,omitempty"`
	Met    *bool  `json:"met,omitempty"`
	Note   string `json:"note,omitempty"`
}

// Ratio is Value / Baseline, or 0 without a baseline.
func (r Row) Ratio() float64 {
	if r.Baseline == 0 {
		return 0
	}
	return r.Value / r.Baseline
}

// Run starts a server and runs every scenario.
func Run(ctx context.Context, cfg Config) ([]Row, error) {
	cfg.Cells = cmp.Or(cfg.Cells, 300)
	cfg.NewSessions = cmp.Or(cfg.NewSessions, 10)
	cfg.OneShots = cmp.Or(cfg.OneShots, 30)
	cfg.Sessions = cmp.Or(cfg.Sessions, 50)
	cfg.Throughput = cmp.Or(cfg.Throughput, 10*time.Second)
	cfg.Python = cmp.Or(cfg.Python, "/usr/bin/python3")
	cfg.DensityPerSandbox = cmp.Or(cfg.DensityPerSandbox, 100)
	log := cmp.Or(cfg.Logger, slog.Default())

	srv, err := startServer(cfg.Sandbox)
	if err != nil {
		return nil, err
	}
	defer srv.close()

	var rows []Row
	for _, sc := range []struct {
		name string
		run  func(context.Context, Config, *server) ([]Row, error)
	}{
		{"session-cell", sessionCell},
		{"new-session", newSession},
		{"one-shot", oneShot},
		{"memory", memory},
		{"throughput", throughput},
		{"density", density},
	} {
		log.Info("bench scenario", "name", sc.name)
		srv.waitWarm(ctx)
		r, err := sc.run(ctx, cfg, srv)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", sc.name, err)
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

// server is codecell serving on loopback, as `codecell serve` does.
type server struct {
	url  string
	http *http.Server
	mgr  *sandbox.Manager
	dir  string
}

func startServer(cfg sandbox.Config) (*server, error) {
	dir, err := os.MkdirTemp("/var/lib", "codecell-bench-")
	if err != nil {
		return nil, err
	}
	os.Chmod(dir, 0o711)
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.CgroupParent = cmp.Or(cfg.CgroupParent, "codecell-bench")
	cfg.MaxSessions = max(cfg.MaxSessions, 1000)
	mgr := sandbox.NewManager(sandbox.ManagerConfig{Sandbox: cfg, SessionIdle: time.Hour})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: api.New(api.Config{Manager: mgr, Version: "bench"}), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	s := &server{url: "http://" + ln.Addr().String(), http: hs, mgr: mgr, dir: dir}
	// The default sandbox and its warm pools are made before timing starts.
	if _, err := mgr.Default(context.Background()); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// waitWarm waits (a minute at most) until the warm pools are full, so
// that a scenario does not share the CPU with the previous one's refills.
func (s *server) waitWarm(ctx context.Context) {
	sb, err := s.mgr.Default(ctx)
	if err != nil {
		return
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		full := true
		for _, st := range sb.PoolStats() {
			full = full && st.Ready == st.Size
		}
		if full {
			return
		}
	}
}

func (s *server) close() {
	s.http.Close()
	s.mgr.Shutdown(context.Background())
	os.RemoveAll(s.dir)
}

// execute runs code in the default sandbox and checks the reply: status
// ok and, if want is not empty, want in stdout or in the text of the result.
func (s *server) execute(lang, code, session, want string) error {
	return s.executeIn("", lang, code, session, want)
}

// executeIn is execute in the sandbox sandboxID ("" for the default one).
func (s *server) executeIn(sandboxID, lang, code, session, want string) error {
	_, err := s.call(sandboxID, lang, code, session, want)
	return err
}

// call is executeIn that also returns the HTTP status (0 if none came).
func (s *server) call(sandboxID, lang, code, session, want string) (int, error) {
	body := map[string]any{"language": lang, "code": code}
	if session != "" {
		body["session_id"] = session
	}
	b, _ := json.Marshal(body)
	prefix := ""
	if sandboxID != "" {
		prefix = "/sandboxes/" + sandboxID
	}
	resp, err := http.Post(s.url+prefix+"/v2/code/execute", "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r struct {
		Data struct {
			Status  string           `json:"status"`
			Stdout  string           `json:"stdout"`
			Outputs []map[string]any `json:"outputs"`
		} `json:"data"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(raw, &r) != nil || r.Data.Status != kernel.StatusOK {
		return resp.StatusCode, fmt.Errorf("status %d: %.300s", resp.StatusCode, raw)
	}
	if want != "" && !strings.Contains(r.Data.Stdout+fmt.Sprint(r.Data.Outputs), want) {
		return resp.StatusCode, fmt.Errorf("reply lacks %q: %.300s", want, raw)
	}
	return resp.StatusCode, nil
}

// timed runs f n times, calling before (untimed, if not nil) ahead of each
// run, and returns the durations in milliseconds.
func timed(n int, before func(), f func(i int) error) ([]float64, error) {
	ms := make([]float64, 0, n)
	for i := range n {
		if before != nil {
			before()
		}
		t := time.Now()
		if err := f(i); err != nil {
			return nil, err
		}
		ms = append(ms, float64(time.Since(t).Microseconds())/1000)
	}
	return ms, nil
}

func percentile(ms []float64, p float64) float64 {
	if len(ms) == 0 {
		return 0
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func met(ok bool) *bool { return &ok }

// The ipykernel baseline: jupyter_client drives a kernel, with no HTTP.
const jupyterBaseline = `
import json, sys, time
from jupyter_client.manager import start_new_kernel
def run(kc, code):
    s = time.perf_counter()
    msg_id = kc.execute(code)
    while True:
        m = kc.get_shell_msg(timeout=60)
        if m["parent_header"].get("msg_id") == msg_id:
            break
    assert m["content"]["status"] == "ok", m["content"]
    return (time.perf_counter() - s) * 1000
t0 = time.perf_counter()
km, kc = start_new_kernel(kernel_name="python3")
start = (time.perf_counter() - t0) * 1000
first = run(kc, "import pandas as pd, matplotlib; r = pd.DataFrame({'a': range(100)}).describe(); assert 'mean' in r.index")
cells = [run(kc, "x = 1") for _ in range(int(sys.argv[1]))]
km.shutdown_kernel(now=True)
print(json.dumps({"start_ms": start, "first_pandas_ms": first, "cell_ms": cells}))
`

type jupyterResult struct {
	StartMS       float64   `json:"start_ms"`
	FirstPandasMS float64   `json:"first_pandas_ms"`
	CellMS        []float64 `json:"cell_ms"`
}

func runJupyterBaseline(python string, cells int) (*jupyterResult, error) {
	cmd := exec.Command(python, "-c", jupyterBaseline, strconv.Itoa(cells))
	cmd.Env = append(os.Environ(), "PYDEVD_DISABLE_FILE_VALIDATION=1")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ipykernel baseline (needs python3-ipykernel and python3-jupyter-client): %w", err)
	}
	var r jupyterResult
	if err := json.Unmarshal(out[bytes.LastIndexByte(bytes.TrimSpace(out), '\n')+1:], &r); err != nil {
		return nil, fmt.Errorf("ipykernel baseline output %q: %w", out, err)
	}
	return &r, nil
}

const pandasCell = "import pandas as pd, matplotlib\nr = pd.DataFrame({'a': range(100)}).describe()\nprint(r.loc['mean', 'a'])"

// Target 1: a session cell over HTTP, against ipykernel with no HTTP.
func sessionCell(ctx context.Context, cfg Config, s *server) ([]Row, error) {
	if err := s.execute("python", "x = 0", "cell", ""); err != nil {
		return nil, err
	}
	// The session took a warm kernel; time its cells once the pool has
	// refilled, not while a new kernel imports pandas on the same CPUs.
	s.waitWarm(ctx)
	ms, err := timed(cfg.Cells, nil, func(int) error { return s.execute("python", "x = 1", "cell", "") })
	if err != nil {
		return nil, err
	}
	base, err := runJupyterBaseline(cfg.Python, cfg.Cells)
	if err != nil {
		return nil, err
	}
	p50, p99 := percentile(ms, 0.5), percentile(ms, 0.99)
	b50, b99 := percentile(base.CellMS, 0.5), percentile(base.CellMS, 0.99)
	return []Row{
		{Scenario: "session-cell", Metric: "x = 1 over HTTP, p50", Value: p50, Unit: "ms", Baseline: b50, BaselineName: "ipykernel via jupyter_client, no HTTP",
			Target: "≤ 1 ms and ≥ 3× faster than baseline", Met: met(p50 <= 1 && b50/p50 >= 3)},
		{Scenario: "session-cell", Metric: "x = 1 over HTTP, p99", Value: p99, Unit: "ms", Baseline: b99, BaselineName: "ipykernel via jupyter_client, no HTTP",
			Target: "≤ 3 ms", Met: met(p99 <= 3)},
	}, nil
}

// Target 2: a new session's first pandas result.
func newSession(ctx context.Context, cfg Config, s *server) ([]Row, error) {
	// Each new session arrives once the warm pool has refilled: the pool is
	// sized for the arrival rate (one-shot's back-to-back row shows what
	// happens when it is not).
	ms, err := timed(cfg.NewSessions, func() { s.waitWarm(ctx) }, func(i int) error {
		id := fmt.Sprintf("new-%d", i)
		defer deleteSession(s, id, "python")
		return s.execute("python", pandasCell, id, "49.5")
	})
	if err != nil {
		return nil, err
	}
	cold, err := timed(min(cfg.NewSessions, 5), nil, func(int) error {
		sb, err := s.mgr.Default(ctx)
		if err != nil {
			return err
		}
		k, err := sb.StartKernel(ctx, kernel.Python)
		if err != nil {
			return err
		}
		defer k.Close()
		res, err := k.Execute(ctx, pandasCell, time.Minute)
		if err == nil && !strings.Contains(res.Text("stdout"), "49.5") {
			err = fmt.Errorf("cold kernel: %+v", res.Outputs)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	base, err := runJupyterBaseline(cfg.Python, 1)
	if err != nil {
		return nil, err
	}
	p50 := percentile(ms, 0.5)
	return []Row{
		{Scenario: "new-session", Metric: "new session → first describe(), p50", Value: p50, Unit: "ms",
			Baseline: percentile(cold, 0.5), BaselineName: "cold jailed kernel, same cell", Target: "≤ 30 ms", Met: met(p50 <= 30)},
		{Scenario: "new-session", Metric: "(baseline) ipykernel start + first cell", Value: base.StartMS + base.FirstPandasMS, Unit: "ms"},
	}, nil
}

func deleteSession(s *server, id, lang string) {
	req, _ := http.NewRequest("DELETE", s.url+"/v2/code/sessions/"+id+"?language="+lang, nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

// Target 3: a one-shot print(1) against starting a bare Python.
func oneShot(ctx context.Context, cfg Config, s *server) ([]Row, error) {
	warm, err := timed(cfg.OneShots, func() { s.waitWarm(ctx) }, func(int) error { return s.execute("python", "print(1)", "", "1") })
	if err != nil {
		return nil, err
	}
	backToBack, err := timed(cfg.OneShots, nil, func(int) error { return s.execute("python", "print(1)", "", "1") })
	if err != nil {
		return nil, err
	}
	bare, err := timed(cfg.OneShots, nil, func(int) error {
		out, err := exec.Command(cfg.Python, "-c", "print(1)").Output()
		if err == nil && string(out) != "1\n" {
			err = fmt.Errorf("python printed %q", out)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	b50 := percentile(bare, 0.5)
	w50, bb50 := percentile(warm, 0.5), percentile(backToBack, 0.5)
	return []Row{
		{Scenario: "one-shot", Metric: "print(1) over HTTP, warm kernel ready, p50", Value: w50, Unit: "ms",
			Baseline: b50, BaselineName: "bare python3 -c 'print(1)'", Target: "< baseline", Met: met(w50 < b50)},
		{Scenario: "one-shot", Metric: "print(1) over HTTP, back to back, p50", Value: bb50, Unit: "ms",
			Baseline: b50, BaselineName: "bare python3 -c 'print(1)'", Target: "< baseline", Met: met(bb50 < b50)},
	}, nil
}

// Target 4: memory of idle pandas-ready sessions (PSS, so shared pages
// are divided among the processes that share them).
func memory(ctx context.Context, cfg Config, s *server) ([]Row, error) {
	sb, err := s.mgr.Default(ctx)
	if err != nil {
		return nil, err
	}
	before := map[int]bool{}
	for _, sess := range sb.Sessions(kernel.Python) {
		before[sess.HostPid()] = true
	}
	var ids []string
	defer func() {
		for _, id := range ids {
			deleteSession(s, id, "python")
		}
	}()
	for i := range cfg.Sessions {
		id := fmt.Sprintf("mem-%d", i)
		ids = append(ids, id)
		if err := s.execute("python", pandasCell, id, "49.5"); err != nil {
			return nil, fmt.Errorf("session %d of %d: %w", i+1, cfg.Sessions, err)
		}
	}
	var total int64
	n := 0
	for _, sess := range sb.Sessions(kernel.Python) {
		if pid := sess.HostPid(); pid != 0 && !before[pid] && strings.HasPrefix(sess.ID, "mem-") {
			pss, err := treePSS(pid)
			if err != nil {
				return nil, err
			}
			total += pss
			n++
		}
	}
	if n == 0 {
		return nil, errors.New("no session processes found")
	}
	perMB := float64(total) / float64(n) / (1 << 20)
	return []Row{{Scenario: "memory", Metric: fmt.Sprintf("PSS per idle pandas-ready session (%d live)", n), Value: perMB, Unit: "MB",
		Target: "≤ 12 MB across 200 sessions", Met: met(perMB <= 12 && n >= 200)}}, nil
}

// treePSS is the PSS of pid, its parent (bwrap's init) and grandparent
// (bwrap): a session's whole process tree.
func treePSS(pid int) (int64, error) {
	var total int64
	for i := 0; i < 3 && pid > 1; i++ {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Pss:"); ok {
				kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				total += kb << 10
			}
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, err
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		pid, _ = strconv.Atoi(f[1])
	}
	return total, nil
}

// Target 6: sustained one-shot executions, each in a fresh jail.
func throughput(ctx context.Context, cfg Config, s *server) ([]Row, error) {
	var ok, failed atomic.Int64
	var firstErr error
	var mu sync.Mutex
	deadline := time.Now().Add(cfg.Throughput)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := s.execute("python", "print(1)", "", "1"); err != nil {
					failed.Add(1)
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					continue
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	rate := float64(ok.Load()) / cfg.Throughput.Seconds()
	row := Row{Scenario: "throughput", Metric: fmt.Sprintf("one-shot print(1) per second over %v, 4 clients", cfg.Throughput), Value: rate, Unit: "/s",
		Target: "≥ 200/s for 30 s, no errors", Met: met(rate >= 200 && failed.Load() == 0 && cfg.Throughput >= 30*time.Second)}
	if failed.Load() > 0 {
		row.Note = fmt.Sprintf("%d errors, first: %v", failed.Load(), firstErr)
	}
	return []Row{row}, nil
}

// Target 5: many live pandas-ready sessions, each touched in turn, while
// the server keeps answering new one-shot runs.
func density(ctx context.Context, cfg Config, s *server) ([]Row, error) {
	if cfg.Density <= 0 {
		return nil, nil
	}
	memBefore, err := memUsed()
	if err != nil {
		return nil, err
	}
	type sess struct{ sandbox, id string }
	var all []sess
	var sandboxes []string
	defer func() {
		for _, id := range sandboxes {
			req, _ := http.NewRequest("DELETE", s.url+"/v2/sandboxes/"+id, nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}()
	for i := 0; len(all) < cfg.Density; i++ {
		resp, err := http.Post(s.url+"/v2/sandboxes", "application/json", strings.NewReader(fmt.Sprintf(`{"id":"density-%d"}`, i)))
		if err != nil {
			return nil, err
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return nil, fmt.Errorf("creating sandbox %d: status %d: %.300s", i, resp.StatusCode, raw)
		}
		id := fmt.Sprintf("density-%d", i)
		sandboxes = append(sandboxes, id)
		for j := 0; j < cfg.DensityPerSandbox && len(all) < cfg.Density; j++ {
			all = append(all, sess{id, fmt.Sprintf("d-%d", j)})
		}
	}
	// Sessions are made by a few clients at once, as agents would, until
	// all are live or the machine runs short of memory.
	const setupCell = "import pandas as pd, matplotlib\ndf = pd.DataFrame({'a': range(100)})\nprint(df.describe().loc['mean', 'a'])"
	var next, live atomic.Int64
	made := make([]bool, len(all))
	var errMu sync.Mutex
	var setupErr error
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(all) || ctx.Err() != nil {
					return
				}
				if avail, err := memAvailable(); err == nil && avail < 2<<30 {
					errMu.Lock()
					setupErr = cmp.Or(setupErr, fmt.Errorf("stopped at %d sessions: less than 2 GiB of memory left", live.Load()))
					errMu.Unlock()
					next.Store(int64(len(all)))
					return
				}
				if err := s.executeIn(all[i].sandbox, "python", setupCell, all[i].id, "49.5"); err != nil {
					errMu.Lock()
					setupErr = cmp.Or(setupErr, fmt.Errorf("session %d: %w", i, err))
					errMu.Unlock()
					next.Store(int64(len(all)))
					return
				}
				made[i] = true
				live.Add(1)
			}
		}()
	}
	wg.Wait()
	n := int(live.Load())
	memAfter, err := memUsed()
	if err != nil {
		return nil, err
	}
	var touched []sess
	for i, x := range all {
		if made[i] {
			touched = append(touched, x)
		}
	}

	// Touch every session in turn while another client keeps sending
	// one-shot runs to the default sandbox.
	stop := make(chan struct{})
	var side []float64
	var sideErr error
	sideDone := make(chan struct{})
	go func() {
		defer close(sideDone)
		for {
			t := time.Now()
			if err := s.execute("python", "print(1)", "", "1"); err != nil {
				sideErr = cmp.Or(sideErr, err)
			} else {
				side = append(side, float64(time.Since(t).Microseconds())/1000)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	touch, err := timed(len(touched), nil, func(i int) error {
		return s.executeIn(touched[i].sandbox, "python", "df['a'].sum()", touched[i].id, "4950")
	})
	close(stop)
	<-sideDone
	if err != nil {
		return nil, err
	}
	if sideErr != nil {
		return nil, fmt.Errorf("one-shot during density: %w", sideErr)
	}
	perMB := float64(memAfter-memBefore) / float64(max(n, 1)) / (1 << 20)
	rows := []Row{
		{Scenario: "density", Metric: fmt.Sprintf("live pandas-ready sessions (%d sandboxes)", len(sandboxes)), Value: float64(n), Unit: "",
			Target: fmt.Sprintf("%d", cfg.Density), Met: met(n >= cfg.Density), Note: errString(setupErr)},
		{Scenario: "density", Metric: "host memory used per live session", Value: perMB, Unit: "MB"},
	}
	if len(touch) > 0 {
		p99 := percentile(touch, 0.99)
		rows = append(rows,
			Row{Scenario: "density", Metric: "each session touched in turn, p50", Value: percentile(touch, 0.5), Unit: "ms"},
			Row{Scenario: "density", Metric: "each session touched in turn, p99", Value: p99, Unit: "ms", Target: "≤ 50 ms", Met: met(p99 <= 50 && n >= cfg.Density)},
			Row{Scenario: "density", Metric: fmt.Sprintf("one-shot print(1) meanwhile, p99 of %d", len(side)), Value: percentile(side, 0.99), Unit: "ms"})
	}
	return rows, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// memAvailable and memUsed read /proc/meminfo, in bytes.
func memAvailable() (int64, error) {
	m, err := meminfo()
	return m["MemAvailable"], err
}

func memUsed() (int64, error) {
	m, err := meminfo()
	return m["MemTotal"] - m["MemAvailable"], err
}

func meminfo() (map[string]int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if f := strings.Fields(v); ok && len(f) > 0 {
			kb, _ := strconv.ParseInt(f[0], 10, 64)
			m[k] = kb << 10
		}
	}
	return m, nil
}
