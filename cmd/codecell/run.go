package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/codecell/codecell/client"
	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

func runCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: codecell run [flags] FILE|-

Runs the code once in a fresh sandbox and prints its outputs. With --server
(or CODECELL_SERVER) it runs on that codecell server instead, in its default
sandbox, and --session keeps state there between runs:

  codecell run --server http://127.0.0.1:18091 --session s1 step1.py
  codecell run --server http://127.0.0.1:18091 --session s1 step2.py

Exit status: 0 when the code ran without error, 1 on an error, 124 on a
timeout.

`)
		fs.PrintDefaults()
	}
	var c common
	c.register(fs)
	lang := fs.String("lang", "", "python or javascript (default: from the file's extension, else python)")
	asJSON := fs.Bool("json", false, "print the result (status and outputs) as JSON")
	outDir := fs.String("out-dir", "", "write images and HTML outputs to this directory")
	timeout := fs.Duration("timeout", 0, "wall-clock limit for the run (default 30s)")
	var puts putFlags
	fs.Var(&puts, "put", "copy a local file into the sandbox first, as LOCAL:SANDBOX_PATH (repeatable)")
	var rf remoteFlags
	rf.register(fs)
	session := fs.String("session", "", "with --server: run in this session of the server, which keeps state between runs (created on first use)")
	fs.Parse(args)
	if fs.NArg() != 1 {
		fs.Usage()
		return exitError(2)
	}
	code, l, err := readCode(fs.Arg(0), *lang)
	if err != nil {
		return err
	}
	out := runOutput{asJSON: *asJSON, outDir: *outDir}
	if rf.server != "" {
		req := client.ExecuteRequest{Language: client.Language(l), Code: code, SessionID: *session, Timeout: *timeout}
		return runRemote(ctx, rf, puts, req, out)
	}
	if *session != "" {
		return errors.New("--session needs --server (or CODECELL_SERVER): a local run has no sessions")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg, err := c.sandboxConfig(log)
	if err != nil {
		return err
	}
	sb, err := sandbox.Create(ctx, cfg, sandbox.Options{ID: "run-" + randomID()})
	if err != nil {
		return err
	}
	defer sb.Destroy(context.WithoutCancel(ctx))
	for _, p := range puts {
		if err := copyIn(sb, p.local, p.remote); err != nil {
			return err
		}
	}
	res, err := sb.Run(ctx, l, code, *timeout)
	if err != nil {
		return err
	}
	if out.asJSON {
		if err := printJSON(res); err != nil {
			return err
		}
	} else if err := printResult(os.Stdout, os.Stderr, res, out.outDir); err != nil {
		return err
	}
	return exitStatus(res.Status)
}

// runOutput is how a run shows its result.
type runOutput struct {
	asJSON bool
	outDir string
}

// runRemote runs req on a codecell server: the files of puts are uploaded
// first, and the outputs printed as they arrive, as a local run prints
// them. Interrupted (^C) in a session, it interrupts the session's cell.
func runRemote(ctx context.Context, rf remoteFlags, puts putFlags, req client.ExecuteRequest, out runOutput) error {
	c, err := rf.client()
	if err != nil {
		return err
	}
	for _, p := range puts {
		if _, err := uploadFile(ctx, c, p.local, p.remote); err != nil {
			return fmt.Errorf("--put %s:%s: %w", p.local, p.remote, err)
		}
	}
	var res *client.Result
	if out.asJSON {
		res, err = c.Execute(ctx, req)
	} else {
		pr := &printer{stdout: os.Stdout, stderr: os.Stderr, outDir: out.outDir}
		var printErr error
		res, err = c.ExecuteStream(ctx, req, func(o client.Output) {
			if printErr == nil {
				printErr = pr.print(kernelOutput(o))
			}
		})
		if err == nil {
			err = printErr
		}
	}
	if err != nil {
		if ctx.Err() != nil && req.SessionID != "" {
			ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			c.Interrupt(ictx, req.SessionID, req.Language)
		}
		return err
	}
	if out.asJSON {
		kr := &kernel.Result{Status: res.Status, ExecutionCount: res.ExecutionCount, Truncated: res.Truncated, Outputs: []kernel.Output{}}
		for _, o := range res.Outputs {
			kr.Outputs = append(kr.Outputs, kernelOutput(o))
		}
		if err := printJSON(kr); err != nil {
			return err
		}
	}
	if res.SessionRestarted {
		fmt.Fprintln(os.Stderr, "codecell:", res.Message)
	}
	return exitStatus(res.Status)
}

// kernelOutput is an output of the client as the local printing code takes it.
func kernelOutput(o client.Output) kernel.Output {
	return kernel.Output{OutputType: o.OutputType, Name: o.Name, Text: o.Text, Data: o.Data, Metadata: o.Metadata,
		ExecutionCount: o.ExecutionCount, Ename: o.Ename, Evalue: o.Evalue, Traceback: o.Traceback}
}

func printJSON(res *kernel.Result) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// exitStatus is a run's exit status: 0 when the code ran without error, 1
// on an error, 124 on a timeout.
func exitStatus(status string) error {
	switch status {
	case kernel.StatusOK:
		return nil
	case kernel.StatusTimeout:
		return exitError(124)
	}
	return exitError(1)
}

func readCode(path, lang string) (string, kernel.Language, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", "", err
	}
	if lang == "" {
		lang = "python"
		switch filepath.Ext(path) {
		case ".js", ".mjs", ".cjs":
			lang = "javascript"
		}
	}
	l, err := kernel.ParseLanguage(lang)
	return string(b), l, err
}

type putFlag struct{ local, remote string }
type putFlags []putFlag

func (p *putFlags) String() string { return fmt.Sprint(*p) }
func (p *putFlags) Set(v string) error {
	local, remote, ok := strings.Cut(v, ":")
	if !ok || local == "" || remote == "" {
		return errors.New("want LOCAL:SANDBOX_PATH")
	}
	*p = append(*p, putFlag{local, remote})
	return nil
}

func copyIn(sb *sandbox.Sandbox, local, remote string) error {
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	return sb.WriteFile(remote, f)
}

// printResult shows outputs the way a notebook would, in a terminal.
func printResult(stdout, stderr io.Writer, res *kernel.Result, outDir string) error {
	p := &printer{stdout: stdout, stderr: stderr, outDir: outDir}
	for _, o := range res.Outputs {
		if err := p.print(o); err != nil {
			return err
		}
	}
	return nil
}

// printer shows outputs one by one, as printResult does; a remote run
// prints them as they arrive.
type printer struct {
	stdout, stderr io.Writer
	outDir         string
	n              int // files written to outDir
}

func (p *printer) print(o kernel.Output) error {
	switch o.OutputType {
	case "stream":
		w := p.stdout
		if o.Name == "stderr" {
			w = p.stderr
		}
		io.WriteString(w, o.Text)
	case "error":
		fmt.Fprintln(p.stderr, strings.Join(o.Traceback, "\n"))
	default:
		saved := false
		if p.outDir != "" {
			for mime, ext := range map[string]string{"image/png": ".png", "image/jpeg": ".jpg", "image/svg+xml": ".svg", "text/html": ".html"} {
				v, ok := o.Data[mime].(string)
				if !ok {
					continue
				}
				p.n++
				body := []byte(v)
				var err error
				if strings.HasPrefix(mime, "image/") && mime != "image/svg+xml" {
					if body, err = base64.StdEncoding.DecodeString(v); err != nil {
						return fmt.Errorf("decoding %s output: %w", mime, err)
					}
				}
				name := filepath.Join(p.outDir, fmt.Sprintf("output-%d%s", p.n, ext))
				if err := os.MkdirAll(p.outDir, 0o755); err != nil {
					return err
				}
				if err := os.WriteFile(name, body, 0o644); err != nil {
					return err
				}
				fmt.Fprintf(p.stdout, "[%s written to %s]\n", mime, name)
				saved = true
			}
		}
		if text, ok := o.Data["text/plain"].(string); ok && (!saved || o.OutputType == "execute_result") {
			fmt.Fprintln(p.stdout, text)
		}
		if _, img := o.Data["image/png"]; img && p.outDir == "" {
			fmt.Fprintln(p.stdout, "[image/png: use --out-dir DIR to save it]")
		}
	}
	return nil
}

func randomID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return fmt.Sprintf("%x", b)
}
