package llm

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/codecell/codecell/internal/kernel"
)

func TestStreams(t *testing.T) {
	tests := []struct {
		name    string
		outs    []kernel.Output
		want    string
		summary string
	}{
		{"stdout as is", []kernel.Output{stdout("a\n  b\n")}, "a\n  b", "output: 2 lines of stdout."},
		{"stderr marked", []kernel.Output{stdout("ok\n"), stderr("warn\n")}, "ok\nstderr:\nwarn", "1 line of stdout, 1 line of stderr"},
		{"stdout after stderr marked too", []kernel.Output{stderr("w\n"), stdout("x\n")}, "stderr:\nw\nstdout:\nx", "1 line of stdout, 1 line of stderr"},
		{"ANSI stripped", []kernel.Output{stdout("\x1b[1;32mgreen\x1b[0m \x1b]8;;http://x\x07link\x1b]8;;\x07\n")}, "green link", ""},
		{"progress bar collapsed", []kernel.Output{stderr("  0%|          | 0/3\r 33%|###       | 1/3\r100%|##########| 3/3\n"), stdout("done\n")},
			"stderr:\n100%|##########| 3/3\nstdout:\ndone", "1 line of stdout, 1 line of stderr"},
		{"shorter rewrite keeps the rest, as a terminal", []kernel.Output{stdout("loading....\rok\n")}, "okading....", ""},
		{"trailing carriage return keeps the line", []kernel.Output{stdout("step 1\rstep 2\r\nnext")}, "step 2\nnext", "2 lines of stdout"},
		{"no output", nil, "", "Ran successfully (execution 1); no output."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Render(okResult(tt.outs...), nil, Options{})
			if got := r.Text(); got != tt.want {
				t.Errorf("text %q, want %q", got, tt.want)
			}
			if !strings.Contains(r.Summary, tt.summary) {
				t.Errorf("summary %q lacks %q", r.Summary, tt.summary)
			}
			if r.IsError || r.Cut {
				t.Errorf("IsError %v, Cut %v", r.IsError, r.Cut)
			}
		})
	}
}

// ipythonTraceback is what IPython 8 sends for 1/0 inside f.
var ipythonTraceback = []string{
	"\x1b[0;31m---------------------------------------------------------------------------\x1b[0m",
	"\x1b[0;31mZeroDivisionError\x1b[0m                         Traceback (most recent call last)",
	"Cell \x1b[0;32mIn[1], line 3\x1b[0m\n\x1b[1;32m      1\x1b[0m \x1b[38;5;28;01mdef\x1b[39;00m \x1b[38;5;21mf\x1b[39m(x):\n\x1b[1;32m      2\x1b[0m     \x1b[38;5;28;01mreturn\x1b[39;00m \x1b[38;5;241m1\x1b[39m \x1b[38;5;241m/\x1b[39m x\n\x1b[0;32m----> 3\x1b[0m \x1b[43mf\x1b[49m\x1b[43m(\x1b[49m\x1b[38;5;241;43m0\x1b[39;49m\x1b[43m)\x1b[49m\n",
	"Cell \x1b[0;32mIn[1], line 2\x1b[0m, in \x1b[0;36mf\x1b[0;34m(x)\x1b[0m\n\x1b[1;32m      1\x1b[0m \x1b[38;5;28;01mdef\x1b[39;00m \x1b[38;5;21mf\x1b[39m(x):\n\x1b[0;32m----> 2\x1b[0m     \x1b[38;5;28;01mreturn\x1b[39;00m \x1b[38;5;241;43m1\x1b[39;49m\x1b[43m \x1b[49m\x1b[38;5;241;43m/\x1b[39;49m\x1b[43m \x1b[49m\x1b[43mx\x1b[49m\n",
	"\x1b[0;31mZeroDivisionError\x1b[0m: division by zero",
}

const ipythonTracebackText = `---------------------------------------------------------------------------
ZeroDivisionError                         Traceback (most recent call last)
Cell In[1], line 3
      1 def f(x):
      2     return 1 / x
----> 3 f(0)

Cell In[1], line 2, in f(x)
      1 def f(x):
----> 2     return 1 / x

ZeroDivisionError: division by zero`

func errOut(ename, evalue string, tb []string) kernel.Output {
	return kernel.Output{OutputType: "error", Ename: ename, Evalue: evalue, Traceback: tb}
}

func TestErrors(t *testing.T) {
	var deep []string
	for i := range 200 {
		deep = append(deep, fmt.Sprintf("  frame %d", i))
	}
	deep = append(deep, "RecursionError: maximum recursion depth exceeded")
	tests := []struct {
		name     string
		res      *kernel.Result
		want     string   // the whole text, if set
		contains []string // else fragments of it
		summary  []string
		cut      bool
	}{{
		name:    "IPython traceback",
		res:     &kernel.Result{Status: kernel.StatusError, ExecutionCount: 4, Outputs: []kernel.Output{stdout("before\n"), errOut("ZeroDivisionError", "division by zero", ipythonTraceback)}},
		want:    "before\n" + ipythonTracebackText,
		summary: []string{"Raised ZeroDivisionError: division by zero (execution 4); output: 1 line of stdout, a traceback."},
	}, {
		name:    "no traceback",
		res:     &kernel.Result{Status: kernel.StatusError, ExecutionCount: 2, Outputs: []kernel.Output{errOut("KeyError", "'x'", nil)}},
		want:    "KeyError: 'x'",
		summary: []string{"Raised KeyError: 'x' (execution 2)"},
	}, {
		name: "long traceback keeps first and last frames",
		res:  &kernel.Result{Status: kernel.StatusError, ExecutionCount: 9, Outputs: []kernel.Output{errOut("RecursionError", "maximum recursion depth exceeded", deep)}},
		contains: []string{"  frame 0\n", "  frame 9\n[… 151 traceback lines cut from the middle; the first and the last frames are kept …]\n  frame 161\n",
			"  frame 199\nRecursionError: maximum recursion depth exceeded"},
		summary: []string{"Raised RecursionError", "cut to fit"},
		cut:     true,
	}, {
		name: "timeout, interrupted",
		res: &kernel.Result{Status: kernel.StatusTimeout, ExecutionCount: 5, Outputs: []kernel.Output{stdout("tick\ntick\n"),
			errOut("KeyboardInterrupt", "", []string{"\x1b[0;31mKeyboardInterrupt\x1b[0m: "})}},
		contains: []string{"tick\ntick\nKeyboardInterrupt"},
		summary:  []string{"Timed out (execution 5): the code did not finish within its time limit and was interrupted; the kernel and its variables are kept; output: 2 lines of stdout"},
	}, {
		name: "timeout, kernel killed",
		res: &kernel.Result{Status: kernel.StatusTimeout, Died: true, Outputs: []kernel.Output{errOut(kernel.EnameTimeout,
			"the cell did not stop when interrupted at its timeout, so the kernel was killed; its state is lost",
			[]string{"TimeoutError: the cell did not stop when interrupted at its timeout, so the kernel was killed; its state is lost"})}},
		want:    "TimeoutError: the cell did not stop when interrupted at its timeout, so the kernel was killed; its state is lost",
		summary: []string{"Timed out and did not stop when interrupted, so the kernel was killed and its state is lost", "The next execution starts a fresh kernel"},
	}, {
		name: "kernel died",
		res: &kernel.Result{Status: kernel.StatusError, Died: true, Outputs: []kernel.Output{stdout("working\n"),
			errOut(kernel.EnameKernelDied, "the kernel exited with signal 11", []string{"KernelDied: the kernel exited with signal 11"})}},
		want:    "working\nKernelDied: the kernel exited with signal 11",
		summary: []string{"The kernel died (the kernel exited with signal 11), so its state is lost; output: 1 line of stdout", "The next execution starts a fresh kernel"},
	}, {
		name: "out of memory",
		res: &kernel.Result{Status: kernel.StatusError, Died: true, Outputs: []kernel.Output{
			errOut(kernel.EnameOutOfMemory, "the kernel used more than its 2 GiB of memory", []string{"OutOfMemory: the kernel used more than its 2 GiB of memory"})}},
		summary: []string{"Ran out of memory, so the kernel was killed and its state is lost"},
	}, {
		name: "out of memory after an error the cell caught",
		res: &kernel.Result{Status: kernel.StatusError, Died: true, Outputs: []kernel.Output{errOut("ValueError", "bad", nil),
			errOut(kernel.EnameOutOfMemory, "the kernel used more than its 2 GiB of memory", nil)}},
		summary: []string{"Ran out of memory, so the kernel was killed and its state is lost"},
	}, {
		name:    "an error the cell raised, named like a death",
		res:     &kernel.Result{Status: kernel.StatusError, ExecutionCount: 3, Outputs: []kernel.Output{errOut(kernel.EnameOutOfMemory, "mine", nil)}},
		summary: []string{"Raised OutOfMemory: mine (execution 3)"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Render(tt.res, nil, Options{})
			text := r.Text()
			if tt.want != "" && text != tt.want {
				t.Errorf("text\n%s\nwant\n%s", text, tt.want)
			}
			for _, s := range tt.contains {
				if !strings.Contains(text, s) {
					t.Errorf("text lacks %q:\n%s", s, text)
				}
			}
			if strings.Contains(text, "\x1b") {
				t.Errorf("escape left in %q", text)
			}
			for _, s := range tt.summary {
				if !strings.Contains(r.Summary, s) {
					t.Errorf("summary %q lacks %q", r.Summary, s)
				}
			}
			if !r.IsError || r.Cut != tt.cut {
				t.Errorf("IsError %v Cut %v, want true %v", r.IsError, r.Cut, tt.cut)
			}
		})
	}
}

func TestFiles(t *testing.T) {
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var files []File
	for i := range 30 {
		files = append(files, File{Path: fmt.Sprintf("/home/user/out/f%02d.csv", i), Size: int64(i) * 700, Modified: base.Add(time.Duration(i) * time.Second)})
	}
	files = append(files, File{Path: "/tmp/evil\nname", Size: 3 << 20})
	r := Render(okResult(stdout("saved\n")), files, Options{})
	lines := strings.Split(r.Text(), "\n")
	want := []string{
		"saved",
		"Files written (most recent first):",
		"- /home/user/out/f29.csv (19.8 KiB)",
		"- /home/user/out/f28.csv (19.1 KiB)",
	}
	if !slicesHasPrefix(lines, want) {
		t.Errorf("text starts\n%q\nwant\n%q", lines[:min(len(lines), 4)], want)
	}
	if n := len(lines); n != 2+20+1 || lines[n-2] != "- /home/user/out/f10.csv (6.8 KiB)" || lines[n-1] != "- and 11 more" {
		t.Errorf("%d lines, ending %q", n, lines[n-2:])
	}
	for _, s := range []string{"wrote 31 files: /home/user/out/f29.csv, /home/user/out/f28.csv, /home/user/out/f27.csv, and 28 more", "1 line of stdout"} {
		if !strings.Contains(r.Summary, s) {
			t.Errorf("summary %q lacks %q", r.Summary, s)
		}
	}
	r = Render(okResult(), []File{{Path: "/tmp/evil\nname", Size: 3 << 20}, {Path: "/tmp/z", Size: 0}}, Options{})
	if want := "Files written (most recent first):\n- \"/tmp/evil\\nname\" (3.0 MiB)\n- /tmp/z (0 bytes)"; r.Text() != want {
		t.Errorf("got %q, want %q", r.Text(), want)
	}
}

func slicesHasPrefix(s, prefix []string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := range prefix {
		if s[i] != prefix[i] {
			return false
		}
	}
	return true
}

func TestServerTruncated(t *testing.T) {
	res := okResult(stdout("lots\n"), stderr("\n[codecell: output truncated: 5000 bytes dropped; the limit is 1000 bytes per cell. Write large results to a file and read it in parts.]\n"))
	res.Truncated = true
	r := Render(res, nil, Options{})
	if !strings.Contains(r.Summary, "The server dropped output beyond its per-cell limit.") {
		t.Errorf("summary %q", r.Summary)
	}
	if !strings.Contains(r.Text(), "output truncated: 5000 bytes dropped") {
		t.Errorf("text %q", r.Text())
	}
}
