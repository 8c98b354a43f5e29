package sandbox_test

// The posture test inspects a running kernel from OUTSIDE its jail, through
// the host's /proc and cgroup files, the way gVisor's bootposture test checks
// a sandbox: it does not trust anything the jailed process says about itself.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/codecell/codecell/internal/cgroup"
	"github.com/codecell/codecell/internal/jail"
	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

// postureStatus parses /proc/<pid>/status into its "Key:" fields.
func postureStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading status of pid %d: %v", pid, err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

func postureRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("reading %s: %v", p, err)
	}
	return strings.TrimSpace(string(b))
}

// postureControlFile finds name in one of the group's directories.
func postureControlFile(t *testing.T, g *cgroup.Group, names ...string) (string, string) {
	t.Helper()
	for _, d := range g.Dirs() {
		for _, n := range names {
			p := filepath.Join(d, n)
			if _, err := os.Stat(p); err == nil {
				return p, postureRead(t, p)
			}
		}
	}
	t.Fatalf("none of %v in %v", names, g.Dirs())
	return "", ""
}

func TestPosture(t *testing.T) {
	cfg := testConfig(t)
	sb := newSandbox(t, cfg, sandbox.Options{})
	k := startKernel(t, sb, kernel.Python)
	// A live cell first: the interpreter is up and has user code's view.
	if res := execute(t, k, "import os; os.getpid()", 0); res.Status != kernel.StatusOK {
		t.Fatalf("kernel: %+v", res)
	}
	pid := k.Pid()
	if pid <= 0 {
		t.Fatalf("kernel host pid = %d", pid)
	}
	uid := strconv.Itoa(sb.UID())
	if sb.UID() == 0 || sb.UID() == os.Getuid() {
		t.Fatalf("sandbox uid %d is root or the server's", sb.UID())
	}
	st := postureStatus(t, pid)
	proc := func(name string) string { return fmt.Sprintf("/proc/%d/%s", pid, name) }

	t.Run("interpreter-is-the-kernel", func(t *testing.T) {
		exe, err := os.Readlink(proc("exe"))
		if err != nil || !strings.Contains(filepath.Base(exe), "python") {
			t.Errorf("pid %d runs %q (%v), want the Python interpreter", pid, exe, err)
		}
	})

	t.Run("host-uid-gid-are-the-sandbox's", func(t *testing.T) {
		for _, key := range []string{"Uid", "Gid"} {
			f := strings.Fields(st[key])
			if len(f) != 4 {
				t.Fatalf("%s: %q", key, st[key])
			}
			for i, v := range f {
				if v != uid {
					t.Errorf("%s field %d = %s, want the sandbox's host id %s (not 0, not the server's %d)", key, i, v, uid, os.Getuid())
				}
			}
		}
		if g := st["Groups"]; g != "" {
			t.Errorf("supplementary groups %q, want none", g)
		}
	})

	t.Run("no-capabilities", func(t *testing.T) {
		for _, key := range []string{"CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb"} {
			if st[key] != "0000000000000000" {
				t.Errorf("%s = %q, want 0000000000000000", key, st[key])
			}
		}
	})

	t.Run("no-new-privs-and-seccomp", func(t *testing.T) {
		if st["NoNewPrivs"] != "1" {
			t.Errorf("NoNewPrivs = %q, want 1", st["NoNewPrivs"])
		}
		if st["Seccomp"] != "2" {
			t.Errorf("Seccomp = %q, want 2 (filter)", st["Seccomp"])
		}
		if n, err := strconv.Atoi(st["Seccomp_filters"]); err != nil || n < 1 {
			t.Errorf("Seccomp_filters = %q, want >= 1", st["Seccomp_filters"])
		}
	})

	t.Run("own-namespaces", func(t *testing.T) {
		for _, ns := range []string{"user", "pid", "net", "ipc", "uts", "mnt", "cgroup"} {
			mine, err1 := os.Readlink("/proc/self/ns/" + ns)
			theirs, err2 := os.Readlink(proc("ns/" + ns))
			if err1 != nil || err2 != nil {
				t.Errorf("ns %s: %v %v", ns, err1, err2)
				continue
			}
			if mine == theirs {
				t.Errorf("the kernel shares the %s namespace with the host (%s)", ns, mine)
			}
		}
		// Its root is not the host's root.
		var hostRoot, jailRoot syscall.Stat_t
		if err := syscall.Stat("/", &hostRoot); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Stat(proc("root")+"/", &jailRoot); err != nil {
			t.Fatal(err)
		}
		if hostRoot.Dev == jailRoot.Dev && hostRoot.Ino == jailRoot.Ino {
			t.Errorf("the kernel's root is the host's root")
		}
	})

	t.Run("uid-and-gid-maps", func(t *testing.T) {
		for _, f := range []string{"uid_map", "gid_map"} {
			got := strings.Fields(postureRead(t, proc(f)))
			want := []string{strconv.Itoa(jail.UID), uid, "1"}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("%s = %q, want %q (only inside 1000 -> the sandbox's host id)", f, got, want)
			}
		}
		if s := postureRead(t, proc("setgroups")); s != "deny" {
			t.Errorf("setgroups = %q, want deny", s)
		}
	})

	t.Run("session-cgroup-membership", func(t *testing.T) {
		want := "/" + k.Cgroup().Path()
		if !strings.HasPrefix(k.Cgroup().Path(), sb.Cgroup().Path()+"/") {
			t.Errorf("session group %s is not a child of the sandbox's %s", k.Cgroup().Path(), sb.Cgroup().Path())
		}
		lines := strings.Split(postureRead(t, proc("cgroup")), "\n")

		found := map[string]bool{}
		for _, line := range lines {
			f := strings.SplitN(line, ":", 3)
			if len(f) != 3 {
				continue
			}
			ctls := strings.Split(f[1], ",")
			if f[0] == "0" && f[1] == "" { // the unified hierarchy "0::/path"
				if cfg.Cgroups.Version != cgroup.V2 {
					continue // hybrid v1 host: v2 holds no controllers
				}
				ctls = []string{"memory", "pids"}
			}
			for _, c := range ctls {
				if c == "memory" || c == "pids" {
					found[c] = true
					if f[2] != want {
						t.Errorf("%s cgroup of the kernel = %q, want %q", c, f[2], want)
					}
				}
			}
		}
		if !found["memory"] || !found["pids"] {
			t.Errorf("no memory/pids cgroup lines in %q", lines)
		}
		// Every process in the session's group is the sandbox's.
		pids, err := k.Cgroup().Pids()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(pids, pid) {
			t.Errorf("kernel pid %d not in its group's pids %v", pid, pids)
		}
		for _, p := range pids {
			s := postureStatus(t, p)
			if f := strings.Fields(s["Uid"]); len(f) != 4 || f[0] != uid || f[1] != uid || f[2] != uid || f[3] != uid {
				t.Errorf("pid %d in the session group runs as %q, want %s", p, s["Uid"], uid)
			}
		}
	})

	t.Run("sandbox-cgroup-limits", func(t *testing.T) {
		g := sb.Cgroup()
		p, v := postureControlFile(t, g, "memory.limit_in_bytes", "memory.max")
		if v != strconv.Itoa(512<<20) {
			t.Errorf("%s = %s, want %d", p, v, 512<<20)
		}
		p, v = postureControlFile(t, g, "pids.max")
		if v != "128" {
			t.Errorf("%s = %s, want 128", p, v)
		}
		// No swap: memsw (v1, where accounted) or memory.swap.max (v2).
		for _, d := range g.Dirs() {
			if b, err := os.ReadFile(filepath.Join(d, "memory.memsw.limit_in_bytes")); err == nil {
				if s := strings.TrimSpace(string(b)); s != strconv.Itoa(512<<20) {
					t.Errorf("memory.memsw.limit_in_bytes = %s, want %d", s, 512<<20)
				}
			}
			if b, err := os.ReadFile(filepath.Join(d, "memory.swap.max")); err == nil {
				if s := strings.TrimSpace(string(b)); s != "0" {
					t.Errorf("memory.swap.max = %s, want 0", s)
				}
			}
		}
		// CPU: DefaultLimits' one core, if the cpu controller is there.
		for _, d := range g.Dirs() {
			if b, err := os.ReadFile(filepath.Join(d, "cpu.cfs_quota_us")); err == nil {
				if s := strings.TrimSpace(string(b)); s != "100000" {
					t.Errorf("cpu.cfs_quota_us = %s, want 100000", s)
				}
			}
			if b, err := os.ReadFile(filepath.Join(d, "cpu.max")); err == nil {
				if s := strings.TrimSpace(string(b)); s != "100000 100000" {
					t.Errorf("cpu.max = %s, want 100000 100000", s)
				}
			}
		}
	})

	t.Run("rlimits", func(t *testing.T) {
		limits := postureRead(t, proc("limits"))
		want := map[string]string{
			"Max core file size": "0 0",
			"Max open files":     "1024 1024",
			"Max file size":      fmt.Sprintf("%d %d", sb.Limits().FileSizeBytes, sb.Limits().FileSizeBytes),
		}
		for _, line := range strings.Split(limits, "\n") {
			for name, w := range want {
				if strings.HasPrefix(line, name) {
					f := strings.Fields(strings.TrimPrefix(line, name))
					if len(f) < 2 || f[0]+" "+f[1] != w {
						t.Errorf("%s: %q, want soft and hard %s", name, line, w)
					}
					delete(want, name)
				}
			}
		}
		for name := range want {
			t.Errorf("no %q line in limits", name)
		}
	})

	t.Run("whole-jail-runs-as-sandbox-uid", func(t *testing.T) {
		// The jail's init and bwrap itself (the kernel's ancestors up to
		// the helper's exec) are unprivileged too: bwrap is not setuid here.
		p := pid
		for i := 0; i < 2; i++ {
			ppid, err := strconv.Atoi(postureStatus(t, p)["PPid"])
			if err != nil || ppid <= 1 {
				t.Fatalf("parent of %d: %v", p, err)
			}
			p = ppid
			s := postureStatus(t, p)
			if f := strings.Fields(s["Uid"]); len(f) != 4 || f[0] != uid || f[1] != uid || f[2] != uid || f[3] != uid {
				t.Errorf("ancestor %d (%s) runs as %q, want %s", p, s["Name"], s["Uid"], uid)
			}
			if s["CapEff"] != "0000000000000000" {
				t.Errorf("ancestor %d (%s) has capabilities %s in the host namespace", p, s["Name"], s["CapEff"])
			}
		}
		if got := postureStatus(t, p)["Name"]; got != "bwrap" {
			t.Errorf("the kernel's grandparent is %q, want bwrap", got)
		}
	})

	t.Run("fds-are-the-driver-pipes", func(t *testing.T) {
		ents, err := os.ReadDir(proc("fd"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			target, err := os.Readlink(proc("fd/" + e.Name()))
			if err != nil {
				continue
			}
			if !strings.HasPrefix(target, "pipe:") && target != "/dev/null" {
				t.Errorf("kernel fd %s -> %s: only the driver's pipes are expected", e.Name(), target)
			}
		}
	})

	t.Run("environment-from-outside", func(t *testing.T) {
		b, err := os.ReadFile(proc("environ"))
		if err != nil {
			t.Fatal(err)
		}
		allowed := atkEnvNames()
		for _, kv := range strings.Split(string(b), "\x00") {
			if kv == "" {
				continue
			}
			name, _, _ := strings.Cut(kv, "=")
			if !slices.Contains(allowed, name) && !strings.HasPrefix(name, "CODECELL_USER_") {
				t.Errorf("kernel environment has %q, not in the allowlist", name)
			}
		}
	})
}
