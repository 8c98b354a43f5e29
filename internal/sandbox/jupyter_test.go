package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codecell/codecell/internal/jupyter"
	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

// jupyterConfig is testConfig with the host's kernelspecs; ipykernel and
// IRkernel must be installed (scripts/setup.sh installs them).
func jupyterConfig(t *testing.T) sandbox.Config {
	cfg := testConfig(t)
	specs, _ := jupyter.FindKernelSpecs(jupyter.DataDirs())
	for _, name := range []string{"python3", "ir"} {
		if _, ok := specs[name]; !ok {
			t.Fatalf("no %q kernelspec in %v: run scripts/setup.sh (python3-ipykernel, r-cran-irkernel)", name, jupyter.DataDirs())
		}
	}
	cfg.KernelSpecs = specs
	cfg.Limits.MemoryBytes = 1 << 30
	return cfg
}

func text(o kernel.Output) string {
	s, _ := o.Data["text/plain"].(string)
	return s
}

// lastResult is the data of the cell's last rich output (IRkernel shows
// values as display_data, ipykernel as execute_result), or nil.
func lastResult(res *kernel.Result) map[string]any {
	for i := len(res.Outputs) - 1; i >= 0; i-- {
		if o := res.Outputs[i]; o.OutputType == "execute_result" || o.OutputType == "display_data" {
			return o.Data
		}
	}
	return nil
}

func hasImage(res *kernel.Result) bool {
	for _, o := range res.Outputs {
		if s, _ := o.Data["image/png"].(string); strings.HasPrefix(s, "iVBOR") {
			return true
		}
	}
	return false
}

// TestJupyterKernels runs real ipykernel and IRkernel kernels in jails.
func TestJupyterKernels(t *testing.T) {
	sb := newSandbox(t, jupyterConfig(t), sandbox.Options{})
	for _, tc := range []struct {
		spec                   string
		set, get, want         string // state across cells
		table, tableWant       string // a data frame as HTML
		plot                   string // a chart as PNG
		sleep                  string // a cell to interrupt
		who, whoWant           string // it runs in the jail
		completeCode, complete string
	}{
		{spec: "python3", set: "x = 41", get: "x + 1", want: "42",
			table: "import pandas as pd\npd.DataFrame({'a': [1, 2]})", tableWant: "<table",
			plot:  "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()",
			sleep: "import time\ntime.sleep(60)", who: "import os, socket\n(os.getuid(), os.path.exists('/etc/shadow'), [n for _, n in socket.if_nameindex()])", whoWant: "(1000, False, ['lo'])",
			completeCode: "import os\nos.pa", complete: "path"},
		{spec: "ir", set: "x <- 41", get: "x + 1", want: "[1] 42",
			table: "data.frame(a = c(1, 2), b = c('u', 'v'))", tableWant: "<table",
			plot:  "plot(1:10)",
			sleep: "Sys.sleep(60)", who: "paste(system('id -u', intern = TRUE), file.exists('/etc/shadow'))", whoWant: `"1000 FALSE"`,
			completeCode: "summ", complete: "summary"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			sess, _, err := sb.OpenSession(kernel.Jupyter(tc.spec), "s-"+tc.spec, true)
			if err != nil {
				t.Fatal(err)
			}
			exec := func(code string) *kernel.Result {
				t.Helper()
				res, err := sess.Execute(context.Background(), kernel.Request{Code: code, Timeout: 90 * time.Second})
				if err != nil {
					t.Fatalf("%q: %v", code, err)
				}
				return res.Result
			}
			exec(tc.set)
			if res := exec(tc.get); res.Status != kernel.StatusOK || !strings.Contains(text(kernel.Output{Data: lastResult(res)}), tc.want) {
				t.Errorf("%q: %+v", tc.get, res)
			}
			if res := exec(tc.who); !strings.Contains(text(kernel.Output{Data: lastResult(res)}), tc.whoWant) {
				t.Errorf("inside the jail %q gave %+v, want %s", tc.who, res.Outputs, tc.whoWant)
			}
			if res := exec(tc.table); !strings.Contains(fmt.Sprint(lastResult(res)["text/html"]), tc.tableWant) {
				t.Errorf("table: %+v", res.Outputs)
			}
			if res := exec(tc.plot); !hasImage(res) {
				t.Errorf("plot gave no PNG: %+v", res.Outputs)
			}
			if res := exec("stop_here_undefined_name"); res.Status != kernel.StatusError || res.Error() == nil {
				t.Errorf("error: %+v", res)
			} else if tb := strings.Join(res.Error().Traceback, "\n"); strings.Contains(tb, "\x1b[") {
				t.Errorf("traceback keeps ANSI colours: %q", tb)
			}
			c, err := sess.Complete(context.Background(), tc.completeCode, len([]rune(tc.completeCode)))
			if err != nil || !strings.Contains(strings.Join(c.Matches, " "), tc.complete) {
				t.Errorf("complete %q: %+v, %v", tc.completeCode, c, err)
			}

			if tc.spec == "python3" {
				// Input past the end of stdin is an EOFError; the kernel lives on.
				res, err := sess.Execute(context.Background(), kernel.Request{Stdin: "one\n", Timeout: 90 * time.Second,
					Code: "a = input()\ntry:\n    input()\nexcept EOFError:\n    print('EOF after', a)"})
				if err != nil || res.Text("stdout") != "EOF after one\n" {
					t.Errorf("input past the end of stdin: %+v, %v", res, err)
				}
			}

			// An interrupt stops the cell and keeps the state.
			done := make(chan *kernel.Result)
			go func() { done <- exec(tc.sleep) }()
			waitRunning(t, sess)
			time.Sleep(500 * time.Millisecond) // let the kernel enter the sleep
			if err := sess.Interrupt(); err != nil {
				t.Fatal(err)
			}
			if res := <-done; res.Status != kernel.StatusError {
				t.Errorf("interrupted cell: %+v", res)
			}
			if res := exec(tc.get); !strings.Contains(text(kernel.Output{Data: lastResult(res)}), tc.want) {
				t.Errorf("state after interrupt: %+v", res.Outputs)
			}

			// A kernel killed mid-cell is reported, and the next cell gets a fresh one.
			go func() { done <- exec(tc.sleep) }()
			waitRunning(t, sess)
			pid := sess.HostPid()
			if pid == 0 {
				t.Fatal("no kernel pid")
			}
			syscall.Kill(pid, syscall.SIGKILL)
			if res := <-done; res.Status != kernel.StatusError || res.Error() == nil || res.Error().Ename != kernel.EnameKernelDied {
				t.Errorf("killed kernel: %+v", res)
			}
			if res := exec(tc.get); res.Status != kernel.StatusError {
				t.Errorf("state survived the kernel's death: %+v", res)
			}

			// Restart clears the state.
			exec(tc.set)
			if err := sess.Restart(context.Background()); err != nil {
				t.Fatal(err)
			}
			if res := exec(tc.get); res.Status != kernel.StatusError {
				t.Errorf("state survived the restart: %+v", res)
			}
		})
	}
}

func waitRunning(t *testing.T, sess *sandbox.Session) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if sess.Info().Busy {
			return
		}
	}
	t.Fatal("the cell never started")
}

// TestJupyterUnknownKernel: a session on a kernelspec that does not
// exist fails to start with ErrNoKernel.
func TestJupyterUnknownKernel(t *testing.T) {
	sb := newSandbox(t, jupyterConfig(t), sandbox.Options{})
	_, err := sb.Run(context.Background(), kernel.Jupyter("cobol"), "1", 0)
	if err == nil || !strings.Contains(err.Error(), "cobol") {
		t.Fatalf("err = %v", err)
	}
}

// TestJupyterKernelExits: a kernel that exits before it answers is a
// startup error that says what it printed, not the connection's host paths.
func TestJupyterKernelExits(t *testing.T) {
	cfg := jupyterConfig(t)
	cfg.KernelSpecs["broken"] = jupyter.KernelSpec{Name: "broken", Language: "python",
		Argv: []string{"/bin/sh", "-c", "echo 'cannot start: no room' >&2; exit 3"}}
	sb := newSandbox(t, cfg, sandbox.Options{})
	_, err := sb.Run(context.Background(), kernel.Jupyter("broken"), "1", 0)
	if !errors.Is(err, kernel.ErrStartup) || !strings.Contains(err.Error(), "exited before it answered: cannot start: no room") ||
		strings.Contains(err.Error(), sb.Home()[:strings.LastIndex(sb.Home(), "/")]) {
		t.Errorf("err = %v", err)
	}
}

// TestInterruptStarting: an interrupt that comes while the session's
// kernel is still starting (an ipykernel takes a second or two) is not
// lost: it waits for the cell to reach the kernel, and stops it.
func TestInterruptStarting(t *testing.T) {
	sb := newSandbox(t, jupyterConfig(t), sandbox.Options{})
	sess, _, err := sb.OpenSession(kernel.Jupyter("python3"), "starting", true)
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res *sandbox.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := sess.Execute(context.Background(), kernel.Request{Code: "import time; time.sleep(60)", Timeout: 2 * time.Minute})
		done <- outcome{res, err}
	}()
	for !sess.Info().Busy {
		time.Sleep(time.Millisecond)
	}
	if pid := sess.HostPid(); pid != 0 {
		t.Fatalf("the session shows busy only once its kernel runs (pid %d): an interrupt before then is lost", pid)
	}
	if err := sess.Interrupt(); err != nil {
		t.Fatal(err)
	}
	if sess.HostPid() == 0 {
		t.Fatal("Interrupt returned before the kernel was up: nothing could receive it")
	}
	// One interrupt is enough: it comes no sooner than the kernel can take
	// it (see kernel.JupyterKernel.Interrupt; ipykernel ignores every later
	// one if the first lands as the cell begins).
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatal(o.err)
		}
		if e := o.res.Error(); e == nil || e.Ename != "KeyboardInterrupt" {
			t.Errorf("the cell after an interrupt during the start: %+v", o.res.Result)
		}
	case <-time.After(time.Minute):
		t.Fatal("the cell ran on: the interrupt was lost")
	}
}
