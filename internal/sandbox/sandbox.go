// Package sandbox owns one sandbox: its host identity (a uid and gid of its
// own), its disk (a volume with a quota holding its home and /tmp), its
// resource budget (a cgroup with limits), and the kernels and one-shot runs
// inside it. Every kernel or run gets a child cgroup of the sandbox's, so the
// budget is shared while each process tree can be killed and accounted alone.
package sandbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/codecell/codecell/internal/cgroup"
	"github.com/codecell/codecell/internal/files"
	"github.com/codecell/codecell/internal/jail"
	"github.com/codecell/codecell/internal/jupyter"
	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/quota"
	"github.com/codecell/codecell/internal/store"
)

// Limits bound one sandbox. Zero fields take the defaults in DefaultLimits.
type Limits struct {
	MemoryBytes    int64   // memory of all its processes together, no swap
	Pids           int64   // processes and threads together
	CPUs           float64 // CPU quota in cores
	DiskBytes      int64   // home and /tmp together
	OutputBytes    int64   // returned per cell
	FileSizeBytes  uint64  // largest file a process may write
	OpenFiles      uint64  // per process
	DefaultTimeout time.Duration
}

// DefaultLimits suit data analysis with pandas and matplotlib.
var DefaultLimits = Limits{
	MemoryBytes:    1 << 30,
	Pids:           512,
	CPUs:           1,
	DiskBytes:      1 << 30,
	OutputBytes:    1 << 20,
	FileSizeBytes:  1 << 30,
	OpenFiles:      1024,
	DefaultTimeout: 30 * time.Second,
}

// DefaultMaxTimeout bounds cell timeouts when Config.MaxTimeout is 0.
const DefaultMaxTimeout = 15 * time.Minute

// Or fills l's zero fields from d.
func (l Limits) Or(d Limits) Limits {
	return Limits{
		MemoryBytes:    cmp.Or(l.MemoryBytes, d.MemoryBytes),
		Pids:           cmp.Or(l.Pids, d.Pids),
		CPUs:           cmp.Or(l.CPUs, d.CPUs),
		DiskBytes:      cmp.Or(l.DiskBytes, d.DiskBytes),
		OutputBytes:    cmp.Or(l.OutputBytes, d.OutputBytes),
		FileSizeBytes:  cmp.Or(l.FileSizeBytes, d.FileSizeBytes),
		OpenFiles:      cmp.Or(l.OpenFiles, d.OpenFiles),
		DefaultTimeout: cmp.Or(l.DefaultTimeout, d.DefaultTimeout),
	}
}

// Config is shared by the sandboxes of one server.
type Config struct {
	// DataDir holds every sandbox's disk under DataDir/sandboxes/<id>.
	DataDir string
	Jail    jail.Config
	// Cgroups is the host's cgroup hierarchy; required unless Jail.Unsafe.
	Cgroups *cgroup.Host
	// CgroupParent is the group under which sandboxes' groups are made;
	// empty means "codecell".
	CgroupParent string
	Limits       Limits
	// MaxTimeout is the longest timeout a cell may ask for; 0 means
	// DefaultMaxTimeout. Every caller (HTTP, MCP, Go) is held to it here.
	MaxTimeout time.Duration
	// SparseDisks leaves sandbox disks sparse instead of reserving their
	// whole size on the host (see quota.Config.Sparse): denser, but a full
	// host disk then turns busy sandboxes' filesystems read-only.
	SparseDisks bool
	// MaxSessions bounds the sessions of one sandbox; 0 means DefaultMaxSessions.
	MaxSessions int
	// Prewarm is how many started kernels of each language every sandbox
	// keeps ready for new sessions and one-shot runs (0: none).
	Prewarm map[kernel.Language]int
	// Preload lists the Python modules warm kernels import before they are
	// handed out; nil means DefaultPreload.
	Preload []string
	// Python and Node are the interpreters (see kernel.Config).
	Python, Node string
	// PythonMode is PythonFork ("": kernels forked from the sandbox's
	// zygote) or PythonSpawn (a new interpreter in a new jail per kernel).
	// Unsafe mode, and a host without cgroups, always spawn.
	PythonMode string
	// KernelSpecs are the Jupyter kernels sessions may ask for by name
	// (kernel.Jupyter(name)); they run in jails like every kernel.
	KernelSpecs map[string]jupyter.KernelSpec
	// Remote, if set, is a Jupyter server whose kernels sessions may ask
	// for (kernel.Remote(name)). Its kernels run there, not in a jail of
	// this server's, and do not see the sandbox's files.
	Remote *jupyter.Server
}

// Options are what differs between sandboxes.
type Options struct {
	// ID names the sandbox: letters, digits, '-' and '_', up to 64.
	ID string
	// UID is the sandbox's host uid and gid; 0 picks one at random from
	// the range reserved for sandboxes (see PickUID). A sandbox re-opened
	// from its data directory keeps the uid it was made with.
	UID    int
	Limits Limits // zero fields: Config.Limits, then DefaultLimits
	// Labels are the caller's, kept as given.
	Labels map[string]string
	// TTL, if set, is how long the sandbox lives; its owner removes it after.
	TTL time.Duration
}

// Sandbox is one isolated filesystem with one resource budget.
type Sandbox struct {
	cfg    Config
	id     string
	uid    int
	limits Limits
	dir    string
	vol    *quota.Volume // nil in unsafe mode
	home   string
	tmp    string
	fs     *files.FS
	cg     *cgroup.Group // nil in unsafe mode
	seq    atomic.Int64  // names the child cgroups

	created time.Time
	labels  map[string]string
	ttl     time.Duration

	sessions sessions
	cells    atomic.Int64      // executions since the sandbox was opened
	cellCPU  atomic.Int64      // their CPU time, in nanoseconds
	cellOOMs atomic.Int64      // those ended by the out-of-memory killer
	pools    map[poolKey]*pool // fixed after Create
	zyg      *zygote           // fork mode only; fixed after Create
	closing  sync.WaitGroup    // kernels being cleaned up after a run

	// db, if set (by the Manager, before the sandbox is handed out),
	// records its sessions so that they are listed after a restart.
	db   *store.DB
	dbMu sync.Mutex // orders a session's record writes after its removal
}

// DefaultPreload is what warm Python kernels import: a data-analysis cell
// then starts without waiting for pandas or matplotlib.
var DefaultPreload = []string{"numpy", "pandas", "matplotlib", "matplotlib.pyplot"}

// DefaultMaxSessions is the number of sessions a sandbox may have unless configured.
const DefaultMaxSessions = 20

var validID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// UIDBase starts the range of host uids given to sandboxes: far above the
// ranges Debian gives to users (1000-59999) and to subordinate ids (100000+
// per user, as allocated by useradd), so a sandbox never owns a real user's files.
const (
	UIDBase  = 1_500_000_000
	UIDRange = 1 << 24
)

// PickUID returns a random uid from the sandbox range.
func PickUID() int { return UIDBase + rand.IntN(UIDRange) }

// Create makes the sandbox's disk and cgroup, or re-opens them if they exist.
func Create(ctx context.Context, cfg Config, opt Options) (_ *Sandbox, err error) {
	if !validID.MatchString(opt.ID) {
		return nil, fmt.Errorf("%w %q: use 1-64 letters, digits, '-' or '_'", ErrInvalidID, opt.ID)
	}
	if cfg.DataDir == "" {
		return nil, errors.New("sandbox: no data directory configured")
	}
	lim := opt.Limits.Or(cfg.Limits).Or(DefaultLimits)
	cfg.MaxSessions = cmp.Or(cfg.MaxSessions, DefaultMaxSessions)
	s := &Sandbox{cfg: cfg, id: opt.ID, uid: opt.UID, limits: lim,
		created: time.Now(), labels: opt.Labels, ttl: opt.TTL}
	s.dir = filepath.Join(cfg.DataDir, "sandboxes", opt.ID)
	// A sandbox made before keeps its uid, which owns its files.
	prev, existed := readMeta(s.dir)
	if existed {
		s.uid, s.created = prev.UID, prev.Created
	}
	s.uid = cmp.Or(s.uid, PickUID())
	// Every directory above a sandbox's home must be traversable by the
	// sandbox uid (bwrap binds as that user) but not listable: 0711.
	for _, d := range []string{cfg.DataDir, filepath.Dir(s.dir), s.dir} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, fmt.Errorf("sandbox %s: creating %s: %w", opt.ID, d, err)
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return nil, fmt.Errorf("sandbox %s: %w", opt.ID, err)
		}
	}
	defer func() {
		if err == nil {
			err = s.writeMeta()
		}
		if err != nil && existed {
			s.Close(context.WithoutCancel(ctx)) // never delete files that were there
		} else if err != nil {
			s.Destroy(context.WithoutCancel(ctx))
		}
	}()
	if !cfg.Jail.Unsafe {
		if err := checkTraversable(filepath.Dir(cfg.DataDir)); err != nil {
			return nil, fmt.Errorf("sandbox %s: %w", opt.ID, err)
		}
	}

	if cfg.Jail.Unsafe {
		s.home, s.tmp = filepath.Join(s.dir, "home"), filepath.Join(s.dir, "tmp")
		for _, d := range []string{s.home, s.tmp} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return nil, fmt.Errorf("sandbox %s: %w", opt.ID, err)
			}
		}
		if s.fs, err = files.New(files.Config{Home: s.home, Tmp: s.tmp, Staging: filepath.Join(s.dir, "staging"), UID: -1, GID: -1}); err != nil {
			return nil, err
		}
		s.startPools()
		return s, nil
	}
	if cfg.Cgroups == nil {
		return nil, fmt.Errorf("sandbox %s: %w", opt.ID, jail.ErrNoCgroup)
	}
	cgPath := cmp.Or(cfg.CgroupParent, "codecell") + "/" + opt.ID
	if existed {
		// Re-opened after a crash, the sandbox's cgroup may still exist with
		// processes in it (which may keep its disk busy): kill them and
		// remove the group and its children before anything else. Its disk
		// may still be mounted too; quota.Mount reuses that mount.
		if err := removeLeftovers(cfg.Cgroups, cgPath); err != nil {
			return nil, fmt.Errorf("sandbox %s: leftover cgroup: %w", opt.ID, err)
		}
	}
	s.vol, err = quota.Mount(ctx, quota.Config{
		Image:      filepath.Join(s.dir, "disk.img"),
		Mountpoint: filepath.Join(s.dir, "fs"),
		SizeBytes:  lim.DiskBytes,
		UID:        s.uid,
		GID:        s.uid,
		Sparse:     cfg.SparseDisks,
	})
	switch {
	case errors.Is(err, syscall.ENOSPC):
		// Host paths stay out of what clients see.
		return nil, fmt.Errorf("sandbox %s: %w for its %d-byte disk", opt.ID, ErrNoSpace, lim.DiskBytes)
	case errors.Is(err, syscall.EOPNOTSUPP):
		return nil, fmt.Errorf("sandbox %s: the data directory's filesystem cannot reserve the sandbox's disk (fallocate: %w); use sparse disks (SparseDisks, codecell serve --sparse-disks)", opt.ID, syscall.EOPNOTSUPP)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: disk: %w", opt.ID, err)
	}
	s.home, s.tmp = s.vol.Home(), s.vol.Tmp()
	// Run directories of Jupyter kernels of a previous server (their
	// numbers start again).
	if err := os.RemoveAll(s.runDir()); err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", opt.ID, err)
	}
	// Staged writes live on the sandbox's disk, beside home and tmp, out
	// of the jail's sight.
	s.fs, err = files.New(files.Config{Home: s.home, Tmp: s.tmp, Staging: filepath.Join(filepath.Dir(s.home), "staging"),
		UID: s.uid, GID: s.uid, MaxFileBytes: lim.DiskBytes})
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", opt.ID, err)
	}
	s.cg, err = cfg.Cgroups.Create(cgPath, cgroup.Limits{
		MemoryBytes: lim.MemoryBytes,
		Pids:        lim.Pids,
		CPUQuota:    lim.CPUs,
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: cgroup: %w", opt.ID, err)
	}
	if s.forkMode() {
		s.zyg = &zygote{sb: s}
	}
	s.startPools()
	return s, nil
}

// runDir holds the run directories of the sandbox's Jupyter kernels, beside
// home and tmp.
func (s *Sandbox) runDir() string { return filepath.Join(filepath.Dir(s.home), "run") }

// removeLeftovers kills every process of the cgroup at path, if it exists,
// and removes it with its children.
func removeLeftovers(h *cgroup.Host, path string) error {
	g, err := h.Open(path) // as it is: its processes keep its limits until killed
	if err != nil {
		return err
	}
	return g.Remove()
}

// A profile is what a warm kernel has loaded before it is handed out.
type profile string

const (
	// bare kernels start fastest: one-shot runs take them.
	bare profile = "bare"
	// data kernels have imported Config.Preload: sessions take them, and
	// one-shot runs of code that names one of those modules.
	data profile = "data"
)

type poolKey struct {
	lang    kernel.Language
	profile profile
}

func (s *Sandbox) startPools() {
	s.pools = map[poolKey]*pool{}
	for lang, n := range s.cfg.Prewarm {
		if n <= 0 {
			continue
		}
		s.pools[poolKey{lang, bare}] = newPool(s, lang, n, nil)
		if lang == kernel.Python {
			s.pools[poolKey{lang, data}] = newPool(s, lang, n, s.preload())
			if s.zyg != nil {
				s.zyg.hold() // warm Python kernels: keep the zygote too
			}
		}
	}
}

func (s *Sandbox) preload() []string {
	if s.cfg.Preload != nil {
		return s.cfg.Preload
	}
	return DefaultPreload
}

// PoolStats describes the sandbox's warm pools, by "language/profile".
func (s *Sandbox) PoolStats() map[string]PoolStats {
	out := map[string]PoolStats{}
	for key, p := range s.pools {
		out[string(key.lang)+"/"+string(key.profile)] = p.stats()
	}
	if s.zyg != nil {
		out["python/zygote"] = s.zyg.stats()
	}
	return out
}

// kernel returns a kernel of lang that has never run anything: a warm one
// of the profile from its pool if one is ready, else a new one.
func (s *Sandbox) kernel(ctx context.Context, lang kernel.Language, prof profile) (*Kernel, error) {
	p := s.pools[poolKey{lang, prof}]
	if p == nil {
		p = s.pools[poolKey{lang, bare}] // JavaScript has no data profile
	}
	if p != nil {
		if k := p.take(); k != nil {
			return k, nil
		}
	}
	return s.StartKernel(ctx, lang)
}

// profileFor picks the warm kernel a one-shot run of code wants: a data
// kernel if the code names a module that kernel has already imported.
func (s *Sandbox) profileFor(lang kernel.Language, code string) profile {
	if lang == kernel.Python {
		for _, m := range s.preload() {
			if strings.Contains(code, m) {
				return data
			}
		}
	}
	return bare
}

func (s *Sandbox) closePools() {
	for _, p := range s.pools {
		p.close()
	}
}

// ID returns the sandbox's id.
func (s *Sandbox) ID() string { return s.id }

// UID returns the sandbox's host uid (also its gid).
func (s *Sandbox) UID() int { return s.uid }

// Home and Tmp are the host directories seen as /home/user and /tmp inside.
func (s *Sandbox) Home() string { return s.home }
func (s *Sandbox) Tmp() string  { return s.tmp }

// Limits returns the sandbox's effective limits.
func (s *Sandbox) Limits() Limits { return s.limits }

// Created is when the sandbox was made.
func (s *Sandbox) Created() time.Time { return s.created }

// Labels returns the caller's labels.
func (s *Sandbox) Labels() map[string]string { return s.labels }

// ExpiresAt is when the sandbox's TTL ends; zero if it has none.
func (s *Sandbox) ExpiresAt() time.Time {
	if s.ttl <= 0 {
		return time.Time{}
	}
	return s.created.Add(s.ttl)
}

// Usage returns the disk space used and available to the sandbox.
func (s *Sandbox) DiskUsage() (used, total int64, err error) {
	if s.vol == nil {
		return 0, 0, nil
	}
	return s.vol.Usage()
}

// Usage is what a sandbox uses now, and what its cells used since this
// server opened it.
type Usage struct {
	MemoryBytes   int64 // now, page cache included
	Pids          int64 // processes and threads now
	Executions    int64
	CPUTime       time.Duration // of those executions
	OOMKills      int64         // of those executions (a kernel's cgroup, which counts them, goes with it)
	PidsLimitHits int64
}

// Usage reads the sandbox's cgroup (DiskUsage its disk). Counters the host
// does not offer are 0.
func (s *Sandbox) Usage() Usage {
	u := Usage{Executions: s.cells.Load(), CPUTime: time.Duration(s.cellCPU.Load()), OOMKills: s.cellOOMs.Load()}
	if s.cg != nil {
		u.MemoryBytes, _ = s.cg.MemoryCurrent()
		u.Pids, _ = s.cg.PidsCurrent()
		u.PidsLimitHits, _ = s.cg.PidsLimitHits()
	}
	return u
}

// account adds an execution's result to the sandbox's usage.
func (s *Sandbox) account(res *kernel.Result) {
	if res == nil {
		return
	}
	s.cells.Add(1)
	s.cellCPU.Add(int64(res.Usage.CPUTime))
	if e := res.Error(); e != nil && e.Ename == kernel.EnameOutOfMemory {
		s.cellOOMs.Add(1)
	}
}

// Cgroup is the sandbox's resource group (nil in unsafe mode).
func (s *Sandbox) Cgroup() *cgroup.Group { return s.cg }

// Kernel is a kernel of the sandbox with the cgroup it runs in.
type Kernel struct {
	kernel.Interpreter
	cg      *cgroup.Group
	release func() // of the zygote, once; nil unless forked
	run     string // the kernel's run directory, removed with it
}

// Cgroup is the kernel's own group, a child of the sandbox's.
func (k *Kernel) Cgroup() *cgroup.Group { return k.cg }

// Close ends the kernel and removes its cgroup.
func (k *Kernel) Close() error {
	var err error
	if k.Interpreter != nil {
		err = k.Interpreter.Close()
	}
	if k.cg != nil {
		err = errors.Join(err, k.cg.Remove())
	}
	if k.run != "" {
		err = errors.Join(err, os.RemoveAll(k.run))
	}
	if k.release != nil {
		k.release()
	}
	return err
}

// StartKernel starts a kernel for lang in the sandbox.
func (s *Sandbox) StartKernel(ctx context.Context, lang kernel.Language) (*Kernel, error) {
	return s.startKernel(ctx, lang, nil, 0)
}

// startKernel starts a kernel that imports preload before it is ready, at
// CPU priority nice.
func (s *Sandbox) startKernel(ctx context.Context, lang kernel.Language, preload []string, nice int) (*Kernel, error) {
	if name, remote, ok := lang.Kernelspec(); ok {
		if remote {
			return s.startRemote(ctx, name)
		}
		return s.startJupyter(ctx, name, nice)
	}
	spec := s.jailSpec(nil, nice)
	var cg *cgroup.Group
	if s.cg != nil {
		var err error
		cg, err = s.cg.Child("k" + strconv.FormatInt(s.seq.Add(1), 10))
		if err != nil {
			return nil, fmt.Errorf("sandbox %s: kernel cgroup: %w", s.id, err)
		}
		spec.Cgroup = cg
	}
	var zyg *kernel.Zygote
	var release func()
	if lang == kernel.Python && s.zyg != nil {
		z, err := s.zyg.acquire(ctx)
		if err != nil {
			if cg != nil {
				cg.Remove()
			}
			return nil, err
		}
		zyg, release = z, sync.OnceFunc(s.zyg.release)
	}
	k, err := kernel.Start(ctx, kernel.Config{
		Zygote:         zyg,
		Language:       lang,
		Jail:           s.cfg.Jail,
		Spec:           spec,
		Python:         s.cfg.Python,
		Node:           s.cfg.Node,
		MaxOutputBytes: s.limits.OutputBytes,
		Preload:        preload,
	})
	if err != nil {
		if cg != nil {
			cg.Remove()
		}
		if release != nil {
			release()
		}
		return nil, err
	}
	return &Kernel{Interpreter: k, cg: cg, release: release}, nil
}

// startJupyter starts a kernel of the kernelspec name in a jail, with a run
// directory of its own for its sockets.
func (s *Sandbox) startJupyter(ctx context.Context, name string, nice int) (*Kernel, error) {
	ks, ok := s.cfg.KernelSpecs[name]
	if !ok {
		return nil, fmt.Errorf("%w: no Jupyter kernel %q", ErrNoKernel, name)
	}
	n := strconv.FormatInt(s.seq.Add(1), 10)
	spec := s.jailSpec(nil, nice)
	// On the sandbox's own disk, so that what the kernel writes there counts
	// against its quota.
	spec.Run = filepath.Join(s.runDir(), "k"+n)
	if err := os.MkdirAll(filepath.Dir(spec.Run), 0o711); err != nil {
		return nil, s.runDirError(err)
	}
	if err := os.Mkdir(spec.Run, 0o700); err != nil {
		return nil, s.runDirError(err)
	}
	k := &Kernel{run: spec.Run} // Close copes with no Interpreter yet
	if err := os.Chown(spec.Run, s.uid, s.uid); err != nil {
		k.Close()
		return nil, s.runDirError(err)
	}
	if s.cg != nil {
		cg, err := s.cg.Child("k" + n)
		if err != nil {
			k.Close()
			return nil, fmt.Errorf("sandbox %s: kernel cgroup: %w", s.id, err)
		}
		spec.Cgroup, k.cg = cg, cg
	}
	jk, err := kernel.StartJupyter(ctx, kernel.JupyterConfig{KernelSpec: ks, Jail: s.cfg.Jail, Spec: spec, MaxOutputBytes: s.limits.OutputBytes})
	if err != nil {
		k.Close()
		return nil, err
	}
	k.Interpreter = jk
	return k, nil
}

// runDirError is err, from making a kernel's run directory, without the
// host path: a full disk is the sandbox's own (files.ErrNoSpace, a 507).
func (s *Sandbox) runDirError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		err = files.ErrNoSpace
	}
	return fmt.Errorf("sandbox %s: making a kernel's run directory: %w", s.id, err)
}

// startRemote starts a kernel of the kernelspec name on the remote Jupyter
// server.
func (s *Sandbox) startRemote(ctx context.Context, name string) (*Kernel, error) {
	if s.cfg.Remote == nil {
		return nil, fmt.Errorf("%w: no remote Jupyter server", ErrNoKernel)
	}
	jk, err := kernel.ConnectRemote(ctx, s.cfg.Remote, name, s.limits.OutputBytes)
	if err != nil {
		return nil, err
	}
	return &Kernel{Interpreter: jk}, nil
}

// timeout is the timeout of a cell that asks for t: the sandbox's default
// for 0, t itself up to the server's bound.
func (s *Sandbox) timeout(t time.Duration) (time.Duration, error) {
	max := cmp.Or(s.cfg.MaxTimeout, DefaultMaxTimeout)
	switch {
	case t == 0:
		return s.limits.DefaultTimeout, nil
	case t < 0 || t > max:
		return 0, fmt.Errorf("%w: %v; it must be more than 0 and at most %v", ErrBadTimeout, t, max)
	}
	return t, nil
}

// Run executes code once in a fresh kernel that is destroyed afterwards,
// with every process it started. timeout 0 means the sandbox's default.
func (s *Sandbox) Run(ctx context.Context, lang kernel.Language, code string, timeout time.Duration) (*kernel.Result, error) {
	return s.RunRequest(ctx, lang, kernel.Request{Code: code, Timeout: timeout})
}

// RunRequest is Run with every option of a cell.
func (s *Sandbox) RunRequest(ctx context.Context, lang kernel.Language, req kernel.Request) (*kernel.Result, error) {
	var err error
	if req.Timeout, err = s.timeout(req.Timeout); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		k, err := s.kernel(ctx, lang, s.profileFor(lang, req.Code))
		if err != nil {
			return nil, err
		}
		res, err := k.Do(ctx, req)
		s.discard(k)
		// A fresh kernel that died before it began the cell (its zygote was
		// killed at that moment) ran none of it: running it on another one
		// is safe, once.
		if err == nil && res.Died && !res.Started && attempt == 0 && ctx.Err() == nil {
			continue
		}
		s.account(res)
		return res, err
	}
}

// discard kills every process of a one-shot kernel now and leaves waiting
// for them and removing the cgroup to the background, so the reply does not
// wait for the teardown. Close and Destroy wait for it.
func (s *Sandbox) discard(k *Kernel) {
	k.Stop()
	s.closing.Add(1)
	go func() {
		defer s.closing.Done()
		k.Close()
	}()
}

// Close ends every session and process of the sandbox, removes its cgroup
// and unmounts its disk, keeping the files for a later Create of the same id.
func (s *Sandbox) Close(ctx context.Context) error {
	errs := s.stop()
	if s.vol != nil {
		errs = append(errs, s.vol.Unmount(ctx))
	}
	return errors.Join(errs...)
}

// Destroy kills everything in the sandbox and deletes its files and cgroup.
func (s *Sandbox) Destroy(ctx context.Context) error {
	errs := s.stop()
	if s.vol != nil {
		errs = append(errs, s.vol.Destroy(ctx))
	}
	errs = append(errs, os.RemoveAll(s.dir))
	return errors.Join(errs...)
}

// stop ends the pools, sessions, one-shot kernels and zygote, in that
// order (the zygote's forks die with it), and removes the cgroup.
func (s *Sandbox) stop() []error {
	s.closePools()
	s.closeSessions()
	s.closing.Wait()
	if s.zyg != nil {
		s.zyg.close()
	}
	if s.cg != nil {
		return []error{s.cg.Remove()}
	}
	return nil
}

// checkTraversable makes sure sandbox uids, which are neither the owner nor
// in the group of anything above the data directory, can reach their home:
// bwrap binds it as the sandbox's uid.
func checkTraversable(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("data directory is below %s (mode %v), which sandbox users cannot traverse: `chmod o+x %s` or choose another --data-dir", d, fi.Mode().Perm(), d)
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}

// meta is what a sandbox keeps on disk about itself.
type meta struct {
	ID      string            `json:"id"`
	UID     int               `json:"uid"`
	Created time.Time         `json:"created"`
	Labels  map[string]string `json:"labels,omitempty"`
	TTL     time.Duration     `json:"ttl,omitempty"`
	Limits  Limits            `json:"limits"`
}

func readMeta(dir string) (meta, bool) {
	var m meta
	b, err := os.ReadFile(filepath.Join(dir, "sandbox.json"))
	if err != nil || json.Unmarshal(b, &m) != nil || m.UID == 0 {
		return meta{}, false
	}
	return m, true
}

// writeMeta replaces sandbox.json atomically.
func (s *Sandbox) writeMeta() error {
	b, err := json.MarshalIndent(meta{ID: s.id, UID: s.uid, Created: s.created, Labels: s.labels, TTL: s.ttl, Limits: s.limits}, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.dir, ".sandbox.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("sandbox %s: writing its metadata: %w", s.id, err)
	}
	return os.Rename(tmp, filepath.Join(s.dir, "sandbox.json"))
}
