package jupyter

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// A kernel started for a test.
type testKernel struct {
	info   ConnectionInfo
	pid    int
	exited chan struct{} // closed when the process is gone
}

// startKernel starts the python3 kernelspec of the system (ipykernel) with
// a connection file of the given transport, and kills it when t ends.
func startKernel(t *testing.T, transport string) *testKernel {
	t.Helper()
	specs, _ := FindKernelSpecs([]string{"/usr/share/jupyter"})
	spec, ok := specs["python3"]
	if !ok {
		t.Skip("no python3 kernelspec in /usr/share/jupyter")
	}
	// Not t.TempDir: unix socket paths must stay short.
	dir, err := os.MkdirTemp("", "jk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var info ConnectionInfo
	switch transport {
	case "ipc":
		info, err = NewIPC(filepath.Join(dir, "k"))
	case "tcp":
		info, err = NewTCP("")
	}
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "kernel.json")
	if err := info.WriteFile(file); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	argv := spec.Command(file)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "IPYTHONDIR="+filepath.Join(dir, "ipython"), "JUPYTER_RUNTIME_DIR="+dir)
	cmd.Stdout, cmd.Stderr = log, log
	// ipykernel answers interrupt_request by signalling its process group
	// when it leads one: it must not be the test's.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	k := &testKernel{info: info, pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(k.exited)
	}()
	t.Cleanup(func() {
		syscall.Kill(k.pid, syscall.SIGKILL)
		<-k.exited
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			t.Logf("kernel output:\n%s", out)
		}
	})
	return k
}

// dial connects to k, closing the client when t ends.
func (k *testKernel) dial(t *testing.T) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, k.info)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// output is what one Execute published, in order.
type output struct {
	types  []string // msg_type of every iopub message
	stream string   // all stream text
	msgs   []Message
}

func (o *output) add(m Message) {
	o.types = append(o.types, m.Header.MsgType)
	o.msgs = append(o.msgs, m)
	if m.Header.MsgType == "stream" {
		var s struct{ Text string }
		json.Unmarshal(m.Content, &s)
		o.stream += s.Text
	}
}

// run executes code, failing t on error.
func run(t *testing.T, c *Client, code string, opts ExecuteOptions) (ExecuteReply, *output) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out := new(output)
	r, err := c.Execute(ctx, code, opts, out.add)
	if err != nil {
		t.Fatalf("Execute(%q): %v", code, err)
	}
	return r, out
}

// resultText returns the text/plain of the execute_result in out.
func resultText(out *output) string {
	for _, m := range out.msgs {
		if m.Header.MsgType == "execute_result" {
			var r struct {
				Data map[string]any `json:"data"`
			}
			json.Unmarshal(m.Content, &r)
			s, _ := r.Data["text/plain"].(string)
			return s
		}
	}
	return ""
}

func TestKernel(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"ipc", "tcp"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			k := startKernel(t, transport)
			c := k.dial(t)
			testKernel := func(name string, f func(t *testing.T, c *Client)) {
				t.Run(name, func(t *testing.T) { f(t, c) })
			}
			testKernel("KernelInfo", testKernelInfo)
			testKernel("State", testState)
			testKernel("Streams", testStreams)
			testKernel("Error", testError)
			testKernel("DisplayData", testDisplayData)
			testKernel("Complete", testComplete)
			testKernel("Inspect", testInspect)
			testKernel("Stdin", testStdin)
			testKernel("Heartbeat", testHeartbeat)
			testKernel("Interrupt", testInterrupt)
			t.Run("BadSignaturesDropped", func(t *testing.T) { testBadSignatures(t, k, c) })
			t.Run("Shutdown", func(t *testing.T) { testShutdown(t, k, c) })
		})
	}
}

func testKernelInfo(t *testing.T, c *Client) {
	info, err := c.KernelInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != "ok" || info.Implementation != "ipython" || info.LanguageInfo.Name != "python" ||
		info.LanguageInfo.FileExtension != ".py" || !strings.HasPrefix(info.ProtocolVersion, "5.") {
		t.Errorf("KernelInfo = %+v", info)
	}
}

// testState runs first among the cells, so its counts are known.
func testState(t *testing.T, c *Client) {
	if r, _ := run(t, c, "x = 41", ExecuteOptions{}); r.Status != "ok" || r.ExecutionCount != 1 {
		t.Errorf("x = 41: %+v", r)
	}
	r, out := run(t, c, "x + 1", ExecuteOptions{})
	if r.Status != "ok" || r.ExecutionCount != 2 {
		t.Errorf("x + 1: %+v", r)
	}
	if got := resultText(out); got != "42" {
		t.Errorf("x + 1 gave %q, want 42", got)
	}
	// Silent cells are not counted and publish nothing but status.
	run(t, c, "y = x * 2", ExecuteOptions{Silent: true})
	r, out = run(t, c, "y", ExecuteOptions{})
	if got := resultText(out); got != "82" || r.ExecutionCount != 3 {
		t.Errorf("y gave %q (count %d), want 82 (count 3)", got, r.ExecutionCount)
	}
}

func testStreams(t *testing.T, c *Client) {
	var returned atomic.Bool
	var late []string
	out := new(output)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	code := "import time\nfor i in range(3): print(i, flush=True); time.sleep(0.3)"
	r, err := c.Execute(ctx, code, ExecuteOptions{}, func(m Message) {
		if returned.Load() {
			late = append(late, m.Header.MsgType)
		}
		out.add(m)
	})
	returned.Store(true)
	if err != nil || r.Status != "ok" {
		t.Fatalf("Execute = %+v, %v", r, err)
	}
	if out.stream != "0\n1\n2\n" {
		t.Errorf("stream text %q, want 0 1 2 in order", out.stream)
	}
	if n := strings.Count(strings.Join(out.types, " "), "stream"); n < 3 {
		t.Errorf("%d stream messages, want 3 (flushed one by one): %v", n, out.types)
	}
	if len(late) > 0 {
		t.Errorf("onIOPub called after Execute returned: %v", late)
	}
	want := []string{"status", "execute_input"}
	if !slices.Equal(out.types[:2], want) || out.types[len(out.types)-1] != "status" {
		t.Errorf("iopub messages %v, want busy status, execute_input, ..., idle status", out.types)
	}
}

func testError(t *testing.T, c *Client) {
	// The next cells would be aborted if they came too soon.
	r, out := run(t, c, "1/0", ExecuteOptions{ContinueOnError: true})
	if r.Status != "error" || r.Ename != "ZeroDivisionError" || len(r.Traceback) == 0 {
		t.Errorf("1/0: %+v", r)
	}
	if !slices.Contains(out.types, "error") {
		t.Errorf("no error on iopub: %v", out.types)
	}
}

func testDisplayData(t *testing.T, c *Client) {
	_, out := run(t, c, "from IPython.display import HTML, display; display(HTML('<b>x</b>'))", ExecuteOptions{})
	for _, m := range out.msgs {
		if m.Header.MsgType != "display_data" {
			continue
		}
		var d struct {
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(m.Content, &d); err != nil {
			t.Fatal(err)
		}
		if d.Data["text/html"] != "<b>x</b>" {
			t.Errorf("display_data %v", d.Data)
		}
		return
	}
	t.Errorf("no display_data: %v", out.types)
}

func testComplete(t *testing.T, c *Client) {
	code := "import os\nos.pa"
	pos := utf8.RuneCountInString(code)
	r, err := c.Complete(t.Context(), code, pos)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "ok" || r.CursorEnd != pos || r.CursorStart < 0 || r.CursorStart > r.CursorEnd {
		t.Fatalf("Complete = %+v", r)
	}
	// The kernel may replace "os.pa" or just "pa": either way, the match
	// extends the text it replaces.
	replaced := string([]rune(code)[r.CursorStart:r.CursorEnd])
	for _, m := range r.Matches {
		if (m == "os.path" || m == "path") && strings.HasPrefix(m, replaced) {
			return
		}
	}
	t.Errorf("matches %v for %q do not complete to os.path", r.Matches, replaced)
}

func testInspect(t *testing.T, c *Client) {
	r, err := c.Inspect(t.Context(), "len", 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := r.Data["text/plain"].(string)
	if !r.Found || r.Status != "ok" || !strings.Contains(text, "len") {
		t.Errorf("Inspect(len) = %+v", r)
	}
}

func testStdin(t *testing.T, c *Client) {
	var prompt string
	r, out := run(t, c, "name = input('name?')\nprint('hello', name)", ExecuteOptions{
		Stdin: func(p string, password bool) (string, error) {
			prompt = p
			return "gopher", nil
		},
	})
	if r.Status != "ok" || prompt != "name?" || !strings.Contains(out.stream, "hello gopher") {
		t.Errorf("reply %+v, prompt %q, output %q", r, prompt, out.stream)
	}
	// The end of input is an EOFError in the cell, not a stuck kernel.
	// ContinueOnError, or the kernel aborts the next test's cell if it
	// comes too soon.
	r, _ = run(t, c, "input('more?')", ExecuteOptions{
		ContinueOnError: true,
		Stdin:           func(string, bool) (string, error) { return "", io.EOF },
	})
	if r.Status != "error" || r.Ename != "EOFError" {
		t.Errorf("input at the end of stdin: %+v, want EOFError", r)
	}
}

func testHeartbeat(t *testing.T, c *Client) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for range 3 {
		if err := c.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func testInterrupt(t *testing.T, c *Client) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	started := make(chan struct{})
	var once sync.Once
	type result struct {
		r   ExecuteReply
		err error
	}
	done := make(chan result, 1)
	go func() {
		code := "import time; print('sleeping', flush=True); time.sleep(30)"
		r, err := c.Execute(ctx, code, ExecuteOptions{ContinueOnError: true}, func(m Message) {
			if m.Header.MsgType == "stream" {
				once.Do(func() { close(started) })
			}
		})
		done <- result{r, err}
	}()
	select {
	case <-started:
	case res := <-done:
		t.Fatalf("Execute returned before it was interrupted: %+v, %v", res.r, res.err)
	}
	// The kernel answers interrupt_request by sending itself SIGINT. If
	// that lands on a thread other than CPython's main one, it does not
	// wake time.sleep; so, like a user, interrupt again if it has no
	// effect.
	var res result
	for again := time.NewTicker(2 * time.Second); ; {
		if err := c.Interrupt(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case res = <-done:
		case <-again.C:
			t.Log("the interrupt had no effect after 2s; interrupting again")
			continue
		}
		again.Stop()
		break
	}
	if res.err != nil || res.r.Status != "error" || res.r.Ename != "KeyboardInterrupt" {
		t.Fatalf("interrupted Execute = %+v, %v", res.r, res.err)
	}
	if r, out := run(t, c, "x", ExecuteOptions{}); resultText(out) != "41" {
		t.Errorf("state lost after interrupt: x = %q (%+v)", resultText(out), r)
	}
}

// testBadSignatures listens to the kernel's iopub with the wrong key: every
// message it publishes is dropped and counted.
func testBadSignatures(t *testing.T, k *testKernel, c *Client) {
	info := k.info
	info.Key = newKey()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	tr, err := dialZMQ(ctx, info, "intruder")
	if err != nil {
		t.Fatal(err)
	}
	bad := newClient(tr, "intruder", nil, "")
	defer bad.Close()
	for bad.Dropped() == 0 {
		run(t, c, "print('hi')", ExecuteOptions{})
		if ctx.Err() != nil {
			t.Fatal("no message dropped")
		}
	}
	if isDone(bad.iopubSeen) {
		t.Error("a badly signed message was delivered")
	}
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func testShutdown(t *testing.T, k *testKernel, c *Client) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := c.Shutdown(ctx, false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-k.exited:
	case <-ctx.Done():
		t.Fatal("kernel still running after shutdown")
	}
	if _, err := c.KernelInfo(ctx); err == nil {
		t.Error("KernelInfo of a kernel that shut down succeeded")
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close after shutdown: %v", err)
	}
}

// TestClientGoroutines checks that Close stops everything a Client
// started, including while calls are in flight. Not parallel: it counts
// the goroutines of the whole test binary.
func TestClientGoroutines(t *testing.T) {
	k := startKernel(t, "ipc")
	before := runtime.NumGoroutine()

	c := k.dial(t)
	run(t, c, "print(1)", ExecuteOptions{})
	if err := c.Heartbeat(t.Context()); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		_, err := c.Execute(context.Background(), "import time; time.sleep(30)", ExecuteOptions{}, func(m Message) {
			if m.Header.MsgType == "execute_input" {
				close(started) // sent once per request
			}
		})
		errc <- err
	}()
	<-started
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Errorf("Execute during Close = %v, want ErrClosed", err)
	}

	// A kernel that never listens: Dial gives up when its context ends.
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	nowhere, _ := NewIPC(filepath.Join(t.TempDir(), "none"))
	if _, err := Dial(ctx, nowhere); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Dial(nowhere) = %v, want deadline exceeded", err)
	}

	waitGoroutines(t, before)
}

// waitGoroutines waits for the number of goroutines to come back to n.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, want %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
