package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codecell/codecell/client"
)

func readAllFile(ctx context.Context, sb *client.Client, p string) ([]byte, error) {
	r, err := sb.ReadFile(ctx, p)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// TestDataDiskFull: the data directory is a 256 MiB filesystem and
// sandboxes have 64 MiB disks. When it fills up, a new sandbox is refused
// with 507 and a message that says why; a running sandbox keeps its whole
// quota (its disk was reserved when it was made): its files are read and
// written, its code runs; its own quota still ends in a 507. Once space is
// freed, sandboxes are made again.
func TestDataDiskFull(t *testing.T) {
	requireJail(t)
	bin := buildBinary(t)
	dataDir := newDataDir(t)
	if err := os.MkdirAll(dataDir, 0o711); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256m,mode=0711", "tmpfs", dataDir).CombinedOutput(); err != nil {
		t.Fatalf("mounting a small data disk: %v: %s", err, out)
	}
	// Registered first, so it runs last, after the server has unmounted
	// the sandboxes' disks.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dataDir).CombinedOutput(); err != nil {
			t.Errorf("unmounting the data disk: %v: %s", err, out)
		}
	})
	srv, url, exited := serveAt(t, bin, dataDir, cgroupParent(t, "disktest"), "--disk", "64M")
	defer stopServer(t, srv, exited)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := newClient(t, url)
	if _, err := c.CreateSandbox(ctx, client.SandboxRequest{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSandbox(context.WithoutCancel(ctx), "a")
	sb := c.Sandbox("a")
	before := bytes.Repeat([]byte("written before the disk filled\n"), 1<<15)
	if _, err := sb.WriteFile(ctx, "/tmp/before.txt", bytes.NewReader(before)); err != nil {
		t.Fatal(err)
	}

	// Fill the data disk.
	filler, err := os.Create(filepath.Join(dataDir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for {
		if _, err = filler.Write(chunk); err != nil {
			break
		}
	}
	filler.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the data disk: %v", err)
	}

	_, err = c.CreateSandbox(ctx, client.SandboxRequest{ID: "b"})
	if client.StatusCode(err) != 507 || !strings.Contains(err.Error(), "no space left on the server's data disk") {
		t.Errorf("a new sandbox on a full data disk: %v (status %d), want 507 naming the data disk", err, client.StatusCode(err))
	}
	if strings.Contains(fmt.Sprint(err), dataDir) {
		t.Errorf("the error shows a host path: %v", err)
	}

	// The running sandbox: reads, writes up to its quota, code.
	if got, err := readAllFile(ctx, sb, "/tmp/before.txt"); err != nil || !bytes.Equal(got, before) {
		t.Errorf("reading back on a full data disk: %d bytes, %v", len(got), err)
	}
	if l, err := sb.ListFiles(ctx, "/tmp"); err != nil || len(l.Files) != 1 {
		t.Errorf("listing on a full data disk: %+v, %v", l, err)
	}
	during := bytes.Repeat([]byte{'d'}, 16<<20)
	if _, err := sb.WriteFile(ctx, "/home/user/during.bin", bytes.NewReader(during)); err != nil {
		t.Errorf("uploading 16 MiB into a 64 MiB sandbox on a full data disk: %v", err)
	}
	res, err := sb.Execute(ctx, client.ExecuteRequest{Language: client.Python, SessionID: "s",
		Code: "open('/tmp/code.bin', 'wb').write(b'c' * (20 << 20))\nimport os; print(os.path.getsize('/home/user/during.bin'), end='')"})
	if err != nil || res.Err() != nil || res.Stdout != fmt.Sprint(16<<20) {
		t.Errorf("code writing 20 MiB on a full data disk: %+v, %v", res, err)
	}
	_, err = sb.WriteFile(ctx, "/home/user/over.bin", io.LimitReader(zeroReader{}, 64<<20))
	if client.StatusCode(err) != 507 {
		t.Errorf("an upload over the sandbox's own quota: %v (status %d), want 507", err, client.StatusCode(err))
	}
	if _, err := sb.Stat(ctx, "/home/user/over.bin"); client.StatusCode(err) != 404 {
		t.Errorf("a refused upload left its target: %v", err)
	}

	// Space is freed: sandboxes are made again.
	if err := os.Remove(filepath.Join(dataDir, "filler")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSandbox(ctx, client.SandboxRequest{ID: "b"}); err != nil {
		t.Errorf("a new sandbox once space was freed: %v", err)
	} else if err := c.DeleteSandbox(ctx, "b"); err != nil {
		t.Error(err)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestCrashMidUpload: codecell is killed with SIGKILL while an upload is
// half received, one to a new name and one over an existing file. No partial
// file is ever visible at either target, neither while the upload lasts nor
// after the crash; the next server serves the old file intact and lists no
// temporary file, and uploads work.
func TestCrashMidUpload(t *testing.T) {
	requireJail(t)
	bin := buildBinary(t)
	dataDir := newDataDir(t)
	parent := cgroupParent(t, "crashtest")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv1, url1, exited1 := serveAt(t, bin, dataDir, parent)
	c1 := newClient(t, url1)
	if _, err := c1.CreateSandbox(ctx, client.SandboxRequest{ID: "up"}); err != nil {
		t.Fatal(err)
	}
	old := []byte("the old content\n")
	if _, err := c1.Sandbox("up").WriteFile(ctx, "/tmp/data/old.csv", bytes.NewReader(old)); err != nil {
		t.Fatal(err)
	}
	// The sandbox's files as its code sees them, through its mounted disk.
	tmpDir := filepath.Join(dataDir, "sandboxes", "up", "fs", "tmp", "data")
	staging := filepath.Join(dataDir, "sandboxes", "up", "fs", "staging")

	var pws []*io.PipeWriter
	for _, target := range []string{"/tmp/data/new.csv", "/tmp/data/old.csv"} {
		pr, pw := io.Pipe()
		pws = append(pws, pw)
		go c1.Sandbox("up").WriteFile(ctx, target, pr)
		go pw.Write(bytes.Repeat([]byte("half,"), 1<<20))
	}
	// Both uploads are on the server's disk, half received.
	deadline := time.Now().Add(time.Minute)
	for {
		var staged int64
		ents, _ := os.ReadDir(staging)
		for _, e := range ents {
			if fi, err := e.Info(); err == nil && fi.Size() >= 5<<20 {
				staged++
			}
		}
		if staged == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the uploads never reached the sandbox's disk: %v", ents)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ents, _ := os.ReadDir(tmpDir); len(ents) != 1 || ents[0].Name() != "old.csv" {
		t.Errorf("user code sees %v while the uploads last, want only old.csv", ents)
	}
	srv1.Process.Signal(syscall.SIGKILL)
	<-exited1
	for _, pw := range pws {
		pw.CloseWithError(errors.New("server gone"))
	}
	if b, err := os.ReadFile(filepath.Join(tmpDir, "old.csv")); err != nil || !bytes.Equal(b, old) {
		t.Errorf("old.csv right after the crash: %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(tmpDir, "new.csv")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("new.csv exists right after the crash: %v", err)
	}

	srv2, url2, exited2 := serveAt(t, bin, dataDir, parent)
	defer stopServer(t, srv2, exited2)
	c2 := newClient(t, url2)
	sb := c2.Sandbox("up")
	defer c2.DeleteSandbox(context.WithoutCancel(ctx), "up")
	l, err := sb.ListFiles(ctx, "/tmp/data")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Files) != 1 || l.Files[0].Name != "old.csv" {
		t.Errorf("after the crash /tmp/data lists %+v, want only old.csv", l.Files)
	}
	if got, err := readAllFile(ctx, sb, "/tmp/data/old.csv"); err != nil || !bytes.Equal(got, old) {
		t.Errorf("old.csv after the crash: %q, %v", got, err)
	}
	if ents, err := os.ReadDir(staging); err != nil || len(ents) != 0 {
		t.Errorf("the staged halves were not removed: %v, %v", ents, err)
	}
	res, err := sb.Execute(ctx, client.ExecuteRequest{Language: client.Python,
		Code: "import os; print(sorted(os.listdir('/tmp/data')), end='')"})
	if err != nil || res.Err() != nil || res.Stdout != "['old.csv']" {
		t.Errorf("code lists /tmp/data after the crash: %+v, %v", res, err)
	}
	if _, err := sb.WriteFile(ctx, "/tmp/data/new.csv", strings.NewReader("a,b\n")); err != nil {
		t.Errorf("uploading after the crash: %v", err)
	}
}
