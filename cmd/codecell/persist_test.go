package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codecell/codecell/client"
	"github.com/moby/sys/mountinfo"
)

// serveAt runs `codecell serve` on dataDir as startServer does, with extra
// flags, but hands back the process, so that a test can crash it and start
// another server on the same data directory. The caller stops it
// (stopServer).
func serveAt(t *testing.T, bin, dataDir, parent string, extra ...string) (*exec.Cmd, string, <-chan error) {
	t.Helper()
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir, "--cgroup-parent", parent,
		"--api-key", cliTestKey, "--prewarm-python", "0", "--prewarm-javascript", "0"}, extra...)
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	sc := bufio.NewScanner(stderr)
	var addr string
	var log strings.Builder
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if m := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
		exited <- cmd.Wait()
	}()
	if addr == "" {
		cmd.Process.Kill()
		t.Fatalf("the server did not say where it listens:\n%s", log.String())
	}
	return cmd, "http://" + addr, exited
}

// newClient is a client of the server at url, with the tests' key.
func newClient(t *testing.T, url string) *client.Client {
	t.Helper()
	c, err := client.New(url, client.WithAPIKey(cliTestKey))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// cgroupParent is a cgroup parent for the servers of one test of this
// process, removed at the end.
func cgroupParent(t *testing.T, name string) string {
	parent := fmt.Sprintf("codecell-%s-%d", name, os.Getpid())
	t.Cleanup(func() {
		for _, ctl := range []string{"", "memory", "pids", "cpu", "freezer"} {
			os.Remove(filepath.Join("/sys/fs/cgroup", ctl, parent))
		}
	})
	return parent
}

// checkUnmounted fails if anything is mounted under dataDir.
func checkUnmounted(t *testing.T, dataDir, when string) {
	t.Helper()
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		t.Errorf("still mounted %s: %s", when, m.Mountpoint)
	}
}

// stopServer stops a server of serveAt with SIGTERM, as an operator does,
// and fails unless it exits cleanly within a minute.
func stopServer(t *testing.T, cmd *exec.Cmd, exited <-chan error) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("serve after SIGTERM: %v", err)
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Error("serve did not stop within a minute of SIGTERM")
	}
}

// TestPersistAcrossCrash: a sandbox, its files in home and /tmp and its
// session survive a SIGKILL of the server; the next server lists it,
// serves the files byte for byte, reports the session's kernel as lost
// once (409) and runs code; at SIGTERM it leaves nothing mounted.
func TestPersistAcrossCrash(t *testing.T) {
	requireJail(t)
	bin := buildBinary(t)
	dataDir := newDataDir(t)
	parent := cgroupParent(t, "persisttest")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	srv1, url1, exited1 := serveAt(t, bin, dataDir, parent)
	c1 := newClient(t, url1)
	if _, err := c1.CreateSandbox(ctx, client.SandboxRequest{ID: "keep", Labels: map[string]string{"team": "x"}, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	sb1 := c1.Sandbox("keep")
	homeData := bytes.Repeat([]byte("home\x00\xff"), 50000)
	tmpData := []byte("tmp file\n")
	if _, err := sb1.WriteFile(ctx, "/home/user/data/h.bin", bytes.NewReader(homeData)); err != nil {
		t.Fatal(err)
	}
	if _, err := sb1.WriteFile(ctx, "/tmp/t.txt", bytes.NewReader(tmpData)); err != nil {
		t.Fatal(err)
	}
	if res, err := sb1.Execute(ctx, client.ExecuteRequest{Language: client.Python, Code: "x = 1", SessionID: "s1"}); err != nil || res.Err() != nil {
		t.Fatalf("session cell: %v %v", res, err)
	}

	// A crash, not a shutdown.
	srv1.Process.Signal(syscall.SIGKILL)
	<-exited1

	srv2, url2, exited2 := serveAt(t, bin, dataDir, parent)
	stopped := false
	defer func() {
		if !stopped { // a failed check: still unmount what the server holds
			srv2.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited2:
			case <-time.After(time.Minute):
				srv2.Process.Kill()
			}
		}
	}()
	c2 := newClient(t, url2)
	list, err := c2.ListSandboxes(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range list {
		if s.ID == "keep" {
			found = true
			if s.Labels["team"] != "x" || s.ExpiresAt == nil {
				t.Errorf("restored sandbox: %+v", s)
			}
		}
	}
	if !found {
		t.Fatalf("GET /v2/sandboxes after the crash: %+v", list)
	}
	sb2 := c2.Sandbox("keep")
	for p, want := range map[string][]byte{"/home/user/data/h.bin": homeData, "/tmp/t.txt": tmpData} {
		r, err := sb2.ReadFile(ctx, p)
		if err != nil {
			t.Fatalf("downloading %s: %v", p, err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s after the crash: %d bytes (want %d), %v", p, len(got), len(want), err)
		}
	}
	if _, err := sb2.Execute(ctx, client.ExecuteRequest{Language: client.Python, Code: "x", SessionID: "s1"}); client.StatusCode(err) != 409 ||
		!strings.Contains(err.Error(), "restarted") {
		t.Errorf("lost session: %v (status %d), want 409", err, client.StatusCode(err))
	}
	res, err := sb2.Execute(ctx, client.ExecuteRequest{Language: client.Python, SessionID: "s1",
		Code: "print('x' in dir(), len(open('/home/user/data/h.bin', 'rb').read()), open('/tmp/t.txt').read(), end='')"})
	if err != nil || res.Err() != nil || res.Stdout != fmt.Sprintf("False %d %s", len(homeData), tmpData) {
		t.Fatalf("after the crash: %+v %v", res, err)
	}

	stopped = true
	stopServer(t, srv2, exited2)
	checkUnmounted(t, dataDir, "after SIGTERM")

	// Clean up: a last server deletes the sandbox.
	srv3, url3, exited3 := serveAt(t, bin, dataDir, parent)
	c3 := newClient(t, url3)
	if err := c3.DeleteSandbox(ctx, "keep"); err != nil {
		t.Error(err)
	}
	stopServer(t, srv3, exited3)
	checkUnmounted(t, dataDir, "after deleting")
}
