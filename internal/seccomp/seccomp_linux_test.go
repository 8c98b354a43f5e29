//go:build linux

package seccomp

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// The package spells out uapi constants itself so it builds everywhere; make
// sure they agree with x/sys/unix.
func TestConstantsMatchUAPI(t *testing.T) {
	checks := []struct {
		name      string
		ours, sys uint64
	}{
		{"CLONE_NEWTIME", cloneNewTime, unix.CLONE_NEWTIME},
		{"CLONE_NEWNS", cloneNewNS, unix.CLONE_NEWNS},
		{"CLONE_NEWCGROUP", cloneNewCgroup, unix.CLONE_NEWCGROUP},
		{"CLONE_NEWUTS", cloneNewUTS, unix.CLONE_NEWUTS},
		{"CLONE_NEWIPC", cloneNewIPC, unix.CLONE_NEWIPC},
		{"CLONE_NEWUSER", cloneNewUser, unix.CLONE_NEWUSER},
		{"CLONE_NEWPID", cloneNewPID, unix.CLONE_NEWPID},
		{"CLONE_NEWNET", cloneNewNet, unix.CLONE_NEWNET},
		{"TIOCSTI", ioctlTIOCSTI, unix.TIOCSTI},
		{"TIOCLINUX", ioctlTIOCLINUX, unix.TIOCLINUX},
		{"EPERM", errnoEPERM, uint64(unix.EPERM)},
		{"ENOSYS", errnoENOSYS, uint64(unix.ENOSYS)},
		{"SECCOMP_RET_KILL_PROCESS", uint64(retKillProcess), unix.SECCOMP_RET_KILL_PROCESS},
		{"SECCOMP_RET_ERRNO", uint64(retErrno), unix.SECCOMP_RET_ERRNO},
		{"SECCOMP_RET_ALLOW", uint64(retAllow), unix.SECCOMP_RET_ALLOW},
	}
	for _, c := range checks {
		if c.ours != c.sys {
			t.Errorf("%s: ours %#x, x/sys/unix %#x", c.name, c.ours, c.sys)
		}
	}
}

// probeScript makes raw syscalls through ctypes and prints the errno of each
// (0 = succeeded). Syscall numbers come from argv so the script is
// architecture-neutral.
const probeScript = `
import ctypes, json, os, sys
nr = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr[name]), *[ctypes.c_ulong(a) for a in args])
    return ctypes.get_errno() if r == -1 else 0
r, w = os.pipe()
buf = ctypes.create_string_buffer(64)
addr = ctypes.addressof(buf)
out = {
    "unshare_user": sc("unshare", 0x10000000),
    "clone3": sc("clone3", 0, 0),
    "ioctl_tiocsti": sc("ioctl", r, 0x5412, addr),
    "ioctl_tiocsti_hi": sc("ioctl", r, 0xffffffff00005412, addr),
    "ioctl_tcgets": sc("ioctl", r, 0x5401, addr),
    "keyctl": sc("keyctl", 0, 0xfffffffd, 0),
    "personality_norandom": sc("personality", 0x0040000),
    "mount": sc("mount", 0, 0, 0, 0, 0),
    "bpf": sc("bpf", 0, 0, 0),
    "getpid": sc("getpid"),
}
pid = os.fork()
if pid == 0:
    os._exit(7)
_, st = os.waitpid(pid, 0)
out["fork_status"] = os.waitstatus_to_exitcode(st)
print(json.dumps(out))
`

// TestUnderBwrap installs the filter for real through bwrap --seccomp and
// probes it from Python. Skipped when bwrap or python3 is unavailable or bwrap
// cannot create its sandbox here.
func TestUnderBwrap(t *testing.T) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bwrap not installed")
	}
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	if out, err := exec.Command(bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--", "/bin/true").CombinedOutput(); err != nil {
		t.Skipf("bwrap unusable here: %v: %s", err, out)
	}

	prog, err := Program()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "filter.bpf")
	if err := os.WriteFile(path, prog, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	info := nativeInfo(t)
	nrs := map[string]int{}
	for _, n := range []string{"unshare", "clone3", "ioctl", "keyctl", "personality", "mount", "bpf", "getpid"} {
		nrs[n] = info.SyscallNames[n]
	}
	nrJSON, _ := json.Marshal(nrs)

	cmd := exec.Command(bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--seccomp", "3",
		"--", python, "-I", "-c", probeScript, string(nrJSON))
	cmd.ExtraFiles = []*os.File{f} // fd 3
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe failed: %v; stdout %s", err, out)
	}
	var got map[string]int
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("bad probe output %q: %v", out, err)
	}
	want := map[string]int{
		"unshare_user":         int(unix.EPERM),
		"clone3":               int(unix.ENOSYS),
		"ioctl_tiocsti":        int(unix.EPERM),
		"ioctl_tiocsti_hi":     int(unix.EPERM),
		"ioctl_tcgets":         int(unix.ENOTTY), // allowed; a pipe is no tty
		"keyctl":               int(unix.EPERM),
		"personality_norandom": int(unix.EPERM),
		"mount":                int(unix.EPERM),
		"bpf":                  int(unix.EPERM),
		"getpid":               0,
		"fork_status":          7,
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s: got %s, want %d", k, strconv.Itoa(g), w)
		}
	}
}
