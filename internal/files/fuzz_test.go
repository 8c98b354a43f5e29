package files

import (
	"context"
	"errors"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/codecell/codecell/internal/jail"
)

// FuzzResolve feeds arbitrary paths, as user code would send them, to the
// lexical mapping (CodePath, resolve) and to real operations (Stat, Read,
// ReadBytes, Open, List, Write) on a fresh newEnv sandbox holding planted
// escape hatches. Whatever the path, nothing outside home and tmp may be
// read or written (newEnv's cleanup checks the victim, /etc/shadow and the
// directory holding the sandbox), results name only /home/user or /tmp
// paths, and errors are *Error wrapping the package's sentinels or an errno.
func FuzzResolve(f *testing.F) {
	for _, p := range []string{
		// Plain paths in both directories and their spellings.
		"own.txt", "~", "~/own.txt", ".", "/home/user", "/home/user/", "/tmp", "/tmp/", "/tmp/t.txt",
		"/tmp//t.txt", "d/f.txt", "./d/../own.txt", "new/dir/file", "/tmp/new.txt",
		// Lexical traversal.
		"..", "../victim.txt", "../../etc/passwd", "/home/user/../../etc/passwd", "/home/user/../victim.txt",
		"/tmp/../home/user", "/tmp/../home/user/own.txt", "/home/user/../user/own.txt", "~/../../etc/shadow",
		"//home/user/own.txt", "///tmp", "/home//user/../user/./own.txt", "/home/user2/x", "/tmpx", "/home",
		"/", "/etc/shadow", "/proc/self/environ", "~root", "~root/.ssh", "%2e%2e/%2e%2e/victim.txt",
		"..\\..\\victim.txt", "/home/user/\n/../../etc/passwd",
		// Through the planted symlinks.
		"v", "v/", "vrel", "root", "root/etc/shadow", "root/" + strings.TrimPrefix(os.TempDir(), "/"),
		"up", "up/victim.txt", "up/home/own.txt", "shadow", "totmp", "totmp/x", "sub", "sub/f.txt",
		"sub/new.txt", "chain", "loop", "loop/x", "fifo", "fifo/x", "/tmp/tohome", "/tmp/tohome/own.txt",
		"/tmp/up/victim.txt", "d/dotdot/victim.txt", "d/dotdot/home/own.txt",
		// Malformed and extreme.
		"", "\x00", "own.txt\x00", "a\x00/../../etc/passwd", "\xff\xfe", "a/\xc0\xaf../victim.txt",
		strings.Repeat("a", 255), strings.Repeat("a", 256), strings.Repeat("a/", 100), strings.Repeat("a/", 2047), strings.Repeat("a/", 2049),
		strings.Repeat("../", 100) + "etc/shadow", strings.Repeat("x", maxPathLen), strings.Repeat("x", maxPathLen+1),
		"ünïcødé/文件.txt", "\u202e/txt.exe", "\ufeffown.txt", "ﬁle", "\u2024\u2024/victim.txt", "／etc／passwd",
	} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		e := newEnv(t)
		plant(t, e)
		// A FIFO must never block an operation: crash the fuzzer (which
		// records the input) rather than hang.
		watchdog := time.AfterFunc(20*time.Second, func() { panic("FuzzResolve: blocked on " + strconv.Quote(p)) })
		defer watchdog.Stop()
		checkCodePath(t, p)
		checkResolve(t, e, p)
		fuzzOps(t, e, p)
	})
}

// plant fills the sandbox with regular files and with symlinks that lead
// out of it (absolute and relative, to the victim, to / and to ..), across
// home and tmp, in a chain and a loop, and a FIFO.
func plant(t *testing.T, e *env) {
	t.Helper()
	home := func(n string) string { return e.h(n) }
	tmp := func(n string) string { return path.Join(e.tmp, n) }
	must(t, os.WriteFile(home("own.txt"), []byte("own\n"), 0o644))
	must(t, os.Mkdir(home("d"), 0o755))
	must(t, os.WriteFile(home("d/f.txt"), []byte("f\n"), 0o644))
	must(t, os.WriteFile(tmp("t.txt"), []byte("t\n"), 0o644))
	for _, l := range []struct{ target, at string }{
		{e.victim, home("v")},
		{"../victim.txt", home("vrel")},
		{"/", home("root")},
		{"..", home("up")},
		{"/etc/shadow", home("shadow")},
		{"/tmp", home("totmp")},
		{"d", home("sub")}, // inside: may be followed
		{"vrel", home("chain")},
		{"loop", home("loop")},
		{"../..", home("d/dotdot")},
		{"/home/user", tmp("tohome")},
		{"..", tmp("up")},
	} {
		must(t, os.Symlink(l.target, l.at))
	}
	must(t, unix.Mkfifo(home("fifo"), 0o644))
}

// inSandbox reports whether p, as user code sees it, is /home/user, /tmp or
// under one of them.
func inSandbox(p string) bool {
	for _, d := range []string{jail.HomeDir, jail.TmpDir} {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// checkCodePath: CodePath is absolute, clean and idempotent.
func checkCodePath(t *testing.T, p string) {
	c := CodePath(p)
	if !strings.HasPrefix(c, "/") || path.Clean(c) != c || CodePath(c) != c {
		t.Errorf("CodePath(%q) = %q: not absolute, clean and idempotent", p, c)
	}
}

// checkResolve: resolve maps p to home or tmp and a relative path without
// "..", exactly when its clean form is inside; otherwise it fails with
// ErrInvalidPath or ErrOutside, naming p.
func checkResolve(t *testing.T, e *env, p string) {
	l, err := e.fs.resolve("fuzz", p)
	malformed := p == "" || len(p) > maxPathLen || strings.IndexByte(p, 0) >= 0 || !utf8.ValidString(p) || strings.Count(p, "/") > maxPathDepth
	switch {
	case malformed:
		if !errors.Is(err, ErrInvalidPath) {
			t.Fatalf("resolve(%q): %v, want ErrInvalidPath", p, err)
		}
	case !inSandbox(CodePath(p)):
		if !errors.Is(err, ErrOutside) {
			t.Fatalf("resolve(%q) = %+v, %v; want ErrOutside", p, l, err)
		}
	case err != nil:
		t.Fatalf("resolve(%q): %v", p, err)
	}
	if err != nil {
		var fe *Error
		if !errors.As(err, &fe) || fe.Path != p || fe.Op != "fuzz" {
			t.Errorf("resolve(%q): error %#v does not name the path", p, err)
		}
		return
	}
	prefix := map[string]string{e.home: jail.HomeDir, e.tmp: jail.TmpDir}[l.dir]
	switch {
	case prefix == "":
		t.Fatalf("resolve(%q): dir %q is neither home nor tmp", p, l.dir)
	case l.path != CodePath(p):
		t.Fatalf("resolve(%q): path %q, want %q", p, l.path, CodePath(p))
	case l.rel != "." && (path.IsAbs(l.rel) || path.Clean(l.rel) != l.rel || l.rel == ".." || strings.HasPrefix(l.rel, "../")):
		t.Fatalf("resolve(%q): rel %q is not clean and relative without ..", p, l.rel)
	case path.Join(prefix, l.rel) != l.path:
		t.Fatalf("resolve(%q): %q in %s is not %q", p, l.rel, prefix, l.path)
	}
}

// fuzzOps runs the real operations on p and checks their outcome.
func fuzzOps(t *testing.T, e *env, p string) {
	ctx := context.Background()
	check := func(op string, err error, out string, paths ...string) {
		t.Helper()
		e.checkSafe(t, err, out)
		for _, q := range paths {
			if !inSandbox(q) {
				t.Errorf("%s(%q) returned the path %q outside the sandbox", op, p, q)
			}
		}
		if err == nil {
			return
		}
		var fe *Error
		if !errors.As(err, &fe) {
			t.Errorf("%s(%q): error %v (%T) is not an *Error", op, p, err, err)
		}
		if !knownError(err) {
			t.Errorf("%s(%q): unexpected error %v (%T)", op, p, err, errors.Unwrap(err))
		}
	}

	if fi, err := e.fs.Stat(p); err == nil {
		check("Stat", nil, "", fi.Path)
	} else {
		check("Stat", err, "")
	}

	if r, err := e.fs.Read(ctx, p, ReadOptions{MaxBytes: 64}); err == nil {
		check("Read", nil, r.Content, r.File)
		if len(r.Content) > 64 {
			t.Errorf("Read(%q): %d bytes, limit 64", p, len(r.Content))
		}
	} else {
		check("Read", err, "")
	}

	b, err := e.fs.ReadBytes(ctx, p, 64)
	check("ReadBytes", err, string(b))

	if file, fi, err := e.fs.Open(p); err == nil {
		head, _ := io.ReadAll(io.LimitReader(file, 64))
		file.Close()
		check("Open", nil, string(head), file.Name())
		if !fi.Mode().IsRegular() {
			t.Errorf("Open(%q) opened a %v", p, fi.Mode())
		}
	} else {
		check("Open", err, "")
	}

	if l, err := e.fs.List(ctx, p, ListOptions{Recursive: true, ShowHidden: true, MaxEntries: 200}); err == nil {
		paths := []string{l.Path}
		for _, fi := range l.Files {
			paths = append(paths, fi.Path)
		}
		check("List", nil, "", paths...)
	} else {
		check("List", err, "")
	}

	// A write lands in the sandbox (replacing whatever link was there) and
	// reads back; the cleanup of newEnv proves it went nowhere else.
	const data = "fuzz-data\n"
	w, err := e.fs.Write(ctx, p, strings.NewReader(data), WriteOptions{MkdirAll: true})
	if err != nil {
		check("Write", err, "")
		return
	}
	check("Write", nil, "", w.File)
	if w.File != CodePath(p) || w.BytesWritten != int64(len(data)) {
		t.Errorf("Write(%q) = %+v", p, w)
	}
	if got, err := readAll(e, p); err != nil || got != data {
		t.Errorf("Write(%q) then Read: %q, %v", p, got, err)
	}
}

// knownError: the package's sentinels (ErrNotFound, ErrExists and
// ErrPermission are the io/fs ones) or a raw errno, as Error.Err documents.
func knownError(err error) bool {
	for _, s := range []error{ErrOutside, ErrInvalidPath, ErrNotFound, ErrExists, ErrPermission, ErrIsDir, ErrNotDir,
		ErrNotEmpty, ErrNotRegular, ErrRoot, ErrNoSpace, ErrTooLarge, ErrNoMatch, ErrInvalidArgument} {
		if errors.Is(err, s) {
			return true
		}
	}
	var errno syscall.Errno
	return errors.As(err, &errno)
}
