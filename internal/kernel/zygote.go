package kernel

// The Python fork server ("zygote").
//
// A zygote is one Python interpreter per sandbox that has imported IPython,
// the driver's shell and the preload modules, and forks a child for every
// new kernel instead of starting an interpreter. It runs in a jail of its
// own (jail.Spec.Zygote): the sandbox's uid, binds, read-only root,
// environment and rlimits, in a child cgroup of the sandbox, but keeping all
// capabilities inside its own user namespace and without a seccomp filter,
// because it runs no user code. Each fork enters new mount, pid, net, ipc
// and uts namespaces, mounts its own /proc and /dev/shm, is moved by the
// server into the kernel's own cgroup, then drops every capability, sets
// no_new_privs and loads the same seccomp filter a spawned kernel gets
// before the kernel (the driver's main) runs; see zygote_main in
// driver/python.py. A child that fails any step exits before user code runs
// and Start reports ErrStartup.
//
// Trade-offs of forking, compared with spawning a fresh interpreter:
//   - ASLR: every forked kernel of a sandbox shares the zygote's memory
//     layout (the addresses of the interpreter, libraries, heap and stack),
//     so an address leaked by one kernel is valid in the sandbox's other
//     kernels (and in the zygote). Only kernels of the same sandbox share
//     a zygote; a new zygote (after a restart) has a new layout.
//   - Python's hash secret (str hashing) is the zygote's in every kernel of
//     the sandbox; Python's random module and numpy's global generator are
//     reseeded in each child.
//   - The forked kernels live in the zygote's pid namespace (below their
//     own): if the zygote's jail ends, its kernels end with it. The sandbox
//     restarts the zygote; sessions whose kernel died start a new one.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codecell/codecell/internal/jail"
	"github.com/codecell/codecell/internal/seccomp"
)

// ZygoteConfig configures a zygote.
type ZygoteConfig struct {
	Jail jail.Config
	// Spec is the zygote's jail; Argv, Zygote, Stdout, Stderr and
	// ExtraFiles are filled in here. Cgroup is required: the server finds
	// forked children among its processes.
	Spec jail.Spec
	// Python is the interpreter; empty means /usr/bin/python3.
	Python string
	// Preload lists the modules the zygote imports before it forks.
	Preload []string
	// StartTimeout bounds start-up; 0 means 60s.
	StartTimeout time.Duration
}

// Zygote is a running Python fork server.
type Zygote struct {
	cfg  ZygoteConfig
	proc *jail.Process
	ctl  *net.UnixConn
	errs *tailBuffer

	mu sync.Mutex // one fork request at a time
}

// tailBuffer keeps the last bytes written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 8<<10 {
		t.b = t.b[len(t.b)-8<<10:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return cmp.Or(strings.TrimSpace(string(t.b)), "exited without a message")
}

// StartZygote starts a zygote and waits until it is ready to fork.
func StartZygote(ctx context.Context, cfg ZygoteConfig) (*Zygote, error) {
	if cfg.Spec.Cgroup == nil {
		return nil, fmt.Errorf("%w: the zygote needs a cgroup", ErrStartup)
	}
	program, err := seccomp.Program()
	if err != nil {
		return nil, fmt.Errorf("%w: seccomp: %w", ErrStartup, err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: control socket: %w", ErrStartup, err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "zygote-ctl"), os.NewFile(uintptr(fds[1]), "zygote-ctl")
	defer theirs.Close()
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: control socket: %w", ErrStartup, err)
	}
	ctl := c.(*net.UnixConn)
	progR, progW, err := os.Pipe()
	if err != nil {
		ctl.Close()
		return nil, fmt.Errorf("%w: %w", ErrStartup, err)
	}
	go func() { progW.Write(program); progW.Close() }()
	defer progR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		ctl.Close()
		return nil, fmt.Errorf("%w: %w", ErrStartup, err)
	}
	z := &Zygote{cfg: cfg, ctl: ctl, errs: &tailBuffer{}}
	errDone := make(chan struct{})
	go func() {
		defer close(errDone)
		buf := make([]byte, 4096)
		for {
			n, err := errR.Read(buf)
			z.errs.Write(buf[:n])
			if err != nil {
				errR.Close()
				return
			}
		}
	}()

	spec := cfg.Spec
	spec.Zygote = true
	// -I: the zygote keeps its capabilities, so it must never import from
	// anywhere user code can write: not the working directory (home), not
	// the user site-packages under home, not PYTHON* variables. Each kernel
	// restores the first two for itself once its filter is loaded.
	spec.Argv = []string{cmp.Or(cfg.Python, "/usr/bin/python3"), "-I", "-u", "-c", pythonDriver, "zygote", strings.Join(cfg.Preload, ",")}
	spec.Stdout, spec.Stderr = nil, errW
	spec.ExtraFiles = []*os.File{theirs, progR}
	proc, err := jail.Start(ctx, cfg.Jail, spec)
	errW.Close()
	if err != nil {
		ctl.Close()
		<-errDone
		return nil, fmt.Errorf("%w: python zygote: %w: %s", ErrStartup, err, z.errs)
	}
	z.proc = proc

	timeout := cmp.Or(cfg.StartTimeout, 60*time.Second)
	ready := make(chan error, 1)
	go func() {
		ctl.SetReadDeadline(time.Now().Add(timeout))
		defer ctl.SetReadDeadline(time.Time{})
		buf := make([]byte, 4096)
		n, err := ctl.Read(buf)
		if err != nil {
			ready <- err
			return
		}
		var msg struct{ Type string }
		if json.Unmarshal(buf[:n], &msg) != nil || msg.Type != "ready" {
			ready <- fmt.Errorf("unexpected message %q", buf[:n])
			return
		}
		ready <- nil
	}()
	select {
	case err = <-ready:
	case <-proc.Done():
		err = errors.New("the zygote exited")
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		z.Close()
		<-errDone
		return nil, fmt.Errorf("%w: python zygote: %w: %s", ErrStartup, err, z.errs)
	}
	// The OOM killer never picks the zygote (the death of a kernel ends one
	// kernel, the zygote's ends all of them); each fork is reset to 0.
	if pid := proc.ProgramPid(); pid > 0 {
		os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid), []byte("-1000"), 0)
	}
	return z, nil
}

// Done is closed when the zygote's jail has exited.
func (z *Zygote) Done() <-chan struct{} { return z.proc.Done() }

// Alive reports whether the zygote can fork.
func (z *Zygote) Alive() bool {
	select {
	case <-z.proc.Done():
		return false
	default:
		return true
	}
}

// Pid is the host pid of the zygote's interpreter.
func (z *Zygote) Pid() int { return z.proc.ProgramPid() }

// Close ends the zygote and, with its pid namespace, every kernel forked from it.
func (z *Zygote) Close() {
	z.ctl.Close() // ends a pending request at once
	z.mu.Lock()
	defer z.mu.Unlock()
	z.stopLocked()
}

// stopLocked is Close. Preconditions: z.mu is held.
func (z *Zygote) stopLocked() {
	z.ctl.Close()
	z.proc.Kill()
	z.cfg.Spec.Cgroup.Kill()
}

// forkRequest is the JSON part of a fork request.
type forkRequest struct {
	ShmBytes int64  `json:"shm_bytes"`
	FileSize uint64 `json:"fsize"`
	NoFile   uint64 `json:"nofile"`
}

// fork asks the zygote for a new kernel with the given fds (see the driver)
// and returns it once it runs in spec's cgroup; it then loads its filter
// and runs the driver's main.
func (z *Zygote) fork(ctx context.Context, spec jail.Spec, files []*os.File) (*forked, error) {
	if spec.Cgroup == nil {
		return nil, jail.ErrNoCgroup
	}
	goR, goW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer goW.Close()
	lim := spec.Rlimits
	lim.FileSize, lim.OpenFiles = cmp.Or(lim.FileSize, 1<<30), cmp.Or(lim.OpenFiles, 1024)
	body, _ := json.Marshal(forkRequest{ShmBytes: cmp.Or(spec.ShmBytes, 64<<20), FileSize: lim.FileSize, NoFile: lim.OpenFiles})
	fds := make([]int, 0, 7)
	for _, f := range append(files, goR) {
		fds = append(fds, int(f.Fd()))
	}
	nsPid, err := z.request(ctx, body, fds)
	goR.Close()
	if err != nil {
		return nil, err
	}
	host, err := z.hostPid(nsPid)
	if err != nil {
		return nil, err
	}
	pidfd, err := unix.PidfdOpen(host, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("pidfd of the forked kernel: %w", err)
	}
	p := &forked{init: host, pidfd: os.NewFile(uintptr(pidfd), "pidfd"), done: make(chan struct{})}
	go p.wait()
	fail := func(err error) (*forked, error) {
		p.Kill()
		return nil, err
	}
	// The pid is C2's (not reused) only if it still has the zygote-side pid.
	if h, err := z.hostPid(nsPid); err != nil || h != host {
		return fail(fmt.Errorf("the forked kernel vanished during set-up"))
	}
	if err := joinAll(spec.Cgroup.ProcsFiles(), host); err != nil {
		return fail(err)
	}
	os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", host), []byte("0"), 0)
	if spec.Nice != 0 {
		jail.Renice([]int{host}, spec.Nice)
	}
	if _, err := goW.Write([]byte("go")); err != nil {
		return fail(fmt.Errorf("the forked kernel exited during set-up: %w", err))
	}
	return p, nil
}

// joinAll writes pid into every cgroup.procs file at once: on cgroup v1
// each write waits for an RCU grace period, so one after the other costs a
// multiple of it.
func joinAll(files []string, pid int) error {
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := os.WriteFile(f, []byte(strconv.Itoa(pid)), 0); err != nil {
				errs[i] = fmt.Errorf("cgroup: join pid %d to %s: %w", pid, f, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// request sends one fork request and returns the new C2's pid in the
// zygote's pid namespace.
func (z *Zygote) request(ctx context.Context, body []byte, fds []int) (int, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if !z.Alive() {
		return 0, errors.New("the zygote is not running")
	}
	deadline := time.Now().Add(30 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	z.ctl.SetDeadline(deadline)
	defer z.ctl.SetDeadline(time.Time{})
	if _, _, err := z.ctl.WriteMsgUnix(body, unix.UnixRights(fds...), nil); err != nil {
		z.stopLocked()
		return 0, fmt.Errorf("fork request: %w", err)
	}
	buf := make([]byte, 4096)
	n, err := z.ctl.Read(buf)
	if err != nil {
		// A late reply would answer the next request: end this zygote
		// (the sandbox starts a new one).
		z.stopLocked()
		return 0, fmt.Errorf("fork reply: %w (zygote: %s)", err, z.errs)
	}
	var reply struct {
		Pid   int
		Error string
	}
	if err := json.Unmarshal(buf[:n], &reply); err != nil || reply.Pid <= 0 {
		return 0, fmt.Errorf("fork failed: %s", cmp.Or(reply.Error, string(buf[:n])))
	}
	return reply.Pid, nil
}

// hostPid finds the host pid of the zygote's child whose pid in the
// zygote's namespace is nsPid and which is pid 1 of a namespace of its own.
func (z *Zygote) hostPid(nsPid int) (int, error) {
	pids, err := z.cfg.Spec.Cgroup.Pids()
	if err != nil {
		return 0, err
	}
	want := strconv.Itoa(nsPid)
	for _, p := range pids {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "status"))
		if err != nil {
			continue
		}
		for line := range bytes.Lines(b) {
			if rest, ok := bytes.CutPrefix(line, []byte("NSpid:")); ok {
				f := strings.Fields(string(rest))
				if len(f) >= 3 && f[len(f)-2] == want && f[len(f)-1] == "1" {
					return p, nil
				}
				break
			}
		}
	}
	return 0, fmt.Errorf("forked kernel (pid %d in the zygote) not found in %s", nsPid, z.cfg.Spec.Cgroup.Path())
}

// forked is a kernel forked by a zygote: C2 (its namespace's init, not a
// child of the server) and the kernel C3 below it.
type forked struct {
	init  int
	pidfd *os.File
	done  chan struct{}
}

func (p *forked) wait() {
	defer close(p.done)
	rc, err := p.pidfd.SyscallConn()
	if err != nil {
		return
	}
	rc.Read(func(fd uintptr) bool {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, 0)
		return err != nil && err != unix.EINTR || n > 0
	})
}

func (p *forked) Done() <-chan struct{} { return p.done }

func (p *forked) Wait() error {
	<-p.done
	return nil
}

func (p *forked) ProgramPid() int {
	select {
	case <-p.done:
		return 0
	default:
	}
	return jail.FirstChild(p.init)
}

func (p *forked) Interrupt() error {
	pid := p.ProgramPid()
	if pid == 0 {
		return os.ErrProcessDone
	}
	return syscall.Kill(pid, syscall.SIGINT)
}

// Stop kills the kernel's init, and with it its whole pid namespace.
func (p *forked) Stop() {
	select {
	case <-p.done:
	default:
		if rc, err := p.pidfd.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) { unix.PidfdSendSignal(int(fd), unix.SIGKILL, nil, 0) })
		}
	}
}

func (p *forked) Kill() {
	p.Stop()
	select {
	case <-p.done:
		p.pidfd.Close()
	case <-time.After(2 * time.Second):
	}
}
