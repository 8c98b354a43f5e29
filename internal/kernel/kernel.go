// Package kernel runs code in long-lived interpreters, each inside its own
// jail, and returns what they produce as Jupyter-style outputs. It owns the
// driver programs (embedded, one per language), the frame protocol between a
// driver and the server, per-cell output caps, timeouts and interrupts.
//
// A driver talks to the server over two pipes of its own (fds 3 and 4),
// never over stdout or stderr: whatever user code prints, to sys.stdout or
// straight to fd 1 and 2, the driver wraps as a stream output. Frames are
// length-prefixed JSON bounded in size; user code that forges frames (it
// shares the driver's process) can only confuse its own results, so nothing
// in a frame is trusted beyond the session it came from.
//
// A Python kernel is either spawned (a new interpreter in a new jail) or
// forked from a Zygote, a per-sandbox fork server that has imported IPython
// and the preload modules (zygote.go). A forked kernel enters its own pid,
// mount, net, ipc and uts namespaces and its own cgroup, and drops every
// capability, sets no_new_privs and loads the same seccomp filter before any
// user code runs. Trade-off: forked kernels do not get address-space layout
// randomisation of their own. Every kernel forked from one zygote has the
// zygote's memory layout (interpreter, libraries, heap, stack), so an address
// leaked in one kernel of a sandbox holds in its other kernels; they also
// share Python's str hash secret. Only kernels of the same sandbox share a
// zygote, and a restarted zygote has a new layout.
package kernel

import (
	"bufio"
	"cmp"
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/codecell/codecell/internal/cgroup"
	"github.com/codecell/codecell/internal/jail"
)

// Language names a kernel's language.
type Language string

// The languages codecell runs.
const (
	Python     Language = "python"
	JavaScript Language = "javascript"
)

// Jupyter is the language of the kernels of a Jupyter kernelspec
// ("jupyter:ir"): sessions and runs are keyed by it like by a language.
func Jupyter(kernelspec string) Language { return Language("jupyter:" + kernelspec) }

// Remote is the language of kernelspec's kernels on the remote Jupyter
// server ("remote:python3").
func Remote(kernelspec string) Language { return Language("remote:" + kernelspec) }

// Kernelspec returns the kernelspec of a Jupyter or Remote language, and
// whether the kernel is remote.
func (l Language) Kernelspec() (name string, remote, ok bool) {
	if name, ok := strings.CutPrefix(string(l), "jupyter:"); ok {
		return name, false, true
	}
	if name, ok := strings.CutPrefix(string(l), "remote:"); ok {
		return name, true, true
	}
	return "", false, false
}

// Interpreter is a running kernel of any backend: a native driver
// (*Kernel) or a Jupyter kernel (*JupyterKernel).
type Interpreter interface {
	Do(ctx context.Context, req Request) (*Result, error)
	Execute(ctx context.Context, code string, timeout time.Duration) (*Result, error)
	Complete(ctx context.Context, code string, cursorPos int) (*Completion, error)
	Inspect(ctx context.Context, code string, cursorPos, detail int) (*Inspection, error)
	Interrupt() error
	// InCell reports whether a cell has reached the kernel and not ended.
	InCell() bool
	Alive() bool
	Pid() int
	Renice(nice int)
	Stop()
	Close() error
}

var (
	_ Interpreter = (*Kernel)(nil)
	_ Interpreter = (*JupyterKernel)(nil)
)

// ParseLanguage accepts the names clients use for the two languages.
func ParseLanguage(s string) (Language, error) {
	switch strings.ToLower(s) {
	case "python", "python3", "py":
		return Python, nil
	case "javascript", "js", "node", "nodejs":
		return JavaScript, nil
	}
	return "", fmt.Errorf("unknown language %q: use python or javascript", s)
}

var (
	//go:embed driver/python.py
	pythonDriver string
	//go:embed driver/node.js
	nodeDriver string
)

// Errors returned by Start and Execute.
var (
	ErrDead    = errors.New("kernel is not running")
	ErrBusy    = errors.New("kernel is busy with another cell")
	ErrStartup = errors.New("kernel failed to start")
	// ErrUnsupported is a request the kernel's language cannot honour.
	ErrUnsupported = errors.New("not supported by this kernel")
)

// Status of an executed cell.
const (
	StatusOK      = "ok"
	StatusError   = "error"
	StatusTimeout = "timeout"
)

// Names used in error outputs the server itself produces.
const (
	EnameTimeout     = "TimeoutError"
	EnameKernelDied  = "KernelDied"
	EnameOutOfMemory = "OutOfMemory"
)

// Config configures one kernel.
type Config struct {
	Language Language
	Jail     jail.Config
	// Spec is the jail for the kernel; Argv, Stdout, Stderr and ExtraFiles
	// are filled in here.
	Spec jail.Spec
	// Python and Node are the interpreters; empty means Debian's
	// /usr/bin/python3 and /usr/bin/node.
	Python, Node string
	// MaxOutputBytes caps what one cell returns; 0 means 1 MiB.
	MaxOutputBytes int64
	// StartTimeout bounds start-up; 0 means 60s.
	StartTimeout time.Duration
	// Grace is how long an interrupted cell may take to stop before the
	// kernel is killed; 0 means 2s.
	Grace time.Duration
	// Preload lists Python modules imported before the kernel is ready, so
	// that the first cell that uses them does not pay for the import.
	Preload []string
	// Zygote, if set, forks a Python kernel instead of starting an
	// interpreter in a new jail (see zygote.go). Spec is then the kernel's:
	// its Cgroup, Rlimits, ShmBytes and Nice apply to the forked kernel.
	Zygote *Zygote
}

// process is a kernel's process tree: a jail (*jail.Process) or a kernel
// forked by a zygote (*forked).
type process interface {
	Done() <-chan struct{}
	Wait() error
	Kill()
	Stop()
	Interrupt() error
	ProgramPid() int
}

// Kernel is a running interpreter in a jail. It runs one cell at a time.
type Kernel struct {
	cfg     Config
	proc    process
	req     *os.File   // fd 3 of the driver
	frames  chan frame // from fd 4; closed when the driver is gone
	Version string     // the interpreter's version, from its ready frame
	pid     int        // host pid of the interpreter, known once it is ready

	mu      sync.Mutex // held for a whole cell
	cellSeq int
	dead    error // why the kernel stopped; guarded by mu

	// An interrupt that arrives before the driver has started the cell it
	// was sent (the request may still be in the pipe) is held until the
	// driver says it has: a SIGINT sent earlier would find no cell to stop.
	imu         sync.Mutex
	cell        string // id of the cell sent, "" between cells
	cellStarted bool
	intPending  bool
}

type frame struct {
	Type           string `json:"type"`
	ID             string `json:"id"`
	Output         Output `json:"output"`
	Status         string `json:"status"`
	ExecutionCount int    `json:"execution_count"`
	DroppedBytes   int64  `json:"dropped_bytes"`
	Version        string `json:"version"`
	// Reply is the answer to a request that is not a cell (complete, inspect).
	Reply json.RawMessage `json:"reply"`
}

func (c *Config) argv() ([]string, error) {
	switch c.Language {
	case Python:
		return []string{cmp.Or(c.Python, "/usr/bin/python3"), "-u", "-c", pythonDriver}, nil
	case JavaScript:
		// One V8 worker thread: a session is one user's REPL, and every
		// thread counts against the sandbox's process limit.
		return []string{cmp.Or(c.Node, "/usr/bin/node"), "--expose-internals", "--v8-pool-size=1", "-e", nodeDriver}, nil
	}
	return nil, fmt.Errorf("kernel: unsupported language %q", c.Language)
}

func (c *Config) maxOutput() int64 { return cmp.Or(c.MaxOutputBytes, 1<<20) }

// Start launches a kernel and waits until its driver is ready for cells.
func Start(ctx context.Context, cfg Config) (*Kernel, error) {
	argv, err := cfg.argv()
	if err != nil {
		return nil, err
	}
	var pipes [8]*os.File // read and write ends of requests, frames, stdout, stderr
	for i := 0; i < len(pipes); i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(pipes[:i])
			return nil, fmt.Errorf("kernel: pipes: %w", err)
		}
		pipes[i], pipes[i+1] = r, w
	}
	reqR, reqW, frR, frW := pipes[0], pipes[1], pipes[2], pipes[3]
	outR, outW, errR, errW := pipes[4], pipes[5], pipes[6], pipes[7]
	childEnds := []*os.File{reqR, frW, outR, outW, errR, errW}
	errCopy, err := dupFile(errR)
	if err != nil {
		closeAll(pipes[:])
		return nil, err
	}
	// Large pipe buffers let user code print in bursts without blocking.
	for _, w := range []*os.File{outW, errW, frW} {
		unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, 1<<20)
	}

	var proc process
	if cfg.Zygote != nil && cfg.Language == Python {
		var f *forked
		f, err = cfg.Zygote.fork(ctx, cfg.Spec, []*os.File{reqR, frW, outR, errR, outW, errW})
		if f != nil {
			proc = f
		}
	} else {
		spec := cfg.Spec
		spec.Argv = argv
		spec.Stdout, spec.Stderr = outW, errW
		spec.ExtraFiles = []*os.File{reqR, frW, outR, errR}
		var j *jail.Process
		j, err = jail.Start(ctx, cfg.Jail, spec)
		if j != nil {
			proc = j
		}
	}
	// The child has its ends now; the server must not hold them, or it
	// would never see EOF on the frame pipe when the driver dies.
	closeAll(childEnds)
	if err != nil {
		msg := drainMessage(errCopy)
		closeAll([]*os.File{reqW, frR, errCopy})
		return nil, fmt.Errorf("%w: %w: %s", ErrStartup, err, msg)
	}
	defer errCopy.Close() // its content only matters until the driver is ready
	oomBefore := int64(0)
	if g := cfg.Spec.Cgroup; g != nil {
		oomBefore, _ = g.OOMKills()
	}
	k := &Kernel{cfg: cfg, proc: proc, req: reqW, frames: make(chan frame)}
	go k.readFrames(frR, cfg.maxOutput()+1<<20)

	timeout := cmp.Or(cfg.StartTimeout, 60*time.Second)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case f, ok := <-k.frames:
		if ok && f.Type == "ready" {
			k.Version = f.Version
			k.pid = proc.ProgramPid()
			if err = k.preload(cfg.Preload, t.C); err == nil {
				return k, nil
			}
			break
		}
		err = errors.New("the interpreter exited")
	case <-t.C:
		err = fmt.Errorf("no ready signal within %v", timeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	oom := k.oomKills() > oomBefore
	k.kill()
	proc.Wait()
	msg := drainMessage(errCopy)
	if oom {
		msg = "out of memory: the sandbox's memory limit is taken by what already runs in it (end a session, or give the sandbox more memory)"
	}
	k.Close()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("%w: %w: %s", ErrStartup, err, msg)
}

// preload has a Python kernel import modules before its first cell.
func (k *Kernel) preload(modules []string, timeout <-chan time.Time) error {
	if len(modules) == 0 || k.cfg.Language != Python {
		return nil
	}
	if err := k.send(map[string]any{"type": "preload", "modules": modules}); err != nil {
		return err
	}
	for {
		select {
		case f, ok := <-k.frames:
			if !ok {
				return errors.New("the interpreter exited while importing " + strings.Join(modules, ", "))
			}
			if f.Type == "preloaded" {
				return nil
			}
		case <-timeout:
			return errors.New("importing " + strings.Join(modules, ", ") + " took too long")
		}
	}
}

// drainMessage reads what is pending in a pipe without waiting for more.
func drainMessage(f *os.File) string {
	syscall.SetNonblock(int(f.Fd()), true)
	b := make([]byte, 8<<10)
	n, _ := syscall.Read(int(f.Fd()), b)
	msg := strings.TrimSpace(string(b[:max(n, 0)]))
	if msg == "" {
		msg = "exited without a message"
	}
	return msg
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

func dupFile(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("kernel: dup: %w", err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

func (k *Kernel) readFrames(r *os.File, maxFrame int64) {
	defer close(k.frames)
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	var head [4]byte
	for {
		if _, err := io.ReadFull(br, head[:]); err != nil {
			return
		}
		n := int64(binary.BigEndian.Uint32(head[:]))
		if n > maxFrame {
			// Only a forged or broken driver sends this: end the kernel.
			k.kill()
			return
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err != nil {
			return
		}
		var f frame
		if err := json.Unmarshal(body, &f); err != nil {
			continue
		}
		k.frames <- f
	}
}

// Request is one cell to run.
type Request struct {
	Code string
	// Timeout bounds the cell; 0 means 30s.
	Timeout time.Duration
	// Cwd, if set, is the working directory (as code sees it) to run in;
	// it stays the kernel's working directory afterwards.
	Cwd string
	// Stdin, if set, is what the cell reads as standard input.
	Stdin string
	// OnOutput, if set, is called with each output as the kernel produces
	// it, in order, on the goroutine that called Do (so it must not block
	// for long: the cell's timeout keeps running).
	OnOutput func(Output)
	// Detached: once the cell is sent, the end of ctx no longer interrupts
	// it; it runs to its end or its timeout. ctx still bounds everything
	// before (waiting for a session, starting a kernel), so a caller that
	// went away while queued never runs.
	Detached bool
}

// Execute runs code as one cell; see Do.
func (k *Kernel) Execute(ctx context.Context, code string, timeout time.Duration) (*Result, error) {
	return k.Do(ctx, Request{Code: code, Timeout: timeout})
}

// Do runs one cell. A cell still running at its timeout is interrupted
// (SIGINT: the kernel keeps its state); if it has not stopped after the grace
// period the kernel is killed. ctx cancellation is treated the same way,
// unless req.Detached.
func (k *Kernel) Do(ctx context.Context, req Request) (*Result, error) {
	code, timeout := req.Code, req.Timeout
	if !k.mu.TryLock() {
		return nil, ErrBusy
	}
	defer k.mu.Unlock()
	if k.dead != nil {
		return nil, fmt.Errorf("%w: %w", ErrDead, k.dead)
	}
	k.cellSeq++
	id := fmt.Sprintf("c%d", k.cellSeq)
	oomBefore := k.oomKills()
	if !utf8.ValidString(code) {
		code = strings.ToValidUTF8(code, "\uFFFD")
	}
	if err := k.send(map[string]any{"type": "execute", "id": id, "code": code, "cwd": req.Cwd, "stdin": req.Stdin, "max_output": k.cfg.maxOutput()}); err != nil {
		k.dead = err
		return nil, fmt.Errorf("%w: sending the cell: %w", ErrDead, err)
	}

	k.imu.Lock()
	k.cell, k.cellStarted, k.intPending = id, false, false
	k.imu.Unlock()
	defer func() {
		k.imu.Lock()
		k.cell = ""
		k.imu.Unlock()
	}()

	m := startMeter(k.pid, k.cfg.Spec.Cgroup)
	res := newResult(k.cfg.maxOutput())
	res.onOutput = req.OnOutput
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var grace <-chan time.Time
	interrupted := false
	interrupt := func() {
		if interrupted {
			return
		}
		interrupted = true
		k.Interrupt()
		grace = time.After(cmp.Or(k.cfg.Grace, 2*time.Second))
	}
	done := ctx.Done()
	if req.Detached {
		done = nil
	}
	for {
		select {
		case f, ok := <-k.frames:
			if !ok {
				k.dead = k.death(oomBefore)
				res.addDeath(k.dead, interrupted)
				res.Usage = m.stop()
				return res.finish(), nil
			}
			if f.ID != id {
				continue // a late frame of an earlier, interrupted cell
			}
			switch f.Type {
			case "started":
				res.Started = true
				k.imu.Lock()
				k.cellStarted = true
				pending := k.intPending
				k.imu.Unlock()
				if pending {
					k.signal(id)
				}
			case "output":
				res.add(f.Output)
			case "done":
				res.ExecutionCount = f.ExecutionCount
				res.Status = f.Status
				if interrupted {
					res.Status = StatusTimeout
				}
				res.dropped += f.DroppedBytes
				res.Usage = m.stop()
				return res.finish(), nil
			}
		case <-deadline.C:
			interrupt()
		case <-done:
			done = nil
			interrupt()
		case <-grace:
			k.kill()
		}
	}
}

func (k *Kernel) send(msg any) error {
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	buf := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	_, err = k.req.Write(append(buf, body...))
	return err
}

func (k *Kernel) oomKills() int64 {
	if k.cfg.Spec.Cgroup == nil {
		return 0
	}
	n, _ := k.cfg.Spec.Cgroup.OOMKills()
	return n
}

// death says why the driver is gone.
func (k *Kernel) death(oomBefore int64) error {
	k.kill()
	k.proc.Wait()
	if k.oomKills() > oomBefore {
		return errOOM
	}
	return errDied
}

var (
	errOOM  = errors.New("the kernel was killed: out of memory (the sandbox's memory limit was reached)")
	errDied = errors.New("the kernel died")
)

// kill ends the jail, then whatever might be left in its cgroup.
func (k *Kernel) kill() { killTree(k.proc, k.cfg.Spec.Cgroup) }

func killTree(p process, cg *cgroup.Group) {
	p.Kill()
	if cg != nil {
		cg.Kill()
	}
}

// Renice sets the CPU priority of every process and thread of the kernel.
func (k *Kernel) Renice(nice int) { renice(k.cfg.Spec.Cgroup, nice) }

func renice(cg *cgroup.Group, nice int) {
	if cg != nil {
		pids, _ := cg.Pids()
		jail.Renice(pids, nice)
	}
}

// InCell reports whether a cell has been sent and not yet answered.
func (k *Kernel) InCell() bool {
	k.imu.Lock()
	defer k.imu.Unlock()
	return k.cell != ""
}

// Interrupt interrupts the running cell, if any.
func (k *Kernel) Interrupt() error {
	k.imu.Lock()
	if k.cell != "" && !k.cellStarted {
		k.intPending = true
		k.imu.Unlock()
		return nil
	}
	id := k.cell
	k.imu.Unlock()
	if id == "" {
		return k.proc.Interrupt() // between cells the driver ignores it
	}
	return k.signal(id)
}

// signal sends SIGINT for cell id. Node runs its SIGINT handler on the
// event loop, so a signal that lands between the driver's "started" and
// the script's own watchdog waits behind the script and is lost; Node's
// driver takes a repeated SIGINT as one interrupt, so it is sent again
// while the cell runs (Python's driver must not get a second one while it
// reports the first).
func (k *Kernel) signal(id string) error {
	err := k.proc.Interrupt()
	if k.cfg.Language != JavaScript || err != nil {
		return err
	}
	go func() {
		for range 8 {
			time.Sleep(250 * time.Millisecond)
			k.imu.Lock()
			same := k.cell == id
			k.imu.Unlock()
			if !same {
				return
			}
			k.proc.Interrupt()
		}
	}()
	return nil
}

// Pid is the host pid of the interpreter (0 if it has exited).
func (k *Kernel) Pid() int {
	if !k.Alive() {
		return 0
	}
	return k.pid
}

// Alive reports whether the kernel can run cells.
func (k *Kernel) Alive() bool {
	select {
	case <-k.proc.Done():
		return false
	default:
		return true
	}
}

// Stop kills every process of the kernel without waiting for them to be
// gone; Close must follow.
func (k *Kernel) Stop() { k.proc.Stop() }

// Close ends the kernel and every process it started.
func (k *Kernel) Close() error {
	k.kill()
	k.req.Close()
	k.proc.Wait()
	for range k.frames {
	}
	return nil
}
