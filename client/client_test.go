package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"image/png"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codecell/codecell/client"
	"github.com/codecell/codecell/internal/api"
	"github.com/codecell/codecell/internal/cgroup"
	"github.com/codecell/codecell/internal/doctor"
	"github.com/codecell/codecell/internal/jail"
	"github.com/codecell/codecell/internal/jupyter"
	"github.com/codecell/codecell/internal/sandbox"
)

func TestMain(m *testing.M) {
	jail.RunHelperIfRequested()
	os.Exit(m.Run())
}

const testKey = "client-test-key"

// newServer starts a real codecell API on loopback, with real jails, as
// internal/api's tests do, and returns its URL.
func newServer(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: sandboxes get their own host uid, cgroup and loop-mounted disk")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("needs bubblewrap: apt-get install bubblewrap")
	}
	host, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o711)
	}
	specs, _ := jupyter.FindKernelSpecs(jupyter.DataDirs())
	parent := fmt.Sprintf("codecell-clienttest-%d", os.Getpid())
	cfg := sandbox.Config{
		KernelSpecs:  specs,
		DataDir:      filepath.Join(dir, "data"),
		Cgroups:      host,
		CgroupParent: parent,
		Limits:       sandbox.Limits{MemoryBytes: 2 << 30, Pids: 512, DiskBytes: 64 << 20},
	}
	mgr := sandbox.NewManager(sandbox.ManagerConfig{Sandbox: cfg, MaxSandboxes: 5})
	rt := doctor.ProbeRuntimes(cfg)
	h := api.New(api.Config{Manager: mgr, APIKey: testKey, Version: "test", Layers: doctor.Prerequisites(cfg, rt), Runtimes: &rt})
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ts.Close()
		if err := mgr.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		for _, ctl := range []string{"", "memory", "pids", "cpu", "freezer"} {
			os.Remove(filepath.Join("/sys/fs/cgroup", ctl, parent))
		}
	})
	return ts.URL
}

func newClient(t *testing.T) (*client.Client, string) {
	t.Helper()
	url := newServer(t)
	c, err := client.New(url, client.WithAPIKey(testKey))
	if err != nil {
		t.Fatal(err)
	}
	return c, url
}

// noErr fails the test at once on an error.
func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantStatus fails unless err carries an *APIError of status.
func wantStatus(t *testing.T, what string, err error, status int) *client.APIError {
	t.Helper()
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != status {
		t.Fatalf("%s: got %v, want an APIError with status %d", what, err, status)
	}
	if client.StatusCode(err) != status {
		t.Errorf("StatusCode(%v) = %d", err, client.StatusCode(err))
	}
	return ae
}

func TestNewRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:18091", "ftp://host", "http://", "http://host/?x=1", "://"} {
		if _, err := client.New(u); err == nil {
			t.Errorf("New(%q) gave no error", u)
		}
	}
}

// The client's package uses the standard library only.
func TestStandardLibraryOnly(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		pf, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		noErr(t, err)
		for _, imp := range pf.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}

func TestInfo(t *testing.T) {
	c, url := newClient(t)
	ctx := context.Background()
	h, err := c.Health(ctx)
	noErr(t, err)
	if h.Status != "ok" || h.Version != "test" {
		t.Errorf("health: %+v", h)
	}
	caps, err := c.Capabilities(ctx)
	noErr(t, err)
	if !slices.Contains(caps.CodeInterpreter.Languages, client.Python) || caps.CodeInterpreter.PythonPackages["pandas"] == "" ||
		caps.Limits.MemoryBytes != 2<<30 || caps.FileSystem.HomeDir != "/home/user" || len(caps.Isolation) == 0 {
		t.Errorf("capabilities: %+v", caps)
	}

	// Without the key: /health answers, the rest is a 401.
	anon, err := client.New(url + "/")
	noErr(t, err)
	if _, err := anon.Health(ctx); err != nil {
		t.Errorf("health without a key: %v", err)
	}
	_, err = anon.Capabilities(ctx)
	if ae := wantStatus(t, "capabilities without a key", err, 401); !strings.Contains(ae.Message, "API key") {
		t.Errorf("401 message: %q", ae.Message)
	}
}

// TestPandasFlow: a CSV written to the sandbox, described by pandas in a
// session, and charted with matplotlib.
func TestPandasFlow(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	const csv = "region,revenue\nnorth,120\nsouth,80\neast,100\nwest,60\n"
	w, err := c.WriteText(ctx, "/tmp/analysis/sales.csv", csv)
	noErr(t, err)
	if w.Path != "/tmp/analysis/sales.csv" || w.Size != int64(len(csv)) {
		t.Errorf("WriteText: %+v", w)
	}
	exec := func(code string) *client.Result {
		t.Helper()
		res, err := c.Execute(ctx, client.ExecuteRequest{Language: client.Python, Code: code, SessionID: "pd", Timeout: time.Minute})
		noErr(t, err)
		if err := res.Err(); err != nil {
			t.Fatalf("%q: %v\n%v", code, err, res.Outputs)
		}
		return res
	}
	first := exec("import pandas as pd\ndf = pd.read_csv('/tmp/analysis/sales.csv')\nprint(len(df))\ndf['revenue'].describe()")
	if first.Stdout != "4\n" || !strings.Contains(first.Text(), "mean      90.0") || !strings.Contains(first.Text(), "count      4.0") {
		t.Errorf("describe: stdout %q, value %q", first.Stdout, first.Text())
	}
	if first.SessionID != "pd" || first.Status != client.StatusOK || first.ExitCode != 0 || first.Usage.WallTime <= 0 || first.Usage.PeakMemoryBytes <= 0 {
		t.Errorf("result: %+v", first)
	}
	chart := exec("import matplotlib.pyplot as plt\ndf.plot.bar(x='region', y='revenue')\nplt.show()")
	if chart.ExecutionCount != first.ExecutionCount+1 {
		t.Errorf("execution count %d after %d: not the same session?", chart.ExecutionCount, first.ExecutionCount)
	}
	var images int
	for _, o := range chart.Outputs {
		if o.OutputType != "display_data" {
			continue
		}
		b, err := o.PNG()
		noErr(t, err)
		img, err := png.Decode(bytes.NewReader(b))
		noErr(t, err)
		if img.Bounds().Dx() < 100 || img.Bounds().Dy() < 100 {
			t.Errorf("chart is %v", img.Bounds())
		}
		images++
	}
	if images != 1 {
		t.Errorf("%d images in %+v", images, chart.Outputs)
	}
	if _, err := first.Outputs[0].PNG(); err == nil {
		t.Error("PNG of a stream output gave no error")
	}
}

// TestStreaming: outputs arrive while the code runs, in order, before the
// result. The cell waits for a file that the callback writes only when it
// has the first output: a client that held outputs back would never write
// it, and the cell would time out.
func TestStreaming(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	var (
		mu       sync.Mutex
		got      []client.Output
		released = make(chan error, 1)
	)
	code := "import os, time\nprint('first', flush=True)\nwhile not os.path.exists('/tmp/go'): time.sleep(0.05)\nprint('second')\n6 * 7"
	res, err := c.ExecuteStream(ctx, client.ExecuteRequest{Language: client.Python, Code: code, Timeout: 20 * time.Second}, func(o client.Output) {
		mu.Lock()
		got = append(got, o)
		n := len(got)
		mu.Unlock()
		if n == 1 {
			go func() {
				_, err := c.WriteText(ctx, "/tmp/go", "")
				released <- err
			}()
		}
	})
	noErr(t, err)
	noErr(t, <-released)
	mu.Lock()
	defer mu.Unlock()
	if res.Status != client.StatusOK || res.Stdout != "first\nsecond\n" || res.Text() != "42" {
		t.Fatalf("result: %+v", res)
	}
	var texts []string
	for _, o := range got {
		texts = append(texts, o.OutputType+":"+o.Text+fmt.Sprint(o.Data["text/plain"]))
	}
	want := []string{"stream:first\n<nil>", "stream:second\n<nil>", "execute_result:42"}
	if !slices.Equal(texts, want) {
		t.Errorf("outputs streamed %q, want %q", texts, want)
	}

	// An exception streams its error output, and the result says so.
	var kinds []string
	res, err = c.ExecuteStream(ctx, client.ExecuteRequest{Language: client.JavaScript, Code: "console.log('a'); null.x"}, func(o client.Output) {
		kinds = append(kinds, o.OutputType)
	})
	noErr(t, err)
	if res.Status != client.StatusError || !slices.Equal(kinds, []string{"stream", "error"}) || !strings.Contains(res.Err().Error(), "TypeError") {
		t.Errorf("streamed exception: %v, outputs %v", res.Err(), kinds)
	}
	// Errors found before the stream began keep their status.
	_, err = c.ExecuteStream(ctx, client.ExecuteRequest{Language: "cobol", Code: "1"}, func(client.Output) { t.Error("an output for bad input") })
	wantStatus(t, "stream in an unknown language", err, 422)
}

// TestErrors: an exception or a timeout is a result; what the server
// refuses is an *APIError.
func TestErrors(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	res, err := c.Execute(ctx, client.ExecuteRequest{Language: client.Python, Code: "print('before')\n1/0"})
	noErr(t, err)
	var ce *client.CodeError
	if !errors.As(res.Err(), &ce) || ce.Ename != "ZeroDivisionError" || ce.Evalue != "division by zero" || len(ce.Traceback) == 0 {
		t.Errorf("exception: %#v", res.Err())
	}
	if res.Status != client.StatusError || res.ExitCode != 1 || res.Stdout != "before\n" || res.Message != "ZeroDivisionError: division by zero" || res.SessionID != "" {
		t.Errorf("exception result: %+v", res)
	}

	res, err = c.Execute(ctx, client.ExecuteRequest{Language: client.Python, Code: "while True: pass", Timeout: time.Second})
	noErr(t, err)
	if !errors.As(res.Err(), &ce) || ce.Status != client.StatusTimeout || res.ExitCode != 124 {
		t.Errorf("timeout: %+v, %v", res, res.Err())
	}

	_, err = c.GetSession(ctx, "no-such-session", client.Python)
	wantStatus(t, "unknown session", err, 404)
	if !strings.Contains(err.Error(), "/v2/code/sessions/no-such-session") {
		t.Errorf("the error does not name the request: %v", err)
	}
	_, err = c.Execute(ctx, client.ExecuteRequest{Language: "cobol", Code: "1"})
	ae := wantStatus(t, "unknown language", err, 422)
	if d, ok := ae.Detail.([]any); !ok || len(d) != 1 || !strings.Contains(fmt.Sprint(d[0]), "language") {
		t.Errorf("422 detail: %#v", ae.Detail)
	}
	_, err = c.Execute(ctx, client.ExecuteRequest{Language: client.Python, Code: "1", Timeout: time.Hour})
	wantStatus(t, "timeout above the maximum", err, 422)
}

// TestSessionControl: create, list, interrupt (state kept), complete,
// inspect, restart (state cleared) and delete.
func TestSessionControl(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	s, err := c.CreateSession(ctx, client.Python, "ctl")
	noErr(t, err)
	if s.ID != "ctl" || s.Language != client.Python || !s.Alive || s.Busy {
		t.Errorf("created: %+v", s)
	}
	js, err := c.CreateSession(ctx, client.JavaScript, "")
	noErr(t, err)
	if js.ID == "" || js.Language != client.JavaScript {
		t.Errorf("created: %+v", js)
	}
	list, err := c.ListSessions(ctx, "")
	noErr(t, err)
	pyOnly, err := c.ListSessions(ctx, client.Python)
	noErr(t, err)
	if len(list) != 2 || len(pyOnly) != 1 || pyOnly[0].ID != "ctl" {
		t.Errorf("sessions: all %+v, python %+v", list, pyOnly)
	}

	exec := func(code string) *client.Result {
		t.Helper()
		res, err := c.Execute(ctx, client.ExecuteRequest{Language: client.Python, Code: code, SessionID: "ctl", Timeout: 2 * time.Minute})
		noErr(t, err)
		return res
	}
	exec("x = 5\nmy_long_name = 1")
	long := make(chan *client.Result)
	go func() { long <- exec("import time\ntime.sleep(60)") }()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s, err := c.GetSession(ctx, "ctl", "")
		noErr(t, err)
		if s.Busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the session never became busy")
		}
	}
	start := time.Now()
	interrupted, err := c.Interrupt(ctx, "ctl", client.Python)
	noErr(t, err)
	res := <-long
	if !interrupted || res.Status != client.StatusError || res.Err().(*client.CodeError).Ename != "KeyboardInterrupt" || time.Since(start) > 30*time.Second {
		t.Errorf("interrupt: %v, cell %v after %v", interrupted, res.Err(), time.Since(start))
	}
	if got := exec("x").Text(); got != "5" {
		t.Errorf("x after the interrupt: %q", got)
	}

	comp, err := c.Complete(ctx, "ctl", client.Python, "my_lo + 1", 5)
	noErr(t, err)
	if !slices.Contains(comp.Matches, "my_long_name") || comp.CursorStart != 0 || comp.CursorEnd != 5 {
		t.Errorf("completion: %+v", comp)
	}
	comp, err = c.Complete(ctx, "ctl", "", "import os\nos.pa", -1)
	noErr(t, err)
	if !slices.Contains(comp.Matches, "path") {
		t.Errorf("completion at the end: %+v", comp)
	}
	in, err := c.Inspect(ctx, "ctl", client.Python, "len(", -1, 0)
	noErr(t, err)
	if text, _ := in.Data["text/plain"].(string); !in.Found || !strings.Contains(text, "Return the number of items") {
		t.Errorf("inspect len: %+v", in)
	}
	in, err = c.Inspect(ctx, "ctl", client.Python, "no_such_name", -1, 1)
	noErr(t, err)
	if in.Found {
		t.Errorf("inspect of an unknown name: %+v", in)
	}
	_, err = c.Inspect(ctx, "ctl", client.Python, "len", -1, 2)
	wantStatus(t, "detail level 2", err, 422)

	s, err = c.Restart(ctx, "ctl", client.Python)
	noErr(t, err)
	if !s.Alive {
		t.Errorf("after restart: %+v", s)
	}
	if res := exec("x"); res.Err() == nil || res.Err().(*client.CodeError).Ename != "NameError" {
		t.Errorf("x after restart: %v", res.Err())
	}

	noErr(t, c.DeleteSession(ctx, "ctl", client.Python))
	noErr(t, c.DeleteSession(ctx, js.ID, ""))
	_, err = c.GetSession(ctx, "ctl", client.Python)
	wantStatus(t, "deleted session", err, 404)
	_, err = c.Interrupt(ctx, "ctl", "")
	wantStatus(t, "interrupt of a deleted session", err, 404)
	_, err = c.Restart(ctx, "ctl", "")
	wantStatus(t, "restart of a deleted session", err, 404)
	_, err = c.Complete(ctx, "ctl", "", "x", -1)
	wantStatus(t, "complete in a deleted session", err, 404)
	list, err = c.ListSessions(ctx, "")
	noErr(t, err)
	if len(list) != 0 {
		t.Errorf("sessions left: %+v", list)
	}
}

// TestSandboxes: a sandbox made, found, used through its scoped client
// (its files are its own) and deleted.
func TestSandboxes(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	info, err := c.CreateSandbox(ctx, client.SandboxRequest{ID: "cl-sb", TTL: 10 * time.Minute,
		Labels: map[string]string{"team": "a"}, Limits: &client.Limits{MemoryMB: 512, TimeoutSeconds: 10}})
	noErr(t, err)
	if info.ID != "cl-sb" || info.BasePath != "/sandboxes/cl-sb" || info.ExpiresAt == nil || time.Until(*info.ExpiresAt) > 11*time.Minute ||
		info.Limits.MemoryMB != 512 || info.Limits.TimeoutSeconds != 10 || info.Labels["team"] != "a" {
		t.Errorf("created: %+v", info)
	}
	_, err = c.CreateSandbox(ctx, client.SandboxRequest{ID: "cl-sb"})
	wantStatus(t, "an existing id", err, 409)
	_, err = c.CreateSandbox(ctx, client.SandboxRequest{Limits: &client.Limits{MemoryMB: 1 << 20}})
	wantStatus(t, "limits above the server's", err, 422)

	for labels, want := range map[string][]string{"a": {"cl-sb"}, "b": nil} {
		list, err := c.ListSandboxes(ctx, map[string]string{"team": labels})
		noErr(t, err)
		var ids []string
		for _, sb := range list {
			ids = append(ids, sb.ID)
		}
		if !slices.Equal(ids, want) {
			t.Errorf("sandboxes of team %s: %v, want %v", labels, ids, want)
		}
	}
	got, err := c.GetSandbox(ctx, "cl-sb")
	noErr(t, err)
	if got.ID != "cl-sb" || got.Disk.TotalBytes == 0 {
		t.Errorf("get: %+v", got)
	}

	sb := c.Sandbox("cl-sb")
	_, err = sb.WriteText(ctx, "/tmp/only-here.txt", "scoped")
	noErr(t, err)
	res, err := sb.Execute(ctx, client.ExecuteRequest{Language: client.Python, Code: "open('/tmp/only-here.txt').read()", SessionID: "s"})
	noErr(t, err)
	if res.Text() != "'scoped'" {
		t.Errorf("the sandbox's own file: %+v", res)
	}
	_, err = c.Stat(ctx, "/tmp/only-here.txt")
	wantStatus(t, "the sandbox's file seen from the default sandbox", err, 404)
	caps, err := sb.Capabilities(ctx)
	noErr(t, err)
	if caps.Limits.MemoryBytes != 512<<20 {
		t.Errorf("scoped capabilities: %+v", caps.Limits)
	}
	if got, err := sb.GetSandbox(ctx, "cl-sb"); err != nil || got.Sessions["python"] != 1 {
		t.Errorf("server routes through a scoped client: %+v, %v", got, err)
	}
	// Live resource use: the session holds 64 MiB and spent 0.3 s of CPU.
	_, err = sb.Execute(ctx, client.ExecuteRequest{Language: client.Python, SessionID: "s",
		Code: "import time\nheld = bytearray(64 << 20)\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"})
	noErr(t, err)
	got, err = c.GetSandbox(ctx, "cl-sb")
	noErr(t, err)
	if u := got.Usage; u.MemoryBytes < 64<<20 || u.MemoryBytes > 512<<20 || u.Pids < 1 || u.Executions != 2 ||
		u.CPUSeconds < 0.25 || u.DiskBytes <= 0 || u.OOMKills != 0 {
		t.Errorf("usage of a sandbox holding 64 MiB after 0.3 s of CPU: %+v", u)
	}

	noErr(t, c.DeleteSandbox(ctx, "cl-sb"))
	_, err = c.GetSandbox(ctx, "cl-sb")
	wantStatus(t, "deleted sandbox", err, 404)
	_, err = sb.Execute(ctx, client.ExecuteRequest{Language: client.Python, Code: "1"})
	wantStatus(t, "execution in a deleted sandbox", err, 404)
	wantStatus(t, "deleting it again", c.DeleteSandbox(ctx, "cl-sb"), 404)
}

// failingReader fails after its content.
type failingReader struct{ r io.Reader }

var errSource = errors.New("the source broke")

func (f failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errSource
	}
	return n, err
}

// TestFiles: binary bytes round-trip through upload and download; stat,
// list, mkdir and delete do what they say.
func TestFiles(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	w, err := c.WriteFile(ctx, "data/blob.bin", bytes.NewReader(data))
	noErr(t, err)
	if w.Path != "/home/user/data/blob.bin" || w.Size != int64(len(data)) {
		t.Errorf("WriteFile: %+v", w)
	}
	rc, err := c.ReadFile(ctx, "~/data/blob.bin")
	noErr(t, err)
	back, err := io.ReadAll(rc)
	rc.Close()
	noErr(t, err)
	if !bytes.Equal(back, data) {
		t.Errorf("read %d bytes back, not the %d written", len(back), len(data))
	}

	fi, err := c.Stat(ctx, "/home/user/data/blob.bin")
	noErr(t, err)
	if fi.Name != "blob.bin" || fi.Type != "file" || fi.IsDir || fi.Size != int64(len(data)) || time.Since(fi.ModTime) > time.Minute {
		t.Errorf("stat: %+v", fi)
	}
	dir, err := c.Mkdir(ctx, "data/out/sub")
	noErr(t, err)
	if !dir.IsDir || dir.Path != "/home/user/data/out/sub" {
		t.Errorf("mkdir: %+v", dir)
	}
	l, err := c.ListFiles(ctx, "/home/user/data")
	noErr(t, err)
	var names []string
	for _, f := range l.Files {
		names = append(names, fmt.Sprintf("%s:%v", f.Name, f.IsDir))
		if f.Name == "blob.bin" && f.Size != int64(len(data)) {
			t.Errorf("listed size %d", f.Size)
		}
	}
	slices.Sort(names)
	if l.Path != "/home/user/data" || l.Truncated || !slices.Equal(names, []string{"blob.bin:false", "out:true"}) {
		t.Errorf("list: %+v (%v)", l, names)
	}

	noErr(t, c.DeleteFile(ctx, "data/blob.bin", false))
	_, err = c.Stat(ctx, "data/blob.bin")
	wantStatus(t, "deleted file", err, 404)
	_, err = c.ReadFile(ctx, "data/blob.bin")
	wantStatus(t, "download of a deleted file", err, 404)
	wantStatus(t, "non-recursive delete of a full directory", c.DeleteFile(ctx, "data", false), 400)
	noErr(t, c.DeleteFile(ctx, "data", true))
	_, err = c.ListFiles(ctx, "data")
	wantStatus(t, "list of a deleted directory", err, 404)
	_, err = c.WriteText(ctx, "/etc/passwd", "x")
	wantStatus(t, "write outside home and /tmp", err, 400)

	// A source that fails fails the upload, with its error, and leaves no file.
	_, err = c.WriteFile(ctx, "/tmp/partial.bin", failingReader{bytes.NewReader(data[:100000])})
	if !errors.Is(err, errSource) {
		t.Errorf("upload from a failing source: %v", err)
	}
	_, err = c.Stat(ctx, "/tmp/partial.bin")
	wantStatus(t, "the failed upload's file", err, 404)
}
