package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cfsPeriodUS is the CFS period used for CPU quotas (100ms).
const cfsPeriodUS = 100000

// minCFSQuotaUS is the smallest quota the kernel accepts (1ms).
const minCFSQuotaUS = 1000

// killTimeout bounds how long Kill waits for a group to become empty.
const killTimeout = 2 * time.Second

// rmdirTimeout bounds how long Remove retries EBUSY from rmdir.
const rmdirTimeout = 2 * time.Second

// Limits is a resource budget. The zero value of a field means no limit
// for it.
type Limits struct {
	// MemoryBytes is the hard memory limit. Swap is always disabled for
	// the group (v2 memory.swap.max=0; v1 memory.memsw.limit_in_bytes =
	// MemoryBytes where swap accounting exists, and memory.swappiness=0).
	MemoryBytes int64
	// Pids is the maximum number of tasks (processes and threads), pids.max.
	Pids int64
	// CPUQuota is in CPUs, e.g. 1.0 = one full core, 0.5 = half a core
	// (v2 cpu.max "quota period"; v1 cpu.cfs_quota_us/cpu.cfs_period_us,
	// period 100ms).
	CPUQuota float64
}

func (l Limits) validate() error {
	if l.MemoryBytes < 0 || l.Pids < 0 || l.CPUQuota < 0 || math.IsNaN(l.CPUQuota) || math.IsInf(l.CPUQuota, 0) {
		return fmt.Errorf("cgroup: invalid limits %+v: fields must be >= 0 and finite", l)
	}
	return nil
}

// Group is one cgroup, present in every hierarchy codecell uses (one
// directory on v2; one directory per v1 hierarchy).
type Group struct {
	host   *Host
	path   string
	limits Limits
	dirs   []string          // absolute directories, one per hierarchy
	ctl    map[string]string // controller -> absolute directory
}

// newGroup computes the directories of a group without touching the
// filesystem.
func (h *Host) newGroup(rel string, l Limits) *Group {
	g := &Group{host: h, path: rel, limits: l, ctl: map[string]string{}}
	if h.Version == V2 {
		d := filepath.Join(h.Unified, rel)
		g.dirs = []string{d}
		for c, ok := range h.avail {
			if ok {
				g.ctl[c] = d
			}
		}
		return g
	}
	for _, hd := range h.v1Hierarchies() {
		d := filepath.Join(hd.mount, rel)
		g.dirs = append(g.dirs, d)
		for _, c := range hd.controllers {
			g.ctl[c] = d
		}
	}
	return g
}

// Create makes (or re-opens; it is idempotent) the group at the relative
// path (e.g. "codecell/sb-abc") under every controller and applies the
// limits; a zero field means no limit for it, and re-applying the limits
// of an existing group overwrites the previous ones. Missing intermediate
// groups are created without limits.
//
// On v2 the controllers are enabled in cgroup.subtree_control of the mount
// root and of every intermediate group (see the package comment for the
// no-internal-process rule this implies).
func (h *Host) Create(path string, l Limits) (*Group, error) {
	rel, err := cleanRel(path)
	if err != nil {
		return nil, err
	}
	if err := l.validate(); err != nil {
		return nil, err
	}
	if l.CPUQuota > 0 && !h.avail[CPU] {
		return nil, fmt.Errorf("cgroup: CPU quota requested but the cpu controller is not available (%s)", h)
	}
	g := h.newGroup(rel, l)
	if h.Version == V2 {
		if err := mkdirV2(h.Unified, rel); err != nil {
			return nil, err
		}
		if err := g.applyV2(l); err != nil {
			return nil, err
		}
		return g, nil
	}
	for _, hd := range h.v1Hierarchies() {
		if err := mkdirV1(hd, rel); err != nil {
			return nil, err
		}
	}
	if err := g.applyV1(l); err != nil {
		return nil, err
	}
	return g, nil
}

// Open returns the group at path as it is, whether or not it exists,
// without creating it or touching its limits: for removing a group left
// by an earlier process (its processes stay bound until Remove kills them).
// Limits reports zero limits.
func (h *Host) Open(path string) (*Group, error) {
	rel, err := cleanRel(path)
	if err != nil {
		return nil, err
	}
	return h.newGroup(rel, Limits{}), nil
}

// Child creates (or re-opens) the child group name (one or more path
// components) of g without limits of its own: it is constrained by g's
// budget hierarchically, while its own counters (OOMKills, MemoryPeak...)
// cover only itself and its descendants.
//
// On v2 this enables the memory, pids and cpu controllers in g's
// cgroup.subtree_control, which fails with EBUSY while g itself contains
// processes (no-internal-process rule): processes belong in the children.
func (g *Group) Child(name string) (*Group, error) {
	rel, err := cleanRel(name)
	if err != nil {
		return nil, err
	}
	full := g.path + "/" + rel
	c := g.host.newGroup(full, Limits{})
	if g.host.Version == V2 {
		if err := mkdirV2(g.host.Unified, full); err != nil {
			return nil, err
		}
		return c, nil
	}
	for _, hd := range g.host.v1Hierarchies() {
		if err := mkdirV1(hd, full); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Path returns the group's path relative to the hierarchy root(s).
func (g *Group) Path() string { return g.path }

// Limits returns the limits applied by Create (zero for Child groups).
func (g *Group) Limits() Limits { return g.limits }

// Dirs returns the group's absolute directories, one per hierarchy.
func (g *Group) Dirs() []string { return append([]string(nil), g.dirs...) }

// ProcsFiles returns the cgroup.procs files a pid must be written into to
// join this group: one per v1 hierarchy (memory, pids, cpu, freezer if
// mounted) or one on v2. Writing "0" means the writing process itself on
// both v1 and v2, so a child between fork and exec can join by writing "0"
// into each of them.
func (g *Group) ProcsFiles() []string {
	out := make([]string, len(g.dirs))
	for i, d := range g.dirs {
		out[i] = filepath.Join(d, "cgroup.procs")
	}
	return out
}

// Join moves the process pid (all of its threads) into the group by
// writing it into every ProcsFiles entry; pid 0 means the caller. On
// failure the process may have joined some hierarchies but not others.
func (g *Group) Join(pid int) error {
	s := strconv.Itoa(pid)
	for _, f := range g.ProcsFiles() {
		if err := os.WriteFile(f, []byte(s), 0); err != nil {
			if g.host.Version == V2 && errors.Is(err, syscall.EBUSY) {
				return fmt.Errorf("cgroup: join %s: %w (cgroup v2 forbids processes in a group that has controllers enabled for children; join a child group instead)", f, err)
			}
			return fmt.Errorf("cgroup: join pid %d to %s: %w", pid, f, err)
		}
	}
	return nil
}

// Pids returns all processes currently in the group or any of its
// descendant groups, the union over all hierarchies, sorted.
func (g *Group) Pids() ([]int, error) {
	set := map[int]bool{}
	for _, d := range g.dirs {
		err := walkGroups(d, func(p string) error {
			pids, err := readPids(filepath.Join(p, "cgroup.procs"))
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV) {
					return nil
				}
				return err
			}
			for _, pid := range pids {
				set[pid] = true
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("cgroup: list processes: %w", err)
		}
	}
	out := make([]int, 0, len(set))
	for pid := range set {
		out = append(out, pid)
	}
	sort.Ints(out)
	return out, nil
}

func readPids(file string) ([]int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%s: bad pid %q", file, f)
		}
		out = append(out, pid)
	}
	return out, nil
}

// Kill kills every process in the group and its descendants and waits
// (bounded, about 2s) until the group is empty. On v2 it uses cgroup.kill
// where the kernel has it (5.14+). Otherwise it freezes the group (v2
// cgroup.freeze, or the v1 freezer if mounted) so nothing can fork, sends
// SIGKILL to every listed process, thaws, and repeats until no process is
// left. The calling process is never signalled; Kill fails if it is in
// the group. Processes that exited but were not yet reaped by their parent
// (zombies) are not listed in cgroup.procs and do not count.
func (g *Group) Kill() error {
	if pids, err := g.Pids(); err == nil && len(pids) == 0 {
		return nil // the common case after the jail's own kill: no freeze needed
	}
	deadline := time.Now().Add(killTimeout)
	if g.host.Version == V2 {
		kf := filepath.Join(g.dirs[0], "cgroup.kill")
		if exists(kf) {
			if err := g.checkNotSelf(); err != nil {
				return err
			}
			if err := os.WriteFile(kf, []byte("1"), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("cgroup: kill %s: %w", g.path, err)
			}
			return g.waitEmpty(deadline, false)
		}
	}
	thaw := g.freeze()
	err := g.signalAll()
	thaw()
	if err != nil {
		return err
	}
	return g.waitEmpty(deadline, true)
}

func (g *Group) checkNotSelf() error {
	pids, err := g.Pids()
	if err != nil {
		return err
	}
	self := os.Getpid()
	for _, p := range pids {
		if p == self {
			return fmt.Errorf("cgroup: refusing to kill group %s: it contains the calling process %d", g.path, self)
		}
	}
	return nil
}

// signalAll sends SIGKILL to every process in the group except the caller.
func (g *Group) signalAll() error {
	pids, err := g.Pids()
	if err != nil {
		return err
	}
	self := os.Getpid()
	for _, p := range pids {
		if p == self {
			return fmt.Errorf("cgroup: refusing to kill group %s: it contains the calling process %d", g.path, self)
		}
		if p <= 0 {
			continue
		}
		if err := syscall.Kill(p, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("cgroup: kill pid %d in %s: %w", p, g.path, err)
		}
	}
	return nil
}

// waitEmpty polls until the group holds no process; with resignal it sends
// SIGKILL again to stragglers (e.g. children forked before the kill).
func (g *Group) waitEmpty(deadline time.Time, resignal bool) error {
	for i := 0; ; i++ {
		pids, err := g.Pids()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup: group %s still has %d process(es) after kill: %v", g.path, len(pids), pids)
		}
		if resignal && i > 0 && i%5 == 0 {
			thaw := g.freeze()
			err := g.signalAll()
			thaw()
			if err != nil {
				return err
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// freeze freezes the group if a freezer is available and returns a
// function that thaws it again. Freezing is best effort: if it does not
// complete quickly the kill proceeds anyway.
func (g *Group) freeze() (thaw func()) {
	noop := func() {}
	if g.host.Version == V2 {
		f := filepath.Join(g.dirs[0], "cgroup.freeze")
		if !exists(f) || os.WriteFile(f, []byte("1"), 0) != nil {
			return noop
		}
		ev := filepath.Join(g.dirs[0], "cgroup.events")
		end := time.Now().Add(200 * time.Millisecond)
		for time.Now().Before(end) {
			if v, ok, _ := readKV(ev, "frozen"); ok && v == 1 {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		return func() { _ = os.WriteFile(f, []byte("0"), 0) }
	}
	d, ok := g.ctl[Freezer]
	if !ok {
		return noop
	}
	f := filepath.Join(d, "freezer.state")
	if os.WriteFile(f, []byte("FROZEN"), 0) != nil {
		return noop
	}
	end := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(end) {
		b, err := os.ReadFile(f)
		if err != nil || strings.TrimSpace(string(b)) == "FROZEN" {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	// On v1 a frozen task acts on SIGKILL only once thawed.
	return func() { _ = os.WriteFile(f, []byte("THAWED"), 0) }
}

// Remove kills any remaining processes, then removes the group's
// directories, descendants first (deepest first), in every hierarchy. It
// is idempotent (a missing group is not an error) and retries EBUSY
// briefly.
func (g *Group) Remove() error {
	var errs []error
	kerr := g.Kill()
	deadline := time.Now().Add(rmdirTimeout)
	for _, d := range g.dirs {
		var all []string
		err := filepath.WalkDir(d, func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if de.IsDir() {
				all = append(all, p)
			}
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("cgroup: remove %s: %w", d, err))
			continue
		}
		sort.SliceStable(all, func(i, j int) bool {
			return strings.Count(all[i], "/") > strings.Count(all[j], "/")
		})
		for _, p := range all {
			if err := rmdirRetry(p, deadline); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		if kerr != nil {
			errs = append([]error{kerr}, errs...)
		}
		return errors.Join(errs...)
	}
	return nil
}

func rmdirRetry(p string, deadline time.Time) error {
	for {
		err := syscall.Rmdir(p)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("cgroup: rmdir %s: %w", p, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// OOMKills returns the number of processes the OOM killer has killed in
// the group and its descendants so far, summed over the subtree from the
// per-group counters: v2 memory.events.local "oom_kill" (falling back to
// the hierarchical memory.events of the group on kernels before 5.2), v1
// memory.oom_control "oom_kill" (which v1 counts only in the group of the
// killed process). 0 if the kernel does not report it.
func (g *Group) OOMKills() (int64, error) {
	d, ok := g.ctl[Memory]
	if !ok {
		return 0, nil
	}
	file := "memory.oom_control"
	if g.host.Version == V2 {
		file = "memory.events.local"
		if !exists(filepath.Join(d, file)) {
			v, _, err := readKV(filepath.Join(d, "memory.events"), "oom_kill")
			if errors.Is(err, fs.ErrNotExist) {
				return 0, nil
			}
			return v, err
		}
	}
	return sumKV(d, file, "oom_kill")
}

// walkGroups calls fn for dir and every descendant group directory; groups
// that vanish during the walk (a jail ending) are skipped.
func walkGroups(dir string, fn func(dir string) error) error {
	return filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !de.IsDir() {
			return nil
		}
		return fn(p)
	})
}

// sumKV sums the "key value" entry of file over dir and its descendants;
// missing files count as 0.
func sumKV(dir, file, key string) (int64, error) {
	var sum int64
	err := walkGroups(dir, func(p string) error {
		v, _, err := readKV(filepath.Join(p, file), key)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		sum += v
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("cgroup: read %s: %w", file, err)
	}
	return sum, nil
}

// MemoryPeak returns the highest memory usage of the group in bytes: v2
// memory.peak where present (5.19+), else memory.current; v1
// memory.max_usage_in_bytes.
func (g *Group) MemoryPeak() (int64, error) {
	d, ok := g.ctl[Memory]
	if !ok {
		return 0, fmt.Errorf("cgroup: memory controller not available")
	}
	files := []string{"memory.max_usage_in_bytes"}
	if g.host.Version == V2 {
		files = []string{"memory.peak", "memory.current"}
	}
	var lastErr error
	for _, f := range files {
		v, err := readInt(filepath.Join(d, f))
		if err == nil {
			return v, nil
		}
		lastErr = err
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	return 0, fmt.Errorf("cgroup: memory peak of %s: %w", g.path, lastErr)
}

// MemoryCurrent returns the group's memory use now, in bytes, page cache
// included: v2 memory.current, v1 memory.usage_in_bytes.
func (g *Group) MemoryCurrent() (int64, error) {
	return g.readCtl(Memory, "memory.usage_in_bytes", "memory.current")
}

// PidsCurrent returns the number of processes and threads in the group and
// its descendants: pids.current.
func (g *Group) PidsCurrent() (int64, error) {
	return g.readCtl(Pids, "pids.current", "pids.current")
}

// readCtl reads one integer file of controller c: v1 or v2 by hierarchy.
func (g *Group) readCtl(c, v1, v2 string) (int64, error) {
	d, ok := g.ctl[c]
	if !ok {
		return 0, fmt.Errorf("cgroup: %s controller not available", c)
	}
	f := v1
	if g.host.Version == V2 {
		f = v2
	}
	v, err := readInt(filepath.Join(d, f))
	if err != nil {
		return 0, fmt.Errorf("cgroup: reading %s of %s: %w", f, g.path, err)
	}
	return v, nil
}

// ResetMemoryPeak starts a new peak measurement, so that MemoryPeak reports
// the highest usage from now on. Only v1 can reset for every reader; on v2
// (where memory.peak resets per open file) MemoryPeak keeps reporting the
// peak since the group was created.
func (g *Group) ResetMemoryPeak() error {
	d, ok := g.ctl[Memory]
	if !ok || g.host.Version == V2 {
		return nil
	}
	return writeFile(filepath.Join(d, "memory.max_usage_in_bytes"), "0")
}

// PidsLimitHits returns how many times a fork or clone failed because of
// a pids limit. The kernels count differently: v2 pids.events "max" counts
// hits of the limit of this group or of a descendant's limit (so query the
// group that carries the limit, i.e. the sandbox; a jail without a limit of
// its own reports 0 there); v1 pids.events "max" counts failed forks in
// the group of the forking process, so on v1 the value is summed over the
// group and its descendants. 0 if the kernel does not report it.
func (g *Group) PidsLimitHits() (int64, error) {
	d, ok := g.ctl[Pids]
	if !ok {
		return 0, nil
	}
	if g.host.Version == V2 {
		v, _, err := readKV(filepath.Join(d, "pids.events"), "max")
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return v, err
	}
	return sumKV(d, "pids.events", "max")
}

// --- creation and limits ---------------------------------------------------

// mkdirV2 creates mount/rel component by component, enabling the wanted
// controllers in each parent's cgroup.subtree_control first.
func mkdirV2(mount, rel string) error {
	cur := mount
	for _, part := range strings.Split(rel, "/") {
		if err := enableSubtree(cur); err != nil {
			return err
		}
		cur = filepath.Join(cur, part)
		if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("cgroup: mkdir %s: %w", cur, err)
		}
	}
	return nil
}

// enableSubtree enables memory, pids and (if offered) cpu for the children
// of the v2 group dir.
func enableSubtree(dir string) error {
	availB, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	enabledB, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	avail, enabled := fieldSet(string(availB)), fieldSet(string(enabledB))
	var missing, add []string
	for _, c := range wanted {
		switch {
		case enabled[c]:
		case avail[c]:
			add = append(add, "+"+c)
		case c != CPU:
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cgroup: %s does not offer controller(s) %s to its children", dir, strings.Join(missing, ", "))
	}
	if len(add) == 0 {
		return nil
	}
	f := filepath.Join(dir, "cgroup.subtree_control")
	err = os.WriteFile(f, []byte(strings.Join(add, " ")), 0)
	if err != nil && len(add) > 1 && add[len(add)-1] == "+"+CPU {
		// The cpu controller can refuse (e.g. realtime tasks present);
		// memory and pids are what matter most.
		if os.WriteFile(f, []byte(strings.Join(add[:len(add)-1], " ")), 0) == nil {
			return nil
		}
	}
	if err != nil {
		if errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("cgroup: enable %s in %s: %w (the group holds processes; cgroup v2 allows controllers for children only in groups without processes of their own)", strings.Join(add, " "), f, err)
		}
		return fmt.Errorf("cgroup: enable %s in %s: %w", strings.Join(add, " "), f, err)
	}
	return nil
}

// mkdirV1 creates mount/rel component by component in one v1 hierarchy,
// making sure the memory hierarchy accounts children against parents.
func mkdirV1(hd v1dir, rel string) error {
	isMem := false
	for _, c := range hd.controllers {
		if c == Memory {
			isMem = true
		}
	}
	cur := hd.mount
	for _, part := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, part)
		if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("cgroup: mkdir %s: %w", cur, err)
		}
		if isMem {
			ensureUseHierarchy(cur)
		}
	}
	return nil
}

// ensureUseHierarchy sets memory.use_hierarchy to 1 where it is 0 and
// writable (recent kernels always report 1 and need nothing).
func ensureUseHierarchy(dir string) {
	f := filepath.Join(dir, "memory.use_hierarchy")
	if v, err := readInt(f); err == nil && v == 0 {
		_ = os.WriteFile(f, []byte("1"), 0)
	}
}

func (g *Group) applyV1(l Limits) error {
	if d, ok := g.ctl[Memory]; ok {
		if err := setMemoryV1(d, l.MemoryBytes); err != nil {
			return err
		}
		if f := filepath.Join(d, "memory.swappiness"); exists(f) {
			if err := writeFile(f, "0"); err != nil {
				return err
			}
		}
		// Keep the OOM killer enabled (the default): with it disabled,
		// tasks hitting the limit would hang instead of being killed.
		if f := filepath.Join(d, "memory.oom_control"); exists(f) {
			if err := writeFile(f, "0"); err != nil {
				return err
			}
		}
	}
	if d, ok := g.ctl[Pids]; ok {
		if err := writeFile(filepath.Join(d, "pids.max"), pidsValue(l.Pids)); err != nil {
			return err
		}
	}
	if d, ok := g.ctl[CPU]; ok {
		q := filepath.Join(d, "cpu.cfs_quota_us")
		if err := writeFile(q, "-1"); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(d, "cpu.cfs_period_us"), strconv.Itoa(cfsPeriodUS)); err != nil {
			return err
		}
		if l.CPUQuota > 0 {
			if err := writeFile(q, strconv.FormatInt(cfsQuotaUS(l.CPUQuota), 10)); err != nil {
				return err
			}
		}
	}
	return nil
}

// setMemoryV1 writes memory.limit_in_bytes and, where swap accounting
// exists, memory.memsw.limit_in_bytes (memory+swap) to the same value so
// no swap can be used. The kernel requires limit <= memsw at all times, so
// the order depends on whether the limit goes up or down.
func setMemoryV1(dir string, bytes int64) error {
	lim := filepath.Join(dir, "memory.limit_in_bytes")
	sw := filepath.Join(dir, "memory.memsw.limit_in_bytes")
	val, newV := "-1", int64(math.MaxInt64)
	if bytes > 0 {
		val, newV = strconv.FormatInt(bytes, 10), bytes
	}
	if !exists(sw) {
		return writeFile(lim, val)
	}
	cur, err := readInt(lim)
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	order := []string{lim, sw}
	if newV >= cur {
		order = []string{sw, lim}
	}
	for _, f := range order {
		if err := writeFile(f, val); err != nil {
			return err
		}
	}
	return nil
}

func (g *Group) applyV2(l Limits) error {
	d := g.dirs[0]
	mem := "max"
	if l.MemoryBytes > 0 {
		mem = strconv.FormatInt(l.MemoryBytes, 10)
	}
	if err := writeFile(filepath.Join(d, "memory.max"), mem); err != nil {
		return err
	}
	if f := filepath.Join(d, "memory.swap.max"); exists(f) {
		if err := writeFile(f, "0"); err != nil {
			return err
		}
	}
	if err := writeFile(filepath.Join(d, "pids.max"), pidsValue(l.Pids)); err != nil {
		return err
	}
	cpu := filepath.Join(d, "cpu.max")
	switch {
	case l.CPUQuota > 0:
		if err := writeFile(cpu, fmt.Sprintf("%d %d", cfsQuotaUS(l.CPUQuota), cfsPeriodUS)); err != nil {
			return err
		}
	case exists(cpu):
		if err := writeFile(cpu, fmt.Sprintf("max %d", cfsPeriodUS)); err != nil {
			return err
		}
	}
	return nil
}

func pidsValue(n int64) string {
	if n > 0 {
		return strconv.FormatInt(n, 10)
	}
	return "max"
}

func cfsQuotaUS(cpus float64) int64 {
	q := int64(math.Round(cpus * cfsPeriodUS))
	if q < minCFSQuotaUS {
		q = minCFSQuotaUS
	}
	return q
}

// --- file helpers ----------------------------------------------------------

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func writeFile(p, val string) error {
	if err := os.WriteFile(p, []byte(val), 0); err != nil {
		return fmt.Errorf("cgroup: write %q to %s: %w", val, p, err)
	}
	return nil
}

func readInt(p string) (int64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return math.MaxInt64, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p, err)
	}
	return v, nil
}

// readKV reads a "key value" line from a flat-keyed cgroup file.
func readKV(p, key string) (int64, bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok || k != key {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %s: %w", p, key, err)
		}
		return n, true, nil
	}
	return 0, false, sc.Err()
}

func fieldSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, f := range strings.Fields(s) {
		m[f] = true
	}
	return m
}
