package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codecell/codecell/client"
	"github.com/codecell/codecell/internal/doctor"
)

const cliTestKey = "cli-test-key"

// startServer runs `codecell serve` on a free loopback port, with an API
// key and extra flags, and returns its URL; the server is stopped (SIGTERM)
// at the end.
func startServer(t *testing.T, bin string, extra ...string) string {
	t.Helper()
	cmd, url, exited := serveAt(t, bin, newDataDir(t), cgroupParent(t, "clitest"), extra...)
	t.Cleanup(func() { stopServer(t, cmd, exited) })
	return url
}

// cli runs the binary and returns its exit status, stdout and stderr.
func cli(t *testing.T, dir, stdin string, env []string, bin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	// The caller's environment must not choose the server or its key.
	cmd.Env = append(os.Environ(), "CODECELL_SERVER=", "CODECELL_API_KEY=", "AIO_API_KEY=")
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run()
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// TestRunRemote: `codecell run --server` runs on a real server, prints as
// a local run prints, keeps a session's state between runs, uploads --put
// files first and exits as a local run does.
func TestRunRemote(t *testing.T) {
	requireJail(t)
	bin := buildBinary(t)
	url := startServer(t, bin)
	dir := t.TempDir()
	remote := []string{"run", "--server", url, "--api-key", cliTestKey}

	// State kept in a session between two runs, and a --put file.
	csv := filepath.Join(dir, "v.csv")
	if err := os.WriteFile(csv, []byte("v\n1\n2\n3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := cli(t, dir, "x = 7\nprint('set')", nil, bin, append(remote, "--session", "s1", "-")...); code != 0 || out != "set\n" {
		t.Fatalf("first run: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut := cli(t, dir, "import pandas as pd\nint(pd.read_csv('/tmp/in/v.csv')['v'].sum() * x)", nil, bin,
		append(remote, "--session", "s1", "--put", csv+":/tmp/in/v.csv", "-")...)
	if code != 0 || out != "42\n" {
		t.Fatalf("second run: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// ^C during a session's cell interrupts the cell: the session stays,
	// with its state, ready for the next run.
	c := newClient(t, url)
	long := exec.Command(bin, append(remote, "--session", "s1", "-")...)
	long.Stdin = strings.NewReader("import time\ntime.sleep(60)")
	if err := long.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if s, err := c.GetSession(context.Background(), "s1", client.Python); err == nil && s.Busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the session never became busy")
		}
	}
	long.Process.Signal(os.Interrupt)
	long.Wait()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s, err := c.GetSession(context.Background(), "s1", client.Python)
		if err != nil {
			t.Fatal(err)
		}
		if !s.Busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cell still runs 10s after ^C: it was not interrupted")
		}
	}
	if code, out, errOut := cli(t, dir, "print(x)", nil, bin, append(remote, "--session", "s1", "-")...); code != 0 || out != "7\n" {
		t.Errorf("after ^C: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// Without the session, a fresh interpreter.
	if code, _, errOut := cli(t, dir, "x", nil, bin, append(remote, "-")...); code != 1 || !strings.Contains(errOut, "NameError") {
		t.Errorf("one-shot run: exit %d, stderr %q", code, errOut)
	}

	// Printed exactly as a local run prints, text and JSON.
	mixed := "import sys\nprint('out')\nprint('err', file=sys.stderr)\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\n{'k': [1, 2]}"
	dataDir := newDataDir(t)
	for _, flags := range [][]string{nil, {"--json"}} {
		lcode, lout, lerr := cli(t, dir, mixed, nil, bin, append(append([]string{"run", "--data-dir", dataDir}, flags...), "-")...)
		rcode, rout, rerr := cli(t, dir, mixed, nil, bin, append(append(remote, flags...), "-")...)
		if lcode != 0 || rcode != lcode || rout != lout || rerr != lerr {
			t.Errorf("run %v: local exit %d, stdout %q, stderr %q\nremote exit %d, stdout %q, stderr %q", flags, lcode, lout, lerr, rcode, rout, rerr)
		}
	}

	// Figures to --out-dir; JavaScript from CODECELL_SERVER and a key from
	// CODECELL_API_KEY.
	outDir := filepath.Join(dir, "charts")
	if code, out, errOut := cli(t, dir, "import matplotlib.pyplot as plt\nplt.plot([3, 1, 2])\nplt.show()", nil, bin,
		append(remote, "--out-dir", outDir, "-")...); code != 0 || !strings.Contains(out, "[image/png written to "+outDir+"/output-1.png]") {
		t.Errorf("--out-dir: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if f, err := os.Open(filepath.Join(outDir, "output-1.png")); err != nil {
		t.Error(err)
	} else if _, err := png.Decode(f); err != nil {
		t.Errorf("the chart is not a PNG: %v", err)
	}
	env := []string{"CODECELL_SERVER=" + url, "CODECELL_API_KEY=" + cliTestKey}
	if code, out, errOut := cli(t, dir, "await Promise.resolve(6 * 7)", env, bin, "run", "--lang", "javascript", "-"); code != 0 || out != "42\n" {
		t.Errorf("javascript from the environment's server: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// Exit statuses, and errors that name the problem.
	for _, tc := range []struct {
		name, code string
		args       []string
		exit       int
		stderr     string
	}{
		{"exception", "1/0", nil, 1, "ZeroDivisionError"},
		{"timeout", "while True: pass", []string{"--timeout", "1s"}, 124, ""},
		{"wrong key", "1", []string{"--api-key", "wrong"}, 1, "401 Unauthorized: missing or wrong API key"},
		{"missing --put file", "1", []string{"--put", filepath.Join(dir, "nope") + ":/tmp/x"}, 1, "no such file"},
		{"no server", "1", []string{"--server", "http://127.0.0.1:1"}, 1, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := cli(t, dir, tc.code, nil, bin, append(append(remote, tc.args...), "-")...)
			if code != tc.exit || !strings.Contains(errOut, tc.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut, tc.exit, tc.stderr)
			}
		})
	}
}

// TestFilesCommand: files put, ls and get round-trip binary bytes through a
// real server.
func TestFilesCommand(t *testing.T) {
	requireJail(t)
	bin := buildBinary(t)
	url := startServer(t, bin)
	dir := t.TempDir()
	srv := []string{"--server", url, "--api-key", cliTestKey}
	files := func(stdin string, args ...string) (int, string, string) {
		t.Helper()
		return cli(t, dir, stdin, nil, bin, append(append([]string{"files"}, args...), srv...)...)
	}
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 31 >> 3)
	}
	local := filepath.Join(dir, "blob.bin")
	if err := os.WriteFile(local, data, 0o644); err != nil {
		t.Fatal(err)
	}

	if code, out, errOut := files("", "put", local, "/tmp/up/blob.bin"); code != 0 || out != "/tmp/up/blob.bin: 1048576 bytes\n" {
		t.Fatalf("put: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, errOut := files("", "put", local, "/tmp/up/"); code != 0 || out != "/tmp/up/blob.bin: 1048576 bytes\n" {
		t.Errorf("put into a directory: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, errOut := files("some notes\n", "put", "-", "notes.txt"); code != 0 || out != "/home/user/notes.txt: 11 bytes\n" {
		t.Errorf("put from stdin: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	code, out, errOut := files("", "ls", "/tmp/up")
	if code != 0 || !regexp.MustCompile(`(?m)^\s*\d{3}\s+1048576\s+\d{4}-\d\d-\d\d \d\d:\d\d\s+blob\.bin$`).MatchString(out) {
		t.Errorf("ls /tmp/up: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, _ := files("", "ls"); code != 0 || !strings.Contains(out, " notes.txt\n") {
		t.Errorf("ls: exit %d, stdout %q", code, out)
	}

	// get: to a named file, into a directory, to the current directory, to stdout.
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	for _, tc := range []struct{ dst, file string }{
		{filepath.Join(dir, "back.bin"), filepath.Join(dir, "back.bin")},
		{sub, filepath.Join(sub, "blob.bin")},
		{"", filepath.Join(dir, "blob.bin")},
	} {
		os.Remove(tc.file)
		args := []string{"get", "/tmp/up/blob.bin"}
		if tc.dst != "" {
			args = append(args, tc.dst)
		}
		if code, _, errOut := files("", args...); code != 0 {
			t.Errorf("get to %q: exit %d, stderr %q", tc.dst, code, errOut)
		}
		if back, err := os.ReadFile(tc.file); err != nil || !bytes.Equal(back, data) {
			t.Errorf("get to %q: %d bytes, %v; want the %d put", tc.dst, len(back), err, len(data))
		}
	}
	if code, out, _ := files("", "get", "notes.txt", "-"); code != 0 || out != "some notes\n" {
		t.Errorf("get to stdout: exit %d, stdout %q", code, out)
	}

	// Errors name the problem, and a failed get leaves no file.
	for _, tc := range []struct {
		args   []string
		exit   int
		stderr string
	}{
		{[]string{"get", "/tmp/up/missing.bin", filepath.Join(dir, "missing.bin")}, 1, "files get: GET /v2/fs/download: 404 Not Found"},
		{[]string{"ls", "/etc"}, 1, "files ls: GET /v2/fs/list: 400 Bad Request"},
		{[]string{"put", filepath.Join(dir, "nope"), "x"}, 1, "no such file or directory"},
		{[]string{"get"}, 2, "wrong number of arguments"},
		{[]string{"mv", "a", "b"}, 2, `unknown command "mv"`},
	} {
		if code, _, errOut := files("", tc.args...); code != tc.exit || !strings.Contains(errOut, tc.stderr) {
			t.Errorf("files %v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.exit, tc.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.bin")); err == nil {
		t.Error("a failed get left a file")
	}
	if code, _, errOut := cli(t, dir, "", nil, bin, "files", "ls"); code != 1 || !strings.Contains(errOut, "no server: give --server URL or set CODECELL_SERVER") {
		t.Errorf("ls without a server: exit %d, stderr %q", code, errOut)
	}
}

// TestDoctorServer: `codecell doctor --server` adds the server and the live
// resource use of each of its sandboxes to its checks; a server that does
// not answer, or refuses the key, is a failed check.
func TestDoctorServer(t *testing.T) {
	requireJail(t)
	bin := buildBinary(t)
	url := startServer(t, bin)
	c := newClient(t, url)
	ctx := context.Background()
	if _, err := c.Execute(ctx, client.ExecuteRequest{Language: client.Python, SessionID: "d", Code: "held = bytearray(48 << 20)"}); err != nil {
		t.Fatal(err)
	}
	checks := func(args ...string) (int, map[string]doctor.Check) {
		t.Helper()
		code, stdout, stderr := cli(t, t.TempDir(), "", nil, bin, append([]string{"doctor", "--json"}, args...)...)
		var list []doctor.Check
		if err := json.Unmarshal([]byte(stdout), &list); err != nil {
			t.Fatalf("doctor --json: %v\n%s\n%s", err, stdout, stderr)
		}
		m := map[string]doctor.Check{}
		for _, ch := range list {
			m[ch.Layer] = ch
		}
		return code, m
	}
	code, m := checks("--server", url, "--api-key", cliTestKey)
	sb, ok := m["sandbox default"]
	if code != 0 || !m["server"].OK || !ok {
		t.Fatalf("doctor --server: exit %d, %+v", code, m)
	}
	// "memory 60.2 MiB of 1024.0 MiB, 3 processes, ..., 1 sessions, 1 executions ..."
	mem := regexp.MustCompile(`^memory ([0-9.]+) MiB of 1024\.0 MiB, [1-9][0-9]* processes, disk [0-9.]+ MiB of [0-9.]+ MiB, 1 sessions, 1 executions`).FindStringSubmatch(sb.Detail)
	if mem == nil {
		t.Fatalf("the default sandbox's use: %q", sb.Detail)
	}
	if v, _ := strconv.ParseFloat(mem[1], 64); v < 48 {
		t.Errorf("a sandbox holding 48 MiB reports %s MiB", mem[1])
	}
	if code, m := checks("--server", url, "--api-key", "wrong"); code != 1 || m["server"].OK || !strings.Contains(m["server"].Detail, "401") {
		t.Errorf("doctor with a wrong key: exit %d, %+v", code, m["server"])
	}
}
