package kernel

// Jupyter kernels: any installed kernelspec (ipykernel, IRkernel, ...)
// run in a jail like the native drivers and spoken to with the Jupyter
// messaging protocol over ZeroMQ on unix sockets in the jail's own run
// directory (the jail has no network); or a kernel of a remote Jupyter
// server, over its websocket. Both give the same Result shapes as the
// native drivers.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codecell/codecell/internal/jail"
	"github.com/codecell/codecell/internal/jupyter"
)

// JupyterConfig starts a kernelspec's kernel in a jail.
type JupyterConfig struct {
	KernelSpec jupyter.KernelSpec
	Jail       jail.Config
	// Spec is the jail; Run is required (the kernel's connection file and
	// sockets live there); Argv is set here.
	Spec           jail.Spec
	MaxOutputBytes int64
	// StartTimeout bounds start-up; 0 means 60s.
	StartTimeout time.Duration
	// Grace is how long an interrupted cell may take to stop before the
	// kernel is killed; 0 means 2s.
	Grace time.Duration
}

// JupyterKernel is a running Jupyter kernel. It runs one cell at a time.
type JupyterKernel struct {
	client  *jupyter.Client
	host    jupyterHost
	lang    string
	Version string
	max     int64
	grace   time.Duration

	mu    sync.Mutex   // held for a whole cell
	began atomic.Int64 // when the kernel began the cell (execute_input), in Unix ns; 0 between cells
	dead  error
}

// jupyterHost is where a kernel runs: a jail of this server's, or a remote
// Jupyter server.
type jupyterHost interface {
	interrupt(ctx context.Context) error
	done() <-chan struct{}
	pid() int // host pid of the kernel, 0 if not local
	meter() meter
	oomKills() int64
	kill()
}

// StartJupyter starts cfg's kernel and waits until it answers.
func StartJupyter(ctx context.Context, cfg JupyterConfig) (*JupyterKernel, error) {
	ks := cfg.KernelSpec
	if cfg.Spec.Run == "" {
		return nil, fmt.Errorf("%w: a Jupyter kernel needs a run directory", ErrStartup)
	}
	// Socket paths as the kernel sees them, and as the server does.
	inside, err := jupyter.NewIPC(jail.RunDir + "/k")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStartup, err)
	}
	inside.KernelName = ks.Name
	outside := inside
	outside.IP = filepath.Join(cfg.Spec.Run, "k")
	connFile := filepath.Join(cfg.Spec.Run, "connection.json")
	err = inside.WriteFile(connFile)
	if err == nil {
		err = os.Chown(connFile, cfg.Spec.HostUID, cfg.Spec.HostGID)
	}
	if err != nil {
		// The run directory is on the sandbox's disk, which its own code
		// may have filled (ENOSPC); the path is the host's, not for clients.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%w: writing the connection file in its run directory: %w", ErrStartup, err)
	}

	spec := cfg.Spec
	spec.Argv = ks.Command(jail.RunDir + "/connection.json")
	// The jail's default Agg backend shows nothing; ipykernel's own inline
	// backend, which it only picks when none is set, sends figures as PNG.
	spec.Env = append(spec.Env, "MPLBACKEND=module://matplotlib_inline.backend_inline")
	for k, v := range ks.Env {
		spec.Env = append(spec.Env, k+"="+v)
	}
	errs := &tailBuffer{}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStartup, err)
	}
	spec.Stdout, spec.Stderr = w, w
	drained := make(chan struct{}) // closed at the end of its output
	go func() {
		defer close(drained)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			errs.Write(buf[:n])
			if err != nil {
				r.Close()
				return
			}
		}
	}()
	proc, err := jail.Start(ctx, cfg.Jail, spec)
	w.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: %s kernel: %w", ErrStartup, ks.Name, err)
	}
	h := &localHost{proc: proc, spec: spec, signal: ks.InterruptMode != "message"}

	timeout := cmp.Or(cfg.StartTimeout, 60*time.Second)
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	go func() {
		select {
		case <-proc.Done():
			cancel() // the kernel exited: stop waiting for it
		case <-dctx.Done():
		}
	}()
	client, err := jupyter.Dial(dctx, outside)
	var info jupyter.KernelInfoReply
	if err == nil {
		info, err = client.KernelInfo(dctx)
	}
	if err != nil {
		if client != nil {
			client.Close()
		}
		timedOut := dctx.Err() != nil // before the kill below ends dctx too
		var exited bool
		select {
		case <-proc.Done():
			exited = true
		default:
		}
		h.kill()
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case exited:
			// What it said says why; the dial's error would only name
			// host paths. Its last words may still be in the pipe.
			select {
			case <-drained:
			case <-time.After(time.Second):
			}
			return nil, fmt.Errorf("%w: %s kernel exited before it answered: %s", ErrStartup, ks.Name, errs)
		case timedOut:
			return nil, fmt.Errorf("%w: %s kernel did not answer within %v: %s", ErrStartup, ks.Name, timeout, errs)
		}
		return nil, fmt.Errorf("%w: %s kernel: %w: %s", ErrStartup, ks.Name, err, errs)
	}
	k := newJupyterKernel(client, h, cfg.MaxOutputBytes, cfg.Grace, info)
	h.client = client
	return k, nil
}

// ConnectRemote starts kernelName on a remote Jupyter server and connects
// to it. The kernel runs wherever that server runs it: not in a jail of
// this server's, and without the sandbox's files.
func ConnectRemote(ctx context.Context, srv *jupyter.Server, kernelName string, maxOutput int64) (*JupyterKernel, error) {
	id, err := srv.StartKernel(ctx, kernelName)
	if err != nil {
		return nil, fmt.Errorf("%w: remote %s kernel: %w", ErrStartup, kernelName, err)
	}
	h := &remoteHost{srv: srv, id: id, gone: make(chan struct{})}
	client, err := srv.Connect(ctx, id)
	var info jupyter.KernelInfoReply
	if err == nil {
		info, err = client.KernelInfo(ctx)
	}
	if err != nil {
		if client != nil {
			client.Close()
		}
		h.kill()
		return nil, fmt.Errorf("%w: remote %s kernel: %w", ErrStartup, kernelName, err)
	}
	return newJupyterKernel(client, h, maxOutput, 0, info), nil
}

func newJupyterKernel(c *jupyter.Client, h jupyterHost, maxOutput int64, grace time.Duration, info jupyter.KernelInfoReply) *JupyterKernel {
	return &JupyterKernel{client: c, host: h, lang: strings.ToLower(info.LanguageInfo.Name), Version: info.LanguageInfo.Version,
		max: cmp.Or(maxOutput, 1<<20), grace: cmp.Or(grace, 2*time.Second)}
}

// Execute runs code as one cell; see Do.
func (k *JupyterKernel) Execute(ctx context.Context, code string, timeout time.Duration) (*Result, error) {
	return k.Do(ctx, Request{Code: code, Timeout: timeout})
}

// Do runs one cell, as Kernel.Do does: at its timeout (or when ctx ends)
// the cell is interrupted, and the kernel is killed if it has not stopped
// after the grace period.
func (k *JupyterKernel) Do(ctx context.Context, req Request) (*Result, error) {
	if !k.mu.TryLock() {
		return nil, ErrBusy
	}
	defer k.mu.Unlock()
	if k.dead != nil {
		return nil, fmt.Errorf("%w: %w", ErrDead, k.dead)
	}
	timeout := cmp.Or(req.Timeout, 30*time.Second)
	oomBefore := k.host.oomKills()
	if req.Cwd != "" {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err := k.chdir(cctx, req.Cwd)
		cancel()
		if err != nil {
			return nil, err
		}
	}

	var mu sync.Mutex // res is filled by the client's goroutine
	res := newResult(k.max)
	res.onOutput = req.OnOutput
	res.Started = true // once sent, the kernel may have run any of it
	opts := jupyter.ExecuteOptions{ContinueOnError: true}
	if req.Stdin != "" {
		opts.Stdin = stdinLines(req.Stdin)
	}
	m := k.host.meter()
	execCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type done struct {
		reply jupyter.ExecuteReply
		err   error
	}
	finished := make(chan done, 1)
	defer k.began.Store(0)
	go func() {
		reply, err := k.client.Execute(execCtx, validUTF8(req.Code), opts, func(msg jupyter.Message) {
			if msg.Header.MsgType == "execute_input" { // the kernel has begun the cell
				k.began.Store(time.Now().UnixNano())
			}
			if o, ok := outputOf(msg); ok {
				mu.Lock()
				res.add(o)
				mu.Unlock()
			}
		})
		finished <- done{reply, err}
	}()

	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var grace <-chan time.Time
	interrupted := false
	var interrupting chan struct{} // closed once the interrupt is delivered
	interrupt := func() {
		if !interrupted {
			interrupted = true
			// An interrupt_request or a remote server may not answer: the
			// grace period and then the kill must still come.
			interrupting = make(chan struct{})
			go func() {
				defer close(interrupting)
				k.Interrupt()
			}()
			grace = time.After(k.grace)
		}
	}
	ctxDone := ctx.Done()
	if req.Detached {
		ctxDone = nil
	}
	for {
		select {
		case d := <-finished:
			if interrupting != nil {
				// Delivered late, it would reach the next cell
				// (Interrupt gives up after interruptTimeout).
				<-interrupting
			}
			mu.Lock()
			defer mu.Unlock()
			if d.err != nil {
				// The kernel or its connection is gone.
				k.dead = k.death(oomBefore)
				res.addDeath(k.dead, interrupted)
				res.Usage = m.stop()
				return res.finish(), nil
			}
			res.ExecutionCount = d.reply.ExecutionCount
			res.Status = StatusOK
			if d.reply.Status != "ok" {
				res.Status = StatusError
			}
			if interrupted {
				res.Status = StatusTimeout
			}
			res.Usage = m.stop()
			return res.finish(), nil
		case <-k.host.done():
			cancel()
			<-finished
			mu.Lock()
			defer mu.Unlock()
			k.dead = k.death(oomBefore)
			res.addDeath(k.dead, interrupted)
			res.Usage = m.stop()
			return res.finish(), nil
		case <-deadline.C:
			interrupt()
		case <-ctxDone:
			ctxDone = nil
			interrupt()
		case <-grace:
			k.host.kill()
		}
	}
}

// death says why the kernel is gone, and makes sure it is.
func (k *JupyterKernel) death(oomBefore int64) error {
	k.host.kill()
	if k.host.oomKills() > oomBefore {
		return errOOM
	}
	return errDied
}

// chdir sets the kernel's working directory where the language allows.
func (k *JupyterKernel) chdir(ctx context.Context, dir string) error {
	q, _ := json.Marshal(dir)
	var code string
	switch k.lang {
	case "python":
		code = "__import__('os').chdir(" + string(q) + ")"
	case "r":
		code = "setwd(" + string(q) + ")"
	default:
		return fmt.Errorf("%w: a working directory cannot be set in a %s kernel", ErrUnsupported, k.lang)
	}
	reply, err := k.client.Execute(ctx, code, jupyter.ExecuteOptions{Silent: true, ContinueOnError: true}, nil)
	if err != nil {
		return fmt.Errorf("setting the working directory: %w", err)
	}
	if reply.Status != "ok" {
		return fmt.Errorf("working directory %s: %s: %s", dir, reply.Ename, reply.Evalue)
	}
	return nil
}

// stdinLines answers the kernel's input requests with the lines of text.
func stdinLines(text string) func(string, bool) (string, error) {
	var mu sync.Mutex
	lines := strings.SplitAfter(text, "\n")
	return func(string, bool) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(lines) == 0 || lines[0] == "" {
			return "", io.EOF // EOFError in the cell, as a closed stdin gives
		}
		l := lines[0]
		lines = lines[1:]
		return strings.TrimSuffix(l, "\n"), nil
	}
}

// ansi matches terminal escape sequences: CSI (colours, cursor moves),
// OSC (titles, hyperlinks) and two-byte escapes.
var ansi = regexp.MustCompile(`\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])`)

// StripANSI removes terminal escapes (IPython colours its tracebacks).
func StripANSI(s string) string {
	if !strings.Contains(s, "\x1b") {
		return s
	}
	return strings.ReplaceAll(ansi.ReplaceAllString(s, ""), "\x1b", "")
}

// outputOf turns an iopub message into an output, if it is one.
func outputOf(msg jupyter.Message) (Output, bool) {
	var c Output // the content's keys are Output's; only those of its type are kept
	t := msg.Header.MsgType
	switch t {
	case "stream", "display_data", "execute_result", "error":
	default:
		return Output{}, false // status, execute_input, clear_output, update_display_data
	}
	if json.Unmarshal(msg.Content, &c) != nil {
		return Output{}, false
	}
	o := Output{OutputType: t}
	switch t {
	case "stream":
		o.Name, o.Text = c.Name, c.Text
	case "error":
		o.Ename, o.Evalue = c.Ename, c.Evalue
		// Kernels colour tracebacks and put several lines in one entry.
		o.Traceback = strings.Split(StripANSI(strings.Join(c.Traceback, "\n")), "\n")
	default:
		o.Data, o.Metadata, o.ExecutionCount = c.Data, c.Metadata, c.ExecutionCount
		for mime, v := range o.Data {
			if s, ok := v.(string); ok && strings.HasPrefix(mime, "image/") && mime != "image/svg+xml" {
				o.Data[mime] = strings.ReplaceAll(s, "\n", "") // bare base64, as the native drivers give
			}
		}
		if o.Metadata == nil {
			o.Metadata = map[string]any{}
		}
	}
	return o, true
}

// Complete asks for completions of code at cursorPos (code points).
func (k *JupyterKernel) Complete(ctx context.Context, code string, cursorPos int) (*Completion, error) {
	if !k.mu.TryLock() {
		return nil, ErrBusy
	}
	defer k.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, assistTimeout)
	defer cancel()
	r, err := k.client.Complete(ctx, validUTF8(code), cursorPos)
	if err != nil {
		return nil, fmt.Errorf("complete: %w", err)
	}
	c := &Completion{Matches: r.Matches, CursorStart: r.CursorStart, CursorEnd: r.CursorEnd, Metadata: r.Metadata}
	if c.Matches == nil {
		c.Matches = []string{}
	}
	return c, nil
}

// Inspect asks what the name at cursorPos is.
func (k *JupyterKernel) Inspect(ctx context.Context, code string, cursorPos, detail int) (*Inspection, error) {
	if !k.mu.TryLock() {
		return nil, ErrBusy
	}
	defer k.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, assistTimeout)
	defer cancel()
	r, err := k.client.Inspect(ctx, validUTF8(code), cursorPos, detail)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	in := &Inspection{Found: r.Found, Data: r.Data, Metadata: r.Metadata}
	if in.Data == nil {
		in.Data = map[string]any{}
	}
	if s, ok := in.Data["text/plain"].(string); ok {
		in.Data["text/plain"] = StripANSI(s)
	}
	return in, nil
}

// Interrupt interrupts the running cell: SIGINT, or an interrupt_request
// for kernelspecs whose interrupt_mode is "message" (waiting for its answer
// at most interruptTimeout), no sooner than settle after the cell began.
func (k *JupyterKernel) Interrupt() error {
	if b := k.began.Load(); b != 0 {
		time.Sleep(time.Until(time.Unix(0, b).Add(settle)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), interruptTimeout)
	defer cancel()
	return k.host.interrupt(ctx)
}

const interruptTimeout = 5 * time.Second

// settle is how long after a kernel says it began a cell an interrupt
// waits. ipykernel 6 announces the cell a moment before it can take a
// SIGINT as KeyboardInterrupt; one that lands in between is caught as an
// error of its own and every later one is ignored until the cell ends
// (with jupyter_client alone: 5 of 8 fresh kernels stuck when interrupted
// right at execute_input, none 0.3 s later).
const settle = 500 * time.Millisecond

// InCell reports whether the kernel is running a cell: it has said it
// began one, so an interrupt now reaches it. It does not take k.mu, which
// Do, Complete and Inspect try for and fail with ErrBusy.
func (k *JupyterKernel) InCell() bool {
	return k.began.Load() != 0
}

// Alive reports whether the kernel is running.
func (k *JupyterKernel) Alive() bool {
	select {
	case <-k.host.done():
		return false
	default:
		return true
	}
}

// Pid is the host pid of the kernel; 0 if it is remote or has exited.
func (k *JupyterKernel) Pid() int {
	if !k.Alive() {
		return 0
	}
	return k.host.pid()
}

// Renice sets the kernel's CPU priority (local kernels).
func (k *JupyterKernel) Renice(nice int) {
	if h, ok := k.host.(*localHost); ok {
		renice(h.spec.Cgroup, nice)
	}
}

// Stop kills the kernel and returns at once.
func (k *JupyterKernel) Stop() { k.host.kill() }

// Close ends the kernel.
func (k *JupyterKernel) Close() error {
	k.client.Close()
	k.host.kill()
	return nil
}

// localHost is a kernel in a jail of this server's.
type localHost struct {
	proc   *jail.Process
	spec   jail.Spec
	signal bool // interrupt_mode "signal" (Jupyter's default)
	client *jupyter.Client
}

func (h *localHost) interrupt(ctx context.Context) error {
	if !h.signal && h.client != nil {
		return h.client.Interrupt(ctx)
	}
	return h.proc.Interrupt()
}

func (h *localHost) done() <-chan struct{} { return h.proc.Done() }
func (h *localHost) pid() int              { return h.proc.ProgramPid() }

func (h *localHost) meter() meter { return startMeter(h.proc.ProgramPid(), h.spec.Cgroup) }

func (h *localHost) oomKills() int64 {
	if h.spec.Cgroup == nil {
		return 0
	}
	n, _ := h.spec.Cgroup.OOMKills()
	return n
}

func (h *localHost) kill() { killTree(h.proc, h.spec.Cgroup) }

// remoteHost is a kernel of a remote Jupyter server.
type remoteHost struct {
	srv  *jupyter.Server
	id   string
	once sync.Once
	gone chan struct{}
}

func (h *remoteHost) interrupt(ctx context.Context) error { return h.srv.Interrupt(ctx, h.id) }
func (h *remoteHost) done() <-chan struct{}               { return h.gone }
func (h *remoteHost) pid() int                            { return 0 }
func (h *remoteHost) meter() meter                        { return meter{start: time.Now()} }
func (h *remoteHost) oomKills() int64                     { return 0 }

func (h *remoteHost) kill() {
	h.once.Do(func() {
		close(h.gone)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.srv.Shutdown(ctx, h.id)
	})
}
