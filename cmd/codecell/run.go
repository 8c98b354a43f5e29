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

	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

func runCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: codecell run [flags] FILE|-\n\nRuns the code once in a fresh sandbox and prints its outputs.\n\n")
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
	fs.Parse(args)
	if fs.NArg() != 1 {
		fs.Usage()
		return exitError(2)
	}
	code, l, err := readCode(fs.Arg(0), *lang)
	if err != nil {
		return err
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
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else if err := printResult(os.Stdout, os.Stderr, res, *outDir); err != nil {
		return err
	}
	switch res.Status {
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
	n := 0
	for _, o := range res.Outputs {
		switch o.OutputType {
		case "stream":
			w := stdout
			if o.Name == "stderr" {
				w = stderr
			}
			io.WriteString(w, o.Text)
		case "error":
			fmt.Fprintln(stderr, strings.Join(o.Traceback, "\n"))
		default:
			saved := false
			if outDir != "" {
				for mime, ext := range map[string]string{"image/png": ".png", "image/jpeg": ".jpg", "image/svg+xml": ".svg", "text/html": ".html"} {
					v, ok := o.Data[mime].(string)
					if !ok {
						continue
					}
					n++
					body := []byte(v)
					var err error
					if strings.HasPrefix(mime, "image/") && mime != "image/svg+xml" {
						if body, err = base64.StdEncoding.DecodeString(v); err != nil {
							return fmt.Errorf("decoding %s output: %w", mime, err)
						}
					}
					name := filepath.Join(outDir, fmt.Sprintf("output-%d%s", n, ext))
					if err := os.MkdirAll(outDir, 0o755); err != nil {
						return err
					}
					if err := os.WriteFile(name, body, 0o644); err != nil {
						return err
					}
					fmt.Fprintf(stdout, "[%s written to %s]\n", mime, name)
					saved = true
				}
			}
			if text, ok := o.Data["text/plain"].(string); ok && (!saved || o.OutputType == "execute_result") {
				fmt.Fprintln(stdout, text)
			}
			if _, img := o.Data["image/png"]; img && outDir == "" {
				fmt.Fprintln(stdout, "[image/png: use --out-dir DIR to save it]")
			}
		}
	}
	return nil
}

func randomID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return fmt.Sprintf("%x", b)
}
