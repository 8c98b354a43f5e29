package sandbox_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

// zygotePids lists the processes in the sandbox's zygote cgroup.
func zygotePids(t *testing.T, sb *sandbox.Sandbox) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sb.Cgroup().Dirs()[0], "zygote", "cgroup.procs"))
	if err != nil {
		t.Fatalf("zygote cgroup: %v", err)
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

func nsOf(t *testing.T, pid int, ns string) string {
	t.Helper()
	s, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
	if err != nil {
		t.Fatalf("ns %s of %d: %v", ns, pid, err)
	}
	return s
}

// Forked kernels of one sandbox are as apart as two jails: their own pid,
// net, mount, ipc and uts namespaces; and a killed zygote is restarted.
func TestZygoteForkedKernels(t *testing.T) {
	cfg := testConfig(t)
	cfg.PythonMode = sandbox.PythonFork
	sb := newSandbox(t, cfg, sandbox.Options{})
	k1 := startKernel(t, sb, kernel.Python)
	k2 := startKernel(t, sb, kernel.Python)
	if st := sb.PoolStats()["python/zygote"]; st.Ready != 1 || st.Served != 2 {
		t.Fatalf("zygote stats %+v, want ready and 2 served", st)
	}
	zpids := zygotePids(t, sb)
	if len(zpids) == 0 {
		t.Fatal("no zygote process")
	}
	// A process of k2 that k1 must not see.
	if res := execute(t, k2, "import subprocess; p = subprocess.Popen(['sleep', '30'])", 0); res.Status != kernel.StatusOK {
		t.Fatalf("k2: %+v", res)
	}
	for _, k := range []*sandbox.Kernel{k1, k2} {
		res := execute(t, k, "import os; print(os.getpid(), os.getppid(), sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))", 0)
		if res.Status != kernel.StatusOK {
			t.Fatalf("listing /proc: %+v", res)
		}
		t.Logf("kernel %d sees: %s", k.Pid(), res.Text("stdout"))
		if !strings.HasPrefix(res.Text("stdout"), "2 1 ") {
			t.Errorf("the kernel is not pid 2 under its own init: %q", res.Text("stdout"))
		}
	}
	res := execute(t, k1, "import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))", 0)
	if got := strings.TrimSpace(res.Text("stdout")); got != "[1, 2]" {
		t.Errorf("k1 sees processes %s, want only its init and itself (k2 runs a sleep)", got)
	}
	p1, p2 := k1.Pid(), k2.Pid()
	for _, ns := range []string{"pid", "net", "mnt", "ipc", "uts"} {
		a, b, z := nsOf(t, p1, ns), nsOf(t, p2, ns), nsOf(t, zpids[0], ns)
		if a == b || a == z || b == z {
			t.Errorf("%s namespaces: k1 %s, k2 %s, zygote %s: want three different", ns, a, b, z)
		}
	}
	// k1's files in /dev/shm are not k2's.
	execute(t, k1, "open('/dev/shm/x', 'w').write('k1')", 0)
	if res := execute(t, k2, "import os; os.path.exists('/dev/shm/x')", 0); res.Outputs[0].Data["text/plain"] != "False" {
		t.Errorf("k2 sees k1's /dev/shm: %+v", res)
	}

	// Code planted where a Python startup would look (the working directory,
	// user site-packages) must never run in a zygote, which keeps its
	// capabilities: it is restarted below and must not import it.
	plant := `
import os, site
payload = "import os\nif '0000000000000000' not in open('/proc/self/status').read().split('CapEff:')[1].split()[0]: open('/tmp/pwned-' + str(os.getpid()), 'w').write('x')\n"
for m in ('json', 'IPython', 'numpy', 'pandas', 'traitlets', 'sitecustomize', 'usercustomize'):
    open('/home/user/%s.py' % m, 'w').write(payload)
d = site.getusersitepackages()
os.makedirs(d, exist_ok=True)
for m in ('numpy', 'sitecustomize', 'usercustomize'):
    open(os.path.join(d, m + '.py'), 'w').write(payload)
open(os.path.join(d, 'x.pth'), 'w').write('import os; exec(%r)\n' % payload)
open('/home/user/mymod.py', 'w').write('VALUE = 42\n')
`
	if res := execute(t, k1, plant, 0); res.Status != kernel.StatusOK {
		t.Fatalf("planting: %+v", res)
	}

	// Killing the zygote ends its kernels; the next kernel gets a new zygote.
	for _, p := range zpids {
		syscall.Kill(p, syscall.SIGKILL)
	}
	for deadline := time.Now().Add(10 * time.Second); sb.PoolStats()["python/zygote"].Ready != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the killed zygote is still reported ready: %+v", sb.PoolStats()["python/zygote"])
		}
	}
	k3 := startKernel(t, sb, kernel.Python)
	if res := execute(t, k3, "1 + 1", 0); res.Status != kernel.StatusOK || res.Outputs[0].Data["text/plain"] != "2" {
		t.Fatalf("kernel after the zygote restart: %+v", res)
	}
	if st := sb.PoolStats()["python/zygote"]; st.Ready != 1 {
		t.Errorf("zygote not restarted: %+v", st)
	}
	if z := zygotePids(t, sb); len(z) == 0 || z[0] == zpids[0] {
		t.Errorf("zygote pids %v after restart (before: %v)", z, zpids)
	}
	if m, _ := filepath.Glob(filepath.Join(sb.Tmp(), "pwned-*")); len(m) != 0 {
		t.Errorf("code planted in home ran with capabilities (in the zygote): %v", m)
	}
	// The kernel itself still imports from its working directory, as a spawned one does.
	if res := execute(t, k3, "import mymod; mymod.VALUE", 0); res.Status != kernel.StatusOK || res.Outputs[0].Data["text/plain"] != "42" {
		t.Errorf("importing a module from home: %+v", res)
	}
}
