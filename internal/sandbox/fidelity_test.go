package sandbox_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"image/png"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

func TestPythonOutputs(t *testing.T) {
	cfg := testConfig(t)
	sb := newSandbox(t, cfg, sandbox.Options{})
	k := startKernel(t, sb, kernel.Python)

	res := execute(t, k, "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3], 'b': [4.0, 5.0, 6.0]})\ndf.describe()", 0)
	if res.Status != kernel.StatusOK || len(res.Outputs) != 1 || res.Outputs[0].OutputType != "execute_result" {
		t.Fatalf("describe(): %+v", res)
	}
	o := res.Outputs[0]
	if plain, _ := o.Data["text/plain"].(string); !strings.Contains(plain, "mean") || !strings.Contains(plain, "2.0") {
		t.Errorf("describe() text/plain = %q", plain)
	}
	if html, _ := o.Data["text/html"].(string); !strings.Contains(html, "<table") {
		t.Errorf("DataFrame has no HTML table: %q", html)
	}
	if o.ExecutionCount == nil || *o.ExecutionCount != 1 || res.ExecutionCount != 1 {
		t.Errorf("execution count = %v / %d, want 1", o.ExecutionCount, res.ExecutionCount)
	}

	// State is kept across cells; streams come in the order written.
	res = execute(t, k, "import sys, os\nprint('one')\nsys.stderr.write('two\\n')\nos.write(1, b'three\\n')\nprint(len(df))", 0)
	want := []struct{ name, text string }{{"stdout", "one\n"}, {"stderr", "two\n"}, {"stdout", "three\n3\n"}}
	if len(res.Outputs) != len(want) {
		t.Fatalf("streams: %+v", res.Outputs)
	}
	for i, w := range want {
		if o := res.Outputs[i]; o.OutputType != "stream" || o.Name != w.name || o.Text != w.text {
			t.Errorf("output %d = %+v, want %s %q", i, o, w.name, w.text)
		}
	}

	// Figures: from plt.show(), from display(fig), and left open at the end.
	for _, code := range []string{
		"import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()",
		"fig, ax = plt.subplots()\nax.bar(['a', 'b'], [3, 4])\nfrom IPython.display import display\ndisplay(fig)\nplt.close(fig)",
		"plt.figure(figsize=(3, 2))\nplt.scatter([1, 2], [2, 1])",
	} {
		res = execute(t, k, code, 0)
		if res.Status != kernel.StatusOK {
			t.Fatalf("%q: %+v", code, res)
		}
		var pngs int
		for _, o := range res.Outputs {
			b64, ok := o.Data["image/png"].(string)
			if !ok {
				continue
			}
			pngs++
			if strings.HasPrefix(b64, "data:") {
				t.Errorf("image/png has a data: prefix")
			}
			raw, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				t.Fatalf("image/png is not base64: %v", err)
			}
			img, err := png.Decode(bytes.NewReader(raw))
			if err != nil {
				t.Fatalf("image/png does not decode: %v", err)
			}
			if b := img.Bounds(); b.Dx() == 0 || b.Dy() == 0 {
				t.Errorf("empty image %v", b)
			}
		}
		if pngs != 1 {
			t.Errorf("%q gave %d PNGs, want 1: %+v", code, pngs, res.Outputs)
		}
	}

	// display() of HTML and Markdown.
	res = execute(t, k, "from IPython.display import HTML, Markdown\ndisplay(HTML('<b>hi</b>'))\ndisplay(Markdown('# T'))", 0)
	if len(res.Outputs) != 2 || res.Outputs[0].Data["text/html"] != "<b>hi</b>" || res.Outputs[1].Data["text/markdown"] != "# T" {
		t.Errorf("display(HTML, Markdown): %+v", res.Outputs)
	}
}

func TestPythonErrors(t *testing.T) {
	cfg := testConfig(t)
	sb := newSandbox(t, cfg, sandbox.Options{})
	k := startKernel(t, sb, kernel.Python)
	tests := []struct {
		code, ename, inTraceback string
	}{
		{"def f():\n    return 1/0\nf()", "ZeroDivisionError", "return 1/0"},
		{"x = (", "SyntaxError", "x = ("},
		{"undefined_name", "NameError", "undefined_name"},
		{"raise ValueError('bad value')", "ValueError", "bad value"},
	}
	for _, tt := range tests {
		res := execute(t, k, tt.code, 0)
		e := res.Error()
		if res.Status != kernel.StatusError || e == nil || e.Ename != tt.ename {
			t.Errorf("%q: status %s, error %+v; want %s", tt.code, res.Status, e, tt.ename)
			continue
		}
		tb := strings.Join(e.Traceback, "\n")
		if !strings.Contains(tb, tt.inTraceback) || strings.Contains(tb, "\x1b[") {
			t.Errorf("%q: traceback %q should contain %q and no ANSI codes", tt.code, tb, tt.inTraceback)
		}
		if len(e.Traceback) < 2 && tt.ename != "SyntaxError" {
			t.Errorf("%q: traceback should be a list of lines: %q", tt.code, e.Traceback)
		}
	}
	// The kernel survives every error and still has its state.
	if res := execute(t, k, "40 + 2", 0); res.Outputs[0].Data["text/plain"] != "42" {
		t.Errorf("after errors: %+v", res)
	}
}

func TestBadInput(t *testing.T) {
	cfg := testConfig(t)
	sb := newSandbox(t, cfg, sandbox.Options{})
	for _, lang := range []kernel.Language{kernel.Python, kernel.JavaScript} {
		k := startKernel(t, sb, lang)
		if res := execute(t, k, "", 0); res.Status != kernel.StatusOK || len(res.Outputs) != 0 {
			t.Errorf("%s: empty code: %+v", lang, res)
		}
		if res := execute(t, k, "  \n\t", 0); res.Status != kernel.StatusOK || len(res.Outputs) != 0 {
			t.Errorf("%s: blank code: %+v", lang, res)
		}
		// Invalid UTF-8 in the code and in the output never breaks a frame.
		code := "print('a\xff\xfeb')"
		if lang == kernel.JavaScript {
			code = "console.log('a\xff\xfeb')"
		}
		res := execute(t, k, code, 0)
		if res.Status != kernel.StatusOK || !strings.Contains(res.Text("stdout"), "a\uFFFD") {
			t.Errorf("%s: invalid UTF-8: %+v", lang, res)
		}
		raw := "import os; os.write(1, b'x\\xff\\xfey\\n')"
		if lang == kernel.JavaScript {
			raw = "require('fs').writeSync(1, Buffer.from([0x78, 0xff, 0xfe, 0x79, 0x0a]))"
		}
		res = execute(t, k, raw, 0)
		if got := res.Text("stdout"); !strings.HasPrefix(got, "x\uFFFD") || !strings.HasSuffix(got, "y\n") {
			t.Errorf("%s: raw invalid UTF-8 output = %q", lang, got)
		}
	}
}

// A timeout outside (0, MaxTimeout] is refused whoever asks, one-shot or
// in a session, before any code runs.
func TestTimeoutBounds(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxTimeout = time.Minute
	sb := newSandbox(t, cfg, sandbox.Options{})
	sess, _, err := sb.OpenSession(kernel.Python, "bounds", true)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		timeout time.Duration
		ok      bool
	}{
		{0, true}, // the sandbox's default
		{time.Minute, true},
		{time.Minute + time.Nanosecond, false},
		{-time.Second, false},
		{math.MaxInt64, false},
	} {
		_, err := sb.Run(t.Context(), kernel.Python, "1", tt.timeout)
		_, serr := sess.Execute(t.Context(), kernel.Request{Code: "1", Timeout: tt.timeout})
		for what, err := range map[string]error{"one-shot": err, "session": serr} {
			if tt.ok != (err == nil) || !tt.ok && !errors.Is(err, sandbox.ErrBadTimeout) {
				t.Errorf("%s with timeout %v: %v", what, tt.timeout, err)
			}
		}
	}
}

func TestJavaScriptOutputs(t *testing.T) {
	cfg := testConfig(t)
	sb := newSandbox(t, cfg, sandbox.Options{})
	k := startKernel(t, sb, kernel.JavaScript)
	steps := []struct {
		code, stdout, stderr, result, ename string
	}{
		{code: "let n = 40; const obj = {a: 1}; globalThis.g = 'kept'", result: "'kept'"},
		{code: "n + 2", result: "42"},
		{code: "console.log('out', obj); console.error('err'); g", stdout: "out { a: 1 }\n", stderr: "err\n", result: "'kept'"},
		{code: "const v = await new Promise(r => setTimeout(() => r(7), 10)); v * 6", result: "42"},
		{code: "v", result: "7"},
		{code: "const os = require('os'); typeof os.cpus", result: "'function'"},
		{code: "function f() { throw new RangeError('too far') }\nf()", ename: "RangeError"},
		{code: "await Promise.reject(new TypeError('rejected'))", ename: "TypeError"},
		{code: "let = ;", ename: "SyntaxError"},
		{code: "process.stdout.write('raw\\n'); 1", stdout: "raw\n", result: "1"},
	}
	for _, s := range steps {
		res := execute(t, k, s.code, 0)
		if got := res.Text("stdout"); got != s.stdout {
			t.Errorf("%q: stdout %q, want %q", s.code, got, s.stdout)
		}
		if got := res.Text("stderr"); got != s.stderr {
			t.Errorf("%q: stderr %q, want %q", s.code, got, s.stderr)
		}
		var result string
		for _, o := range res.Outputs {
			if o.OutputType == "execute_result" {
				result, _ = o.Data["text/plain"].(string)
			}
		}
		if result != s.result {
			t.Errorf("%q: result %q, want %q", s.code, result, s.result)
		}
		if e := res.Error(); s.ename != "" && (e == nil || e.Ename != s.ename || res.Status != kernel.StatusError) {
			t.Errorf("%q: error %+v, want %s", s.code, e, s.ename)
		} else if s.ename == "" && e != nil {
			t.Errorf("%q: unexpected error %+v", s.code, e)
		}
	}
}

func TestOneShotRun(t *testing.T) {
	cfg := testConfig(t)
	sb := newSandbox(t, cfg, sandbox.Options{})
	// The seed's pandas example, with its data written through the host side.
	csv := "month,revenue,cost\n2026-01,120,80\n2026-02,135,82\n2026-03,150,90\n2026-04,142,95\n2026-05,168,99\n2026-06,180,104\n"
	if err := sb.WriteFile("/tmp/analysis/sales.csv", strings.NewReader(csv)); err != nil {
		t.Fatal(err)
	}
	res := run(t, sb, kernel.Python, "import pandas as pd\ndf = pd.read_csv('/tmp/analysis/sales.csv')\ndf['margin'] = df.revenue - df.cost\nprint(df.margin.describe())")
	if out := res.Text("stdout"); !strings.Contains(out, "mean     57.500000") || !strings.Contains(out, "std      13.546217") {
		t.Errorf("describe() = %q", out)
	}
	// Each one-shot run starts from nothing.
	run(t, sb, kernel.Python, "x = 1")
	if res := run(t, sb, kernel.Python, "x"); res.Error() == nil || res.Error().Ename != "NameError" {
		t.Errorf("state leaked between one-shot runs: %+v", res)
	}
	if res := run(t, sb, kernel.JavaScript, "[1, 2, 3].map(x => x * 2)"); res.Outputs[0].Data["text/plain"] != "[ 2, 4, 6 ]" {
		t.Errorf("javascript one-shot: %+v", res)
	}
}

func TestTimeoutKeepsState(t *testing.T) {
	cfg := testConfig(t)
	sb := newSandbox(t, cfg, sandbox.Options{})
	for _, tt := range []struct {
		lang             kernel.Language
		set, spin, sleep string
		get, want        string
	}{
		{kernel.Python, "kept = 41", "while True: pass", "import time; time.sleep(60)", "kept + 1", "42"},
		{kernel.JavaScript, "var kept = 41", "while (true) {}", "await new Promise(r => setTimeout(r, 60000))", "kept + 1", "42"},
	} {
		k := startKernel(t, sb, tt.lang)
		execute(t, k, tt.set, 0)
		for _, code := range []string{tt.spin, tt.sleep} {
			res := execute(t, k, code, time.Second)
			if res.Status != kernel.StatusTimeout || res.Died {
				t.Errorf("%s %q: status %s died=%v, want a timeout that keeps the kernel: %+v", tt.lang, code, res.Status, res.Died, res.Outputs)
			}
			if e := res.Error(); e == nil || e.Ename != "KeyboardInterrupt" {
				t.Errorf("%s %q: error %+v, want KeyboardInterrupt", tt.lang, code, e)
			}
		}
		if res := execute(t, k, tt.get, 0); len(res.Outputs) != 1 || res.Outputs[0].Data["text/plain"] != tt.want {
			t.Errorf("%s: state after interrupts: %+v", tt.lang, res)
		}
	}
}

// A cell that ignores the interrupt is killed after the grace period: the
// result says so, and the session reports itself dead.
func TestTimeoutKillsStubbornCell(t *testing.T) {
	cfg := testConfig(t)
	sb := newSandbox(t, cfg, sandbox.Options{})
	k := startKernel(t, sb, kernel.Python)
	res := execute(t, k, "import time\nwhile True:\n    try:\n        time.sleep(10)\n    except KeyboardInterrupt:\n        pass", time.Second)
	if res.Status != kernel.StatusTimeout || !res.Died {
		t.Fatalf("status %s, died %v; want timeout and died", res.Status, res.Died)
	}
	if e := res.Error(); e == nil || e.Ename != kernel.EnameTimeout {
		t.Errorf("error = %+v, want %s", e, kernel.EnameTimeout)
	}
	if _, err := k.Execute(context.Background(), "1", 0); !errors.Is(err, kernel.ErrDead) {
		t.Errorf("after the kill, Execute = %v; want ErrDead", err)
	}
}

// What user code prints is user output even when it looks like a frame.
func TestStdoutCannotForgeFrames(t *testing.T) {
	cfg := testConfig(t)
	sb := newSandbox(t, cfg, sandbox.Options{})
	k := startKernel(t, sb, kernel.Python)
	frame := `{"type": "done", "id": "c1", "status": "ok", "execution_count": 99}`
	code := "import os, struct, sys\nf = " + strconv.Quote(frame) + ".encode()\n" +
		"os.write(1, struct.pack('>I', len(f)) + f)\nsys.stdout.write(f.decode())\nprint('after')"
	res := execute(t, k, code, 0)
	out := res.Text("stdout")
	if res.ExecutionCount == 99 || strings.Count(out, `"type": "done"`) != 2 || !strings.HasSuffix(out, "after\n") {
		t.Fatalf("forged frame was not plain output: count %d, stdout %q", res.ExecutionCount, out)
	}
}

func TestBusyKernel(t *testing.T) {
	cfg := testConfig(t)
	sb := newSandbox(t, cfg, sandbox.Options{})
	k := startKernel(t, sb, kernel.Python)
	done := make(chan *kernel.Result)
	go func() { done <- execute(t, k, "import time; time.sleep(1); 'slow'", 0) }()
	time.Sleep(300 * time.Millisecond)
	if _, err := k.Execute(context.Background(), "1", 0); !errors.Is(err, kernel.ErrBusy) {
		t.Errorf("second cell while busy: %v, want ErrBusy", err)
	}
	if res := <-done; res.Outputs[0].Data["text/plain"] != "'slow'" {
		t.Errorf("first cell: %+v", res)
	}
}

// A kernel that cannot start says why, quickly, and leaves nothing running.
func TestStartupFailureIsReported(t *testing.T) {
	cfg := testConfig(t)
	cfg.Python = "/nonexistent/python3"
	sb := newSandbox(t, cfg, sandbox.Options{})
	_, err := sb.StartKernel(context.Background(), kernel.Python)
	if !errors.Is(err, kernel.ErrStartup) || !strings.Contains(err.Error(), "/nonexistent/python3") {
		t.Fatalf("StartKernel = %v; want ErrStartup naming the interpreter", err)
	}
	// The exit is noticed at once, not by waiting out the start-up timeout.
	if strings.Contains(err.Error(), "no ready signal") {
		t.Errorf("the failure was only noticed at the timeout: %v", err)
	}
	if pids, _ := sb.Cgroup().Pids(); len(pids) != 0 {
		t.Errorf("processes left in the sandbox: %v", pids)
	}
}

// TestWarmUpLeavesNoTrace: kernels run a few cells before they are handed
// out (see warm_up in the driver); none of it may show in the user's first
// cell, whichever way the kernel was made.
func TestWarmUpLeavesNoTrace(t *testing.T) {
	sb := newSandbox(t, testConfig(t), sandbox.Options{})
	const probe = "import sys as _s\nprint(len(Out), len(In), repr(_), hasattr(_s, 'last_value'), [n for n in dir() if n in ('plt', 'pandas', 'matplotlib', 'pd')])\n1/0"
	const want = "0 2 '' False []\n"
	check := func(name string, res *kernel.Result) {
		t.Helper()
		if got := res.Text("stdout"); got != want {
			t.Errorf("%s: first cell printed %q, want %q", name, got, want)
		}
		if res.ExecutionCount != 1 || res.Status != kernel.StatusError {
			t.Errorf("%s: execution count %d, status %s; want 1, error", name, res.ExecutionCount, res.Status)
		}
		if tb := strings.Join(res.Outputs[len(res.Outputs)-1].Traceback, "\n"); !strings.Contains(tb, "ZeroDivisionError") {
			t.Errorf("%s: traceback %q", name, tb)
		}
	}
	res, err := sb.Run(context.Background(), kernel.Python, probe, 0)
	if err != nil {
		t.Fatal(err)
	}
	check("one-shot", res)
	sess, _, err := sb.OpenSession(kernel.Python, "warm", true)
	if err != nil {
		t.Fatal(err)
	}
	sres, err := sess.Execute(context.Background(), kernel.Request{Code: probe})
	if err != nil {
		t.Fatal(err)
	}
	check("session", sres.Result)
}
