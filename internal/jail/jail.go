// Package jail starts processes that run untrusted code, each inside its own
// bubblewrap sandbox. It owns every isolation layer applied to one process
// tree: the namespaces (user, pid, net, ipc, uts, cgroup), the filesystem view,
// the unprivileged host uid, the environment allowlist, the seccomp filter,
// rlimits and membership of a cgroup whose limits the caller chose.
//
// The order of set-up matters and is the same for every jail: a re-executed
// copy of this binary (the helper, see helper.go) joins the cgroup while still
// root so that nothing it forks can escape the limits, sets rlimits, drops to
// the sandbox's host uid and execs bwrap; bwrap builds the namespaces and the
// mounts, drops all capabilities, and loads the seccomp filter as its last step
// before exec of user code.
//
// Start refuses to run anything when a layer cannot be set up, unless
// Config.Unsafe is set, which runs the program with no isolation at all and
// logs a warning every time.
package jail

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/codecell/codecell/internal/cgroup"
	"github.com/codecell/codecell/internal/seccomp"
)

// Paths inside every jail.
const (
	HomeDir = "/home/user"
	TmpDir  = "/tmp"
	// RunDir is where Spec.Run is bound: a directory of one kernel's own
	// (its Jupyter sockets), seen by no other jail.
	RunDir = "/run/kernel"
	// UID and GID are the ids user code sees inside the jail. On the host the
	// same processes run as the sandbox's own uid (Spec.HostUID).
	UID = 1000
	GID = 1000
)

// Config is the host-wide configuration shared by all jails.
type Config struct {
	// Bwrap is the bubblewrap binary. Empty means "bwrap" from PATH.
	Bwrap string
	// Helper is the executable re-run as the set-up helper; it must call
	// RunHelperIfRequested first thing in main. Empty means os.Executable.
	Helper string
	// Unsafe runs programs without any isolation. Only for hosts where the
	// jail cannot work and the operator said so explicitly.
	Unsafe bool
	// Logger receives the per-execution warning in Unsafe mode. Nil means slog.Default.
	Logger *slog.Logger
}

// Rlimits are applied to every process of the jail.
type Rlimits struct {
	FileSize  uint64 // RLIMIT_FSIZE in bytes; 0 means 1 GiB
	OpenFiles uint64 // RLIMIT_NOFILE; 0 means 1024
}

// Spec describes one jailed process.
type Spec struct {
	// Argv is the program and its arguments, as seen inside the jail.
	Argv []string
	// Env holds extra KEY=VALUE pairs for user code, on top of Environ's allowlist.
	Env []string
	// Home and Tmp are host directories, owned by HostUID, bound read-write
	// at HomeDir and TmpDir. Both are required.
	Home, Tmp string
	// Run, if set, is a host directory owned by HostUID, bound read-write
	// at RunDir.
	Run string
	// Cwd is the working directory inside the jail; empty means HomeDir.
	Cwd string
	// HostUID and HostGID identify the sandbox on the host. They must not be
	// 0 or the server's own ids.
	HostUID, HostGID int
	// Cgroup is the group the whole process tree is placed in before it
	// starts. Required unless Config.Unsafe.
	Cgroup  *cgroup.Group
	Rlimits Rlimits
	// ShmBytes bounds the private /dev/shm; 0 means 64 MiB.
	ShmBytes int64
	// Nice is the CPU priority the jail starts with (0 normal, up to 19
	// lowest); see Renice.
	Nice int
	// Stdin, Stdout, Stderr are the process's fds 0-2 (nil: /dev/null).
	Stdin, Stdout, Stderr *os.File
	// ExtraFiles become fds 3, 4, ... of the jailed program.
	ExtraFiles []*os.File
	// Zygote marks the jail of a fork server (see kernel.Zygote): the
	// program keeps all capabilities INSIDE its own user namespace
	// (bwrap --cap-add ALL; none in the host's) and gets no seccomp filter,
	// because it runs no user code: the children it forks enter their own
	// namespaces, drop every capability, set no_new_privs and load the
	// filter themselves before any user code runs. Everything else (uid,
	// binds, read-only root, environment, cgroup, rlimits) is as for any jail.
	Zygote bool
}

// Errors returned by Start.
var (
	ErrNoBwrap   = errors.New("bubblewrap (bwrap) not found: install it with `apt-get install bubblewrap`")
	ErrBadSpec   = errors.New("invalid jail spec")
	ErrNoCgroup  = errors.New("no cgroup for the jail: resource limits cannot be applied")
	ErrRootOwned = errors.New("refusing to run user code as host root or as the server's own uid")
)

// Process is a running jail.
type Process struct {
	cmd  *exec.Cmd
	init int // host pid of the jail's pid 1 (bwrap's init); 0 in Unsafe mode
	done chan struct{}
	err  error // set before done is closed
}

// Start launches spec.Argv in a new jail. It returns once bwrap has built the
// sandbox and forked the program, or with an error naming the layer that failed.
func Start(ctx context.Context, c Config, spec Spec) (*Process, error) {
	if len(spec.Argv) == 0 || spec.Home == "" || spec.Tmp == "" {
		return nil, fmt.Errorf("%w: Argv, Home and Tmp are required", ErrBadSpec)
	}
	if c.Unsafe {
		return startUnsafe(c, spec)
	}
	if spec.HostUID <= 0 || spec.HostGID <= 0 || spec.HostUID == os.Getuid() || spec.HostGID == os.Getgid() {
		return nil, fmt.Errorf("%w (uid %d, gid %d)", ErrRootOwned, spec.HostUID, spec.HostGID)
	}
	if spec.Cgroup == nil {
		return nil, ErrNoCgroup
	}
	bwrap, err := exec.LookPath(cmp.Or(c.Bwrap, "bwrap"))
	if err != nil {
		return nil, ErrNoBwrap
	}
	helper := c.Helper
	if helper == "" {
		if helper, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("jail: finding the helper executable: %w", err)
		}
	}
	filter, err := seccomp.Program()
	if err != nil {
		return nil, fmt.Errorf("jail: building the seccomp filter: %w", err)
	}

	// Files bwrap consumes follow the program's own extra files, so that
	// the program sees its fds at 3, 4, ... whatever the jail needs.
	var closeAfterStart []*os.File
	defer func() {
		for _, f := range closeAfterStart {
			f.Close()
		}
	}()
	extra := append([]*os.File(nil), spec.ExtraFiles...)
	fdOf := func(f *os.File) string {
		extra = append(extra, f)
		closeAfterStart = append(closeAfterStart, f)
		return strconv.Itoa(2 + len(extra))
	}
	dataFD := func(content []byte) (string, error) {
		r, err := fileWithContent(content)
		if err != nil {
			return "", err
		}
		return fdOf(r), nil
	}

	var seccompFD string
	if !spec.Zygote {
		if seccompFD, err = dataFD(filter); err != nil {
			return nil, fmt.Errorf("jail: passing the seccomp filter: %w", err)
		}
	}
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("jail: info pipe: %w", err)
	}
	defer infoR.Close()
	infoFD := fdOf(infoW)

	args := []string{
		"--unshare-all", "--unshare-user", // all: ipc, pid, net, uts, cgroup; user only "if possible" without the second flag
		"--disable-userns",
		"--uid", strconv.Itoa(UID), "--gid", strconv.Itoa(GID),
		"--hostname", "sandbox",
		"--new-session",
		"--die-with-parent",
	}
	if spec.Zygote {
		args = append(args, "--cap-add", "ALL")
	} else {
		args = append(args, "--cap-drop", "ALL")
	}
	args = append(args, systemMounts()...)
	for _, f := range syntheticEtc() {
		fd, err := dataFD(f.content)
		if err != nil {
			return nil, fmt.Errorf("jail: passing %s: %w", f.path, err)
		}
		args = append(args, "--ro-bind-data", fd, f.path)
	}
	shm := spec.ShmBytes
	if shm <= 0 {
		shm = 64 << 20
	}
	cwd := cmp.Or(spec.Cwd, HomeDir)
	args = append(args,
		"--proc", "/proc",
		"--dev", "/dev",
		"--size", strconv.FormatInt(shm, 10), "--perms", "1777", "--tmpfs", "/dev/shm",
		"--bind", spec.Home, HomeDir,
		"--bind", spec.Tmp, TmpDir,
	)
	if spec.Run != "" {
		args = append(args, "--bind", spec.Run, RunDir)
	}
	args = append(args,
		// Everything but the binds stays read-only: without this, the root
		// tmpfs bwrap builds belongs to the sandbox user, who could create
		// /etc/ld.so.preload or fill memory outside the disk quota.
		"--remount-ro", "/",
		"--chdir", cwd,
		"--info-fd", infoFD,
	)
	if !spec.Zygote {
		args = append(args, "--seccomp", seccompFD)
	}
	// bwrap's argv stays visible as the jail's /proc/1/cmdline: pass the
	// options through an fd so that no host path (data dir, sandbox id)
	// shows. The command itself must stay on the command line.
	argsFD, err := dataFD([]byte(strings.Join(args, "\x00") + "\x00"))
	if err != nil {
		return nil, fmt.Errorf("jail: passing bwrap's arguments: %w", err)
	}

	h := helperConfig{
		Procs:   spec.Cgroup.ProcsFiles(),
		UID:     spec.HostUID,
		GID:     spec.HostGID,
		Parent:  os.Getpid(),
		Rlimits: spec.Rlimits.withDefaults(),
		Nice:    spec.Nice,
		Path:    bwrap,
		Argv:    append([]string{"bwrap", "--args", argsFD, "--"}, spec.Argv...),
		Env:     Environ(cwd, spec.Env),
	}
	hj, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("jail: encoding helper config: %w", err)
	}
	cmd := exec.Command(helper, helperArg, string(hj))
	cmd.Env = []string{} // the helper passes h.Env to bwrap; nothing of ours leaks
	cmd.Stdin, cmd.Stdout, cmd.Stderr = spec.Stdin, spec.Stdout, spec.Stderr
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("jail: starting the helper: %w", err)
	}
	for _, f := range closeAfterStart {
		f.Close()
	}
	closeAfterStart = nil

	p := &Process{cmd: cmd, done: make(chan struct{})}
	go p.wait()

	// bwrap writes {"child-pid": N} once the namespaces exist and closes the
	// fd; EOF without it means set-up failed (its message is on stderr).
	var info struct {
		ChildPID int `json:"child-pid"`
	}
	if err := readInfo(ctx, infoR, &info); err != nil || info.ChildPID == 0 {
		p.Kill()
		<-p.done
		return nil, fmt.Errorf("jail: bubblewrap did not set up the sandbox (%v; exit: %v)", err, p.err)
	}
	p.init = info.ChildPID
	return p, nil
}

func readInfo(ctx context.Context, r *os.File, v any) error {
	r.SetReadDeadline(time.Now().Add(30 * time.Second))
	if d, ok := ctx.Deadline(); ok {
		r.SetReadDeadline(d)
	}
	b, err := io.ReadAll(io.LimitReader(r, 4096))
	if err != nil {
		return err
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return io.ErrUnexpectedEOF
	}
	return json.Unmarshal(b, v)
}

func startUnsafe(c Config, spec Spec) (*Process, error) {
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	log.Warn("running user code WITHOUT a sandbox (--unsafe-no-sandbox)", "argv0", spec.Argv[0])
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = spec.Home
	cmd.Env = Environ(spec.Home, spec.Env)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = spec.Stdin, spec.Stdout, spec.Stderr
	cmd.ExtraFiles = spec.ExtraFiles
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("jail: starting %s: %w", spec.Argv[0], err)
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go p.wait()
	return p, nil
}

func (p *Process) wait() {
	p.err = p.cmd.Wait()
	close(p.done)
}

// Done is closed when the jail's outermost process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the jail to exit and returns its exit error.
func (p *Process) Wait() error {
	<-p.done
	return p.err
}

// Pid is the host pid of the jail's outermost process (bwrap).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// InitPid is the host pid of the jail's pid 1.
func (p *Process) InitPid() int { return p.init }

// ProgramPid is the host pid of the program named in Spec.Argv: the only
// child of the jail's init. It returns 0 if the program has exited.
func (p *Process) ProgramPid() int {
	if p.init == 0 {
		return p.cmd.Process.Pid
	}
	return FirstChild(p.init)
}

// FirstChild returns the host pid of the first child of pid, 0 if it has none.
func FirstChild(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(pid), "children"))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	child, _ := strconv.Atoi(f[0])
	return child
}

// Interrupt sends SIGINT to the program (not to its children, as Jupyter does).
func (p *Process) Interrupt() error {
	pid := p.ProgramPid()
	if pid == 0 {
		return os.ErrProcessDone
	}
	return syscall.Kill(pid, syscall.SIGINT)
}

// Stop sends the jail's pid 1 SIGKILL and returns at once: from then on no
// process of the jail runs code again. Kill still has to be called to wait
// for the jail and clean up.
func (p *Process) Stop() {
	if p.init != 0 {
		syscall.Kill(p.init, syscall.SIGKILL)
	} else {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// Renice gives every thread of the processes pids the CPU priority nice
// (lowering it needs root, which the server is).
func Renice(pids []int, nice int) {
	for _, pid := range pids {
		tasks, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
		for _, t := range tasks {
			if tid, err := strconv.Atoi(t.Name()); err == nil {
				syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice)
			}
		}
	}
}

// Kill ends the jail and waits for it. Killing the jail's pid 1 kills every
// process of its pid namespace, daemons included; bwrap then reaps it and
// exits. bwrap itself is killed only if that does not happen, since killing
// it first would orphan its init to the host's pid 1.
func (p *Process) Kill() {
	if p.init != 0 {
		syscall.Kill(p.init, syscall.SIGKILL)
		select {
		case <-p.done:
			return
		case <-time.After(2 * time.Second):
		}
	}
	// The helper leads its own process group (Setpgid).
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

func (r Rlimits) withDefaults() Rlimits {
	if r.FileSize == 0 {
		r.FileSize = 1 << 30
	}
	if r.OpenFiles == 0 {
		r.OpenFiles = 1024
	}
	return r
}

// fileWithContent returns a readable file holding content, for bwrap
// options that read data from an fd (--seccomp, --ro-bind-data).
func fileWithContent(content []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	if len(content) > 60<<10 {
		// Larger than a pipe's default buffer: use an unlinked temp file.
		r.Close()
		w.Close()
		f, err := os.CreateTemp("", "codecell-jail-")
		if err != nil {
			return nil, err
		}
		os.Remove(f.Name())
		if _, err := f.Write(content); err != nil {
			f.Close()
			return nil, err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	if _, err := w.Write(content); err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	w.Close()
	return r, nil
}
