package sandbox_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
	"github.com/codecell/codecell/internal/store"
	"github.com/moby/sys/mountinfo"
)

// stdout is the stream text of a result.
func stdout(res *sandbox.Result) string {
	var b strings.Builder
	for _, o := range res.Outputs {
		if o.OutputType == "stream" {
			b.WriteString(o.Text)
		}
	}
	return b.String()
}

func restoredManager(t *testing.T, cfg sandbox.Config) *sandbox.Manager {
	t.Helper()
	m := sandbox.NewManager(sandbox.ManagerConfig{Sandbox: cfg})
	if err := m.Restore(context.Background()); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	return m
}

func readFile(t *testing.T, sb *sandbox.Sandbox, p string) string {
	t.Helper()
	b, err := sb.Files().ReadBytes(context.Background(), p, 1<<20)
	if err != nil {
		t.Fatalf("reading %s: %v", p, err)
	}
	return string(b)
}

// TestPersistRestore: a shut-down manager's sandboxes come back in the next
// one with their identity, limits, labels, expiry and files; their sessions
// are listed as lost, fail once with ErrSessionLost, then run on a fresh
// kernel. A sandbox whose TTL ended meanwhile is removed with its files.
func TestPersistRestore(t *testing.T) {
	cfg := testConfig(t)
	ctx := context.Background()
	m1 := restoredManager(t, cfg)
	labels := map[string]string{"owner": "alice", "job": "42"}
	sb, err := m1.Create(ctx, sandbox.Options{ID: "kept", Labels: labels, TTL: time.Hour,
		Limits: sandbox.Limits{MemoryBytes: 300 << 20, Pids: 99}})
	if err != nil {
		t.Fatal(err)
	}
	short, err := m1.Create(ctx, sandbox.Options{ID: "short", TTL: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	shortDir := filepath.Dir(short.Home())
	for p, body := range map[string]string{"/home/user/notes/a.txt": "in home", "/tmp/b.txt": "in tmp"} {
		if err := sb.WriteFile(p, strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	sess, _, err := sb.OpenSession(kernel.Python, "s1", true)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sess.Execute(ctx, kernel.Request{Code: "x = 41\nprint(x + 1)"}); err != nil || stdout(res) != "42\n" {
		t.Fatalf("first cell: %v %v", res, err)
	}
	ended, _, err := sb.OpenSession(kernel.JavaScript, "gone", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.EndSession(ended.Language, ended.ID); err != nil {
		t.Fatal(err)
	}
	want := struct {
		uid     int
		limits  sandbox.Limits
		created time.Time
		expires time.Time
	}{sb.UID(), sb.Limits(), sb.Created(), sb.ExpiresAt()}
	if err := m1.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(short.ExpiresAt()) + 100*time.Millisecond)

	m2 := restoredManager(t, cfg)
	defer m2.Shutdown(ctx)
	var ids []string
	for _, s := range m2.List() {
		ids = append(ids, s.ID())
	}
	if strings.Join(ids, ",") != "kept" {
		t.Fatalf("restored sandboxes %v, want [kept] (short expired)", ids)
	}
	if _, err := os.Stat(shortDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the expired sandbox's directory is still there: %v", err)
	}
	sb2, err := m2.Get("kept")
	if err != nil {
		t.Fatal(err)
	}
	if sb2.UID() != want.uid || sb2.Limits() != want.limits || !maps.Equal(sb2.Labels(), labels) ||
		!sb2.Created().Equal(want.created) || !sb2.ExpiresAt().Equal(want.expires) {
		t.Errorf("restored: uid %d limits %+v labels %v created %v expires %v; want %+v labels %v",
			sb2.UID(), sb2.Limits(), sb2.Labels(), sb2.Created(), sb2.ExpiresAt(), want, labels)
	}
	if got := readFile(t, sb2, "/home/user/notes/a.txt"); got != "in home" {
		t.Errorf("home file: %q", got)
	}
	if got := readFile(t, sb2, "/tmp/b.txt"); got != "in tmp" {
		t.Errorf("tmp file: %q", got)
	}
	list := sb2.Sessions("")
	if len(list) != 1 || list[0].ID != "s1" || list[0].Language != kernel.Python || !list[0].Info().Lost {
		t.Fatalf("restored sessions: %+v (want s1, lost; the ended one forgotten)", list)
	}
	s1 := list[0]
	if !s1.Created.Equal(sess.Created) {
		t.Errorf("session created %v, was %v", s1.Created, sess.Created)
	}
	_, err = s1.Execute(ctx, kernel.Request{Code: "print(x)"})
	if !errors.Is(err, sandbox.ErrSessionLost) || !strings.Contains(err.Error(), "restarted") || !strings.Contains(err.Error(), "setup cells") {
		t.Fatalf("first execution after restart: %v, want ErrSessionLost naming the restart and setup cells", err)
	}
	if s1.Info().Lost {
		t.Error("still lost after the first execution")
	}
	res, err := s1.Execute(ctx, kernel.Request{Code: "print('x' in dir())\nprint(open('/home/user/notes/a.txt').read())"})
	if err != nil || stdout(res) != "False\nin home\n" {
		t.Fatalf("fresh kernel: %v %v", res, err)
	}

	// Deleting forgets the sandbox: a third manager restores nothing.
	if err := m2.Delete(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	if err := m2.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	m3 := restoredManager(t, cfg)
	defer m3.Shutdown(ctx)
	if l := m3.List(); len(l) != 0 {
		t.Errorf("deleted sandbox restored: %v", l)
	}
}

// TestStoreLockedByAnotherManager: a second manager on the same data
// directory fails clearly instead of waiting.
func TestStoreLockedByAnotherManager(t *testing.T) {
	cfg := testConfig(t)
	m1 := restoredManager(t, cfg)
	defer m1.Shutdown(context.Background())
	m2 := sandbox.NewManager(sandbox.ManagerConfig{Sandbox: cfg})
	start := time.Now()
	if err := m2.Restore(context.Background()); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("second Restore: %v, want ErrLocked", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("second Restore took %v", d)
	}
}

// TestRestoreAfterCrash: a process of the test binary makes a sandbox with
// a running session and a leftover process holding its disk busy in its
// cgroup, and is SIGKILLed. The next manager kills the leftover, replaces
// the cgroup, reuses the mount, and finds the files.
func TestRestoreAfterCrash(t *testing.T) {
	if dir := os.Getenv("CODECELL_CRASH_CHILD"); dir != "" {
		crashChild(t, dir)
		return
	}
	cfg := testConfig(t)
	ready := filepath.Join(t.TempDir(), "ready")
	child := exec.Command(os.Args[0], "-test.run=^TestRestoreAfterCrash$", "-test.count=1")
	child.Env = append(os.Environ(), "CODECELL_CRASH_CHILD="+cfg.DataDir, "CODECELL_CRASH_CGROUP="+cfg.CgroupParent,
		"CODECELL_CRASH_READY="+ready)
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var leftover int
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
			leftover, _ = strconv.Atoi(string(b))
			break
		}
		if time.Now().After(deadline) {
			child.Process.Kill()
			t.Fatal("the child never got ready")
		}
	}
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	t.Cleanup(func() { syscall.Kill(leftover, syscall.SIGKILL) })

	mnt := filepath.Join(cfg.DataDir, "sandboxes", "crashed", "fs")
	if ok, err := mountinfo.Mounted(mnt); err != nil || !ok {
		t.Fatalf("after the crash the disk should still be mounted: %v %v", ok, err)
	}
	if err := syscall.Kill(leftover, 0); err != nil {
		t.Fatalf("the leftover process should have survived the crash: %v", err)
	}

	m := restoredManager(t, cfg)
	defer func() {
		m.Delete(context.Background(), "crashed")
		m.Shutdown(context.Background())
	}()
	sb, err := m.Get("crashed")
	if err != nil {
		t.Fatal(err)
	}
	// The leftover was killed (it is our grandchild no more: reaped by init).
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(leftover, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the leftover process is still alive after Restore")
		}
	}
	if got := readFile(t, sb, "/home/user/h.txt"); got != "home" {
		t.Errorf("home file: %q", got)
	}
	if got := readFile(t, sb, "/tmp/t.txt"); got != "tmp" {
		t.Errorf("tmp file: %q", got)
	}
	list := sb.Sessions("")
	if len(list) != 1 || !list[0].Info().Lost {
		t.Fatalf("sessions after the crash: %+v", list)
	}
	if _, err := list[0].Execute(context.Background(), kernel.Request{Code: "1"}); !errors.Is(err, sandbox.ErrSessionLost) {
		t.Fatalf("lost session: %v", err)
	}
	res, err := list[0].Execute(context.Background(), kernel.Request{Code: "print(open('/tmp/t.txt').read())"})
	if err != nil || stdout(res) != "tmp\n" {
		t.Fatalf("after the crash: %v %v", res, err)
	}
	for _, d := range sb.Cgroup().Dirs() {
		if _, err := os.Stat(filepath.Join(d, "leftover")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the leftover cgroup is still there: %v", err)
		}
	}
}

// crashChild is the process that crashes in TestRestoreAfterCrash.
func crashChild(t *testing.T, dataDir string) {
	cfg := testConfig(t)
	cfg.DataDir, cfg.CgroupParent = dataDir, os.Getenv("CODECELL_CRASH_CGROUP")
	m := restoredManager(t, cfg)
	ctx := context.Background()
	sb, err := m.Create(ctx, sandbox.Options{ID: "crashed"})
	if err != nil {
		t.Fatal(err)
	}
	sb.WriteFile("/home/user/h.txt", strings.NewReader("home"))
	sb.WriteFile("/tmp/t.txt", strings.NewReader("tmp"))
	sess, _, err := sb.OpenSession(kernel.Python, "s1", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Execute(ctx, kernel.Request{Code: "x = 1"}); err != nil {
		t.Fatal(err)
	}
	// A process that outlives us, in the sandbox's cgroup, working in its disk.
	g, err := sb.Cgroup().Child("leftover")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "600")
	cmd.Dir = sb.Home()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := g.Join(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(os.Getenv("CODECELL_CRASH_READY"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
	time.Sleep(10 * time.Minute)
}

// TestRestoreReaps: after a restart the reaper still ends idle sessions
// (by their recorded last use) and sandboxes whose TTL ends, forgetting
// both.
func TestRestoreReaps(t *testing.T) {
	cfg := testConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m1 := restoredManager(t, cfg)
	sb, err := m1.Create(ctx, sandbox.Options{ID: "ttl", TTL: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(sb.Home())
	if _, _, err := sb.OpenSession(kernel.Python, "idle", true); err != nil {
		t.Fatal(err)
	}
	if err := m1.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	m2 := sandbox.NewManager(sandbox.ManagerConfig{Sandbox: cfg, SessionIdle: 200 * time.Millisecond})
	if err := m2.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	defer m2.Shutdown(context.Background())
	sb2, err := m2.Get("ttl")
	if err != nil {
		t.Fatalf("restored before its TTL ended: %v", err)
	}
	go m2.Run(ctx)
	for deadline := time.Now().Add(10 * time.Second); len(sb2.Sessions("")) != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the idle restored session was not reaped")
		}
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := m2.Get("ttl")
		if _, statErr := os.Stat(dir); errors.Is(err, sandbox.ErrNotFound) && errors.Is(statErr, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sandbox outlived its TTL after a restart")
		}
	}
	if err := m2.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	m3 := restoredManager(t, cfg)
	defer m3.Shutdown(context.Background())
	if l := m3.List(); len(l) != 0 {
		t.Errorf("a reaped sandbox came back: %v", l)
	}
}
