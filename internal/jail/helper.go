package jail

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// helperArg marks a re-execution of the server binary as the jail helper.
const helperArg = "__codecell-jail-helper"

// helperConfig is what Start hands the helper on its command line.
type helperConfig struct {
	Procs   []string // cgroup.procs files to join
	UID     int
	GID     int
	Parent  int // the server's pid; the helper gives up if it is gone
	Rlimits Rlimits
	Nice    int
	Path    string   // bwrap
	Argv    []string // bwrap's argv
	Env     []string // user code's environment
}

// RunHelperIfRequested runs the jail helper and never returns when this
// process was started as one; otherwise it returns at once. Every main
// (and TestMain) of a program that starts jails calls it first.
func RunHelperIfRequested() {
	if len(os.Args) != 3 || os.Args[1] != helperArg {
		return
	}
	// Priority is per thread: the thread that sets it must be the one that
	// execs bwrap.
	runtime.LockOSThread()
	var h helperConfig
	if err := json.Unmarshal([]byte(os.Args[2]), &h); err != nil {
		helperFail("decoding config", err)
	}
	helperFail("exec bwrap", h.run())
}

func helperFail(step string, err error) {
	fmt.Fprintf(os.Stderr, "codecell jail: %s: %v\n", step, err)
	os.Exit(125)
}

// run is the straight line of set-up steps between the server and bwrap.
func (h *helperConfig) run() error {
	// 1. Join the cgroup while still root, before anything is forked, so no
	//    process of the jail can ever run outside the limits.
	pid := []byte(strconv.Itoa(os.Getpid()))
	for _, f := range h.Procs {
		if err := os.WriteFile(f, pid, 0); err != nil {
			return fmt.Errorf("joining cgroup %s: %w", f, err)
		}
	}
	// 2. Limits that cgroups do not cover. (syscall.Setrlimit, not x/sys:
	//    Go restores its saved NOFILE limit on exec unless set through syscall.)
	for _, l := range []struct {
		res int
		max uint64
	}{
		{syscall.RLIMIT_CORE, 0},
		{syscall.RLIMIT_FSIZE, h.Rlimits.FileSize},
		{syscall.RLIMIT_NOFILE, h.Rlimits.OpenFiles},
	} {
		if err := syscall.Setrlimit(l.res, &syscall.Rlimit{Cur: l.max, Max: l.max}); err != nil {
			return fmt.Errorf("setrlimit(%d): %w", l.res, err)
		}
	}
	if h.Nice != 0 {
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, 0, h.Nice); err != nil {
			return fmt.Errorf("setpriority(%d): %w", h.Nice, err)
		}
	}
	// 3. Become the sandbox's own host user: not root, not the server. bwrap
	//    then maps only this uid into its user namespace.
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(h.GID); err != nil {
		return fmt.Errorf("setgid(%d): %w", h.GID, err)
	}
	if err := syscall.Setuid(h.UID); err != nil {
		return fmt.Errorf("setuid(%d): %w", h.UID, err)
	}
	if os.Getuid() != h.UID || os.Geteuid() != h.UID || os.Getegid() != h.GID {
		return fmt.Errorf("still uid %d/%d after setuid(%d)", os.Getuid(), os.Geteuid(), h.UID)
	}
	// 4. The uid change cleared the parent-death signal: set it again, then
	//    make sure the server did not die in between.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_PDEATHSIG): %w", err)
	}
	if os.Getppid() != h.Parent {
		return fmt.Errorf("server exited during set-up")
	}
	return syscall.Exec(h.Path, h.Argv, h.Env)
}
