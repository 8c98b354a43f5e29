// Package files is the file plane of one sandbox: it reads, writes, lists,
// searches, moves and edits the files of the sandbox's two writable host
// directories (home, seen by user code as /home/user, and tmp, seen as /tmp)
// on behalf of the API, running as root on the host. It owns those two
// directories, a staging directory beside them that user code cannot see
// (Config.Staging), and a bounded in-memory undo history for Edit.
//
// # Threat model
//
// Paths, file names, file types and symlinks are controlled by user code,
// which runs concurrently as the sandbox uid and can create, rename and swap
// files, directories and symlinks at any moment, including between two
// system calls made here. Nothing here may read, write, create, chown or
// remove anything outside the two directories and the staging directory,
// block on a FIFO, or put a host path in an error message.
//
// # Defences
//
//   - A path is mapped lexically from the jail's view (absolute under
//     /home/user or /tmp, relative to /home/user, or "~"/"~/x") to one of the
//     two directories and a clean relative path without "..". Anything else is
//     ErrOutside; NUL bytes, invalid UTF-8 and over-long paths are
//     ErrInvalidPath.
//   - Every lookup of a multi-component path goes through an os.Root, which
//     resolves ".." and symlinks itself, one openat at a time, and refuses to
//     leave the directory. Absolute symlinks are always refused, including
//     those that are valid inside the jail (/home/user/x), and so are links
//     from home into /tmp or back: following them is an error (ErrOutside),
//     never a host file.
//   - What is created, replaced or removed is named by a single final
//     component, acted on by one *at system call on a descriptor of its
//     parent directory (opened through the root) with O_NOFOLLOW or
//     AT_SYMLINK_NOFOLLOW, so a symlink there is acted on as a link, never
//     followed. Writes go to an O_EXCL file in Config.Staging, out of user
//     code's reach, whose mode and owner are set on its descriptor; it is
//     then renamed over the target: a symlink or hard link at the target is
//     replaced, never written through.
//   - Files are opened O_NONBLOCK|O_NOCTTY and their type is checked on the
//     opened descriptor (fstat), so FIFOs, sockets, devices and directories
//     are refused without blocking and without a check-then-use race. (Opening
//     a device can have side effects, but user code cannot create device nodes
//     and the sandbox volume is mounted nodev.)
//   - Walks (List, Find, Glob, Grep, Copy) never descend into a symlink, are
//     bounded in entries and depth, and honour ctx.
//   - Everything created here is owned by Config.UID/GID (fchown on the new
//     descriptor, or lchown through the root), so user code can modify it.
//
// Hard links: a hard link inside the directories is the file it names and is
// read like any other file. In production home and tmp live on the sandbox's
// own loop-mounted ext4 volume (see package quota), so a hard link to a host
// file cannot exist there; writes replace the link rather than write through
// it, but Append writes in place.
package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/codecell/codecell/internal/jail"
)

// Errors returned by FS methods, wrapped in an *Error that names the path as
// user code sees it. ErrNotFound, ErrExists and ErrPermission are the io/fs
// errors, so errors.Is(err, fs.ErrNotExist) works too.
var (
	ErrOutside         = errors.New("path is outside " + jail.HomeDir + " and " + jail.TmpDir)
	ErrInvalidPath     = errors.New("invalid path")
	ErrNotFound        = fs.ErrNotExist
	ErrExists          = fs.ErrExist
	ErrPermission      = fs.ErrPermission
	ErrIsDir           = errors.New("is a directory")
	ErrNotDir          = errors.New("not a directory")
	ErrNotEmpty        = errors.New("directory not empty")
	ErrNotRegular      = errors.New("not a regular file")
	ErrRoot            = errors.New("cannot remove, move or replace " + jail.HomeDir + " or " + jail.TmpDir)
	ErrNoSpace         = errors.New("no space left on device (disk quota exceeded)")
	ErrTooLarge        = errors.New("file too large")
	ErrNoMatch         = errors.New("no match")
	ErrInvalidArgument = errors.New("invalid argument")
)

// Error records a failed operation on a path.
type Error struct {
	Op   string // "read", "write", ...
	Path string // as user code sees it, never a host path
	Err  error  // one of the errors above (possibly wrapped with detail), a syscall.Errno or a context error
}

func (e *Error) Error() string { return e.Op + " " + e.Path + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Config describes the directories of one sandbox.
type Config struct {
	// Home and Tmp are the host directories that user code sees as
	// /home/user and /tmp.
	Home, Tmp string
	// UID and GID own everything created here. -1 leaves the owner to the
	// calling process (for tests and unprivileged development hosts).
	UID, GID int
	// MaxFileBytes limits the size of one written, uploaded, appended or
	// copied file. 0 means no limit beyond the disk quota.
	MaxFileBytes int64
	// Staging is a host directory on the filesystem of Home and Tmp that
	// user code cannot see. Writes are made there and renamed into place,
	// so no partial file is ever visible, even while a write lasts or
	// after the server died during one; New empties it. Required.
	Staging string
}

// FS is the file plane of one sandbox. Its methods are safe for concurrent
// use. It holds no descriptors between calls: each call opens the directory
// it needs, so an FS never keeps the sandbox volume busy.
type FS struct {
	cfg Config

	mu        sync.Mutex // guards undo and undoBytes
	undo      []undoEntry
	undoBytes int
}

// New returns the FS of the sandbox described by c. Home and Tmp must exist;
// Staging is made, or emptied.
func New(c Config) (*FS, error) {
	for _, d := range []string{c.Home, c.Tmp} {
		r, err := os.OpenRoot(d)
		if err != nil {
			return nil, fmt.Errorf("files: %w", err)
		}
		r.Close()
	}
	if c.Staging == "" {
		return nil, errors.New("files: no staging directory configured")
	}
	// What is there was left by a server that stopped mid-write.
	if err := os.RemoveAll(c.Staging); err != nil {
		return nil, fmt.Errorf("files: emptying the staging directory: %w", err)
	}
	if err := os.Mkdir(c.Staging, 0o700); err != nil {
		return nil, fmt.Errorf("files: %w", err)
	}
	return &FS{cfg: c}, nil
}

// maxPathLen is PATH_MAX: longer paths cannot name anything.
const maxPathLen = 4096

// maxPathDepth bounds a path's components: creating parents looks each
// prefix up again, so the cost grows with the square of the depth (a
// 2,000-level path took 20 s of CPU); no real file is this deep.
const maxPathDepth = 256

// loc is a path resolved to one of the sandbox's directories.
type loc struct {
	dir  string // host directory: Config.Home or Config.Tmp
	rel  string // "." or clean, relative, without ".." or empty components
	path string // clean path as user code sees it, for results and errors
}

// CodePath is p as user code would see it, absolute and clean: "~" and
// relative paths are taken from the home directory. It is purely lexical
// and says nothing about whether p is inside the sandbox.
func CodePath(p string) string {
	switch {
	case p == "~":
		p = jail.HomeDir
	case strings.HasPrefix(p, "~/"):
		p = jail.HomeDir + p[1:]
	case !strings.HasPrefix(p, "/"):
		p = jail.HomeDir + "/" + p
	}
	return path.Clean(p)
}

// resolve maps p, as user code would write it, to a loc. It is purely
// lexical: p only ever reaches the kernel through an os.Root for loc.dir.
func (f *FS) resolve(op, p string) (loc, error) {
	switch {
	case p == "", len(p) > maxPathLen, strings.IndexByte(p, 0) >= 0, !utf8.ValidString(p):
		return loc{}, &Error{Op: op, Path: p, Err: ErrInvalidPath}
	}
	clean := CodePath(p)
	for _, m := range [...]struct{ prefix, dir string }{{jail.HomeDir, f.cfg.Home}, {jail.TmpDir, f.cfg.Tmp}} {
		if clean == m.prefix {
			return loc{dir: m.dir, rel: ".", path: clean}, nil
		}
		if rel, ok := strings.CutPrefix(clean, m.prefix+"/"); ok {
			if strings.Count(rel, "/") >= maxPathDepth { // components of the clean path
				return loc{}, &Error{Op: op, Path: p, Err: ErrInvalidPath}
			}
			return loc{dir: m.dir, rel: rel, path: clean}, nil
		}
	}
	return loc{}, &Error{Op: op, Path: p, Err: ErrOutside}
}

// join returns the loc of name inside l. name must be a single component
// read from the directory (never "", ".", ".." or containing "/").
func (l loc) join(name string) loc {
	return loc{dir: l.dir, rel: path.Join(l.rel, name), path: path.Join(l.path, name)}
}

func (l loc) isRoot() bool { return l.rel == "." }

// root opens the os.Root of l's directory. Callers close it.
func (l loc) root() (*os.Root, error) { return os.OpenRoot(l.dir) }

// openParent opens, through r, the directory that contains l and returns it
// with l's final component. Operations on that component then use the
// descriptor and one *at system call, never a path.
func (l loc) openParent(r *os.Root) (dir *os.File, base string, err error) {
	if l.isRoot() {
		return nil, "", ErrRoot
	}
	d, base := path.Split(l.rel)
	d = strings.TrimSuffix(d, "/")
	if d == "" {
		d = "."
	}
	dir, err = r.OpenFile(d, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	return dir, base, err
}

// fail wraps err for the API: host paths carried by os errors are dropped
// and well-known causes become the sentinel errors.
func (f *FS) fail(op string, l loc, err error) error {
	return f.failPath(op, l.path, err)
}

func (f *FS) failPath(op, p string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Op: op, Path: p, Err: f.classify(err)}
}

func (f *FS) classify(err error) error {
	for {
		switch e := err.(type) {
		case *fs.PathError:
			err = e.Err
			continue
		case *os.LinkError:
			err = e.Err
			continue
		case *os.SyscallError:
			err = e.Err
			continue
		}
		break
	}
	// os.Root reports an escape with this unexported error; the tests
	// pin the text.
	if err.Error() == "path escapes from parent" {
		return ErrOutside
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case unix.ENOENT:
			return ErrNotFound
		case unix.EEXIST:
			return ErrExists
		case unix.EACCES, unix.EPERM, unix.EROFS:
			return ErrPermission
		case unix.EISDIR:
			return ErrIsDir
		case unix.ENOTDIR:
			return ErrNotDir
		case unix.ENOTEMPTY:
			return ErrNotEmpty
		case unix.ENOSPC, unix.EDQUOT:
			return ErrNoSpace
		case unix.EFBIG:
			return ErrTooLarge
		case unix.ELOOP, unix.ENAMETOOLONG:
			return fmt.Errorf("%w: %v", ErrInvalidPath, errno)
		case unix.ENXIO, unix.ENODEV:
			return ErrNotRegular
		case unix.EINVAL:
			return ErrInvalidArgument
		}
		return errno
	}
	if msg := err.Error(); strings.Contains(msg, f.cfg.Home) || strings.Contains(msg, f.cfg.Tmp) || strings.Contains(msg, f.cfg.Staging) {
		return errors.New("internal error") // never leak a host path
	}
	return err
}

// lchown gives name in r to the sandbox's uid without following a symlink.
func (f *FS) lchown(r *os.Root, name string) error {
	if f.cfg.UID < 0 && f.cfg.GID < 0 {
		return nil
	}
	return r.Lchown(name, f.cfg.UID, f.cfg.GID)
}

// mkdirAll creates rel and its missing parents in r, like mkdir -p (existing
// symlinks to directories inside the root are followed), giving each
// directory it creates to the sandbox's uid.
func (f *FS) mkdirAll(r *os.Root, rel string) error {
	if rel == "." {
		return nil
	}
	if fi, err := r.Stat(rel); err == nil {
		if !fi.IsDir() {
			return ErrNotDir
		}
		return nil
	}
	cur := ""
	for c := range strings.SplitSeq(rel, "/") {
		cur = path.Join(cur, c)
		switch err := r.Mkdir(cur, 0o755); {
		case err == nil:
			if err := f.lchown(r, cur); err != nil {
				return err
			}
		case !errors.Is(err, fs.ErrExist):
			return err
		}
	}
	return nil
}

// openAt opens base in dir without following a symlink there, with
// O_NONBLOCK so a FIFO cannot block, and returns it named as user code sees
// it, blocking again, if it is a regular file.
func openAt(dir *os.File, base string, flag int, perm uint32, name string) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), base, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, perm)
	if err != nil {
		if err == unix.ELOOP {
			err = ErrNotRegular // a symlink
		}
		return nil, err
	}
	return regularFile(fd, name)
}

// regularFile checks that fd is a regular file and wraps it named name.
func regularFile(fd int, name string) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		unix.Close(fd)
		return nil, ErrIsDir
	default:
		unix.Close(fd)
		return nil, ErrNotRegular
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// openRegular opens l for reading, following symlinks inside its root, and
// returns it if it is a regular file. The returned file is named l.path, so
// its errors carry no host path.
func (f *FS) openRegular(l loc) (*os.File, error) {
	r, err := l.root()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	rf, err := r.OpenFile(l.rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer rf.Close()
	// Duplicate rather than reuse rf's descriptor: rf is named by its host
	// path, which its errors would carry.
	fd, err := unix.FcntlInt(rf.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return regularFile(fd, l.path)
}
