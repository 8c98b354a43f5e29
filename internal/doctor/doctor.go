// Package doctor checks, layer by layer, whether this host can run code the
// way codecell promises: the prerequisites (root, bubblewrap, user
// namespaces, seccomp, cgroups, disk quotas, the interpreters), then a live
// probe that starts a real jail and reads its posture from inside and from
// outside. Each check says what it found and, when missing, how to fix it.
package doctor

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/codecell/codecell/internal/cgroup"
	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/quota"
	"github.com/codecell/codecell/internal/sandbox"
	"github.com/codecell/codecell/internal/seccomp"
)

// Check is the state of one layer.
type Check struct {
	Layer  string `json:"layer"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Run checks every layer: the prerequisites, then a live jail. cfg is the
// configuration code would run with; its Cgroups may be nil.
func Run(ctx context.Context, cfg sandbox.Config) []Check {
	checks := Prerequisites(cfg, ProbeRuntimes(cfg))
	for _, c := range checks {
		if !c.OK {
			return append(checks, Check{Layer: "live jail", Detail: "not attempted: fix the missing layers above first"})
		}
	}
	if cfg.Cgroups == nil {
		cfg.Cgroups, _ = cgroup.Detect()
	}
	return append(checks, probe(ctx, cfg)...)
}

// Runtime is one interpreter, as probed.
type Runtime struct {
	Path     string
	Version  string
	Packages map[string]string // Python's data packages by module name
	Err      error             // why it cannot run kernels
}

// Runtimes are the interpreters kernels use.
type Runtimes struct{ Python, Node Runtime }

// ProbeRuntimes runs each interpreter once to learn its version (about a
// second: Python imports its data packages).
func ProbeRuntimes(cfg sandbox.Config) Runtimes {
	py := Runtime{Path: cmp.Or(cfg.Python, "/usr/bin/python3")}
	py.Version, py.Packages, py.Err = Python(py.Path)
	node := Runtime{Path: cmp.Or(cfg.Node, "/usr/bin/node")}
	node.Version, node.Err = Node(node.Path)
	return Runtimes{Python: py, Node: node}
}

// Prerequisites checks what the host offers, without starting a jail; rt
// are the interpreters as probed.
func Prerequisites(cfg sandbox.Config, rt Runtimes) []Check {
	return []Check{
		checkRoot(),
		checkBwrap(),
		checkUserns(),
		checkSeccomp(),
		checkCgroups(),
		checkQuota(),
		checkPython(rt.Python),
		checkNode(rt.Node),
	}
}

func checkRoot() Check {
	c := Check{Layer: "privileges", OK: os.Geteuid() == 0, Detail: fmt.Sprintf("running as uid %d", os.Geteuid())}
	if !c.OK {
		c.Fix = "run codecell as root: it gives each sandbox its own host uid, cgroup and loop-mounted disk"
	}
	return c
}

func checkBwrap() Check {
	c := Check{Layer: "bubblewrap"}
	path, err := exec.LookPath("bwrap")
	if err != nil {
		c.Detail, c.Fix = "bwrap not found", "apt-get install bubblewrap"
		return c
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		c.Detail, c.Fix = fmt.Sprintf("%s --version failed: %v", path, err), "reinstall bubblewrap"
		return c
	}
	c.OK, c.Detail = true, fmt.Sprintf("%s (%s)", strings.TrimSpace(string(out)), path)
	return c
}

func checkUserns() Check {
	c := Check{Layer: "user namespaces"}
	n, err := readInt("/proc/sys/user/max_user_namespaces")
	if err != nil || n == 0 {
		c.Detail, c.Fix = "user namespaces are disabled", "sysctl -w user.max_user_namespaces=15000"
		return c
	}
	if v, err := readInt("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && v != 0 {
		c.Detail = "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+)"
		c.Fix = "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or install an AppArmor profile allowing userns for /usr/bin/bwrap"
		return c
	}
	if v, err := readInt("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && v == 0 {
		c.Detail, c.Fix = "unprivileged user namespaces are disabled", "sysctl -w kernel.unprivileged_userns_clone=1"
		return c
	}
	c.OK, c.Detail = true, fmt.Sprintf("available (max %d)", n)
	return c
}

func checkSeccomp() Check {
	c := Check{Layer: "seccomp"}
	status, _ := os.ReadFile("/proc/self/status")
	if !strings.Contains(string(status), "Seccomp:") {
		c.Detail, c.Fix = "the kernel has no seccomp support", "use a kernel built with CONFIG_SECCOMP_FILTER"
		return c
	}
	prog, err := seccomp.Program()
	if err != nil {
		c.Detail, c.Fix = err.Error(), "run on amd64 or arm64"
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("filter of %d instructions; denies %d syscalls plus namespace clone flags, TIOCSTI/TIOCLINUX, clone3 (ENOSYS) and foreign ABIs", len(prog)/8, len(seccomp.Denied()))
	return c
}

func checkCgroups() Check {
	c := Check{Layer: "cgroups"}
	h, err := cgroup.Detect()
	if err != nil {
		c.Detail, c.Fix = err.Error(), "mount cgroup v2 at /sys/fs/cgroup (or v1 memory, pids and cpu hierarchies)"
		return c
	}
	c.Detail = h.String()
	ctl := h.Controllers()
	c.OK = ctl[cgroup.Memory] && ctl[cgroup.Pids]
	if !c.OK {
		c.Fix = "enable the memory and pids controllers"
	}
	return c
}

func checkQuota() Check {
	if err := quota.Available(); err != nil {
		return Check{Layer: "disk quota", Detail: err.Error(), Fix: "apt-get install e2fsprogs util-linux; modprobe loop"}
	}
	return Check{Layer: "disk quota", OK: true, Detail: "loop-mounted ext4 image per sandbox"}
}

// Python reports the version of the interpreter at path (empty: Debian's
// /usr/bin/python3) and of the data packages the kernels rely on.
func Python(path string) (version string, packages map[string]string, err error) {
	path = cmp.Or(path, "/usr/bin/python3")
	out, err := exec.Command(path, "-c", "import sys, json, IPython, pandas, matplotlib, numpy; print(json.dumps([sys.version.split()[0], {m.__name__: m.__version__ for m in (IPython, pandas, matplotlib, numpy)}]))").CombinedOutput()
	if err != nil {
		return "", nil, fmt.Errorf("%s: %s", path, lastLine(out, err))
	}
	var v []json.RawMessage
	if err := json.Unmarshal(out, &v); err != nil || len(v) != 2 {
		return "", nil, fmt.Errorf("%s: unexpected output %q", path, out)
	}
	json.Unmarshal(v[0], &version)
	json.Unmarshal(v[1], &packages)
	return version, packages, nil
}

// Node reports the version of the Node.js at path (empty: /usr/bin/node),
// checking that the internals the JavaScript kernel uses are there.
func Node(path string) (version string, err error) {
	path = cmp.Or(path, "/usr/bin/node")
	out, err := exec.Command(path, "--expose-internals", "-e", "require('internal/repl/await'); console.log(process.versions.node)").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s: %s", path, lastLine(out, err))
	}
	return strings.TrimSpace(string(out)), nil
}

func checkPython(rt Runtime) Check {
	c := Check{Layer: "python"}
	if rt.Err != nil {
		c.Detail = rt.Err.Error()
		c.Fix = "apt-get install python3 python3-ipython python3-pandas python3-matplotlib python3-numpy (or run scripts/setup.sh)"
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("%s %s IPython %s pandas %s matplotlib %s numpy %s", rt.Path, rt.Version,
		rt.Packages["IPython"], rt.Packages["pandas"], rt.Packages["matplotlib"], rt.Packages["numpy"])
	return c
}

func checkNode(rt Runtime) Check {
	c := Check{Layer: "javascript"}
	if rt.Err != nil {
		c.Detail, c.Fix = rt.Err.Error(), "apt-get install nodejs (Node.js 18 or newer)"
		return c
	}
	c.OK, c.Detail = true, fmt.Sprintf("%s v%s", rt.Path, rt.Version)
	return c
}

// probeCode reports the jail's posture as seen from inside.
const probeCode = `
import json, os, socket
st = dict(l.split(':\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\t' in l)
def connect(host, port):
    try:
        socket.create_connection((host, port), timeout=1).close()
        return 'connected'
    except OSError as e:
        return type(e).__name__
print(json.dumps({
    'uid': os.getuid(), 'gid': os.getgid(),
    'cap_eff': st['CapEff'].strip(), 'no_new_privs': st['NoNewPrivs'].strip(), 'seccomp': st['Seccomp'].strip(),
    'interfaces': [n for _, n in socket.if_nameindex()],
    'pids': sorted(int(p) for p in os.listdir('/proc') if p.isdigit()),
    'ns': {n: os.readlink('/proc/self/ns/' + n) for n in ('user', 'pid', 'net', 'ipc', 'uts', 'mnt', 'cgroup')},
    'hostname': socket.gethostname(),
    'shadow': os.path.exists('/etc/shadow'),
}))
`

func probe(ctx context.Context, cfg sandbox.Config) []Check {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	fail := func(err error) []Check {
		return []Check{{Layer: "live jail", Detail: err.Error(), Fix: "see the layers above; run with --unsafe-no-sandbox only if you accept running code unconfined"}}
	}
	sb, err := sandbox.Create(ctx, cfg, sandbox.Options{ID: "doctor-" + strconv.Itoa(os.Getpid())})
	if err != nil {
		return fail(err)
	}
	defer sb.Destroy(context.WithoutCancel(ctx))
	start := time.Now()
	k, err := sb.StartKernel(ctx, kernel.Python)
	if err != nil {
		return fail(err)
	}
	defer k.Close()
	startup := time.Since(start)
	res, err := k.Execute(ctx, probeCode, 30*time.Second)
	if err != nil {
		return fail(err)
	}
	var in struct {
		UID, GID   int
		CapEff     string `json:"cap_eff"`
		NoNewPrivs string `json:"no_new_privs"`
		Seccomp    string
		Interfaces []string
		Pids       []int
		NS         map[string]string
		Hostname   string
		Shadow     bool
	}
	if err := json.Unmarshal([]byte(res.Text("stdout")), &in); err != nil {
		return fail(fmt.Errorf("probe output %q: %v", res.Text("stdout"), err))
	}
	pid := k.Pid()
	hostStatus, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	hostUID := statusField(string(hostStatus), "Uid")
	uidMap, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "uid_map"))

	var checks []Check
	add := func(layer string, ok bool, detail string) {
		c := Check{Layer: layer, OK: ok, Detail: detail}
		if !ok {
			c.Fix = "this layer did not hold in a live jail: do not run untrusted code on this host until it does"
		}
		checks = append(checks, c)
	}
	add("live jail", true, fmt.Sprintf("Python kernel started in %v", startup.Round(time.Millisecond)))
	var apart []string
	for _, n := range []string{"user", "pid", "net", "ipc", "uts", "mnt", "cgroup"} {
		if host, _ := os.Readlink("/proc/self/ns/" + n); host != "" && host != in.NS[n] {
			apart = append(apart, n)
		}
	}
	add("namespaces", len(apart) == 7, "own "+strings.Join(apart, ", "))
	add("identity", in.UID == 1000 && hostUID != "" && hostUID != "0" && hostUID != strconv.Itoa(os.Getuid()),
		fmt.Sprintf("uid %d inside, host uid %s (uid_map %q)", in.UID, hostUID, strings.Join(strings.Fields(string(uidMap)), " ")))
	add("capabilities", in.CapEff == "0000000000000000", "CapEff "+in.CapEff)
	add("no_new_privs", in.NoNewPrivs == "1", "NoNewPrivs "+in.NoNewPrivs)
	add("seccomp filter", in.Seccomp == "2", "Seccomp mode "+in.Seccomp+" (2 = filter)")
	add("network", len(in.Interfaces) == 1 && in.Interfaces[0] == "lo", "interfaces: "+strings.Join(in.Interfaces, ", "))
	add("process view", len(in.Pids) <= 4, fmt.Sprintf("%d processes visible: %v", len(in.Pids), in.Pids))
	add("filesystem", !in.Shadow, fmt.Sprintf("/etc/shadow visible: %v; hostname %q", in.Shadow, in.Hostname))
	l := sb.Limits()
	add("limits", true, fmt.Sprintf("memory %d MiB (no swap), pids %d, cpu %.1f cores, disk %d MiB, output %d KiB per cell, cgroup %s",
		l.MemoryBytes>>20, l.Pids, l.CPUs, l.DiskBytes>>20, l.OutputBytes>>10, sb.Cgroup().Path()))
	return checks
}

func statusField(status, name string) string {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				return f[0]
			}
		}
	}
	return ""
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

func lastLine(out []byte, err error) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if l := lines[len(lines)-1]; l != "" {
		return l
	}
	return err.Error()
}
