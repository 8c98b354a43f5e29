package cgroup

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
)

const (
	helperEnv  = "CODECELL_CGROUP_TEST_HELPER"
	testParent = "codecell-test"
)

// TestMain doubles as the helper process: when helperEnv is set the test
// binary runs a helper mode instead of the tests.
func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	code := m.Run()
	// Best effort: remove the shared test parent if every test cleaned up.
	if os.Geteuid() == 0 {
		if h, err := Detect(); err == nil {
			for _, d := range h.newGroup(testParent, Limits{}).dirs {
				_ = syscall.Rmdir(d)
			}
		}
	}
	os.Exit(code)
}

// runHelper implements the helper modes. Every mode first prints "ready",
// then waits for a line on stdin (so the parent can Join it first).
func runHelper(mode string) int {
	fmt.Println("ready")
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		return 3
	}
	switch mode {
	case "alloc":
		// Allocate and touch 200 MiB; expected to be OOM-killed.
		var keep [][]byte
		for i := 0; i < 200; i++ {
			b := make([]byte, 1<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
			keep = append(keep, b)
		}
		fmt.Println("survived", len(keep))
		return 0
	case "fork":
		// Try to start 30 sleeping children; report successes/failures.
		ok, fail := 0, 0
		for i := 0; i < 30; i++ {
			_, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "30"}, &syscall.ProcAttr{})
			if err != nil {
				fail++
			} else {
				ok++
			}
		}
		fmt.Printf("ok=%d fail=%d\n", ok, fail)
		_, _ = io.Copy(io.Discard, in) // block until killed or stdin closes
		return 0
	case "spawn":
		// Start 3 sleeping grandchildren, then block.
		for i := 0; i < 3; i++ {
			if _, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "30"}, &syscall.ProcAttr{}); err != nil {
				fmt.Println("fork:", err)
				return 4
			}
		}
		fmt.Println("spawned")
		_, _ = io.Copy(io.Discard, in)
		return 0
	}
	return 5
}

func needRoot(t *testing.T) *Host {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creating cgroups and moving processes requires euid 0")
	}
	h, err := Detect()
	if err != nil {
		t.Fatalf("Detect: %v", err)
	}
	return h
}

func uniqueName(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	n := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return testParent + "/" + n + "-" + hex.EncodeToString(b)
}

// newGroup creates a uniquely named group and removes it in t.Cleanup.
func newTestGroup(t *testing.T, h *Host, l Limits) *Group {
	t.Helper()
	g, err := h.Create(uniqueName(t), l)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		if err := g.Remove(); err != nil {
			t.Errorf("cleanup Remove: %v", err)
		}
	})
	return g
}

type helperProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// startHelper starts the test binary in a helper mode and waits for it to
// be ready. The process is killed and reaped in t.Cleanup.
func startHelper(t *testing.T, mode string, extraEnv ...string) *helperProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+mode), extraEnv...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &helperProc{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	if line, err := p.out.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("helper %s: got %q, %v; want ready", mode, line, err)
	}
	return p
}

func (p *helperProc) go_(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
}

func readTrim(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// --- detection -------------------------------------------------------------

func TestParseAndDetectFrom(t *testing.T) {
	thisHost := `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	pureV2 := `26 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
	coMount := `25 22 0:22 / /sys/fs/cgroup ro shared:4 - tmpfs tmpfs ro,mode=755
28 25 0:25 / /sys/fs/cgroup/cpu,cpuacct rw shared:9 - cgroup cgroup rw,cpu,cpuacct
29 25 0:26 / /sys/fs/cgroup/memory rw shared:10 - cgroup cgroup rw,memory
30 25 0:27 / /sys/fs/cgroup/pids rw shared:11 - cgroup cgroup rw,pids
31 22 0:26 /docker/abc /mnt/mem\040cg rw shared:10 - cgroup cgroup rw,memory
`
	hybridV2 := `41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
`
	spacePath := `29 25 0:26 / /mnt/mem\040cg rw shared:10 - cgroup cgroup rw,memory
30 25 0:27 / /sys/fs/cgroup/pids rw shared:11 - cgroup cgroup rw,pids
`
	noPids := `35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	controllers := map[string]string{
		"/sys/fs/cgroup":         "cpuset cpu io memory hugetlb pids rdma misc",
		"/sys/fs/cgroup/unified": "",
	}
	tests := []struct {
		name      string
		mountinfo string
		ctrl      map[string]string
		wantVer   Version
		wantStr   string
		wantMount map[string]string // v1 mounts to check, or "" -> unified
		wantErr   string
	}{
		{name: "v1 with empty unified (this host)", mountinfo: thisHost, ctrl: controllers, wantVer: V1,
			wantStr: "v1 (memory, pids, cpu)",
			wantMount: map[string]string{Memory: "/sys/fs/cgroup/memory", Pids: "/sys/fs/cgroup/pids",
				CPU: "/sys/fs/cgroup/cpu", Freezer: "/sys/fs/cgroup/freezer"}},
		{name: "pure v2", mountinfo: pureV2, ctrl: controllers, wantVer: V2, wantStr: "v2 (memory, pids, cpu)",
			wantMount: map[string]string{"": "/sys/fs/cgroup"}},
		{name: "v1 cpu,cpuacct co-mount, prefers full hierarchy", mountinfo: coMount, ctrl: controllers, wantVer: V1,
			wantMount: map[string]string{CPU: "/sys/fs/cgroup/cpu,cpuacct", Memory: "/sys/fs/cgroup/memory", Pids: "/sys/fs/cgroup/pids"}},
		{name: "hybrid unified with memory+pids", mountinfo: hybridV2,
			ctrl:    map[string]string{"/sys/fs/cgroup/unified": "memory pids"},
			wantVer: V2, wantStr: "v2 at /sys/fs/cgroup/unified (memory, pids; missing cpu)",
			wantMount: map[string]string{"": "/sys/fs/cgroup/unified"}},
		{name: "v1 mount point with an escaped space", mountinfo: spacePath, ctrl: controllers, wantVer: V1,
			wantStr:   "v1 (memory, pids; missing cpu)",
			wantMount: map[string]string{Memory: "/mnt/mem cg", Pids: "/sys/fs/cgroup/pids"}},
		{name: "pids missing everywhere", mountinfo: noPids, ctrl: controllers,
			wantErr: "pids not mounted; cgroup2 at /sys/fs/cgroup/unified lacks memory, pids"},
		{name: "nothing", mountinfo: "", ctrl: controllers, wantErr: "memory, pids not mounted; no cgroup2 mount"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := mountinfo.GetMountsFromReader(strings.NewReader(tc.mountinfo),
				mountinfo.FSTypeFilter("cgroup", "cgroup2"))
			if err != nil {
				t.Fatal(err)
			}
			h, err := detectFrom(ms, func(mp string) (string, error) {
				s, ok := tc.ctrl[mp]
				if !ok {
					return "", os.ErrNotExist
				}
				return s, nil
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Version != tc.wantVer {
				t.Errorf("Version = %v, want %v", h.Version, tc.wantVer)
			}
			if tc.wantStr != "" && h.String() != tc.wantStr {
				t.Errorf("String() = %q, want %q", h.String(), tc.wantStr)
			}
			for c, mp := range tc.wantMount {
				got := h.Unified
				if c != "" {
					got = h.V1Mounts[c]
				}
				if got != mp {
					t.Errorf("mount[%q] = %q, want %q", c, got, mp)
				}
			}
		})
	}
}

func TestDetectThisHost(t *testing.T) {
	h, err := Detect()
	if err != nil {
		t.Fatalf("Detect: %v", err)
	}
	t.Logf("host: %s, v1 mounts %v, unified %q", h, h.V1Mounts, h.Unified)
	// This suite is developed on a v1 host with an empty cgroup2 at
	// /sys/fs/cgroup/unified; on a v2 host just check the controllers.
	if h.Version == V1 {
		if s := h.String(); s != "v1 (memory, pids, cpu)" {
			t.Errorf("String() = %q", s)
		}
	}
	for c, ok := range h.Controllers() {
		if !ok {
			t.Errorf("controller %s not usable", c)
		}
	}
	if len(h.Controllers()) != 3 {
		t.Errorf("Controllers() = %v, want memory, pids, cpu", h.Controllers())
	}
}

// --- groups ----------------------------------------------------------------

func TestCreateAppliesLimits(t *testing.T) {
	h := needRoot(t)
	name := uniqueName(t)
	t.Cleanup(func() {
		if g, err := h.Create(name, Limits{}); err == nil {
			_ = g.Remove()
		}
	})
	// Applied in sequence to the same group: also exercises re-opening
	// with raised and lowered memory limits (memsw ordering).
	steps := []struct {
		name string
		l    Limits
	}{
		{"all limits", Limits{MemoryBytes: 64 << 20, Pids: 10, CPUQuota: 0.5}},
		{"raise", Limits{MemoryBytes: 256 << 20, Pids: 100, CPUQuota: 2}},
		{"lower", Limits{MemoryBytes: 32 << 20, Pids: 5, CPUQuota: 0.001}},
		{"unlimited", Limits{}},
		{"again", Limits{MemoryBytes: 64 << 20, Pids: 10, CPUQuota: 1}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			g, err := h.Create(name, st.l)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if g.Limits() != st.l || g.Path() != name {
				t.Errorf("Limits()/Path() = %+v %q", g.Limits(), g.Path())
			}
			checkLimits(t, g, st.l)
		})
	}
}

func checkLimits(t *testing.T, g *Group, l Limits) {
	t.Helper()
	memWant, pidsWant := "max", "max"
	if l.MemoryBytes > 0 {
		memWant = strconv.FormatInt(l.MemoryBytes, 10)
	}
	if l.Pids > 0 {
		pidsWant = strconv.FormatInt(l.Pids, 10)
	}
	if g.host.Version == V2 {
		d := g.dirs[0]
		if got := readTrim(t, filepath.Join(d, "memory.max")); got != memWant {
			t.Errorf("memory.max = %s, want %s", got, memWant)
		}
		if exists(filepath.Join(d, "memory.swap.max")) {
			if got := readTrim(t, filepath.Join(d, "memory.swap.max")); got != "0" {
				t.Errorf("memory.swap.max = %s", got)
			}
		}
		if got := readTrim(t, filepath.Join(d, "pids.max")); got != pidsWant {
			t.Errorf("pids.max = %s, want %s", got, pidsWant)
		}
		cpuWant := "max 100000"
		if l.CPUQuota > 0 {
			cpuWant = fmt.Sprintf("%d 100000", cfsQuotaUS(l.CPUQuota))
		}
		if got := readTrim(t, filepath.Join(d, "cpu.max")); got != cpuWant {
			t.Errorf("cpu.max = %s, want %s", got, cpuWant)
		}
		return
	}
	md := g.ctl[Memory]
	lim, err := readInt(filepath.Join(md, "memory.limit_in_bytes"))
	if err != nil {
		t.Fatal(err)
	}
	if l.MemoryBytes > 0 && lim != l.MemoryBytes {
		t.Errorf("memory.limit_in_bytes = %d, want %d", lim, l.MemoryBytes)
	}
	if l.MemoryBytes == 0 && lim < 1<<62 {
		t.Errorf("memory.limit_in_bytes = %d, want unlimited", lim)
	}
	if sw := filepath.Join(md, "memory.memsw.limit_in_bytes"); exists(sw) {
		if got, _ := readInt(sw); got != lim {
			t.Errorf("memory.memsw.limit_in_bytes = %d, want %d (no swap)", got, lim)
		}
	}
	if got := readTrim(t, filepath.Join(md, "memory.swappiness")); got != "0" {
		t.Errorf("memory.swappiness = %s", got)
	}
	if v, _, _ := readKV(filepath.Join(md, "memory.oom_control"), "oom_kill_disable"); v != 0 {
		t.Errorf("oom_kill_disable = %d", v)
	}
	if got := readTrim(t, filepath.Join(md, "memory.use_hierarchy")); got != "1" {
		t.Errorf("memory.use_hierarchy = %s", got)
	}
	if got := readTrim(t, filepath.Join(g.ctl[Pids], "pids.max")); got != pidsWant {
		t.Errorf("pids.max = %s, want %s", got, pidsWant)
	}
	quotaWant := "-1"
	if l.CPUQuota > 0 {
		quotaWant = strconv.FormatInt(cfsQuotaUS(l.CPUQuota), 10)
	}
	if got := readTrim(t, filepath.Join(g.ctl[CPU], "cpu.cfs_quota_us")); got != quotaWant {
		t.Errorf("cpu.cfs_quota_us = %s, want %s", got, quotaWant)
	}
	if got := readTrim(t, filepath.Join(g.ctl[CPU], "cpu.cfs_period_us")); got != "100000" {
		t.Errorf("cpu.cfs_period_us = %s", got)
	}
}

func TestCreateIdempotentAndRemove(t *testing.T) {
	h := needRoot(t)
	name := uniqueName(t)
	l := Limits{MemoryBytes: 100 << 20, Pids: 50, CPUQuota: 1}
	g1, err := h.Create(name, l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g1.Remove() })
	c1, err := g1.Child("jail-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Child("nested/deeper"); err != nil {
		t.Fatal(err)
	}
	g2, err := h.Create(name, l)
	if err != nil {
		t.Fatalf("second Create: %v", err)
	}
	c2, err := g2.Child("jail-1")
	if err != nil {
		t.Fatalf("second Child: %v", err)
	}
	if c2.Path() != name+"/jail-1" || c2.Limits() != (Limits{}) {
		t.Errorf("child Path/Limits = %q %+v", c2.Path(), c2.Limits())
	}
	checkLimits(t, g2, l)
	wantDirs := 1
	if h.Version == V1 {
		wantDirs = len(h.v1Hierarchies())
	}
	if len(g2.Dirs()) != wantDirs || len(g2.ProcsFiles()) != wantDirs {
		t.Errorf("Dirs %v ProcsFiles %v, want %d each", g2.Dirs(), g2.ProcsFiles(), wantDirs)
	}
	for _, d := range append(g2.Dirs(), c2.Dirs()...) {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			t.Errorf("missing dir %s: %v", d, err)
		}
	}
	for _, bad := range []string{"", "/abs", "a/../../b", "..", "cgroup.procs"} {
		if _, err := h.Create(bad, Limits{}); err == nil {
			t.Errorf("Create(%q) succeeded", bad)
		}
		if _, err := g2.Child(bad); err == nil {
			t.Errorf("Child(%q) succeeded", bad)
		}
	}
	if _, err := h.Create(name+"-neg", Limits{Pids: -1}); err == nil {
		t.Error("negative limit accepted")
	}

	if err := g2.Remove(); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	for _, d := range append(g2.Dirs(), c2.Dirs()...) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists after Remove (%v)", d, err)
		}
	}
	if err := g2.Remove(); err != nil {
		t.Errorf("second Remove: %v", err)
	}
	if err := c1.Remove(); err != nil {
		t.Errorf("Remove of removed child: %v", err)
	}
}

func TestOOMKill(t *testing.T) {
	h := needRoot(t)
	tests := []struct {
		name    string
		inChild bool // jail pattern: limit on the group, process in a child
	}{
		{"process in limited group", false},
		{"process in child of limited group", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb := newTestGroup(t, h, Limits{MemoryBytes: 64 << 20, Pids: 64})
			target := sb
			if tc.inChild {
				var err error
				if target, err = sb.Child("jail"); err != nil {
					t.Fatal(err)
				}
			}
			p := startHelper(t, "alloc")
			if err := target.Join(p.cmd.Process.Pid); err != nil {
				t.Fatalf("Join: %v", err)
			}
			p.go_(t)
			out, _ := io.ReadAll(p.out)
			err := p.cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("helper exited with %v, output %q; want killed", err, out)
			}
			ws := ee.Sys().(syscall.WaitStatus)
			if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("helper status %v, want SIGKILL (output %q)", ws, out)
			}
			for _, g := range []*Group{target, sb} {
				n, err := g.OOMKills()
				if err != nil {
					t.Fatal(err)
				}
				if n < 1 {
					t.Errorf("%s: OOMKills = %d, want > 0", g.Path(), n)
				}
				peak, err := g.MemoryPeak()
				if err != nil {
					t.Fatal(err)
				}
				if peak < 32<<20 || peak > 65<<20 {
					t.Errorf("%s: MemoryPeak = %d, want about 64 MiB", g.Path(), peak)
				}
			}
		})
	}
}

func TestPidsLimitStopsForkLoop(t *testing.T) {
	h := needRoot(t)
	sb := newTestGroup(t, h, Limits{Pids: 10})
	jail, err := sb.Child("jail")
	if err != nil {
		t.Fatal(err)
	}
	// One P keeps the helper's own thread count low and stable.
	p := startHelper(t, "fork", "GOMAXPROCS=1")
	if err := jail.Join(p.cmd.Process.Pid); err != nil {
		t.Fatalf("Join: %v", err)
	}
	p.go_(t)
	line, err := p.out.ReadString('\n')
	if err != nil {
		t.Fatalf("reading helper result: %v", err)
	}
	var ok, fail int
	if _, err := fmt.Sscanf(line, "ok=%d fail=%d", &ok, &fail); err != nil {
		t.Fatalf("helper said %q: %v", line, err)
	}
	t.Logf("fork loop: %d started, %d refused", ok, fail)
	if fail == 0 || ok >= 10 {
		t.Errorf("pids limit 10 did not stop the fork loop: ok=%d fail=%d", ok, fail)
	}
	cur := readTrim(t, filepath.Join(sb.ctl[Pids], "pids.current"))
	if n, _ := strconv.Atoi(cur); n > 10 {
		t.Errorf("pids.current = %s > limit 10", cur)
	}
	hits, err := sb.PidsLimitHits()
	if err != nil {
		t.Fatal(err)
	}
	if hits < int64(fail) {
		t.Errorf("PidsLimitHits = %d, want >= %d", hits, fail)
	}
	pids, err := sb.Pids()
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) != ok+1 {
		t.Errorf("Pids() = %v, want helper + %d children", pids, ok)
	}
	if err := sb.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if pids, _ := sb.Pids(); len(pids) != 0 {
		t.Errorf("after Kill: %v", pids)
	}
}

func TestKillEmptiesGroup(t *testing.T) {
	h := needRoot(t)
	tests := []struct {
		name string
		host *Host
	}{{"detected host", h}}
	if _, ok := h.V1Mounts[Freezer]; ok {
		// Same host without the optional v1 freezer: plain SIGKILL loop.
		nf := &Host{Version: h.Version, V1Mounts: map[string]string{}, avail: h.avail}
		for c, mp := range h.V1Mounts {
			if c != Freezer {
				nf.V1Mounts[c] = mp
			}
		}
		tests = append(tests, struct {
			name string
			host *Host
		}{"v1 without freezer", nf})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { killScenario(t, tc.host) })
	}
}

func killScenario(t *testing.T, h *Host) {
	sb := newTestGroup(t, h, Limits{MemoryBytes: 256 << 20, Pids: 100})
	jails := make([]*Group, 2)
	for i := range jails {
		var err error
		if jails[i], err = sb.Child(fmt.Sprintf("jail-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// Direct children joined by the parent.
	var direct []*exec.Cmd
	for i := 0; i < 3; i++ {
		cmd := exec.Command("/bin/sleep", "30")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		if err := jails[0].Join(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		direct = append(direct, cmd)
	}
	// A process that joins by itself writing "0" into every ProcsFiles
	// entry, then execs sleep.
	var script strings.Builder
	for _, f := range jails[1].ProcsFiles() {
		fmt.Fprintf(&script, "echo 0 > %s || exit 1; ", f)
	}
	script.WriteString("exec /bin/sleep 30")
	self := exec.Command("/bin/sh", "-c", script.String())
	self.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := self.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = self.Process.Kill(); _ = self.Wait() })
	direct = append(direct, self)
	// A helper with grandchildren (not our children), in jail 1.
	p := startHelper(t, "spawn")
	if err := jails[1].Join(p.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	p.go_(t)
	if line, _ := p.out.ReadString('\n'); line != "spawned\n" {
		t.Fatalf("helper: %q", line)
	}

	want := 3 + 1 + 1 + 3
	var pids []int
	for end := time.Now().Add(2 * time.Second); ; {
		var err error
		if pids, err = sb.Pids(); err != nil {
			t.Fatal(err)
		}
		if len(pids) == want || time.Now().After(end) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(pids) != want {
		t.Fatalf("Pids() = %v, want %d processes", pids, want)
	}
	if j1, _ := jails[1].Pids(); len(j1) != 5 {
		t.Errorf("jail-1 Pids() = %v, want 5", j1)
	}

	if err := sb.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if pids, err := sb.Pids(); err != nil || len(pids) != 0 {
		t.Fatalf("after Kill: Pids() = %v, %v", pids, err)
	}
	for _, cmd := range append(direct, p.cmd) {
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("pid %d: wait = %v, want killed by SIGKILL", cmd.Process.Pid, err)
		}
	}
	// The group is still usable and can be killed again (no-op).
	if err := sb.Kill(); err != nil {
		t.Errorf("second Kill: %v", err)
	}
	if h.Version == V1 {
		if d, ok := sb.ctl[Freezer]; ok {
			if s := readTrim(t, filepath.Join(d, "freezer.state")); s != "THAWED" {
				t.Errorf("freezer.state = %s after Kill", s)
			}
		}
	}
}

// TestOpenLeavesLimits: a group opened as it is keeps its limits while its
// processes run (Create would have lifted them), and Open+Remove clears a
// leftover group, or nothing if there is none.
func TestOpenLeavesLimits(t *testing.T) {
	h := needRoot(t)
	name := uniqueName(t)
	l := Limits{MemoryBytes: 100 << 20, Pids: 20}
	g, err := h.Create(name, l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Remove() })
	cmd := exec.Command("/bin/sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if err := g.Join(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	left, err := h.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	checkLimits(t, g, l)
	if err := left.Remove(); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if err := cmd.Wait(); err == nil {
		t.Error("the leftover process was not killed")
	}
	for _, d := range g.Dirs() {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists", d)
		}
	}
	if none, err := h.Open(name + "-none"); err != nil || none.Remove() != nil {
		t.Errorf("Open and Remove of a group that does not exist: %v", err)
	}
	if _, err := h.Open("../x"); err == nil {
		t.Error("Open(../x) succeeded")
	}
}

func TestRemoveKillsRemaining(t *testing.T) {
	h := needRoot(t)
	g, err := h.Create(uniqueName(t), Limits{Pids: 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Remove() })
	jail, err := g.Child("jail")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if err := jail.Join(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := g.Remove(); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	for _, d := range append(g.Dirs(), jail.Dirs()...) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists", d)
		}
	}
	if err := cmd.Wait(); err == nil {
		t.Error("sleep was not killed")
	}
}
