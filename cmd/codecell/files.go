package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/codecell/codecell/client"
)

const filesUsage = `Usage:
  codecell files put LOCAL REMOTE       upload LOCAL (- for stdin) to REMOTE in the sandbox
  codecell files get REMOTE [LOCAL|-]   download REMOTE to LOCAL (default: its name, in the
                                        current directory; - for stdout)
  codecell files ls [REMOTE]            list a directory of the sandbox (default /home/user)

Moves files in and out of a codecell server's default sandbox. REMOTE is a
path as the sandbox's code sees it: under /home/user or /tmp, or relative to
/home/user; a REMOTE or LOCAL ending in / (or an existing local directory)
keeps the file's name.

Flags (before or after the arguments):
`

// remoteFlags are the flags of the verbs that talk to a codecell server.
type remoteFlags struct {
	server, apiKey string
}

func (r *remoteFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.server, "server", os.Getenv("CODECELL_SERVER"), "URL of a codecell server, such as http://127.0.0.1:18091 (CODECELL_SERVER)")
	fs.StringVar(&r.apiKey, "api-key", cmp.Or(os.Getenv("CODECELL_API_KEY"), os.Getenv("AIO_API_KEY")), "API key of the server (CODECELL_API_KEY or AIO_API_KEY)")
}

func (r *remoteFlags) client() (*client.Client, error) {
	if r.server == "" {
		return nil, errors.New("no server: give --server URL or set CODECELL_SERVER")
	}
	c, err := client.New(r.server, client.WithAPIKey(r.apiKey))
	if err != nil {
		return nil, fmt.Errorf("--server: %w", err)
	}
	return c, nil
}

func filesCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("files", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), filesUsage)
		fs.PrintDefaults()
	}
	var rf remoteFlags
	rf.register(fs)
	pos := parseInterspersed(fs, args)
	if len(pos) == 0 {
		fs.Usage()
		return exitError(2)
	}
	sub, pos := pos[0], pos[1:]
	nargs := map[string][2]int{"put": {2, 2}, "get": {1, 2}, "ls": {0, 1}}
	n, ok := nargs[sub]
	if !ok {
		fmt.Fprintf(fs.Output(), "codecell files: unknown command %q\n\n", sub)
		fs.Usage()
		return exitError(2)
	}
	if len(pos) < n[0] || len(pos) > n[1] {
		fmt.Fprintf(fs.Output(), "codecell files %s: wrong number of arguments\n\n", sub)
		fs.Usage()
		return exitError(2)
	}
	c, err := rf.client()
	if err != nil {
		return fmt.Errorf("files %s: %w", sub, err)
	}
	switch sub {
	case "put":
		local, remote := pos[0], pos[1]
		if strings.HasSuffix(remote, "/") {
			if local == "-" {
				return errors.New("files put: REMOTE is a directory, and stdin has no name: give REMOTE a file name")
			}
			remote += filepath.Base(local)
		}
		var w *client.Written
		if w, err = uploadFile(ctx, c, local, remote); err == nil {
			fmt.Printf("%s: %d bytes\n", w.Path, w.Size)
		}
	case "get":
		local := ""
		if len(pos) == 2 {
			local = pos[1]
		}
		err = download(ctx, c, pos[0], local)
	case "ls":
		dir := "/home/user"
		if len(pos) == 1 {
			dir = pos[0]
		}
		err = list(ctx, c, dir)
	}
	if err != nil {
		return fmt.Errorf("files %s: %w", sub, err)
	}
	return nil
}

// parseInterspersed parses flags wherever they are among the arguments, and
// returns the arguments that are not flags; those after "--" are all
// arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) []string {
	var pos []string
	for {
		fs.Parse(args)
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...)
		}
		if len(rest) == 0 {
			return pos
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// uploadFile copies the local file (- for stdin) to remote in the sandbox.
func uploadFile(ctx context.Context, c *client.Client, local, remote string) (*client.Written, error) {
	var r io.Reader = os.Stdin
	if local != "-" {
		f, err := os.Open(local)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			return nil, fmt.Errorf("%s is a directory: upload its files one by one", local)
		}
		r = f
	}
	return c.WriteFile(ctx, remote, r)
}

// download copies remote to the local file (its name in the current
// directory if empty, inside local if local is a directory, stdout if -).
// A failed download leaves no file behind.
func download(ctx context.Context, c *client.Client, remote, local string) error {
	rc, err := c.ReadFile(ctx, remote)
	if err != nil {
		return err
	}
	defer rc.Close()
	if local == "-" {
		_, err := io.Copy(os.Stdout, rc)
		return err
	}
	if fi, err := os.Stat(local); local == "" || strings.HasSuffix(local, "/") || err == nil && fi.IsDir() {
		local = filepath.Join(local, path.Base(remote))
	}
	tmp, err := os.CreateTemp(filepath.Dir(local), ".codecell-download-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing
	if _, err := io.Copy(tmp, rc); err != nil {
		tmp.Close()
		return fmt.Errorf("downloading %s: %w", remote, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), local)
}

// list prints a directory of the sandbox, as ls -l would.
func list(ctx context.Context, c *client.Client, dir string) error {
	l, err := c.ListFiles(ctx, dir)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, f := range l.Files {
		name := f.Name
		switch {
		case f.IsDir:
			name += "/"
		case f.LinkTarget != "":
			name += " -> " + f.LinkTarget
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t %s\n", f.Permissions, f.Size, f.ModTime.Local().Format("2006-01-02 15:04"), name)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if l.Truncated {
		fmt.Fprintf(os.Stderr, "(more entries than the server lists)\n")
	}
	return nil
}
