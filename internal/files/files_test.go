package files

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const testUID, testGID = 1234, 1234

const secret = "HOST-SECRET-CONTENT\n"

type env struct {
	fs              *FS
	base            string // holds home, tmp and the victim
	home, tmp       string
	staging         string // Config.Staging
	victim          string // a host file outside the sandbox
	shadow          []byte // /etc/shadow as it is, to prove it never leaks
	victimModTime   time.Time
	shadowModTimeAt time.Time
}

// newEnv makes a sandbox (home and tmp owned by testUID, mode 0700) next to
// a host victim file, and checks at the end of the test that the victim and
// /etc/shadow were not modified.
func newEnv(t *testing.T) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (chown, mknod)")
	}
	e := &env{base: t.TempDir()}
	e.home = filepath.Join(e.base, "home")
	e.tmp = filepath.Join(e.base, "tmp")
	e.victim = filepath.Join(e.base, "victim.txt")
	for _, d := range []string{e.home, e.tmp} {
		must(t, os.Mkdir(d, 0o700))
		must(t, os.Chown(d, testUID, testGID))
	}
	must(t, os.WriteFile(e.victim, []byte(secret), 0o600))
	fi, err := os.Stat(e.victim)
	must(t, err)
	e.victimModTime = fi.ModTime()
	e.shadow, _ = os.ReadFile("/etc/shadow")
	if fi, err := os.Stat("/etc/shadow"); err == nil {
		e.shadowModTimeAt = fi.ModTime()
	}
	e.staging = filepath.Join(e.base, "staging")
	e.fs, err = New(Config{Home: e.home, Tmp: e.tmp, Staging: e.staging, UID: testUID, GID: testGID})
	must(t, err)
	t.Cleanup(func() {
		b, err := os.ReadFile(e.victim)
		if err != nil || string(b) != secret {
			t.Errorf("host victim file changed: %q, %v", b, err)
		}
		if fi, err := os.Stat(e.victim); err != nil || !fi.ModTime().Equal(e.victimModTime) {
			t.Errorf("host victim file touched")
		}
		if fi, err := os.Stat("/etc/shadow"); err == nil && !fi.ModTime().Equal(e.shadowModTimeAt) {
			t.Errorf("/etc/shadow touched")
		}
		entries, _ := os.ReadDir(e.base)
		for _, de := range entries {
			if n := de.Name(); n != "home" && n != "tmp" && n != "staging" && n != "victim.txt" {
				t.Errorf("something was created outside the sandbox: %s", n)
			}
		}
		if staged, _ := os.ReadDir(e.staging); len(staged) != 0 {
			t.Errorf("left staged: %v", staged)
		}
	})
	return e
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// h returns the host path of a file in home.
func (e *env) h(name string) string { return filepath.Join(e.home, name) }

// checkSafe fails if err or out leaks the host path or host content.
func (e *env) checkSafe(t *testing.T, err error, out string) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), e.base) {
		t.Errorf("error leaks a host path: %v", err)
	}
	if strings.Contains(out, strings.TrimSpace(secret)) {
		t.Errorf("host victim content leaked: %q", out)
	}
	if len(e.shadow) > 20 && strings.Contains(out, string(e.shadow[:20])) {
		t.Errorf("/etc/shadow content leaked")
	}
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("error %v is not an *Error", err)
	}
}

func owner(t *testing.T, p string) (uid, gid uint32) {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Lstat(p, &st))
	return st.Uid, st.Gid
}

func wantOwner(t *testing.T, p string) {
	t.Helper()
	if uid, gid := owner(t, p); uid != testUID || gid != testGID {
		t.Errorf("%s owned by %d:%d, want %d:%d", p, uid, gid, testUID, testGID)
	}
}

func write(t *testing.T, e *env, p, content string) {
	t.Helper()
	if _, err := e.fs.Write(context.Background(), p, strings.NewReader(content), WriteOptions{MkdirAll: true}); err != nil {
		t.Fatal(err)
	}
}

func readAll(e *env, p string) (string, error) {
	r, err := e.fs.Read(context.Background(), p, ReadOptions{})
	if err != nil {
		return "", err
	}
	return r.Content, nil
}

// TestAttacks: hostile paths and symlinks. Each case runs one operation and
// must fail with the given error (or succeed harmlessly when want is nil and
// check passes); newEnv's cleanup proves no host file was written.
func TestAttacks(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		setup func(t *testing.T, e *env)
		op    func(e *env) (string, error)
		want  error
		check func(t *testing.T, e *env)
	}{
		{name: "dotdot relative", op: func(e *env) (string, error) { return readAll(e, "../../etc/passwd") }, want: ErrOutside},
		{name: "dotdot from home", op: func(e *env) (string, error) { return readAll(e, "/home/user/../../../etc/shadow") }, want: ErrOutside},
		{name: "dotdot from tmp", op: func(e *env) (string, error) {
			_, err := e.fs.List(ctx, "/tmp/../etc", ListOptions{})
			return "", err
		}, want: ErrOutside},
		{name: "dotdot to victim", op: func(e *env) (string, error) { return readAll(e, "../victim.txt") }, want: ErrOutside},
		{name: "percent-encoded dotdot stays literal", op: func(e *env) (string, error) {
			return readAll(e, "%2e%2e/%2e%2e/victim.txt")
		}, want: ErrNotFound},
		{name: "percent-encoded dotdot write is a literal dir", op: func(e *env) (string, error) {
			_, err := e.fs.Write(ctx, "%2e%2e/x", strings.NewReader("x"), WriteOptions{MkdirAll: true})
			return "", err
		}, check: func(t *testing.T, e *env) {
			if _, err := os.Stat(e.h("%2e%2e/x")); err != nil {
				t.Error(err)
			}
		}},
		{name: "NUL byte", op: func(e *env) (string, error) { return readAll(e, "a\x00/../../etc/passwd") }, want: ErrInvalidPath},
		{name: "invalid UTF-8", op: func(e *env) (string, error) { return readAll(e, "a\xff\xfe") }, want: ErrInvalidPath},
		{name: "absolute host path", op: func(e *env) (string, error) { return readAll(e, "/etc/shadow") }, want: ErrOutside},
		{name: "proc", op: func(e *env) (string, error) { return readAll(e, "/proc/self/environ") }, want: ErrOutside},
		{name: "sibling home", op: func(e *env) (string, error) { return readAll(e, "/home/user/../other/.ssh/id_rsa") }, want: ErrOutside},
		{name: "home prefix lookalike", op: func(e *env) (string, error) { return readAll(e, "/home/user2/x") }, want: ErrOutside},
		{name: "tilde dotdot", op: func(e *env) (string, error) { return readAll(e, "~/../../etc/passwd") }, want: ErrOutside},
		{name: "too long path", op: func(e *env) (string, error) { return readAll(e, strings.Repeat("a/", 3000)) }, want: ErrInvalidPath},
		{name: "too long component", op: func(e *env) (string, error) {
			_, err := e.fs.Write(ctx, strings.Repeat("a", 300), strings.NewReader("x"), WriteOptions{})
			return "", err
		}, want: ErrInvalidPath},
		{name: "newline in outside path", op: func(e *env) (string, error) { return readAll(e, "../\n/etc/passwd") }, want: ErrOutside},
		{
			name:  "symlink to /etc/shadow: read",
			setup: func(t *testing.T, e *env) { must(t, os.Symlink("/etc/shadow", e.h("s"))) },
			op:    func(e *env) (string, error) { return readAll(e, "s") },
			want:  ErrOutside,
		},
		{
			name:  "symlink to /etc/shadow: download",
			setup: func(t *testing.T, e *env) { must(t, os.Symlink("/etc/shadow", e.h("s"))) },
			op: func(e *env) (string, error) {
				f, _, err := e.fs.Open("s")
				if f != nil {
					b, _ := io.ReadAll(f)
					f.Close()
					return string(b), err
				}
				return "", err
			},
			want: ErrOutside,
		},
		{
			name:  "symlink to victim: read bytes, search, grep file",
			setup: func(t *testing.T, e *env) { must(t, os.Symlink(e.victim, e.h("v"))) },
			op: func(e *env) (string, error) {
				if _, err := e.fs.Search(ctx, "v", "."); !errors.Is(err, ErrOutside) {
					return "", errors.New("search followed the link")
				}
				if r, err := e.fs.Grep(ctx, "v", GrepOptions{Pattern: "SECRET"}); err == nil && len(r.Matches) > 0 {
					return r.Matches[0].LineContent, nil
				}
				b, err := e.fs.ReadBytes(ctx, "v", 0)
				return string(b), err
			},
			want: ErrOutside,
		},
		{
			name:  "relative symlink escaping",
			setup: func(t *testing.T, e *env) { must(t, os.Symlink("../../", e.h("up"))) },
			op:    func(e *env) (string, error) { return readAll(e, "up/"+filepath.Base(e.base)+"/victim.txt") },
			want:  ErrOutside,
		},
		{
			name: "symlink chain escaping",
			setup: func(t *testing.T, e *env) {
				must(t, os.Symlink("b", e.h("a")))
				must(t, os.Symlink("c", e.h("b")))
				must(t, os.Symlink("../victim.txt", e.h("c")))
			},
			op:   func(e *env) (string, error) { return readAll(e, "a") },
			want: ErrOutside,
		},
		{
			name: "symlink loop",
			setup: func(t *testing.T, e *env) {
				must(t, os.Symlink("loop2", e.h("loop1")))
				must(t, os.Symlink("loop1", e.h("loop2")))
			},
			op:   func(e *env) (string, error) { return readAll(e, "loop1") },
			want: ErrInvalidPath,
		},
		{
			name:  "symlinked parent to /etc",
			setup: func(t *testing.T, e *env) { must(t, os.Symlink("/etc", e.h("d"))) },
			op:    func(e *env) (string, error) { return readAll(e, "d/passwd") },
			want:  ErrOutside,
		},
		{
			name:  "write under symlinked parent",
			setup: func(t *testing.T, e *env) { must(t, os.Symlink("..", e.h("d"))) },
			op: func(e *env) (string, error) {
				_, err := e.fs.Write(ctx, "d/victim.txt", strings.NewReader("PWNED"), WriteOptions{})
				return "", err
			},
			want: ErrOutside,
		},
		{
			name:  "upload and mkdir under symlinked parent",
			setup: func(t *testing.T, e *env) { must(t, os.Symlink(e.base, e.h("d"))) },
			op: func(e *env) (string, error) {
				if err := e.fs.Mkdir("d/new/dir", true); !errors.Is(err, ErrOutside) {
					return "", errors.New("mkdir did not fail with ErrOutside")
				}
				_, err := e.fs.Upload(ctx, "d/evil", strings.NewReader("PWNED"))
				return "", err
			},
			want: ErrOutside,
		},
		{
			name:  "write replaces a symlink to a host file",
			setup: func(t *testing.T, e *env) { must(t, os.Symlink("../victim.txt", e.h("w"))) },
			op: func(e *env) (string, error) {
				_, err := e.fs.Write(ctx, "w", strings.NewReader("PWNED"), WriteOptions{})
				return "", err
			},
			check: func(t *testing.T, e *env) {
				fi, err := os.Lstat(e.h("w"))
				if err != nil || !fi.Mode().IsRegular() {
					t.Errorf("w is not a regular file now: %v %v", fi, err)
				}
			},
		},
		{
			name:  "append through a symlink is refused",
			setup: func(t *testing.T, e *env) { must(t, os.Symlink(e.victim, e.h("w"))) },
			op: func(e *env) (string, error) {
				_, err := e.fs.Write(ctx, "w", strings.NewReader("PWNED"), WriteOptions{Append: true})
				return "", err
			},
			want: ErrNotRegular,
		},
		{
			name:  "replace and edit through a symlink are refused",
			setup: func(t *testing.T, e *env) { must(t, os.Symlink(e.victim, e.h("w"))) },
			op: func(e *env) (string, error) {
				old, new := "HOST", "PWNED"
				if _, err := e.fs.Edit(ctx, EditRequest{Command: "str_replace", Path: "w", OldStr: &old, NewStr: &new}); !errors.Is(err, ErrNotRegular) {
					return "", errors.New("edit was not refused")
				}
				_, err := e.fs.Replace(ctx, "w", old, new, true)
				return "", err
			},
			want: ErrNotRegular,
		},
		{
			name:  "view through an escaping symlink",
			setup: func(t *testing.T, e *env) { must(t, os.Symlink("../victim.txt", e.h("w"))) },
			op: func(e *env) (string, error) {
				r, err := e.fs.Edit(ctx, EditRequest{Command: "view", Path: "w"})
				if r != nil {
					return r.Output, err
				}
				return "", err
			},
			want: ErrOutside,
		},
		{
			name: "rename over a symlink replaces the link",
			setup: func(t *testing.T, e *env) {
				must(t, os.Symlink(e.victim, e.h("w")))
				must(t, os.WriteFile(e.h("f"), []byte("mine"), 0o644))
			},
			op: func(e *env) (string, error) { return "", e.fs.Move(ctx, "f", "w", true) },
			check: func(t *testing.T, e *env) {
				if b, err := os.ReadFile(e.h("w")); err != nil || string(b) != "mine" {
					t.Errorf("w = %q, %v", b, err)
				}
			},
		},
		{name: "move from outside", op: func(e *env) (string, error) { return "", e.fs.Move(ctx, "/etc/passwd", "p", false) }, want: ErrOutside},
		{name: "move to outside", setup: func(t *testing.T, e *env) { must(t, os.WriteFile(e.h("f"), nil, 0o644)) },
			op: func(e *env) (string, error) { return "", e.fs.Move(ctx, "f", "../victim.txt", true) }, want: ErrOutside},
		{
			name: "move into a symlinked parent",
			setup: func(t *testing.T, e *env) {
				must(t, os.WriteFile(e.h("f"), nil, 0o644))
				must(t, os.Symlink("..", e.h("d")))
			},
			op:   func(e *env) (string, error) { return "", e.fs.Move(ctx, "f", "d/victim.txt", true) },
			want: ErrOutside,
		},
		{
			name:  "move a symlink out of the sandbox",
			setup: func(t *testing.T, e *env) { must(t, os.Symlink("..", e.h("d"))) },
			op:    func(e *env) (string, error) { return "", e.fs.Move(ctx, "d/victim.txt", "stolen", false) },
			want:  ErrOutside,
		},
		{name: "copy from outside", op: func(e *env) (string, error) {
			return "", e.fs.Copy(ctx, "/etc/shadow", "s", CopyOptions{})
		}, want: ErrOutside},
		{
			name:  "copy through an escaping symlink",
			setup: func(t *testing.T, e *env) { must(t, os.Symlink(e.victim, e.h("v"))) },
			op:    func(e *env) (string, error) { return "", e.fs.Copy(ctx, "v", "stolen", CopyOptions{}) },
			want:  ErrOutside,
		},
		{
			name: "copy to an escaping parent",
			setup: func(t *testing.T, e *env) {
				must(t, os.WriteFile(e.h("f"), nil, 0o644))
				must(t, os.Symlink("..", e.h("d")))
			},
			op: func(e *env) (string, error) {
				return "", e.fs.Copy(ctx, "f", "d/victim.txt", CopyOptions{Overwrite: true})
			},
			want: ErrOutside,
		},
		{name: "delete home", op: func(e *env) (string, error) { return "", e.fs.Delete("/home/user", true) }, want: ErrRoot},
		{name: "delete tmp", op: func(e *env) (string, error) { return "", e.fs.Delete("/tmp/", true) }, want: ErrRoot},
		{name: "delete tilde", op: func(e *env) (string, error) { return "", e.fs.Delete("~", true) }, want: ErrRoot},
		{name: "delete dot", op: func(e *env) (string, error) { return "", e.fs.Delete(".", true) }, want: ErrRoot},
		{name: "delete above home", op: func(e *env) (string, error) { return "", e.fs.Delete("/home/user/..", true) }, want: ErrOutside},
		{name: "move home away", op: func(e *env) (string, error) { return "", e.fs.Move(ctx, "/home/user", "/tmp/h", false) }, want: ErrRoot},
		{
			name:  "recursive delete of a symlink to the parent removes only the link",
			setup: func(t *testing.T, e *env) { must(t, os.Symlink("..", e.h("d"))) },
			op:    func(e *env) (string, error) { return "", e.fs.Delete("d", true) },
			check: func(t *testing.T, e *env) {
				if _, err := os.Lstat(e.h("d")); !os.IsNotExist(err) {
					t.Error("link still there")
				}
			},
		},
		{
			name: "download a FIFO does not block",
			setup: func(t *testing.T, e *env) {
				must(t, unix.Mkfifo(e.h("fifo"), 0o644))
			},
			op: func(e *env) (string, error) {
				done := make(chan error, 1)
				go func() {
					f, _, err := e.fs.Open("fifo")
					if f != nil {
						f.Close()
					}
					if err == nil {
						_, err = e.fs.Read(ctx, "fifo", ReadOptions{})
					}
					done <- err
				}()
				select {
				case err := <-done:
					return "", err
				case <-time.After(5 * time.Second):
					return "", errors.New("blocked on a FIFO")
				}
			},
			want: ErrNotRegular,
		},
		{
			name:  "append to a FIFO does not block",
			setup: func(t *testing.T, e *env) { must(t, unix.Mkfifo(e.h("fifo"), 0o644)) },
			op: func(e *env) (string, error) {
				done := make(chan error, 1)
				go func() {
					_, err := e.fs.Write(ctx, "fifo", strings.NewReader("x"), WriteOptions{Append: true})
					done <- err
				}()
				select {
				case err := <-done:
					return "", err
				case <-time.After(5 * time.Second):
					return "", errors.New("blocked on a FIFO")
				}
			},
			want: ErrNotRegular,
		},
		{
			name: "download a character device",
			setup: func(t *testing.T, e *env) {
				must(t, unix.Mknod(e.h("null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
			},
			op: func(e *env) (string, error) {
				_, _, err := e.fs.Open("null")
				return "", err
			},
			want: ErrNotRegular,
		},
		{
			name:  "download a directory",
			setup: func(t *testing.T, e *env) { must(t, os.Mkdir(e.h("dir"), 0o755)) },
			op: func(e *env) (string, error) {
				_, _, err := e.fs.Open("dir")
				return "", err
			},
			want: ErrIsDir,
		},
		{
			// Documented: a hard link is the file itself. It cannot exist in
			// production (the sandbox volume is its own filesystem), but a
			// write must still replace the link, not write through it.
			name:  "hard link to a host file",
			setup: func(t *testing.T, e *env) { must(t, os.Link(e.victim, e.h("hl"))) },
			op: func(e *env) (string, error) {
				_, err := e.fs.Write(ctx, "hl", strings.NewReader("PWNED"), WriteOptions{})
				return "", err
			},
			check: func(t *testing.T, e *env) {
				if b, _ := os.ReadFile(e.h("hl")); string(b) != "PWNED" {
					t.Errorf("hl = %q", b)
				}
			},
		},
		{
			name:  "absolute symlink from home into /tmp is refused",
			setup: func(t *testing.T, e *env) { must(t, os.Symlink("/tmp/x", e.h("totmp"))) },
			op:    func(e *env) (string, error) { return readAll(e, "totmp") },
			want:  ErrOutside,
		},
		{
			name: "walks do not follow symlinked directories",
			setup: func(t *testing.T, e *env) {
				must(t, os.Symlink("/", e.h("rootlink")))
				must(t, os.Symlink("..", e.h("up")))
				must(t, os.WriteFile(e.h("own.txt"), []byte("own"), 0o644))
			},
			op: func(e *env) (string, error) {
				var out strings.Builder
				g, err := e.fs.Grep(ctx, "~", GrepOptions{Pattern: "SECRET|root:"})
				if err != nil {
					return "", err
				}
				for _, m := range g.Matches {
					out.WriteString(m.File + m.LineContent)
				}
				fr, err := e.fs.Find(ctx, "~", "*")
				if err != nil {
					return "", err
				}
				gl, err := e.fs.Glob(ctx, GlobOptions{Pattern: "**", IncludeHidden: true, IncludeDirs: true})
				if err != nil {
					return "", err
				}
				l, err := e.fs.List(ctx, "~", ListOptions{Recursive: true, ShowHidden: true})
				if err != nil {
					return "", err
				}
				n := len(l.Files) + len(fr.Files) + len(gl.Files)
				if n != 9 || len(g.Matches) != 0 {
					return "", errors.New("walk went through a symlinked directory")
				}
				if _, err := e.fs.Glob(ctx, GlobOptions{Pattern: "rootlink/**"}); !errors.Is(err, ErrOutside) {
					return "", errors.New("glob followed a symlink to /")
				}
				if _, err := e.fs.List(ctx, "rootlink", ListOptions{}); !errors.Is(err, ErrOutside) {
					return "", errors.New("list followed a symlink to /")
				}
				if _, err := e.fs.Grep(ctx, "up", GrepOptions{Pattern: "SECRET"}); !errors.Is(err, ErrOutside) {
					return "", errors.New("grep followed a symlink to ..")
				}
				return out.String(), nil
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			if c.setup != nil {
				c.setup(t, e)
			}
			out, err := c.op(e)
			e.checkSafe(t, err, out)
			if c.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
			} else {
				wantErr(t, err, c.want)
			}
			if c.check != nil {
				c.check(t, e)
			}
		})
	}
}

func TestSymlinkSwapRace(t *testing.T) {
	e := newEnv(t)
	must(t, os.WriteFile(e.h("safe.txt"), []byte("safe\n"), 0o644))
	must(t, os.Symlink("safe.txt", e.h("link")))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		targets := []string{"/etc/shadow", "safe.txt", "../victim.txt", "safe.txt", e.victim}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tmp := e.h("link.new")
			os.Remove(tmp)
			if err := os.Symlink(targets[i%len(targets)], tmp); err == nil {
				os.Rename(tmp, e.h("link"))
			}
		}
	}()
	ok := 0
	for range 500 {
		r, err := e.fs.Read(context.Background(), "link", ReadOptions{})
		if err == nil {
			e.checkSafe(t, nil, r.Content)
			if r.Content != "safe\n" {
				t.Fatalf("read %q", r.Content)
			}
			ok++
		} else {
			e.checkSafe(t, err, "")
		}
		if f, _, err := e.fs.Open("link"); err == nil {
			b, _ := io.ReadAll(f)
			f.Close()
			if string(b) != "safe\n" {
				t.Fatalf("download %q", b)
			}
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d/500 reads got the safe file", ok)
}

// TestDirSwapRace swaps a directory for a symlink to the host while walks
// and writes run.
func TestDirSwapRace(t *testing.T) {
	e := newEnv(t)
	must(t, os.MkdirAll(e.h("d/sub"), 0o755))
	must(t, os.WriteFile(e.h("d/sub/f.txt"), []byte("needle\n"), 0o644))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%2 == 0 {
				os.Rename(e.h("d/sub"), e.h("d/sub.real"))
				os.Symlink(e.base, e.h("d/sub"))
			} else {
				os.Remove(e.h("d/sub"))
				os.Rename(e.h("d/sub.real"), e.h("d/sub"))
			}
		}
	}()
	ctx := context.Background()
	for range 300 {
		g, err := e.fs.Grep(ctx, "d", GrepOptions{Pattern: "SECRET|needle"})
		if err == nil {
			for _, m := range g.Matches {
				e.checkSafe(t, nil, m.LineContent)
			}
		}
		e.fs.Write(ctx, "d/sub/victim.txt", strings.NewReader("PWNED"), WriteOptions{})
		e.fs.Write(ctx, "d/sub/victim.txt", strings.NewReader("PWNED"), WriteOptions{Append: true})
		l, err := e.fs.List(ctx, "d", ListOptions{Recursive: true})
		if err == nil {
			for _, f := range l.Files {
				if strings.Contains(f.Path, "victim") && !strings.HasPrefix(f.Path, "/home/user/d/sub") {
					t.Fatalf("listed %s", f.Path)
				}
			}
		}
	}
	close(stop)
	wg.Wait()
}

func TestEscapeErrorText(t *testing.T) {
	// classify relies on os.Root's unexported escape error; pin it.
	e := newEnv(t)
	must(t, os.Symlink("/etc", e.h("abs")))
	r, err := os.OpenRoot(e.home)
	must(t, err)
	defer r.Close()
	_, err = r.Open("abs/passwd")
	if !errors.Is(e.fs.classify(err), ErrOutside) {
		t.Fatalf("os.Root escape error changed: %v", err)
	}
}

func TestResolve(t *testing.T) {
	fs := &FS{cfg: Config{Home: "/H", Tmp: "/T"}}
	for _, c := range []struct{ in, dir, rel, path string }{
		{"/home/user", "/H", ".", "/home/user"},
		{"/home/user/", "/H", ".", "/home/user"},
		{"~", "/H", ".", "/home/user"},
		{"~/a/b", "/H", "a/b", "/home/user/a/b"},
		{"a/./b/../c", "/H", "a/c", "/home/user/a/c"},
		{".", "/H", ".", "/home/user"},
		{"~root", "/H", "~root", "/home/user/~root"},
		{"/tmp", "/T", ".", "/tmp"},
		{"/tmp//x/", "/T", "x", "/tmp/x"},
		{"/home/user/../user/x", "/H", "x", "/home/user/x"},
		{"a\nb", "/H", "a\nb", "/home/user/a\nb"},
		{"%2e%2e/x", "/H", "%2e%2e/x", "/home/user/%2e%2e/x"},
	} {
		l, err := fs.resolve("t", c.in)
		if err != nil || l.dir != c.dir || l.rel != c.rel || l.path != c.path {
			t.Errorf("resolve(%q) = %+v, %v", c.in, l, err)
		}
	}
	for _, in := range []string{"", "/", "/home", "/home/user2", "/tmpx", "/etc/passwd", "../x", "/tmp/../etc", "/home/user/../../x"} {
		if _, err := fs.resolve("t", in); err == nil {
			t.Errorf("resolve(%q) succeeded", in)
		}
	}
}

func TestWriteRead(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	res, err := e.fs.Write(ctx, "/home/user/a/b/c.txt", strings.NewReader("l0\nl1\nl2\nl3\n"), WriteOptions{MkdirAll: true})
	must(t, err)
	if res.File != "/home/user/a/b/c.txt" || res.BytesWritten != 12 {
		t.Errorf("result %+v", res)
	}
	for _, p := range []string{"a", "a/b", "a/b/c.txt"} {
		wantOwner(t, e.h(p))
	}
	if fi, _ := os.Stat(e.h("a/b/c.txt")); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", fi.Mode())
	}
	for _, c := range []struct {
		opts ReadOptions
		want string
	}{
		{ReadOptions{}, "l0\nl1\nl2\nl3\n"},
		{ReadOptions{StartLine: 1, Limit: 2}, "l1\nl2\n"},
		{ReadOptions{StartLine: 3}, "l3\n"},
		{ReadOptions{StartLine: 9}, ""},
		{ReadOptions{MaxBytes: 4}, "l0\nl"},
	} {
		r, err := e.fs.Read(ctx, "~/a/b/c.txt", c.opts)
		must(t, err)
		if r.Content != c.want {
			t.Errorf("Read(%+v) = %q, want %q", c.opts, r.Content, c.want)
		}
		if r.Truncated != (c.opts.MaxBytes > 0) {
			t.Errorf("Read(%+v) truncated = %v", c.opts, r.Truncated)
		}
	}
	// Missing parents without MkdirAll.
	_, err = e.fs.Write(ctx, "x/y", strings.NewReader(""), WriteOptions{})
	wantErr(t, err, ErrNotFound)
	// A directory is not replaced.
	_, err = e.fs.Write(ctx, "a", strings.NewReader(""), WriteOptions{})
	wantErr(t, err, ErrIsDir)
	_, err = e.fs.Read(ctx, "a", ReadOptions{})
	wantErr(t, err, ErrIsDir)
	_, err = e.fs.Read(ctx, "nope", ReadOptions{})
	wantErr(t, err, ErrNotFound)
	// Mode: explicit, then kept.
	_, err = e.fs.Write(ctx, "m", strings.NewReader("1"), WriteOptions{Mode: 0o600})
	must(t, err)
	_, err = e.fs.Write(ctx, "m", strings.NewReader("2"), WriteOptions{})
	must(t, err)
	if fi, _ := os.Stat(e.h("m")); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode not kept: %v", fi.Mode())
	}
	// Exclusive.
	_, err = e.fs.Write(ctx, "m", strings.NewReader("3"), WriteOptions{Exclusive: true})
	wantErr(t, err, ErrExists)
	// Append creates, then appends.
	for _, s := range []string{"one\n", "two\n"} {
		_, err := e.fs.Write(ctx, "/tmp/log", strings.NewReader(s), WriteOptions{Append: true})
		must(t, err)
	}
	if b, _ := os.ReadFile(filepath.Join(e.tmp, "log")); string(b) != "one\ntwo\n" {
		t.Errorf("append: %q", b)
	}
	wantOwner(t, filepath.Join(e.tmp, "log"))
	// Newlines and tildes are ordinary characters.
	write(t, e, "line\nbreak.txt", "nl")
	if s, err := readAll(e, "/home/user/line\nbreak.txt"); err != nil || s != "nl" {
		t.Errorf("newline name: %q, %v", s, err)
	}
	write(t, e, "~/~root", "t")
	if _, err := os.Stat(e.h("~root")); err != nil {
		t.Error(err)
	}
	// ReadBytes.
	b, err := e.fs.ReadBytes(ctx, "m", 0)
	if err != nil || string(b) != "2" {
		t.Errorf("ReadBytes = %q, %v", b, err)
	}
	_, err = e.fs.ReadBytes(ctx, "a/b/c.txt", 5)
	wantErr(t, err, ErrTooLarge)
	// No temporary file is left behind.
	entries, _ := os.ReadDir(e.home)
	for _, de := range entries {
		if strings.HasPrefix(de.Name(), ".codecell-") {
			t.Errorf("left %s", de.Name())
		}
	}
}

// blockingReader hands out some bytes, then waits for release and fails.
type blockingReader struct {
	sent    bool
	started chan struct{}
	release chan struct{}
}

func (r *blockingReader) Read(p []byte) (int, error) {
	if !r.sent {
		r.sent = true
		close(r.started)
		return copy(p, "partial"), nil
	}
	<-r.release
	return 0, errors.New("client went away")
}

// TestStaging: writes are made in Config.Staging, so user code never sees a
// partial or temporary file, neither during a write nor after one failed;
// leftovers of a dead server are removed by New; a staged upload is
// committed with the owner and mode a write gives, or discarded.
func TestStaging(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	write(t, e, "/tmp/keep", "kept")
	if _, err := New(Config{Home: e.home, Tmp: e.tmp, UID: testUID, GID: testGID}); err == nil {
		t.Error("New without a staging directory succeeded: writes would leave temporary files in user code's sight")
	}

	r := &blockingReader{started: make(chan struct{}), release: make(chan struct{})}
	errc := make(chan error, 1)
	go func() {
		_, err := e.fs.Upload(ctx, "/tmp/up.csv", r)
		errc <- err
	}()
	<-r.started
	for _, d := range []string{e.home, e.tmp} {
		ents, _ := os.ReadDir(d)
		for _, de := range ents {
			if de.Name() != "keep" {
				t.Errorf("visible to user code during a write: %s", de.Name())
			}
		}
	}
	if n, err := e.fs.Staged(); n != 1 || err != nil {
		t.Errorf("Staged() = %d, %v during a write, want 1", n, err)
	}
	close(r.release)
	if err := <-errc; err == nil {
		t.Fatal("an upload whose reader failed succeeded")
	}
	if _, err := os.Lstat(filepath.Join(e.tmp, "up.csv")); !os.IsNotExist(err) {
		t.Errorf("a failed upload left its target: %v", err)
	}
	if n, err := e.fs.Staged(); n != 0 || err != nil {
		t.Errorf("Staged() = %d, %v after a failed write, want 0", n, err)
	}

	// A server killed mid-write leaves its staged file; the next New
	// removes it.
	must(t, os.WriteFile(filepath.Join(e.staging, ".codecell-0123456789abcdef.tmp"), []byte("half"), 0o600))
	fs2, err := New(Config{Home: e.home, Tmp: e.tmp, Staging: e.staging, UID: testUID, GID: testGID})
	must(t, err)
	if ents, _ := os.ReadDir(e.staging); len(ents) != 0 {
		t.Errorf("New left %v in staging", ents)
	}

	// Stage, then Commit: parents made, owner and mode as a write gives.
	st, err := fs2.Stage(ctx, strings.NewReader("a,b\n1,2\n"))
	must(t, err)
	if st.Size() != 8 {
		t.Errorf("staged %d bytes, want 8", st.Size())
	}
	res, err := st.Commit("data/in.csv")
	must(t, err)
	if res.FilePath != "/home/user/data/in.csv" || res.FileSize != 8 {
		t.Errorf("Commit = %+v", res)
	}
	if b, err := os.ReadFile(e.h("data/in.csv")); err != nil || string(b) != "a,b\n1,2\n" {
		t.Errorf("committed content %q, %v", b, err)
	}
	wantOwner(t, e.h("data/in.csv"))
	wantOwner(t, e.h("data"))
	if fi, err := os.Stat(e.h("data/in.csv")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("committed mode %v, %v; want 0644", fi.Mode(), err)
	}
	// Over an existing file: replaced, its mode kept.
	must(t, os.Chmod(e.h("data/in.csv"), 0o600))
	st, err = fs2.Stage(ctx, strings.NewReader("new"))
	must(t, err)
	_, err = st.Commit("/home/user/data/in.csv")
	must(t, err)
	if fi, err := os.Stat(e.h("data/in.csv")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("replaced file's mode %v, %v; want 0600 kept", fi.Mode(), err)
	}
	// Onto a directory, or outside: refused, nothing left staged.
	st, err = fs2.Stage(ctx, strings.NewReader("x"))
	must(t, err)
	_, err = st.Commit("data")
	wantErr(t, err, ErrIsDir)
	st, err = fs2.Stage(ctx, strings.NewReader("x"))
	must(t, err)
	_, err = st.Commit("/etc/passwd")
	wantErr(t, err, ErrOutside)
	// Discarded, or too large: nothing left.
	st, err = fs2.Stage(ctx, strings.NewReader("x"))
	must(t, err)
	st.Discard()
	st.Discard()
	fs2.cfg.MaxFileBytes = 4
	_, err = fs2.Stage(ctx, strings.NewReader("too long"))
	wantErr(t, err, ErrTooLarge)
	if ents, _ := os.ReadDir(e.staging); len(ents) != 0 {
		t.Errorf("staging holds %v", ents)
	}
}

func TestWriteAtomic(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const size = 1 << 20
	version := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, size) }
	_, err := e.fs.Write(ctx, "big", bytes.NewReader(version(0)), WriteOptions{})
	must(t, err)
	var done atomic.Bool
	var wg sync.WaitGroup
	var reads atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				b, err := os.ReadFile(e.h("big"))
				if err != nil {
					t.Error(err)
					return
				}
				if len(b) != size || bytes.Count(b, b[:1]) != size {
					t.Errorf("partial or mixed content: %d bytes", len(b))
					return
				}
				reads.Add(1)
			}
		}()
	}
	for i := 1; i <= 40; i++ {
		_, err := e.fs.Write(ctx, "big", bytes.NewReader(version(i)), WriteOptions{})
		must(t, err)
	}
	done.Store(true)
	wg.Wait()
	t.Logf("%d concurrent reads, all whole", reads.Load())
	wantOwner(t, e.h("big"))
}

func TestLimits(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.fs.cfg.MaxFileBytes = 10
	write(t, e, "f", "0123456789")
	_, err := e.fs.Write(ctx, "f", strings.NewReader("0123456789A"), WriteOptions{})
	wantErr(t, err, ErrTooLarge)
	if s, _ := readAll(e, "f"); s != "0123456789" {
		t.Errorf("file changed by a failed write: %q", s)
	}
	_, err = e.fs.Upload(ctx, "u", strings.NewReader(strings.Repeat("x", 100)))
	wantErr(t, err, ErrTooLarge)
	if _, err := os.Stat(e.h("u")); !os.IsNotExist(err) {
		t.Error("failed upload left a file")
	}
	e.fs.cfg.MaxFileBytes = 0

	// A full disk: a tiny tmpfs as tmp.
	small := t.TempDir()
	if err := unix.Mount("tmpfs", small, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount tmpfs: %v", err)
	}
	defer unix.Unmount(small, unix.MNT_DETACH)
	staging := filepath.Join(small, ".staging") // on the same filesystem, as in a sandbox
	fs, err := New(Config{Home: e.home, Tmp: small, Staging: staging, UID: testUID, GID: testGID})
	must(t, err)
	_, err = fs.Upload(ctx, "/tmp/huge", io.LimitReader(zeros{}, 1<<20))
	wantErr(t, err, ErrNoSpace)
	for _, d := range []string{small, staging} {
		if entries, _ := os.ReadDir(d); len(entries) > 1 || len(entries) == 1 && entries[0].Name() != ".staging" {
			t.Errorf("failed upload left %v in %s", entries, d)
		}
	}
	// Cancellation stops a stream.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = e.fs.Upload(cctx, "c", io.LimitReader(zeros{}, 1<<20))
	wantErr(t, err, context.Canceled)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestUploadOpenStat(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r, err := e.fs.Upload(ctx, "/tmp/up/data.bin", io.LimitReader(zeros{}, 5<<20))
	must(t, err)
	if *r != (UploadResult{FilePath: "/tmp/up/data.bin", FileSize: 5 << 20, Success: true}) {
		t.Errorf("%+v", r)
	}
	f, fi, err := e.fs.Open("/tmp/up/data.bin")
	must(t, err)
	defer f.Close()
	if fi.Name() != "data.bin" || fi.Size() != 5<<20 || f.Name() != "/tmp/up/data.bin" {
		t.Errorf("open: %s %d %s", fi.Name(), fi.Size(), f.Name())
	}
	// Download follows a symlink inside the directory.
	must(t, os.Symlink("up/data.bin", filepath.Join(e.tmp, "latest")))
	f2, fi2, err := e.fs.Open("/tmp/latest")
	must(t, err)
	f2.Close()
	if fi2.Size() != 5<<20 {
		t.Errorf("size %d", fi2.Size())
	}
	st, err := e.fs.Stat("/tmp/latest")
	must(t, err)
	if st.Type != "symlink" || st.LinkTarget != "up/data.bin" || st.Path != "/tmp/latest" {
		t.Errorf("stat %+v", st)
	}
	st, err = e.fs.Stat("/tmp/up")
	must(t, err)
	if !st.IsDir || st.Type != "directory" || st.Permissions != "755" {
		t.Errorf("stat %+v", st)
	}
	_, err = e.fs.Stat("/tmp/none")
	wantErr(t, err, ErrNotFound)
}

func TestMkdirDeleteMove(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	must(t, e.fs.Mkdir("d", false))
	wantOwner(t, e.h("d"))
	wantErr(t, e.fs.Mkdir("d", false), ErrExists)
	must(t, e.fs.Mkdir("d", true))
	wantErr(t, e.fs.Mkdir("x/y", false), ErrNotFound)
	must(t, e.fs.Mkdir("x/y/z", true))
	wantOwner(t, e.h("x/y"))
	wantOwner(t, e.h("x/y/z"))
	write(t, e, "f", "f")
	wantErr(t, e.fs.Mkdir("f/g", true), ErrNotDir)

	write(t, e, "x/y/z/file", "deep")
	wantErr(t, e.fs.Delete("x", false), ErrNotEmpty)
	must(t, e.fs.Delete("x", true))
	wantErr(t, e.fs.Delete("x", true), ErrNotFound)
	must(t, e.fs.Delete("d", false))

	write(t, e, "a", "A")
	write(t, e, "b", "B")
	wantErr(t, e.fs.Move(ctx, "a", "b", false), ErrExists)
	must(t, e.fs.Move(ctx, "a", "b", true))
	if s, _ := readAll(e, "b"); s != "A" {
		t.Errorf("b = %q", s)
	}
	// Across home and tmp.
	must(t, e.fs.Move(ctx, "b", "/tmp/b", false))
	if s, _ := readAll(e, "/tmp/b"); s != "A" {
		t.Errorf("/tmp/b = %q", s)
	}
	wantErr(t, e.fs.Move(ctx, "nope", "c", false), ErrNotFound)
	wantErr(t, e.fs.Move(ctx, "/tmp/b", "no/dir/c", false), ErrNotFound)
	must(t, e.fs.Mkdir("m/n", true))
	wantErr(t, e.fs.Move(ctx, "m", "m/n/m", false), ErrInvalidArgument)
	wantErr(t, e.fs.Move(ctx, "f", "/tmp", true), ErrRoot)
}

func TestCopy(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	write(t, e, "src/a.txt", "a")
	write(t, e, "src/sub/b.txt", "b")
	must(t, os.Chmod(e.h("src/a.txt"), 0o755))
	must(t, os.Symlink("a.txt", e.h("src/link")))
	must(t, unix.Mkfifo(e.h("src/fifo"), 0o644))
	must(t, e.fs.Copy(ctx, "src/a.txt", "/tmp/a.txt", CopyOptions{}))
	wantErr(t, e.fs.Copy(ctx, "src/a.txt", "/tmp/a.txt", CopyOptions{}), ErrExists)
	must(t, e.fs.Copy(ctx, "src/a.txt", "/tmp/a.txt", CopyOptions{Overwrite: true}))
	if fi, _ := os.Stat(filepath.Join(e.tmp, "a.txt")); fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %v", fi.Mode())
	}
	wantErr(t, e.fs.Copy(ctx, "src", "dst", CopyOptions{}), ErrIsDir)
	wantErr(t, e.fs.Copy(ctx, "src", "src/sub/x", CopyOptions{Recursive: true}), ErrInvalidArgument)
	must(t, e.fs.Copy(ctx, "src", "dst", CopyOptions{Recursive: true}))
	for _, p := range []string{"dst", "dst/a.txt", "dst/sub", "dst/sub/b.txt", "dst/link"} {
		wantOwner(t, e.h(p))
	}
	if target, err := os.Readlink(e.h("dst/link")); err != nil || target != "a.txt" {
		t.Errorf("link %q, %v", target, err)
	}
	if _, err := os.Lstat(e.h("dst/fifo")); !os.IsNotExist(err) {
		t.Error("FIFO copied")
	}
	wantErr(t, e.fs.Copy(ctx, "src", "dst", CopyOptions{Recursive: true}), ErrExists)
	must(t, e.fs.Copy(ctx, "src", "dst", CopyOptions{Recursive: true, Overwrite: true}))
}

func TestReplaceSearch(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	write(t, e, "f", "foo bar foo\nbaz foo\n")
	r, err := e.fs.Replace(ctx, "f", "foo", "X", false)
	must(t, err)
	if r.ReplacedCount != 1 {
		t.Errorf("%+v", r)
	}
	r, err = e.fs.Replace(ctx, "f", "foo", "Y", true)
	must(t, err)
	if s, _ := readAll(e, "f"); r.ReplacedCount != 2 || s != "X bar Y\nbaz Y\n" {
		t.Errorf("%+v %q", r, s)
	}
	_, err = e.fs.Replace(ctx, "f", "nothing", "", true)
	wantErr(t, err, ErrNoMatch)
	wantOwner(t, e.h("f"))

	s, err := e.fs.Search(ctx, "f", `^baz`)
	must(t, err)
	if len(s.LineNumbers) != 1 || s.LineNumbers[0] != 1 || s.Matches[0] != "baz Y" {
		t.Errorf("%+v", s)
	}
	_, err = e.fs.Search(ctx, "f", `(`)
	wantErr(t, err, ErrInvalidArgument)
}

func TestEdit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	str := func(s string) *string { return &s }
	num := func(n int) *int { return &n }
	run := func(req EditRequest) *EditResult {
		t.Helper()
		r, err := e.fs.Edit(ctx, req)
		must(t, err)
		return r
	}
	r := run(EditRequest{Command: "create", Path: "/home/user/p/e.py", FileText: str("a\nb\nc\n")})
	if r.PrevExist || *r.NewContent != "a\nb\nc\n" {
		t.Errorf("%+v", r)
	}
	wantOwner(t, e.h("p/e.py"))
	_, err := e.fs.Edit(ctx, EditRequest{Command: "create", Path: "p/e.py", FileText: str("")})
	wantErr(t, err, ErrExists)

	r = run(EditRequest{Command: "view", Path: "p/e.py", ViewRange: []int{2, -1}})
	if !strings.Contains(r.Output, "     2\tb\n     3\tc\n") || strings.Contains(r.Output, "\ta\n") {
		t.Errorf("view: %q", r.Output)
	}
	r = run(EditRequest{Command: "view", Path: "p"})
	if !strings.Contains(r.Output, "/home/user/p/e.py") {
		t.Errorf("view dir: %q", r.Output)
	}
	run(EditRequest{Command: "str_replace", Path: "p/e.py", OldStr: str("b\n"), NewStr: str("B\n")})
	run(EditRequest{Command: "insert", Path: "p/e.py", InsertLine: num(0), NewStr: str("top")})
	if s, _ := readAll(e, "p/e.py"); s != "top\na\nB\nc\n" {
		t.Errorf("after edits %q", s)
	}
	write(t, e, "m", "x x x")
	_, err = e.fs.Edit(ctx, EditRequest{Command: "str_replace", Path: "m", OldStr: str("x"), NewStr: str("y")})
	wantErr(t, err, ErrInvalidArgument)
	_, err = e.fs.Edit(ctx, EditRequest{Command: "str_replace", Path: "m", OldStr: str("z"), NewStr: str("y")})
	wantErr(t, err, ErrNoMatch)
	run(EditRequest{Command: "str_replace", Path: "m", OldStr: str("x"), NewStr: str("L"), ReplaceMode: "LAST"})
	run(EditRequest{Command: "str_replace", Path: "m", OldStr: str("x"), NewStr: str("A"), ReplaceMode: "ALL"})
	if s, _ := readAll(e, "m"); s != "A A L" {
		t.Errorf("m = %q", s)
	}
	_, err = e.fs.Edit(ctx, EditRequest{Command: "insert", Path: "m", InsertLine: num(5), NewStr: str("y")})
	wantErr(t, err, ErrInvalidArgument)
	_, err = e.fs.Edit(ctx, EditRequest{Command: "rm", Path: "m"})
	wantErr(t, err, ErrInvalidArgument)

	// Undo, newest first, down to the creation.
	run(EditRequest{Command: "undo_edit", Path: "p/e.py"})
	if s, _ := readAll(e, "p/e.py"); s != "a\nB\nc\n" {
		t.Errorf("undo 1: %q", s)
	}
	run(EditRequest{Command: "undo_edit", Path: "p/e.py"})
	run(EditRequest{Command: "undo_edit", Path: "~/p/e.py"})
	if _, err := os.Stat(e.h("p/e.py")); !os.IsNotExist(err) {
		t.Errorf("undo of create left the file: %v", err)
	}
	_, err = e.fs.Edit(ctx, EditRequest{Command: "undo_edit", Path: "p/e.py"})
	wantErr(t, err, ErrInvalidArgument)
	run(EditRequest{Command: "undo_edit", Path: "m"})
	if s, _ := readAll(e, "m"); s != "x x L" {
		t.Errorf("undo m: %q", s)
	}
}

func TestUndoBounded(t *testing.T) {
	fs := &FS{}
	for i := range 3 * maxUndoEntries {
		fs.pushUndo(undoEntry{path: "p", content: strings.Repeat("x", i), existed: true})
	}
	if len(fs.undo) != maxUndoEntries {
		t.Errorf("%d entries", len(fs.undo))
	}
	fs.pushUndo(undoEntry{path: "big", content: strings.Repeat("x", maxUndoBytes/3)})
	fs.pushUndo(undoEntry{path: "big", content: strings.Repeat("x", maxUndoBytes/3)})
	fs.pushUndo(undoEntry{path: "big", content: strings.Repeat("x", maxUndoBytes/3)})
	if fs.undoBytes > maxUndoBytes {
		t.Errorf("%d bytes", fs.undoBytes)
	}
	fs.pushUndo(undoEntry{path: "big", content: strings.Repeat("x", maxUndoBytes)})
	if _, ok := fs.popUndo("big"); ok {
		t.Error("older version kept after an unrecordable one")
	}
}

func TestListFindGlobGrep(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	write(t, e, "proj/main.go", "package main\n// TODO one\nfunc main() {}\n")
	write(t, e, "proj/util/u.go", "package util\n// todo two\n")
	write(t, e, "proj/README.md", "TODO docs\n")
	write(t, e, "proj/node_modules/m.js", "TODO vendored\n")
	write(t, e, "proj/.hidden/h.go", "TODO hidden\n")
	must(t, os.WriteFile(e.h("proj/bin"), []byte("TODO\x00binary"), 0o644))

	l, err := e.fs.List(ctx, "proj", ListOptions{})
	must(t, err)
	if l.TotalCount != 5 || l.DirectoryCount != 2 || l.FileCount != 3 {
		t.Errorf("list: %+v", l)
	}
	l, err = e.fs.List(ctx, "proj", ListOptions{Recursive: true, ShowHidden: true, Extensions: []string{"go"}})
	must(t, err)
	var paths []string
	for _, f := range l.Files {
		if !f.IsDir {
			paths = append(paths, f.Path)
		}
	}
	if strings.Join(paths, " ") != "/home/user/proj/.hidden/h.go /home/user/proj/main.go /home/user/proj/util/u.go" {
		t.Errorf("list ext: %v", paths)
	}
	l, err = e.fs.List(ctx, "proj", ListOptions{Recursive: true, MaxEntries: 3})
	must(t, err)
	if !l.Truncated {
		t.Error("not truncated")
	}
	_, err = e.fs.List(ctx, "proj/main.go", ListOptions{})
	wantErr(t, err, ErrNotDir)

	fr, err := e.fs.Find(ctx, "proj", "*.go")
	must(t, err)
	if len(fr.Files) != 3 {
		t.Errorf("find: %v", fr.Files)
	}
	_, err = e.fs.Find(ctx, "proj", "[")
	wantErr(t, err, ErrInvalidArgument)

	gl, err := e.fs.Glob(ctx, GlobOptions{Path: "proj", Pattern: "**/*.go"})
	must(t, err)
	if gl.TotalCount != 2 { // hidden excluded
		t.Errorf("glob: %+v", gl)
	}
	gl, err = e.fs.Glob(ctx, GlobOptions{Pattern: "/home/user/proj/*/*.go", IncludeHidden: true, Exclude: []string{"util"}})
	must(t, err)
	if gl.TotalCount != 1 || gl.Files[0].Path != "/home/user/proj/.hidden/h.go" {
		t.Errorf("glob: %+v", gl)
	}
	gl, err = e.fs.Glob(ctx, GlobOptions{Pattern: "~/proj/README.md"})
	must(t, err)
	if gl.TotalCount != 1 {
		t.Errorf("glob literal: %+v", gl)
	}
	_, err = e.fs.Glob(ctx, GlobOptions{Pattern: "/etc/*"})
	wantErr(t, err, ErrOutside)

	g, err := e.fs.Grep(ctx, "proj", GrepOptions{Pattern: "todo", CaseInsensitive: true, Exclude: []string{"node_modules"}, ContextAfter: 1})
	must(t, err)
	if g.MatchCount != 3 || g.FilesMatched != 3 {
		t.Errorf("grep: %+v", g)
	}
	if m := g.Matches[1]; m.File != "/home/user/proj/main.go" || m.LineNumber != 2 || m.LineContent != "// TODO one" || len(m.ContextAfter) != 1 {
		t.Errorf("grep match: %+v", m)
	}
	g, err = e.fs.Grep(ctx, "proj", GrepOptions{Pattern: "TODO", CaseInsensitive: true, Include: []string{"*.go"}, MaxResults: 1})
	must(t, err)
	if len(g.Matches) != 1 || !g.Truncated {
		t.Errorf("grep max: %+v", g)
	}
	g, err = e.fs.Grep(ctx, "proj/main.go", GrepOptions{Pattern: "func", FixedStrings: true})
	must(t, err)
	if len(g.Matches) != 1 {
		t.Errorf("grep file: %+v", g)
	}
	g, err = e.fs.Grep(ctx, "proj", GrepOptions{Pattern: "TODO", MaxDepth: 1})
	must(t, err)
	if len(g.Matches) != 2 { // README.md and main.go
		t.Errorf("grep depth: %+v", g)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = e.fs.Grep(cctx, "proj", GrepOptions{Pattern: "x"})
	wantErr(t, err, context.Canceled)
	_, err = e.fs.List(cctx, "proj", ListOptions{})
	wantErr(t, err, context.Canceled)
}

func TestMatchSegments(t *testing.T) {
	for _, c := range []struct {
		pat, name string
		want      bool
	}{
		{"**", "a/b/c", true},
		{"**/*.go", "x.go", true},
		{"**/*.go", "a/b/x.go", true},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/*/b", "a/x/y/b", false},
		{"*.go", "a/x.go", false},
		{strings.Repeat("**/", 50) + "x", strings.Repeat("a/", 60) + "y", false},
	} {
		if got := matchSegments(strings.Split(c.pat, "/"), strings.Split(c.name, "/")); got != c.want {
			t.Errorf("match(%q, %q) = %v", c.pat, c.name, got)
		}
	}
}

func TestNoHostPathInErrors(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	must(t, os.Symlink("/etc", e.h("etc")))
	errs := []error{}
	add := func(_ any, err error) { errs = append(errs, err) }
	add(e.fs.Read(ctx, "nope", ReadOptions{}))
	add(e.fs.Read(ctx, "etc/passwd", ReadOptions{}))
	add(e.fs.Write(ctx, "a/b/c", strings.NewReader(""), WriteOptions{}))
	add(nil, e.fs.Delete("nope", false))
	add(nil, e.fs.Move(ctx, "nope", "x", false))
	add(e.fs.List(ctx, "nope", ListOptions{}))
	add(e.fs.Stat("nope"))
	for _, err := range errs {
		if err == nil {
			t.Fatal("no error")
		}
		e.checkSafe(t, err, "")
		if !strings.Contains(err.Error(), "/home/user/") {
			t.Errorf("error does not name the sandbox path: %v", err)
		}
	}
}
