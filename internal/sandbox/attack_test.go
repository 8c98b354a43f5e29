package sandbox_test

// The attack suite: hostile Python code tries to get out of its jail, to see
// or touch the host and other sandboxes, to gain privileges, to reach the
// network and to exhaust the host's resources. Every case asserts the SAFE
// outcome and is built so that it fails if the layer it exercises is missing:
// the code prints "RAN" before its attempt (a crash or a syntax error in the
// case is never mistaken for "blocked"), then either "SAFE <how>" (the attempt
// failed, with the errno or the value observed) or "PWNED <evidence>" (the
// attempt worked). A case passes only with RAN, a SAFE line naming one of the
// expected errnos or values, and no PWNED line.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/codecell/codecell/internal/jail"
	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

// attackPrelude is run once in every attack kernel. It defines the helpers
// the cases use: raw syscalls through ctypes with errno, and the markers.
const attackPrelude = `
import ctypes, errno, os, signal, socket, stat, struct, subprocess, sys, threading, time
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

def _arg(a):
    if isinstance(a, bool):
        return ctypes.c_long(int(a))
    if isinstance(a, int):
        return ctypes.c_long(a)
    if isinstance(a, bytes):
        return ctypes.c_char_p(a)
    return a

def raw(nr, *args):
    """syscall(nr, args...) with x86_64 numbers; raises OSError with errno on -1."""
    ctypes.set_errno(0)
    r = _libc.syscall(ctypes.c_long(nr), *[_arg(a) for a in args])
    if r == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r

def libc(name, *args):
    """A libc wrapper (unshare, mount, setns...), raising OSError on -1."""
    f = getattr(_libc, name)
    ctypes.set_errno(0)
    r = f(*[_arg(a) for a in args])
    if r == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r

def attempt(fn):
    """Runs one attack: SAFE <ERRNO> <type> if it raised OSError, PWNED if it returned."""
    print('RAN', flush=True)
    try:
        r = fn()
    except OSError as e:
        name = errno.errorcode.get(e.errno, str(e.errno)) if isinstance(e.errno, int) and e.errno > 0 else 'NOERRNO'
        print('SAFE', name, type(e).__name__, str(e)[:200].replace('\n', ' '), flush=True)
        return
    print('PWNED', repr(r)[:500], flush=True)

def check(ok, detail):
    """A value check: SAFE <detail> when ok, PWNED <detail> otherwise."""
    print('RAN', flush=True)
    print(('SAFE ' if ok else 'PWNED ') + str(detail)[:2000].replace('\n', ' | '), flush=True)

def status(pid='self'):
    out = {}
    for line in open(f'/proc/{pid}/status'):
        k, _, v = line.partition(':')
        out[k] = v.strip()
    return out

def cmd(argv, **kw):
    """Runs a command; SAFE EXIT <rc> <stderr> if it failed, PWNED if it exited 0."""
    print('RAN', flush=True)
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20, **kw)
    msg = (p.stdout + p.stderr).strip().replace('\n', ' | ')[:500]
    print(('SAFE EXIT %d ' % p.returncode if p.returncode != 0 else 'PWNED ') + msg, flush=True)

def find_text(roots, needle, limit=20000):
    """Walks roots (without following symlinked dirs) and returns files containing needle."""
    hits, seen = [], 0
    for root in roots:
        for d, dirs, files in os.walk(root, onerror=lambda e: None):
            for f in files:
                seen += 1
                if seen > limit:
                    return hits
                p = os.path.join(d, f)
                try:
                    with open(p, 'rb') as fh:
                        if needle.encode() in fh.read(1 << 20):
                            hits.append(p)
                except OSError:
                    pass
    return hits

def pids():
    return sorted(int(p) for p in os.listdir('/proc') if p.isdigit())

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x20000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
print('PRELUDE-OK')
`

// jsAttackPrelude defines the same markers for the JavaScript kernel.
const jsAttackPrelude = `
globalThis.attempt = async (fn) => {
  console.log('RAN')
  try {
    const r = await fn()
    console.log('PWNED', String(r).slice(0, 500))
  } catch (e) {
    console.log('SAFE', e.code || e.name, String(e.message).slice(0, 200))
  }
}
globalThis.check = (ok, detail) => { console.log('RAN'); console.log((ok ? 'SAFE ' : 'PWNED ') + detail) }
`

// attackCase is one attack run in a shared kernel.
type attackCase struct {
	name string
	code string
	// want lists acceptable prefixes of what follows SAFE (errno names such
	// as EPERM, EXIT for a failed command, or the value the case prints);
	// empty means any SAFE line.
	want []string
	// contains, if set, must appear in the SAFE line.
	contains string
	skip     string // reason to skip on this host
}

// attackKernel is a kernel with the prelude loaded; it is restarted if a
// case kills it, so one case cannot hide the result of the next.
type attackKernel struct {
	sb *sandbox.Sandbox
	k  *sandbox.Kernel
}

func newAttackKernel(t *testing.T, sb *sandbox.Sandbox) *attackKernel {
	a := &attackKernel{sb: sb}
	a.restart(t)
	return a
}

func (a *attackKernel) restart(t *testing.T) {
	t.Helper()
	a.k = startKernel(t, a.sb, kernel.Python)
	res := execute(t, a.k, attackPrelude, 30*time.Second)
	if res.Status != kernel.StatusOK || !strings.Contains(res.Text("stdout"), "PRELUDE-OK") {
		t.Fatalf("attack prelude: %+v", res)
	}
}

func (a *attackKernel) run(t *testing.T, code string, timeout time.Duration) *kernel.Result {
	t.Helper()
	if !a.k.Alive() {
		a.restart(t)
	}
	res, err := a.k.Execute(context.Background(), code, timeout)
	if err != nil {
		a.restart(t)
		t.Fatalf("executing: %v", err)
	}
	if res.Died {
		t.Errorf("the attack killed its kernel: %+v", res.Outputs)
		a.restart(t)
	}
	return res
}

// checkAttack asserts the SAFE outcome of one case's output.
func checkAttack(t *testing.T, c attackCase, res *kernel.Result) {
	t.Helper()
	out := res.Text("stdout")
	dump := func() string {
		return fmt.Sprintf("status %s\nstdout:\n%s\nstderr:\n%s\nerror: %+v", res.Status, out, res.Text("stderr"), res.Error())
	}
	var ran bool
	var safe, pwned []string
	for _, line := range strings.Split(out, "\n") {
		switch {
		case line == "RAN":
			ran = true
		case strings.HasPrefix(line, "SAFE"):
			safe = append(safe, strings.TrimSpace(strings.TrimPrefix(line, "SAFE")))
		case strings.HasPrefix(line, "PWNED"):
			pwned = append(pwned, line)
		}
	}
	if len(pwned) > 0 {
		t.Errorf("ATTACK SUCCEEDED: %s\n%s", strings.Join(pwned, "\n"), dump())
		return
	}
	if !ran {
		t.Errorf("the attack code did not run (no RAN marker): %s", dump())
		return
	}
	if res.Status != kernel.StatusOK {
		t.Errorf("the attack cell ended with status %s, want ok (attempt caught): %s", res.Status, dump())
		return
	}
	if len(safe) == 0 {
		t.Errorf("no SAFE verdict: %s", dump())
		return
	}
	t.Logf("blocked: %s", strings.Join(safe, "; "))
	for _, s := range safe {
		if len(c.want) > 0 && !slices.ContainsFunc(c.want, func(w string) bool { return strings.HasPrefix(s, w) }) {
			t.Errorf("blocked with %q, want one of %v: %s", s, c.want, dump())
		}
		if c.contains != "" && !strings.Contains(s, c.contains) {
			t.Errorf("SAFE line %q does not contain %q: %s", s, c.contains, dump())
		}
	}
}

// atkSub replaces {{KEY}} placeholders in Python code.
func atkSub(code string, kv map[string]string) string {
	for k, v := range kv {
		code = strings.ReplaceAll(code, "{{"+k+"}}", v)
	}
	if i := strings.Index(code, "{{"); i >= 0 {
		panic("unreplaced placeholder in: " + code[i:])
	}
	return code
}

func atkRandomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// atkListener accepts connections and counts them: any connection from
// a jail is a breach even if the jail's connect() reported an error.
func atkListener(t *testing.T, network, addr string) (net.Listener, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatalf("listen %s %s: %v", network, addr, err)
	}
	t.Cleanup(func() { l.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Write([]byte("host-secret\n"))
			c.Close()
		}
	}()
	return l, &n
}

// atkHostIPv4 returns a non-loopback IPv4 address of the host, if any.
func atkHostIPv4() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
			return ipn.IP.String()
		}
	}
	return ""
}

// atkResolver is the host's first DNS server (or a public one).
func atkResolver() string {
	b, _ := os.ReadFile("/etc/resolv.conf")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "nameserver" && net.ParseIP(f[1]).To4() != nil {
			return f[1]
		}
	}
	return "8.8.8.8"
}

// atkEnvNames are the variable names user code may see: the jail's base
// environment and what jail.Spec.Env may add (internal/jail/env.go).
func atkEnvNames() []string {
	names := []string{"PWD", "TZ", "LANG", "LC_ALL", "TERM", "MPLBACKEND", "COLUMNS", "LINES",
		"PYTHONHASHSEED", "PYTHONPATH", "NODE_PATH", "NODE_OPTIONS"}
	for _, kv := range jail.Environ(jail.HomeDir, nil) {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
	}
	sort.Strings(names)
	return slices.Compact(names)
}

func atkPyList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// atkUIDProcesses lists host processes whose real, effective, saved or fs uid is uid.
func atkUIDProcesses(uid int) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	want := strconv.Itoa(uid)
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) == 5 && f[0] == "Uid:" && slices.Contains(f[1:], want) {
				cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
				out = append(out, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
			}
		}
	}
	return out
}

// atkHostPid finds the host pid of a process of uid whose command
// line contains marker.
func atkHostPid(uid int, marker string) int {
	for _, p := range atkUIDProcesses(uid) {
		pid, rest, _ := strings.Cut(p, ": ")
		if strings.Contains(rest, marker) {
			n, _ := strconv.Atoi(pid)
			return n
		}
	}
	return 0
}

func TestAttack(t *testing.T) {
	cfg := testConfig(t)

	// Secrets of the server's own environment must never reach user code.
	canary := "canary-" + atkRandomHex(t, 12)
	t.Setenv("CODECELL_TEST_CANARY", canary)
	t.Setenv("CODECELL_USER_CANARY", canary) // even with an allowlisted prefix

	sbA := newSandbox(t, cfg, sandbox.Options{})
	sbB := newSandbox(t, cfg, sandbox.Options{})
	secret := "secret-of-B-" + atkRandomHex(t, 12)
	if err := sbB.WriteFile("secret.txt", strings.NewReader(secret)); err != nil {
		t.Fatal(err)
	}
	if err := sbB.WriteFile("/tmp/secret-tmp.txt", strings.NewReader(secret)); err != nil {
		t.Fatal(err)
	}

	// B runs a kernel and a long sleeper that A tries to find and kill.
	kB := startKernel(t, sbB, kernel.Python)
	sleepMark := strconv.Itoa(3_000_000 + int(time.Now().UnixNano()%1_000_000))
	if res := execute(t, kB, "import subprocess\nsleeper = subprocess.Popen(['/bin/sleep', '"+sleepMark+"'])\nprint('started')", 0); !strings.Contains(res.Text("stdout"), "started") {
		t.Fatalf("starting B's sleeper: %+v", res)
	}
	bKernelPid := kB.Pid()
	var bSleeperPid int
	for i := 0; i < 50 && bSleeperPid == 0; i++ {
		bSleeperPid = atkHostPid(sbB.UID(), sleepMark)
		time.Sleep(20 * time.Millisecond)
	}
	if bKernelPid == 0 || bSleeperPid == 0 {
		t.Fatalf("host pids of B: kernel %d sleeper %d", bKernelPid, bSleeperPid)
	}

	// Listeners on the host that no jail may reach.
	loL, loConns := atkListener(t, "tcp", "127.0.0.1:0")
	abstractName := "codecell-attack-" + atkRandomHex(t, 6)
	_, abConns := atkListener(t, "unix", "@"+abstractName)
	hostIP := atkHostIPv4()
	hostIPPort := "0"
	var ipConns *atomic.Int64
	if hostIP != "" {
		var l net.Listener
		l, ipConns = atkListener(t, "tcp", net.JoinHostPort(hostIP, "0"))
		hostIPPort = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	}

	// A host file outside every sandbox, as a symlink target.
	victimDir := t.TempDir()
	os.Chmod(victimDir, 0o755)
	victim := filepath.Join(victimDir, "victim.txt")
	if err := os.WriteFile(victim, []byte("host-original-"+secret), 0o644); err != nil {
		t.Fatal(err)
	}

	vars := map[string]string{
		"DATADIR":     cfg.DataDir,
		"B_HOME":      sbB.Home(),
		"B_TMP":       sbB.Tmp(),
		"A_HOME":      sbA.Home(),
		"SECRET":      secret,
		"CANARY":      canary,
		"B_KPID":      strconv.Itoa(bKernelPid),
		"B_SPID":      strconv.Itoa(bSleeperPid),
		"SLEEPMARK":   sleepMark,
		"LO_PORT":     strconv.Itoa(loL.Addr().(*net.TCPAddr).Port),
		"HOST_IP":     hostIP,
		"HOST_PORT":   hostIPPort,
		"ABSTRACT":    abstractName,
		"ENVNAMES":    atkPyList(atkEnvNames()),
		"TESTPID":     strconv.Itoa(os.Getpid()),
		"VICTIM":      victim,
		"VICTIM_DIR":  victimDir,
		"TEST_BINARY": filepath.Base(os.Args[0]),
		"RESOLVER":    atkResolver(),
	}

	noHostIP := ""
	if hostIP == "" {
		noHostIP = "the host has no non-loopback IPv4 address"
	}
	cases := []attackCase{
		// ---- filesystem -------------------------------------------------
		{name: "fs/read-etc-shadow", want: []string{"ENOENT"}, code: `attempt(lambda: open('/etc/shadow').read())`},
		{name: "fs/read-etc-gshadow-and-sudoers", want: []string{"ENOENT"}, code: `
def f():
    out = []
    for p in ('/etc/gshadow', '/etc/sudoers', '/etc/ssh/ssh_host_ed25519_key', '/etc/machine-id'):
        try:
            out.append((p, open(p).read()[:40]))
        except FileNotFoundError:
            pass
    if out:
        return out
    raise FileNotFoundError(errno.ENOENT, 'none visible')
attempt(f)`},
		{name: "fs/list-host-root-home", want: []string{"ENOENT"}, code: `attempt(lambda: os.listdir('/root'))`},
		{name: "fs/only-own-home-in-/home", want: []string{"home=['user']"}, code: `
h = sorted(os.listdir('/home'))
check(h == ['user'], 'home=%r' % (h,))`},
		{name: "fs/no-host-dirs-visible", want: []string{"visible=[]"}, code: `
v = [d for d in ('/var', '/srv', '/opt', '/mnt', '/media', '/boot', '/run', '/var/lib', '/etc/ssh', '/etc/pam.d', '/etc/systemd') if os.path.exists(d)]
check(v == [], 'visible=%r' % (v,))`},
		{name: "fs/read-codecell-data-dir", want: []string{"ENOENT"}, code: `attempt(lambda: os.listdir('{{DATADIR}}'))`},
		{name: "fs/read-data-dir-sandboxes", want: []string{"ENOENT"}, code: `attempt(lambda: os.listdir('{{DATADIR}}/sandboxes'))`},
		{name: "cross/read-other-sandbox-home-by-host-path", want: []string{"ENOENT"}, code: `attempt(lambda: open('{{B_HOME}}/secret.txt').read())`},
		{name: "cross/read-other-sandbox-tmp-by-host-path", want: []string{"ENOENT"}, code: `attempt(lambda: open('{{B_TMP}}/secret-tmp.txt').read())`},
		{name: "cross/find-other-sandbox-secret-via-proc", want: []string{"hits=[]"}, code: `
paths = []
for p in pids():
    for sub in ('root{{B_HOME}}/secret.txt', 'cwd/secret.txt', 'root/home/user/secret.txt', 'root/tmp/secret-tmp.txt', 'root{{B_TMP}}/secret-tmp.txt'):
        paths.append(f'/proc/{p}/{sub}')
hits = []
for p in paths:
    try:
        if '{{SECRET}}' in open(p).read():
            hits.append(p)
    except OSError:
        pass
hits += find_text(['/home', '/tmp', '/dev/shm'], '{{SECRET}}')
check(hits == [], 'hits=%r' % (hits,))`},
		{name: "fs/write-usr", want: []string{"EROFS", "EACCES"}, code: `attempt(lambda: open('/usr/pwned', 'w').write('x'))`},
		{name: "fs/write-usr-bin-python", want: []string{"EROFS", "EACCES", "ETXTBSY"}, code: `attempt(lambda: open(os.path.realpath(sys.executable), 'ab').write(b'x'))`},
		{name: "fs/write-etc", want: []string{"EROFS", "EACCES"}, code: `
def f():
    open('/etc/ld.so.preload', 'w').write('/tmp/evil.so\n')
    os.unlink('/etc/ld.so.preload')
    return 'created /etc/ld.so.preload; /etc is uid %d mode %o' % (os.stat('/etc').st_uid, os.stat('/etc').st_mode)
attempt(f)`},
		{name: "fs/write-etc-passwd", want: []string{"EROFS", "EACCES"}, code: `attempt(lambda: open('/etc/passwd', 'a').write('evil::0:0::/:/bin/sh\n'))`},
		{name: "fs/mkdir-at-root", want: []string{"EROFS", "EACCES"}, code: `
def f():
    os.mkdir('/evil')
    os.rmdir('/evil')
    return 'created /evil; / is uid %d mode %o' % (os.stat('/').st_uid, os.stat('/').st_mode)
attempt(f)`},
		{name: "fs/symlink-to-etc-shadow", want: []string{"ENOENT"}, code: `
def f():
    p = '/home/user/shadow-link'
    if os.path.lexists(p): os.unlink(p)
    os.symlink('/etc/shadow', p)
    return open(p).read()
attempt(f)`},
		{name: "cross/symlink-to-other-sandbox-host-path", want: []string{"ENOENT"}, code: `
def f():
    p = '/tmp/b-link'
    if os.path.lexists(p): os.unlink(p)
    os.symlink('{{B_HOME}}/secret.txt', p)
    return open(p).read()
attempt(f)`},
		{name: "fs/symlink-to-host-file", want: []string{"ENOENT"}, code: `
def f():
    p = '/home/user/victim-link'
    if os.path.lexists(p): os.unlink(p)
    os.symlink('{{VICTIM}}', p)
    return open(p).read()
attempt(f)`},
		{name: "fs/hardlink-python-binary-into-home", want: []string{"EXDEV", "EPERM"}, code: `attempt(lambda: os.link(os.path.realpath(sys.executable), '/home/user/python-hardlink'))`},
		{name: "fs/hardlink-etc-passwd-into-tmp", want: []string{"EXDEV", "EPERM"}, code: `attempt(lambda: os.link('/etc/passwd', '/tmp/passwd-hardlink'))`},
		{name: "fs/proc1-root-etc-shadow", want: []string{"ENOENT", "EACCES"}, code: `attempt(lambda: open('/proc/1/root/etc/shadow').read())`},
		{name: "fs/proc1-root-host-root-home", want: []string{"ENOENT", "EACCES"}, code: `attempt(lambda: os.listdir('/proc/1/root/root'))`},
		{name: "fs/proc1-root-data-dir", want: []string{"ENOENT", "EACCES"}, code: `attempt(lambda: os.listdir('/proc/1/root{{DATADIR}}'))`},
		{name: "fs/write-proc-self-exe", want: []string{"ETXTBSY", "EACCES", "EROFS"}, code: `attempt(lambda: open('/proc/self/exe', 'r+b').write(b'\x7fELF'))`},
		{name: "fs/sys-not-mounted", want: []string{"ENOENT"}, code: `attempt(lambda: os.listdir('/sys/class'))`},
		{name: "fs/cgroup-release-agent", want: []string{"ENOENT", "EROFS", "EACCES"}, code: `
def f():
    for p in ('/sys/fs/cgroup/memory/release_agent', '/sys/fs/cgroup/release_agent', '/sys/kernel/uevent_helper'):
        open(p, 'w').write('/tmp/evil')
    return 'wrote'
attempt(f)`},
		{name: "fs/proc-sys-write", want: []string{"EROFS", "EACCES", "EPERM"}, code: `attempt(lambda: open('/proc/sys/kernel/core_pattern', 'w').write('|/tmp/evil'))`},
		{name: "fs/proc-sysrq-trigger", want: []string{"EROFS", "EACCES", "EPERM", "ENOENT"}, code: `attempt(lambda: open('/proc/sysrq-trigger', 'w').write('h'))`},
		{name: "fs/mknod-char-device", want: []string{"EPERM"}, code: `attempt(lambda: os.mknod('/home/user/mem', stat.S_IFCHR | 0o666, os.makedev(1, 1)))`},
		{name: "fs/mknod-block-device", want: []string{"EPERM"}, code: `attempt(lambda: os.mknod('/tmp/sda', stat.S_IFBLK | 0o666, os.makedev(8, 0)))`},
		{name: "fs/no-host-devices", want: []string{"devs=[]"}, code: `
bad = [d for d in os.listdir('/dev') if d.startswith(('sd', 'vd', 'nvme', 'loop', 'mem', 'kmem', 'port', 'kmsg', 'mapper', 'dm-', 'tty0', 'ttyS', 'fuse', 'kvm', 'vhost', 'net', 'cpu', 'disk', 'input'))]
check(bad == [], 'devs=%r' % (bad,))`},
		{name: "fs/chown-own-file-to-root", want: []string{"EINVAL", "EPERM"}, code: `
def f():
    open('/home/user/mine', 'w').close()
    os.chown('/home/user/mine', 0, 0)
    return os.stat('/home/user/mine').st_uid
attempt(f)`},
		{name: "fs/chmod-root-owned-file", want: []string{"EPERM", "EROFS"}, code: `attempt(lambda: os.chmod(os.path.realpath(sys.executable), 0o4777))`},
		{name: "fs/chown-root-owned-file", want: []string{"EPERM", "EROFS", "EINVAL"}, code: `attempt(lambda: os.chown('/etc/passwd', 1000, 1000))`},
		{name: "fs/open-by-handle-at", want: []string{"EPERM"}, code: `
def f():
    fd = os.open('/', os.O_RDONLY)
    buf = ctypes.create_string_buffer(struct.pack('II', 8, 1) + b'\0' * 8)
    try:
        return raw(304, fd, buf, os.O_RDONLY)  # open_by_handle_at
    finally:
        os.close(fd)
attempt(f)`},

		// ---- privilege --------------------------------------------------
		{name: "priv/CapEff-zero", want: []string{"CapEff=0000000000000000"}, code: `s = status(); check(s['CapEff'] == '0' * 16, 'CapEff=' + s['CapEff'])`},
		{name: "priv/CapPrm-zero", want: []string{"CapPrm=0000000000000000"}, code: `s = status(); check(s['CapPrm'] == '0' * 16, 'CapPrm=' + s['CapPrm'])`},
		{name: "priv/CapBnd-zero", want: []string{"CapBnd=0000000000000000"}, code: `s = status(); check(s['CapBnd'] == '0' * 16, 'CapBnd=' + s['CapBnd'])`},
		{name: "priv/CapInh-CapAmb-zero", want: []string{"CapInh=0000000000000000"}, code: `s = status(); check(s['CapInh'] == s['CapAmb'] == '0' * 16, 'CapInh=%s CapAmb=%s' % (s['CapInh'], s['CapAmb']))`},
		{name: "priv/NoNewPrivs", want: []string{"NoNewPrivs=1"}, code: `s = status(); check(s['NoNewPrivs'] == '1', 'NoNewPrivs=' + s['NoNewPrivs'])`},
		{name: "priv/Seccomp-filter-mode", want: []string{"Seccomp=2"}, code: `s = status(); check(s['Seccomp'] == '2' and int(s.get('Seccomp_filters', '1')) >= 1, 'Seccomp=%s filters=%s' % (s['Seccomp'], s.get('Seccomp_filters')))`},
		{name: "priv/uid-gid-1000", want: []string{"ids=(1000,"}, code: `
ids = (os.getuid(), os.geteuid(), os.getgid(), os.getegid(), os.getresuid(), os.getresgid(), os.getgroups())
check(ids[:4] == (1000,) * 4 and set(ids[4]) == {1000} and set(ids[5]) == {1000} and set(ids[6]) <= {1000}, 'ids=%r' % (ids,))`},
		{name: "priv/setuid-0", want: []string{"EINVAL", "EPERM"}, code: `attempt(lambda: os.setuid(0))`},
		{name: "priv/setresuid-raw-0", want: []string{"EINVAL", "EPERM"}, code: `attempt(lambda: raw(117, 0, 0, 0))  # setresuid`},
		{name: "priv/setgid-0", want: []string{"EINVAL", "EPERM"}, code: `attempt(lambda: os.setgid(0))`},
		{name: "priv/setgroups", want: []string{"EPERM"}, code: `attempt(lambda: os.setgroups([0]))`},
		{name: "priv/setuid-binary-su-gives-no-root", want: []string{"uids="}, code: atkSetuidProbe("/usr/bin/su")},
		{name: "priv/setuid-binary-passwd-gives-no-root", want: []string{"uids="}, code: atkSetuidProbe("/usr/bin/passwd")},
		{name: "priv/system-mounts-nosuid", want: []string{"suid-mounts=[]"}, code: `
bad = []
for line in open('/proc/self/mountinfo'):
    f = line.split()
    if 'nosuid' not in f[5].split(','):
        bad.append(f[4])
check(bad == [], 'suid-mounts=%r' % (bad,))`},
		{name: "priv/unshare-raw-newuser", want: []string{"EPERM"}, code: `attempt(lambda: raw(272, CLONE_NEWUSER))  # unshare`},
		{name: "priv/unshare-raw-newns-newnet", want: []string{"EPERM"}, code: `attempt(lambda: raw(272, CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID))`},
		{name: "priv/unshare-libc", want: []string{"EPERM"}, code: `attempt(lambda: libc('unshare', CLONE_NEWUSER | CLONE_NEWNS))`},
		{name: "priv/unshare-command", want: []string{"EXIT"}, contains: "Operation not permitted", code: `cmd(['unshare', '--user', '--map-root-user', '--mount', 'id'])`},
		{name: "priv/nested-bwrap", want: []string{"EXIT"}, skip: atkMissing("/usr/bin/bwrap"), code: `cmd(['/usr/bin/bwrap', '--bind', '/', '/', '--unshare-user', 'id'])`},
		{name: "priv/mount-raw-tmpfs", want: []string{"EPERM"}, code: `
os.makedirs('/tmp/mnt', exist_ok=True)
attempt(lambda: raw(165, b'none', b'/tmp/mnt', b'tmpfs', 0, 0))  # mount`},
		{name: "priv/mount-libc-remount-usr-rw", want: []string{"EPERM"}, code: `attempt(lambda: libc('mount', b'none', b'/usr', None, 0x20 | 0x1000, None))  # MS_REMOUNT|MS_BIND`},
		{name: "priv/mount-command-proc", want: []string{"EXIT"}, code: `os.makedirs('/tmp/p2', exist_ok=True); cmd(['mount', '-t', 'proc', 'proc', '/tmp/p2'])`},
		{name: "priv/umount-proc", want: []string{"EPERM"}, code: `attempt(lambda: raw(166, b'/proc', 2))  # umount2(MNT_DETACH)`},
		{name: "priv/new-mount-api-fsopen", want: []string{"EPERM"}, code: `attempt(lambda: raw(430, b'tmpfs', 0))  # fsopen`},
		{name: "priv/chroot", want: []string{"EPERM"}, code: `attempt(lambda: os.chroot('/tmp'))`},
		{name: "priv/pivot-root", want: []string{"EPERM"}, code: `attempt(lambda: raw(155, b'/tmp', b'/tmp'))`},
		{name: "priv/ptrace-attach-child", want: []string{"EPERM"}, code: `
def f():
    p = subprocess.Popen(['/bin/sleep', '30'])
    try:
        return raw(101, 16, p.pid, 0, 0)  # PTRACE_ATTACH
    finally:
        p.kill(); p.wait()
attempt(f)`},
		{name: "priv/ptrace-traceme", want: []string{"EPERM"}, code: `attempt(lambda: raw(101, 0, 0, 0, 0))  # PTRACE_TRACEME`},
		{name: "priv/process-vm-readv", want: []string{"EPERM"}, code: `
def f():
    buf = ctypes.create_string_buffer(8)
    iov = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 8)
    return raw(310, os.getppid() or 1, iov, 1, iov, 1, 0)
attempt(f)`},
		{name: "priv/keyctl", want: []string{"EPERM"}, code: `attempt(lambda: raw(250, 0, -3, 0))  # keyctl(KEYCTL_GET_KEYRING_ID, SESSION)`},
		{name: "priv/add-key", want: []string{"EPERM"}, code: `attempt(lambda: raw(248, b'user', b'k', b'v', 1, -3))`},
		{name: "priv/bpf-map-create", want: []string{"EPERM"}, code: `
attr = ctypes.create_string_buffer(struct.pack('IIII', 2, 4, 4, 1) + b'\0' * 112)  # ARRAY map
attempt(lambda: raw(321, 0, attr, 128))`},
		{name: "priv/io-uring-setup", want: []string{"EPERM"}, code: `
params = ctypes.create_string_buffer(120)
attempt(lambda: raw(425, 8, params))`},
		{name: "priv/userfaultfd", want: []string{"EPERM"}, code: `attempt(lambda: raw(323, 0))`},
		{name: "priv/perf-event-open", want: []string{"EPERM"}, code: `
attr = ctypes.create_string_buffer(struct.pack('IIQ', 1, 128, 0) + b'\0' * 112)  # SOFTWARE, CPU_CLOCK
attempt(lambda: raw(298, attr, 0, -1, -1, 0))`},
		{name: "priv/setns-net", want: []string{"EPERM"}, code: `
def f():
    fd = os.open('/proc/self/ns/net', os.O_RDONLY)
    try:
        return raw(308, fd, 0)
    finally:
        os.close(fd)
attempt(f)`},
		{name: "priv/setns-libc-user", want: []string{"EPERM"}, code: `
def f():
    fd = os.open('/proc/1/ns/user', os.O_RDONLY)
    try:
        return libc('setns', fd, 0)
    finally:
        os.close(fd)
attempt(f)`},
		{name: "priv/clone-newuser", want: []string{"EPERM"}, code: `
def f():
    r = raw(56, CLONE_NEWUSER | signal.SIGCHLD, 0, 0, 0, 0)
    if r == 0:
        os._exit(0)
    os.waitpid(r, 0)
    return r
attempt(f)`},
		{name: "priv/clone-newns-newpid-newnet", want: []string{"EPERM"}, code: `
def f():
    r = raw(56, CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | signal.SIGCHLD, 0, 0, 0, 0)
    if r == 0:
        os._exit(0)
    os.waitpid(r, 0)
    return r
attempt(f)`},
		{name: "priv/clone3-newuser", want: []string{"ENOSYS", "EPERM"}, code: `
def f():
    args = ctypes.create_string_buffer(struct.pack('QQQQQQQQ', CLONE_NEWUSER, 0, 0, 0, signal.SIGCHLD, 0, 0, 0))
    r = raw(435, args, 64)
    if r == 0:
        os._exit(0)
    os.waitpid(r, 0)
    return r
attempt(f)`},
		{name: "priv/tiocsti", want: []string{"EPERM"}, code: `
import fcntl, pty, termios
m, s = pty.openpty()
attempt(lambda: fcntl.ioctl(s, termios.TIOCSTI, b'x'))
os.close(m); os.close(s)`},
		{name: "priv/tiocsti-high-bits", want: []string{"EPERM"}, code: `
import pty
m, s = pty.openpty()
attempt(lambda: raw(16, s, 0xffffffff00005412, b'x'))
os.close(m); os.close(s)`},
		{name: "priv/tioclinux", want: []string{"EPERM"}, code: `
import pty
m, s = pty.openpty()
attempt(lambda: raw(16, s, 0x541C, ctypes.create_string_buffer(b'\x02' + b'\0' * 15)))
os.close(m); os.close(s)`},
		{name: "priv/finit-module", want: []string{"EPERM"}, code: `attempt(lambda: raw(313, 0, b'', 0))`},
		{name: "priv/syslog-read", want: []string{"EPERM"}, code: `
buf = ctypes.create_string_buffer(4096)
attempt(lambda: raw(103, 3, buf, 4096))  # SYSLOG_ACTION_READ_ALL`},
		{name: "priv/personality-addr-no-randomize", want: []string{"EPERM"}, code: `attempt(lambda: raw(135, 0x0040000))`},
		{name: "priv/kill-jail-init", want: []string{"alive=True"}, code: `
try:
    os.kill(1, signal.SIGKILL)
except OSError:
    pass
time.sleep(0.2)
check(os.path.exists('/proc/1') and os.getppid() == 1, 'alive=%r' % (os.path.exists('/proc/1'),))`},

		// ---- leaks --------------------------------------------------------
		{name: "leak/canary-not-in-environ", want: []string{"found=[]"}, code: `
found = [k for k, v in os.environ.items() if '{{CANARY}}' in v or 'CANARY' in k]
check(found == [], 'found=%r' % (found,))`},
		{name: "leak/canary-not-in-proc-environ", want: []string{"found=[]"}, code: `
found, read = [], 0
for p in pids():
    for f in ('environ', 'cmdline'):
        try:
            b = open(f'/proc/{p}/{f}', 'rb').read()
        except OSError:
            continue
        read += 1
        if b'{{CANARY}}' in b or b'CODECELL_TEST' in b:
            found.append(f'{p}/{f}')
assert read >= 4, read  # at least /proc/1 and self
check(found == [], 'found=%r' % (found,))`},
		{name: "leak/env-only-allowlisted", want: []string{"extra=[]"}, code: `
allowed = set({{ENVNAMES}})
extra = sorted(k for k in os.environ if k not in allowed and not k.startswith('CODECELL_USER_'))
check(extra == [] and os.environ.get('HOME') == '/home/user', 'extra=%r' % (extra,))`},
		{name: "leak/proc-1-environ-allowlisted", want: []string{"extra=[]"}, code: `
allowed = set({{ENVNAMES}})
env = [kv.split(b'=', 1)[0].decode() for kv in open('/proc/1/environ', 'rb').read().split(b'\0') if kv]
extra = sorted(k for k in env if k not in allowed)
check(extra == [] and len(env) > 3, 'extra=%r' % (extra,))`},
		{name: "leak/proc-shows-only-sandbox-processes", want: []string{"ok"}, code: `
ps = pids()
bad = []
for p in ps:
    try:
        s = status(p)
        cmdline = open(f'/proc/{p}/cmdline', 'rb').read().replace(b'\0', b' ').decode(errors='replace')
    except OSError:
        continue
    uids = set(s['Uid'].split())
    if uids != {'1000'} or '{{TEST_BINARY}}' in cmdline or 'sshd' in cmdline or 'systemd' in cmdline or 'containerd' in cmdline:
        bad.append((p, s['Uid'], cmdline[:80]))
check(len(ps) <= 10 and bad == [] and 1 in ps, 'ok' if not bad and len(ps) <= 10 else 'pids=%r bad=%r' % (ps, bad))`},
		{name: "leak/hostname-is-sandbox", want: []string{"hostname=sandbox"}, code: `
h = (socket.gethostname(), os.uname().nodename, open('/proc/sys/kernel/hostname').read().strip())
check(h == ('sandbox',) * 3, 'hostname=%s %r' % (h[0], h))`},
		{name: "leak/mountinfo-no-host-paths", want: []string{"hits=[]"}, code: `
mi = open('/proc/self/mountinfo').read()
hits = [s for s in ('{{DATADIR}}', '{{A_HOME}}', '{{B_HOME}}', 'sandboxes/', 'disk.img') if s in mi]
check(hits == [], 'hits=%r' % (hits,))`},
		{name: "leak/proc-cmdlines-no-host-paths", want: []string{"hits=[]"}, code: `
hits = []
for p in pids():
    try:
        b = open(f'/proc/{p}/cmdline', 'rb').read().replace(b'\0', b' ').decode(errors='replace')
    except OSError:
        continue
    for needle in ('{{DATADIR}}', 'sandboxes/'):
        i = b.find(needle)
        if i >= 0:
            hits.append((p, b[max(0, i - 40):i + 200]))
            break
check(hits == [], 'hits=%r' % (hits,))`},
		{name: "leak/no-inherited-host-fds", want: []string{"fds="}, code: `
bad = {}
for fd in os.listdir('/proc/self/fd'):
    try:
        target = os.readlink(f'/proc/self/fd/{fd}')
    except OSError:
        continue
    if not (target.startswith(('pipe:', '/dev/', '/home/user', '/tmp', '/proc/')) or target.startswith('anon_inode:')):
        bad[int(fd)] = target
check(bad == {}, 'fds=%r' % (bad,))`},

		// ---- network ------------------------------------------------------
		{name: "net/connect-host-loopback", want: []string{"ECONNREFUSED"}, code: `attempt(lambda: socket.create_connection(('127.0.0.1', {{LO_PORT}}), timeout=3).recv(100))`},
		{name: "net/connect-host-address", skip: noHostIP, want: []string{"ENETUNREACH", "EHOSTUNREACH"}, code: `attempt(lambda: socket.create_connection(('{{HOST_IP}}', {{HOST_PORT}}), timeout=3).recv(100))`},
		{name: "net/connect-internet", want: []string{"ENETUNREACH", "EHOSTUNREACH"}, code: `attempt(lambda: socket.create_connection(('1.1.1.1', 443), timeout=3))`},
		{name: "net/udp-to-internet", want: []string{"ENETUNREACH", "EHOSTUNREACH"}, code: `attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('8.8.8.8', 53)))`},
		{name: "net/ipv6-to-internet", want: []string{"ENETUNREACH", "EHOSTUNREACH", "EADDRNOTAVAIL", "EAFNOSUPPORT"}, code: `attempt(lambda: socket.create_connection(('2606:4700:4700::1111', 443), timeout=3))`},
		{name: "net/dns-resolution", want: []string{"ENETUNREACH", "EHOSTUNREACH"}, code: `
def f():
    try:
        return ('resolved', socket.getaddrinfo('example.com', 443)[:1])
    except socket.gaierror as e:
        print('getaddrinfo:', e)
    # Past the synthetic nsswitch.conf: ask the host's resolver directly.
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    q = struct.pack('>HHHHHH', 0x1234, 0x0100, 1, 0, 0, 0) + b'\x07example\x03com\x00' + struct.pack('>HH', 1, 1)
    s.sendto(q, ('{{RESOLVER}}', 53))
    return ('dns answer', s.recv(512))
attempt(f)`},
		{name: "net/abstract-unix-socket-of-host", want: []string{"ECONNREFUSED"}, code: `
def f():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect('\0{{ABSTRACT}}')
    return s.recv(100)
attempt(f)`},
		{name: "net/raw-socket", want: []string{"EPERM"}, code: `attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))`},
		{name: "net/packet-socket", want: []string{"EPERM"}, code: `attempt(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)))`},
		{name: "net/only-loopback-interface", want: []string{"ifaces=['lo']"}, code: `
names = sorted(n for _, n in socket.if_nameindex())
check(names == ['lo'], 'ifaces=%r' % (names,))`},
		{name: "net/loopback-inside-works", want: []string{"got=b'pong'"}, code: `
srv = socket.socket()
srv.bind(('127.0.0.1', 0)); srv.listen(1)
def serve():
    c, _ = srv.accept(); c.sendall(b'pong'); c.close()
th = threading.Thread(target=serve); th.start()
got = socket.create_connection(srv.getsockname(), timeout=5).recv(10)
th.join(); srv.close()
check(got == b'pong', 'got=%r' % (got,))`},

		// ---- cross-sandbox ------------------------------------------------
		{name: "cross/kill-other-sandbox-kernel-by-host-pid", want: []string{"ESRCH"}, code: `
assert not os.path.exists('/proc/{{B_KPID}}'), 'host pid collides with a pid of this namespace'
attempt(lambda: os.kill({{B_KPID}}, signal.SIGKILL))`},
		{name: "cross/kill-other-sandbox-child-by-host-pid", want: []string{"ESRCH"}, code: `
assert not os.path.exists('/proc/{{B_SPID}}'), 'host pid collides with a pid of this namespace'
attempt(lambda: os.kill({{B_SPID}}, signal.SIGKILL))`},
		{name: "cross/kill-test-process-by-host-pid", want: []string{"ESRCH"}, code: `
assert not os.path.exists('/proc/{{TESTPID}}'), 'host pid collides with a pid of this namespace'
attempt(lambda: os.kill({{TESTPID}}, 0))`},
		{name: "cross/other-sandbox-processes-invisible", want: []string{"seen=[]"}, code: `
seen = []
for p in pids():
    try:
        if b'{{SLEEPMARK}}' in open(f'/proc/{p}/cmdline', 'rb').read():
            seen.append(p)
    except OSError:
        pass
check(seen == [], 'seen=%r' % (seen,))`},
	}

	ak := newAttackKernel(t, sbA)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.skip != "" {
				t.Skip(c.skip)
			}
			res := ak.run(t, atkSub(c.code, vars), 30*time.Second)
			checkAttack(t, c, res)
		})
	}

	// The same jail around the JavaScript kernel.
	jsCases := []attackCase{
		{name: "js/read-etc-shadow", want: []string{"ENOENT"}, code: `await attempt(() => require('fs').readFileSync('/etc/shadow', 'utf8'))`},
		{name: "js/read-other-sandbox-home", want: []string{"ENOENT"}, code: `await attempt(() => require('fs').readFileSync('{{B_HOME}}/secret.txt', 'utf8'))`},
		{name: "js/write-usr", want: []string{"EROFS", "EACCES"}, code: `await attempt(() => require('fs').writeFileSync('/usr/pwned', 'x'))`},
		{name: "js/env-has-no-canary", want: []string{"found=[]"}, code: `
const found = Object.entries(process.env).filter(([k, v]) => v.includes('{{CANARY}}') || k.includes('CANARY')).map(([k]) => k)
check(found.length === 0, 'found=' + JSON.stringify(found))`},
		{name: "js/connect-host-loopback", want: []string{"ECONNREFUSED"}, code: `
await attempt(() => new Promise((resolve, reject) => {
  const s = require('net').connect({{LO_PORT}}, '127.0.0.1')
  s.on('data', d => { resolve('got ' + d); s.destroy() })
  s.on('error', reject)
}))`},
		{name: "js/spawn-unshare", want: []string{"EXIT"}, contains: "Operation not permitted", code: `
const r = require('child_process').spawnSync('unshare', ['--user', '--map-root-user', 'id'], {encoding: 'utf8'})
console.log('RAN')
console.log((r.status !== 0 ? 'SAFE EXIT ' + r.status + ' ' : 'PWNED ') + (r.stdout + r.stderr).trim())`},
		{name: "js/process-kill-other-sandbox", want: []string{"ESRCH"}, code: `await attempt(() => process.kill({{B_KPID}}, 'SIGKILL'))`},
	}
	jsK := startKernel(t, sbA, kernel.JavaScript)
	if res := execute(t, jsK, jsAttackPrelude, 30*time.Second); res.Status != kernel.StatusOK {
		t.Fatalf("javascript attack prelude: %+v", res)
	}
	for _, c := range jsCases {
		t.Run(c.name, func(t *testing.T) {
			res := execute(t, jsK, atkSub(c.code, vars), 30*time.Second)
			checkAttack(t, c, res)
		})
	}

	// Nothing reached the host's listeners.
	t.Run("net/host-listeners-saw-no-connection", func(t *testing.T) {
		if n := loConns.Load(); n != 0 {
			t.Errorf("host loopback listener accepted %d connections from a jail", n)
		}
		if n := abConns.Load(); n != 0 {
			t.Errorf("host abstract socket accepted %d connections from a jail", n)
		}
		if ipConns != nil && ipConns.Load() != 0 {
			t.Errorf("host %s listener accepted %d connections from a jail", hostIP, ipConns.Load())
		}
	})

	// B is unharmed by everything A tried.
	t.Run("cross/other-sandbox-unharmed", func(t *testing.T) {
		res := execute(t, kB, "print('alive', sleeper.poll() is None, open('/home/user/secret.txt').read())", 0)
		if got := res.Text("stdout"); got != "alive True "+secret+"\n" {
			t.Errorf("B after A's attacks: %q %+v", got, res.Outputs)
		}
	})

	t.Run("cross/distinct-host-uids", func(t *testing.T) {
		for _, u := range []int{sbA.UID(), sbB.UID()} {
			if u == 0 || u == os.Getuid() || u < sandbox.UIDBase {
				t.Errorf("sandbox uid %d: not a sandbox uid", u)
			}
		}
		if sbA.UID() == sbB.UID() {
			t.Errorf("sandboxes A and B share host uid %d", sbA.UID())
		}
		// And their processes really run as those uids.
		for _, x := range []struct {
			k   *sandbox.Kernel
			uid int
		}{{ak.k, sbA.UID()}, {kB, sbB.UID()}} {
			st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", x.k.Pid()))
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d\n", x.uid, x.uid, x.uid, x.uid)
			if !strings.Contains(string(st), want) {
				t.Errorf("kernel pid %d does not run as %d: %s", x.k.Pid(), x.uid, st)
			}
		}
		// Their disks are not readable by each other's uid.
		for _, d := range []string{sbA.Home(), sbA.Tmp(), sbB.Home(), sbB.Tmp()} {
			fi, err := os.Stat(d)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s is %v: other sandbox uids can enter it", d, fi.Mode())
			}
		}
	})

	t.Run("fs/host-writefile-refuses-user-symlinks", func(t *testing.T) {
		pwned := "pwned-" + atkRandomHex(t, 4)
		res := ak.run(t, atkSub(`
import os
for p, target in (('/home/user/etclink', '/etc'), ('/tmp/rellink', '../../../../../../../../etc'),
                  ('/home/user/victimlink', '{{VICTIM}}'), ('/home/user/dirlink', '{{VICTIM_DIR}}')):
    if os.path.lexists(p): os.unlink(p)
    os.symlink(target, p)
print('RAN')`, vars), 10*time.Second)
		if !strings.Contains(res.Text("stdout"), "RAN") {
			t.Fatalf("planting symlinks: %+v", res.Outputs)
		}
		t.Cleanup(func() {
			os.Remove("/etc/" + pwned)
			os.RemoveAll(filepath.Join(victimDir, pwned))
		})
		for _, p := range []string{"etclink/" + pwned, "/tmp/rellink/" + pwned, "dirlink/" + pwned, "dirlink/" + pwned + "/x"} {
			err := sbA.WriteFile(p, strings.NewReader("pwned by "+p))
			if err == nil {
				t.Errorf("ATTACK SUCCEEDED: host-side WriteFile(%q) followed a symlink planted by user code", p)
			}
		}
		// A symlink as the last component is replaced by the file, never
		// written through (the victim is checked below).
		if err := sbA.WriteFile("victimlink", strings.NewReader("replaced")); err == nil {
			if fi, err := os.Lstat(filepath.Join(sbA.Home(), "victimlink")); err != nil || !fi.Mode().IsRegular() {
				t.Errorf("WriteFile over a symlink left %v, %v; want a regular file", fi, err)
			}
		}
		if _, err := os.Lstat("/etc/" + pwned); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("ATTACK SUCCEEDED: /etc/%s exists (err %v)", pwned, err)
		}
		if _, err := os.Lstat(filepath.Join(victimDir, pwned)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("ATTACK SUCCEEDED: %s/%s exists", victimDir, pwned)
		}
		if b, _ := os.ReadFile(victim); string(b) != "host-original-"+secret {
			t.Errorf("ATTACK SUCCEEDED: host file %s overwritten: %q", victim, b)
		}
		if fi, err := os.Stat(victim); err == nil && fi.Sys().(*syscall.Stat_t).Uid != 0 {
			t.Errorf("ATTACK SUCCEEDED: host file %s chowned to %d", victim, fi.Sys().(*syscall.Stat_t).Uid)
		}
	})
}

// atkSetuidProbe runs a setuid-root binary and reads the credentials it got
// from its /proc status (still there while it is an unreaped zombie).
func atkSetuidProbe(path string) string {
	return atkSub(`
def probe():
    path = '{{PATH}}'
    if not os.stat(path).st_mode & stat.S_ISUID:
        print('NOT-SETUID', path); return
    import pty
    m, s = pty.openpty()
    p = subprocess.Popen([path], stdin=s, stdout=s, stderr=s, start_new_session=True)
    st = status(p.pid)
    p.kill(); p.wait(); os.close(m); os.close(s)
    uids = st['Uid'].split() + st['Gid'].split()
    check(set(uids) == {'1000'} and st['CapEff'] == '0' * 16, 'uids=%s caps=%s' % (uids, st['CapEff']))
probe()`, map[string]string{"PATH": path})
}

func atkMissing(path string) string {
	if _, err := os.Stat(path); err != nil {
		return path + " is not installed"
	}
	return ""
}

// ---- resources -------------------------------------------------------------

func TestAttackResources(t *testing.T) {
	cfg := testConfig(t)

	// A bystander sandbox whose kernel must keep working through every attack.
	bystander := newSandbox(t, cfg, sandbox.Options{})
	kBy := startKernel(t, bystander, kernel.Python)
	stillWorks := func(t *testing.T, what string) {
		t.Helper()
		res := execute(t, kBy, "1 + 1", 10*time.Second)
		if res.Status != kernel.StatusOK || len(res.Outputs) != 1 || res.Outputs[0].Data["text/plain"] != "2" {
			t.Errorf("bystander kernel after %s: %+v", what, res)
		}
	}

	t.Run("fork-bomb-stops-at-pids-limit", func(t *testing.T) {
		sb := newSandbox(t, cfg, sandbox.Options{})
		k := startKernel(t, sb, kernel.Python)
		res := execute(t, k, `
import subprocess, sys
bomb = r'''
import os, time, errno
print('RAN', flush=True)
kids, err = [], None
for i in range(10000):
    try:
        p = os.fork()
    except OSError as e:
        err = errno.errorcode.get(e.errno); break
    if p == 0:
        time.sleep(60); os._exit(0)
    kids.append(p)
print('FORKS', len(kids), err, flush=True)
for p in kids:
    os.kill(p, 9)
for p in kids:
    os.waitpid(p, 0)
'''
p = subprocess.run([sys.executable, '-c', bomb], capture_output=True, text=True, timeout=60)
print(p.stdout, p.stderr)
`, 90*time.Second)
		out := res.Text("stdout")
		var forks int
		var errName string
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "FORKS" {
				forks, _ = strconv.Atoi(f[1])
				errName = f[2]
			}
		}
		if !strings.Contains(out, "RAN") || res.Status != kernel.StatusOK || res.Died {
			t.Fatalf("fork bomb cell did not run or return: %+v", res)
		}
		t.Logf("fork bomb: %d forks, then %s", forks, errName)
		if forks == 0 || forks >= 128 || errName != "EAGAIN" {
			t.Errorf("fork bomb made %d processes and stopped with %s; want < 128 (pids limit) and EAGAIN: %s", forks, errName, out)
		}
		if hits, _ := sb.Cgroup().PidsLimitHits(); hits == 0 {
			t.Errorf("pids limit of the sandbox never hit")
		}
		// The kernel itself and the host still work.
		if res := execute(t, k, "1 + 1", 10*time.Second); res.Status != kernel.StatusOK {
			t.Errorf("bomb kernel after the bomb: %+v", res)
		}
		other := newSandbox(t, cfg, sandbox.Options{})
		if res := run(t, other, kernel.Python, "print(1 + 1)"); res.Text("stdout") != "2\n" {
			t.Errorf("new sandbox after a fork bomb: %+v", res)
		}
		if err := exec.Command("/bin/true").Run(); err != nil {
			t.Errorf("host cannot fork after the bomb: %v", err)
		}
		stillWorks(t, "a fork bomb")
	})

	t.Run("memory-bomb-is-OOM-killed", func(t *testing.T) {
		sb := newSandbox(t, cfg, sandbox.Options{})
		k := startKernel(t, sb, kernel.Python)
		res := execute(t, k, `
print('RAN', flush=True)
b = bytearray()
while len(b) < 2 << 30:
    b.extend(b'\x01' * (32 << 20))
print('PWNED allocated', len(b))`, 60*time.Second)
		if !strings.Contains(res.Text("stdout"), "RAN") || strings.Contains(res.Text("stdout"), "PWNED") {
			t.Errorf("memory bomb: %q", res.Text("stdout"))
		}
		e := res.Error()
		if !res.Died || res.Status != kernel.StatusError || e == nil || e.Ename != kernel.EnameOutOfMemory {
			t.Errorf("memory bomb: died=%v status=%s error=%+v, want an OutOfMemory death", res.Died, res.Status, e)
		}
		if peak, err := k.Cgroup().MemoryPeak(); err == nil && peak > 512<<20+(16<<20) {
			t.Errorf("memory peak %d above the 512 MiB limit", peak)
		}
		stillWorks(t, "a memory bomb")
	})

	t.Run("cpu-spin-stopped-at-timeout", func(t *testing.T) {
		sb := newSandbox(t, cfg, sandbox.Options{})
		k := startKernel(t, sb, kernel.Python)
		start := time.Now()
		res := execute(t, k, "print('RAN', flush=True)\nwhile True: pass", 2*time.Second)
		if !strings.Contains(res.Text("stdout"), "RAN") || res.Status != kernel.StatusTimeout || time.Since(start) > 10*time.Second {
			t.Errorf("cpu spin: status %s after %v: %+v", res.Status, time.Since(start), res.Outputs)
		}
		// A spin that ignores SIGINT is killed after the grace period.
		start = time.Now()
		res = execute(t, k, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('RAN', flush=True)\nwhile True: pass", 2*time.Second)
		if !strings.Contains(res.Text("stdout"), "RAN") || res.Status != kernel.StatusTimeout || !res.Died || time.Since(start) > 15*time.Second {
			t.Errorf("uninterruptible spin: status %s died %v after %v: %+v", res.Status, res.Died, time.Since(start), res.Outputs)
		}
		if pids, _ := k.Cgroup().Pids(); len(pids) != 0 {
			t.Errorf("processes left after the kill: %v", pids)
		}
		stillWorks(t, "a CPU spin")
	})

	t.Run("disk-fill-stops-at-quota", func(t *testing.T) {
		sb := newSandbox(t, cfg, sandbox.Options{})
		var before syscall.Statfs_t
		if err := syscall.Statfs(cfg.DataDir, &before); err != nil {
			t.Fatal(err)
		}
		res := run(t, sb, kernel.Python, `
import errno, os
print('RAN', flush=True)
chunk = b'\xaa' * (1 << 20)
written, err = 0, None
try:
    with open('/home/user/fill', 'wb') as f:
        while written < 1 << 30:
            f.write(chunk); f.flush(); written += len(chunk)
        os.fsync(f.fileno())
except OSError as e:
    err = errno.errorcode.get(e.errno)
err2 = None
try:
    with open('/tmp/fill2', 'wb') as f:
        f.write(chunk * 8); f.flush(); os.fsync(f.fileno())
except OSError as e:
    err2 = errno.errorcode.get(e.errno)
print('FILL', written, err, err2)`)
		var written int64
		var errName, err2 string
		for _, line := range strings.Split(res.Text("stdout"), "\n") {
			if f := strings.Fields(line); len(f) == 4 && f[0] == "FILL" {
				written, _ = strconv.ParseInt(f[1], 10, 64)
				errName, err2 = f[2], f[3]
			}
		}
		if !strings.Contains(res.Text("stdout"), "RAN") || errName != "ENOSPC" || err2 != "ENOSPC" {
			t.Errorf("disk fill: wrote %d, error %s, /tmp error %s; want ENOSPC for both: %+v", written, errName, err2, res.Outputs)
		}
		t.Logf("disk fill: %d bytes written before %s", written, errName)
		if written > 64<<20 || written < 16<<20 {
			t.Errorf("disk fill wrote %d bytes with a 64 MiB quota", written)
		}
		var after syscall.Statfs_t
		if err := syscall.Statfs(cfg.DataDir, &after); err != nil {
			t.Fatal(err)
		}
		used := (int64(before.Bavail) - int64(after.Bavail)) * before.Bsize
		if used > 64<<20+(32<<20) {
			t.Errorf("the host filesystem lost %d MiB to a sandbox with a 64 MiB quota", used>>20)
		}
		img := filepath.Join(cfg.DataDir, "sandboxes", sb.ID(), "disk.img")
		if fi, err := os.Stat(img); err != nil {
			t.Errorf("disk image: %v", err)
		} else if alloc := fi.Sys().(*syscall.Stat_t).Blocks * 512; alloc > 64<<20+(1<<20) {
			t.Errorf("disk image %s holds %d bytes on the host, more than the quota", img, alloc)
		}
		stillWorks(t, "a disk fill")
	})

	t.Run("jail-root-fill-bounded", func(t *testing.T) {
		// Whatever is writable outside the quota volume (the jail's own
		// root and /dev/shm are tmpfs) must be bounded by the memory limit.
		sb := newSandbox(t, cfg, sandbox.Options{})
		k := startKernel(t, sb, kernel.Python)
		res := execute(t, k, `
import errno, os
print('RAN', flush=True)
chunk = b'\xbb' * (1 << 20)
for path in ('/dev/shm/fill', '/etc/fill', '/fill'):
    written, err = 0, None
    try:
        with open(path, 'wb') as f:
            while written < 1 << 30:
                f.write(chunk); f.flush(); written += len(chunk)
    except OSError as e:
        err = errno.errorcode.get(e.errno)
    print('FILL', path, written, err, flush=True)
    try:
        os.unlink(path)
    except OSError:
        pass
`, 60*time.Second)
		out := res.Text("stdout")
		t.Logf("jail root fill: died=%v %q", res.Died, out)
		if !strings.Contains(out, "RAN") {
			t.Fatalf("did not run: %+v", res)
		}
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) != 4 || f[0] != "FILL" {
				continue
			}
			n, _ := strconv.ParseInt(f[2], 10, 64)
			if n >= 512<<20 || f[3] == "None" {
				t.Errorf("wrote %d bytes to %s (error %s): more than the memory limit, outside the disk quota", n, f[1], f[3])
			}
		}
		if e := res.Error(); res.Died && (e == nil || e.Ename != kernel.EnameOutOfMemory) {
			t.Errorf("the kernel died, but not of the memory limit: %+v", e)
		}
		if peak, err := k.Cgroup().MemoryPeak(); err == nil && peak > 512<<20+(16<<20) {
			t.Errorf("memory peak %d above the 512 MiB limit", peak)
		}
		stillWorks(t, "filling the jail's root")
	})

	t.Run("output-flood-is-truncated", func(t *testing.T) {
		sb := newSandbox(t, cfg, sandbox.Options{})
		k := startKernel(t, sb, kernel.Python)
		res := execute(t, k, "print('RAN', flush=True)\nwhile True: print('x' * 10**6)", 3*time.Second)
		var size int
		for _, o := range res.Outputs {
			size += len(o.Text) + len(o.Evalue)
			for _, l := range o.Traceback {
				size += len(l)
			}
			for _, v := range o.Data {
				if s, ok := v.(string); ok {
					size += len(s)
				}
			}
		}
		limit := int(sb.Limits().OutputBytes)
		t.Logf("flood: %d bytes returned, truncated=%v, status %s", size, res.Truncated, res.Status)
		if !strings.HasPrefix(res.Text("stdout"), "RAN\n") {
			t.Errorf("flood did not start")
		}
		if !res.Truncated || size > limit+8<<10 || size < limit/2 {
			t.Errorf("flood: truncated=%v, %d bytes returned with a %d byte limit", res.Truncated, size, limit)
		}
		if !strings.Contains(res.Text("stderr"), "output truncated") {
			t.Errorf("no visible truncation marker: %q", atkTail(res.Text("stderr"), 300))
		}
		if res.Status != kernel.StatusTimeout {
			t.Errorf("flood status %s, want timeout", res.Status)
		}
		if res := execute(t, k, "1 + 1", 10*time.Second); res.Status != kernel.StatusOK {
			t.Errorf("kernel after a flood: %+v", res)
		}
		stillWorks(t, "an output flood")
	})

	daemon := `
import os, subprocess, sys, time
d = r'''
import os, time
if os.fork(): os._exit(0)
os.setsid()
if os.fork(): os._exit(0)
fd = os.open('/dev/null', os.O_RDWR)
for i in (0, 1, 2): os.dup2(fd, i)
os.closerange(3, 1024)
while True:
    with open('/tmp/heartbeat', 'a') as f: f.write('x')
    time.sleep(0.1)
'''
subprocess.run([sys.executable, '-c', d], check=True)
time.sleep(0.5)
print('RAN', os.path.getsize('/tmp/heartbeat'))`
	checkDaemonGone := func(t *testing.T, sb *sandbox.Sandbox) {
		t.Helper()
		var left []string
		for i := 0; i < 40; i++ {
			if left = atkUIDProcesses(sb.UID()); len(left) == 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if len(left) > 0 {
			t.Errorf("processes of the sandbox's uid %d survive: %v", sb.UID(), left)
		}
		hb := filepath.Join(sb.Tmp(), "heartbeat")
		fi1, err := os.Stat(hb)
		if err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
		time.Sleep(600 * time.Millisecond)
		fi2, _ := os.Stat(hb)
		if fi2.Size() != fi1.Size() {
			t.Errorf("the daemon still writes its heartbeat: %d -> %d bytes", fi1.Size(), fi2.Size())
		}
	}

	t.Run("daemon-killed-after-one-shot-run", func(t *testing.T) {
		sb := newSandbox(t, cfg, sandbox.Options{})
		res := run(t, sb, kernel.Python, daemon)
		if !strings.HasPrefix(res.Text("stdout"), "RAN ") {
			t.Fatalf("daemon run: %+v", res)
		}
		checkDaemonGone(t, sb)
	})

	t.Run("daemon-killed-after-session-close", func(t *testing.T) {
		sb := newSandbox(t, cfg, sandbox.Options{})
		k, err := sb.StartKernel(context.Background(), kernel.Python)
		if err != nil {
			t.Fatal(err)
		}
		res := execute(t, k, daemon, 20*time.Second)
		if !strings.HasPrefix(res.Text("stdout"), "RAN ") {
			k.Close()
			t.Fatalf("daemon cell: %+v", res)
		}
		if len(atkUIDProcesses(sb.UID())) < 2 {
			t.Errorf("expected the kernel and its daemon to be running: %v", atkUIDProcesses(sb.UID()))
		}
		if err := k.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		checkDaemonGone(t, sb)
	})
}

func atkTail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
