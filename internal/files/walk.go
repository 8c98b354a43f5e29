package files

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// defaultMaxEntries bounds the entries one walk visits.
	defaultMaxEntries = 100_000
	// maxWalkDepth bounds how deep a walk goes (and the descriptors it holds).
	maxWalkDepth = 64
)

// entry is one file met by walk.
type entry struct {
	dir   *os.File // the directory holding the entry; valid during the callback
	name  string
	rel   string // relative to the walk's start, slash-separated
	loc   loc
	depth int         // 1 for the start's children
	info  fs.FileInfo // from fstatat without following a symlink
}

// open opens the entry for reading if it is a regular file, without
// following a symlink swapped in since it was listed.
func (e *entry) open() (*os.File, error) {
	return openAt(e.dir, e.name, unix.O_RDONLY, 0, e.loc.path)
}

func (e *entry) readlink() string {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(int(e.dir.Fd()), e.name, buf)
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

// walk calls fn for every entry under the directory start, depth first and
// in lexical order within a directory, going down at most maxDepth levels
// (0 means maxWalkDepth) and visiting at most maxEntries entries, after which
// it stops and reports truncated. fn returning fs.SkipDir skips a directory;
// any other error stops the walk and is returned.
//
// Directories are opened relative to their parent's descriptor with
// O_DIRECTORY|O_NOFOLLOW, so a walk never follows a symlink (not even one
// swapped in after the entry was listed) and never opens a FIFO; only the
// start itself is looked up through the root, following symlinks inside it.
func (f *FS) walk(ctx context.Context, start loc, maxDepth, maxEntries int, fn func(*entry) error) (truncated bool, err error) {
	root, err := start.root()
	if err != nil {
		return false, err
	}
	defer root.Close()
	dir, err := root.OpenFile(start.rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false, err
	}
	defer dir.Close()
	if maxDepth <= 0 || maxDepth > maxWalkDepth {
		maxDepth = maxWalkDepth
	}
	w := &walker{ctx: ctx, fn: fn, start: start, maxDepth: maxDepth, max: maxEntries}
	err = w.dir(dir, "", 1)
	if err == errStop {
		err = nil
	}
	return w.truncated, err
}

type walker struct {
	ctx       context.Context
	fn        func(*entry) error
	start     loc
	maxDepth  int
	max, n    int
	truncated bool
}

func (w *walker) dir(dir *os.File, rel string, depth int) error {
	names, err := dir.Readdirnames(w.max - w.n + 1)
	if err != nil && err != io.EOF {
		return nil // unreadable or gone: nothing to report in it
	}
	slices.Sort(names)
	dfd := int(dir.Fd())
	for _, name := range names {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		if w.n++; w.n > w.max {
			w.truncated = true
			return errStop
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // removed since listed
		}
		erel := path.Join(rel, name)
		e := &entry{dir: dir, name: name, rel: erel, loc: w.start.join(erel), depth: depth, info: newStatInfo(name, &st)}
		switch err := w.fn(e); {
		case err == fs.SkipDir:
			continue
		case err != nil:
			return err
		}
		if !e.info.IsDir() || depth >= w.maxDepth {
			continue
		}
		fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // replaced by a symlink or a non-directory: not followed
		}
		sub := os.NewFile(uintptr(fd), e.loc.path)
		err = w.dir(sub, erel, depth+1)
		sub.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// statInfo is an fs.FileInfo from a unix.Stat_t.
type statInfo struct {
	name string
	st   unix.Stat_t
}

func newStatInfo(name string, st *unix.Stat_t) *statInfo { return &statInfo{name, *st} }

func (s *statInfo) Name() string       { return s.name }
func (s *statInfo) Size() int64        { return s.st.Size }
func (s *statInfo) ModTime() time.Time { return time.Unix(s.st.Mtim.Unix()) }
func (s *statInfo) IsDir() bool        { return s.st.Mode&unix.S_IFMT == unix.S_IFDIR }
func (s *statInfo) Sys() any           { return &s.st }

func (s *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch s.st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	}
	if s.st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if s.st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if s.st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

var _ fs.FileInfo = (*statInfo)(nil)
