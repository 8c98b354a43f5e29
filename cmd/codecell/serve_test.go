package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codecell/codecell/internal/sandbox"
)

// TestServeShutdown: SIGTERM ends running executions and leaves no process,
// mount or cgroup of any sandbox behind; the files stay.
func TestServeShutdown(t *testing.T) {
	requireJail(t)
	bin := buildBinary(t)
	dataDir := newDataDir(t)
	parent := fmt.Sprintf("codecell-servetest-%d", os.Getpid())
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir, "--cgroup-parent", parent)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	addr := ""
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
			break
		}
	}
	if addr == "" {
		t.Fatal("the server did not say where it listens")
	}
	var logs bytes.Buffer
	go func() {
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
		}
	}()
	post := func(path string, body any) (*http.Response, map[string]any) {
		b, _ := json.Marshal(body)
		resp, err := http.Post("http://"+addr+path, "application/json", bytes.NewReader(b))
		if err != nil {
			return nil, nil
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp, m
	}
	if resp, m := post("/v2/sandboxes", map[string]any{"id": "other"}); resp == nil || resp.StatusCode != 201 {
		t.Fatalf("create sandbox: %v", m)
	}
	for _, p := range []string{"/v2/code/execute", "/sandboxes/other/v2/code/execute"} {
		for _, lang := range []string{"python", "javascript"} {
			if resp, m := post(p, map[string]any{"language": lang, "code": "1", "session_id": "s"}); resp == nil || resp.StatusCode != 200 {
				t.Fatalf("%s %s: %v", p, lang, m)
			}
		}
	}
	post("/v2/code/execute", map[string]any{"language": "python", "code": "open('/tmp/kept', 'w').write('x')"})

	// A long execution is running when the signal comes.
	running := make(chan map[string]any, 1)
	go func() {
		_, m := post("/v2/code/execute", map[string]any{"language": "python", "code": "import time; time.sleep(300)", "session_id": "long", "timeout": 600})
		running <- m
	}()
	time.Sleep(2 * time.Second)
	uids := sandboxUIDs(parent)
	if len(uids) == 0 {
		t.Fatal("no sandbox processes found while sessions run")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve exited with %v\n%s", err, logs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not stop\n%s", logs.String())
	}
	select {
	case m := <-running:
		if m == nil || m["success"] != false {
			t.Errorf("the running execution got %v, want a reply that it ended", m)
		}
	case <-time.After(10 * time.Second):
		t.Error("the running execution got no reply")
	}

	for uid := range uids {
		if pids := processesOf(uid); len(pids) > 0 {
			t.Errorf("processes of sandbox uid %d left: %v", uid, pids)
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), dataDir) {
		t.Errorf("mounts under %s left behind", dataDir)
	}
	for _, ctl := range []string{"memory", "pids", "cpu", "unified"} {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", ctl, parent, sandbox.DefaultID)); err == nil {
			t.Errorf("cgroup %s/%s/default left behind", ctl, parent)
		}
	}
	// The default sandbox's files survive the shutdown on disk.
	if _, err := os.Stat(filepath.Join(dataDir, "sandboxes", "default", "disk.img")); err != nil {
		t.Errorf("the default sandbox's disk is gone: %v", err)
	}
	for _, ctl := range []string{"memory", "pids", "cpu", "freezer"} {
		os.Remove(filepath.Join("/sys/fs/cgroup", ctl, parent))
	}
}

// sandboxUIDs returns the uids of the processes in the cgroups under parent:
// this server's sandboxes, not those of anything else running codecell.
func sandboxUIDs(parent string) map[int]bool {
	uids := map[int]bool{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if uid := uidOf(pid); strings.Contains(string(cg), "/"+parent+"/") && uid >= sandbox.UIDBase {
			uids[uid] = true
		}
	}
	return uids
}

func processesOf(uid int) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && uidOf(pid) == uid {
			pids = append(pids, pid)
		}
	}
	return pids
}

func uidOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				uid, _ := strconv.Atoi(f[0])
				return uid
			}
		}
	}
	return -1
}

// Listening beyond loopback without an API key is refused unless --insecure.
func TestServeRefusesOpenAddressWithoutKey(t *testing.T) {
	out, err := exec.Command(buildBinary(t), "serve", "--addr", "0.0.0.0:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "without an API key") {
		t.Errorf("serve on 0.0.0.0 without a key: %v\n%s", err, out)
	}
}
