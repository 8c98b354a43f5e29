package files

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/codecell/codecell/internal/jail"
)

// WriteOptions control Write.
type WriteOptions struct {
	// Append appends to the file in place (creating it if needed) instead of
	// replacing it; a symlink at p is refused (ErrNotRegular).
	Append bool
	// Mode is the permission of the file. 0 keeps an existing file's, and
	// is 0644 for a new one.
	Mode fs.FileMode
	// MkdirAll creates missing parent directories.
	MkdirAll bool
	// Exclusive fails with ErrExists if p exists (ignored with Append).
	Exclusive bool
}

// WriteResult is the result of Write (FileWriteResult).
type WriteResult struct {
	File         string `json:"file"`
	BytesWritten int64  `json:"bytes_written"`
}

// Write writes the content of r to p, streaming.
//
// Unless opts.Append is set the write is atomic: readers see the old or the
// new content, never a part. The content goes to a new file in
// Config.Staging, which is synced, given to the sandbox's uid and renamed
// over p. A symlink or hard link at p is replaced, not written through; a
// directory there is ErrIsDir.
//
// A write larger than Config.MaxFileBytes fails with ErrTooLarge and a full
// disk quota with ErrNoSpace; p is then left as it was (but for Append).
func (f *FS) Write(ctx context.Context, p string, r io.Reader, opts WriteOptions) (*WriteResult, error) {
	l, err := f.resolve("write", p)
	if err != nil {
		return nil, err
	}
	if opts.Mode&^fs.ModePerm != 0 {
		return nil, f.fail("write", l, ErrInvalidArgument)
	}
	root, err := l.root()
	if err != nil {
		return nil, f.fail("write", l, err)
	}
	defer root.Close()
	if l.isRoot() {
		return nil, f.fail("write", l, ErrIsDir)
	}
	if opts.MkdirAll {
		if err := f.mkdirAll(root, parentRel(l.rel)); err != nil {
			return nil, f.fail("write", l, err)
		}
	}
	var n int64
	if opts.Append {
		n, err = f.appendFile(ctx, root, l, r, opts.Mode)
	} else {
		n, err = f.writeAtomic(ctx, root, l, r, opts.Mode, opts.Exclusive)
	}
	if err != nil {
		return nil, f.fail("write", l, err)
	}
	return &WriteResult{File: l.path, BytesWritten: n}, nil
}

// UploadResult is the result of Upload (FileUploadResult).
type UploadResult struct {
	FilePath string `json:"file_path"`
	FileSize int64  `json:"file_size"`
	Success  bool   `json:"success"`
}

// Upload atomically writes the content of r to p, creating missing parent
// directories, as Write does.
func (f *FS) Upload(ctx context.Context, p string, r io.Reader) (*UploadResult, error) {
	res, err := f.Write(ctx, p, r, WriteOptions{MkdirAll: true})
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Op = "upload"
		}
		return nil, err
	}
	return &UploadResult{FilePath: res.File, FileSize: res.BytesWritten, Success: true}, nil
}

func parentRel(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return "."
}

// writeAtomic writes r to a staged file and renames it over l.
func (f *FS) writeAtomic(ctx context.Context, root *os.Root, l loc, r io.Reader, mode fs.FileMode, exclusive bool) (int64, error) {
	dir, base, err := l.openParent(root)
	if err != nil {
		return 0, err
	}
	defer dir.Close()
	if mode, err = targetMode(dir, base, mode, exclusive); err != nil {
		return 0, err
	}
	st, err := f.stage(ctx, r, mode)
	if err != nil {
		return 0, err
	}
	defer st.Discard()
	return st.size, st.place(dir, base, exclusive)
}

// targetMode checks that base in dir may be written and returns the mode the
// new file gets: mode, or else the replaced file's, or else 0644.
func targetMode(dir *os.File, base string, mode fs.FileMode, exclusive bool) (fs.FileMode, error) {
	var st unix.Stat_t
	switch err := unix.Fstatat(int(dir.Fd()), base, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil:
		if exclusive {
			return 0, ErrExists
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return 0, ErrIsDir
		}
		if mode == 0 && st.Mode&unix.S_IFMT == unix.S_IFREG {
			mode = fs.FileMode(st.Mode) & fs.ModePerm
		}
	case err != unix.ENOENT:
		return 0, err
	}
	return cmp.Or(mode, 0o644), nil
}

// Staged is content written by Stage (or by a write on its way), in a file
// that user code cannot see until Commit renames it into place.
type Staged struct {
	f    *FS
	dir  *os.File // Config.Staging
	file *os.File // open until placed or discarded: modes are set on it, never by name
	name string
	size int64
}

// Stage writes the content of r to a new file out of user code's sight, in
// Config.Staging, within MaxFileBytes, for an upload whose target is not
// known yet. The caller must Commit or Discard it.
func (f *FS) Stage(ctx context.Context, r io.Reader) (*Staged, error) {
	st, err := f.stage(ctx, r, 0o644)
	return st, f.failPath("upload", jail.TmpDir, err)
}

// stage writes r to a new file in Config.Staging.
func (f *FS) stage(ctx context.Context, r io.Reader, mode fs.FileMode) (_ *Staged, err error) {
	st := &Staged{f: f}
	if st.dir, err = os.OpenFile(f.cfg.Staging, unix.O_DIRECTORY|unix.O_NOFOLLOW, 0); err != nil {
		return nil, err
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	st.name = ".codecell-" + hex.EncodeToString(rnd[:]) + ".tmp"
	fd, err := unix.Openat(int(st.dir.Fd()), st.name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		st.dir.Close()
		return nil, err
	}
	st.file = os.NewFile(uintptr(fd), st.name)
	if st.size, err = f.fill(ctx, st.file, r, mode); err != nil {
		st.Discard()
		return nil, err
	}
	return st, nil
}

// Staged counts the files in Config.Staging: writes in progress, or left by
// a bug.
func (f *FS) Staged() (int, error) {
	ents, err := os.ReadDir(f.cfg.Staging)
	return len(ents), err
}

// Size is the number of bytes staged.
func (s *Staged) Size() int64 { return s.size }

// Discard removes the staged file unless it was committed. It may be called
// more than once.
func (s *Staged) Discard() {
	if s.dir == nil {
		return
	}
	unix.Unlinkat(int(s.dir.Fd()), s.name, 0)
	s.close()
}

func (s *Staged) close() {
	s.file.Close()
	s.dir.Close()
	s.dir = nil
}

// Commit renames the staged file to p, as Upload writes it: missing parent
// directories are created and a file at p is replaced, keeping its mode.
func (s *Staged) Commit(p string) (*UploadResult, error) {
	f := s.f
	defer s.Discard()
	l, err := f.resolve("upload", p)
	if err != nil {
		return nil, err
	}
	root, err := l.root()
	if err != nil {
		return nil, f.fail("upload", l, err)
	}
	defer root.Close()
	if l.isRoot() {
		return nil, f.fail("upload", l, ErrIsDir)
	}
	if err := f.mkdirAll(root, parentRel(l.rel)); err != nil {
		return nil, f.fail("upload", l, err)
	}
	dir, base, err := l.openParent(root)
	if err != nil {
		return nil, f.fail("upload", l, err)
	}
	defer dir.Close()
	mode, err := targetMode(dir, base, 0, false)
	if err == nil {
		err = s.file.Chmod(mode)
	}
	if err == nil {
		err = s.place(dir, base, false)
	}
	if err != nil {
		return nil, f.fail("upload", l, err)
	}
	return &UploadResult{FilePath: l.path, FileSize: s.size, Success: true}, nil
}

// place renames the staged file to base in dir, durably.
func (s *Staged) place(dir *os.File, base string, exclusive bool) error {
	sfd, dfd := int(s.dir.Fd()), int(dir.Fd())
	flags := 0
	if exclusive {
		flags = unix.RENAME_NOREPLACE
	}
	err := unix.Renameat2(sfd, s.name, dfd, base, uint(flags))
	if err == unix.EINVAL && exclusive {
		// A filesystem without RENAME_NOREPLACE: link(2) does not
		// replace either.
		if err = unix.Linkat(sfd, s.name, dfd, base, 0); err == nil {
			unix.Unlinkat(sfd, s.name, 0)
		}
	}
	if err != nil {
		return err
	}
	s.close()
	// The rename must outlive a host crash as the content does: a file
	// acknowledged to the client is not left behind in Staging.
	return dir.Sync()
}

// fill copies r into the new file, within MaxFileBytes, makes it durable and
// gives it to the sandbox's uid.
func (f *FS) fill(ctx context.Context, file *os.File, r io.Reader, mode fs.FileMode) (int64, error) {
	if err := f.fchown(file); err != nil {
		return 0, err
	}
	if err := file.Chmod(mode); err != nil { // exact, regardless of umask
		return 0, err
	}
	n, err := f.copyLimited(ctx, file, r)
	if err != nil {
		return n, err
	}
	return n, file.Sync() // ext4 may report ENOSPC only now
}

func (f *FS) fchown(file *os.File) error {
	if f.cfg.UID < 0 && f.cfg.GID < 0 {
		return nil
	}
	return file.Chown(f.cfg.UID, f.cfg.GID)
}

func (f *FS) copyLimited(ctx context.Context, w io.Writer, r io.Reader) (int64, error) {
	limit := f.cfg.MaxFileBytes
	if limit > 0 {
		r = io.LimitReader(r, limit+1)
	}
	n, err := io.CopyBuffer(w, ctxReader{ctx, r}, make([]byte, 256<<10))
	if err == nil && limit > 0 && n > limit {
		err = ErrTooLarge
	}
	return n, err
}

// appendFile appends r to l in place, creating it if needed, never through
// a symlink.
func (f *FS) appendFile(ctx context.Context, root *os.Root, l loc, r io.Reader, mode fs.FileMode) (int64, error) {
	dir, base, err := l.openParent(root)
	if err != nil {
		return 0, err
	}
	defer dir.Close()
	if mode == 0 {
		mode = 0o644
	}
	created := true
	file, err := openAt(dir, base, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_EXCL, uint32(mode), l.path)
	if errors.Is(err, unix.EEXIST) {
		created = false
		file, err = openAt(dir, base, unix.O_WRONLY|unix.O_APPEND, 0, l.path)
	}
	if err != nil {
		return 0, err
	}
	defer file.Close()
	if created {
		if err := f.fchown(file); err != nil {
			return 0, err
		}
		if err := file.Chmod(mode); err != nil {
			return 0, err
		}
	}
	n, err := f.copyLimited(ctx, file, r)
	if err != nil {
		return n, err
	}
	return n, file.Sync()
}

// Mkdir creates the directory p, owned by the sandbox's uid. With parents it
// also creates missing parents and an existing directory is not an error.
func (f *FS) Mkdir(p string, parents bool) error {
	l, err := f.resolve("mkdir", p)
	if err != nil {
		return err
	}
	root, err := l.root()
	if err != nil {
		return f.fail("mkdir", l, err)
	}
	defer root.Close()
	if parents {
		return f.fail("mkdir", l, f.mkdirAll(root, l.rel))
	}
	if l.isRoot() {
		return f.fail("mkdir", l, ErrExists)
	}
	dir, base, err := l.openParent(root)
	if err != nil {
		return f.fail("mkdir", l, err)
	}
	defer dir.Close()
	if err := unix.Mkdirat(int(dir.Fd()), base, 0o755); err != nil {
		return f.fail("mkdir", l, err)
	}
	if f.cfg.UID >= 0 || f.cfg.GID >= 0 {
		err = unix.Fchownat(int(dir.Fd()), base, f.cfg.UID, f.cfg.GID, unix.AT_SYMLINK_NOFOLLOW)
	}
	return f.fail("mkdir", l, err)
}

// Delete removes p; a symlink is removed, not its target. A non-empty
// directory needs recursive (else ErrNotEmpty). /home/user and /tmp
// themselves cannot be removed (ErrRoot).
func (f *FS) Delete(p string, recursive bool) error {
	l, err := f.resolve("delete", p)
	if err != nil {
		return err
	}
	root, err := l.root()
	if err != nil {
		return f.fail("delete", l, err)
	}
	defer root.Close()
	dir, base, err := l.openParent(root)
	if err != nil {
		return f.fail("delete", l, err)
	}
	defer dir.Close()
	err = unix.Unlinkat(int(dir.Fd()), base, 0)
	if err == unix.EISDIR {
		err = unix.Unlinkat(int(dir.Fd()), base, unix.AT_REMOVEDIR)
		if err == unix.ENOTEMPTY && recursive {
			// os.Root.RemoveAll works on descriptors and does not follow
			// symlinks.
			err = root.RemoveAll(l.rel)
		}
	}
	return f.fail("delete", l, err)
}

// Move renames src to dst (the new path, not a directory to move into).
// Without overwrite an existing dst is ErrExists, checked atomically. A
// symlink is moved as a link. Between filesystems (never the case for a
// sandbox volume, whose home and tmp share one) it copies and deletes.
func (f *FS) Move(ctx context.Context, src, dst string, overwrite bool) error {
	s, err := f.resolve("move", src)
	if err != nil {
		return err
	}
	d, err := f.resolve("move", dst)
	if err != nil {
		return err
	}
	if s.isRoot() || d.isRoot() {
		return f.fail("move", s, ErrRoot)
	}
	sr, err := s.root()
	if err != nil {
		return f.fail("move", s, err)
	}
	defer sr.Close()
	dr, err := d.root()
	if err != nil {
		return f.fail("move", d, err)
	}
	defer dr.Close()
	sdir, sbase, err := s.openParent(sr)
	if err != nil {
		return f.fail("move", s, err)
	}
	defer sdir.Close()
	ddir, dbase, err := d.openParent(dr)
	if err != nil {
		return f.fail("move", d, err)
	}
	defer ddir.Close()
	flags := uint(unix.RENAME_NOREPLACE)
	if overwrite {
		flags = 0
	}
	err = unix.Renameat2(int(sdir.Fd()), sbase, int(ddir.Fd()), dbase, flags)
	if err == unix.EINVAL && !overwrite {
		// Maybe a filesystem without RENAME_NOREPLACE: check, then rename
		// (racy, but both ends stay in the sandbox).
		var st unix.Stat_t
		if err = unix.Fstatat(int(ddir.Fd()), dbase, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
			err = unix.EEXIST
		} else if err == unix.ENOENT {
			err = unix.Renameat(int(sdir.Fd()), sbase, int(ddir.Fd()), dbase)
		}
	}
	if err == unix.EXDEV {
		if err = f.copy(ctx, s, d, true, overwrite); err == nil {
			return f.Delete(s.path, true)
		}
	}
	if err == unix.ENOENT {
		// Report the source unless the destination's parent is missing.
		if _, serr := sr.Lstat(s.rel); serr == nil {
			return f.fail("move", d, err)
		}
	}
	return f.fail("move", s, err)
}

// CopyOptions control Copy.
type CopyOptions struct {
	Recursive bool // copy a directory tree
	Overwrite bool // replace existing files and merge into existing directories
}

// Copy copies src to dst (the new path). A symlink at src is followed inside
// its directory; symlinks inside a copied tree are copied as links, and
// FIFOs, sockets and devices in it are skipped. Each file is written
// atomically and owned by the sandbox's uid.
func (f *FS) Copy(ctx context.Context, src, dst string, opts CopyOptions) error {
	s, err := f.resolve("copy", src)
	if err != nil {
		return err
	}
	d, err := f.resolve("copy", dst)
	if err != nil {
		return err
	}
	if d.isRoot() {
		return f.fail("copy", d, ErrRoot)
	}
	if s.dir == d.dir && (d.rel == s.rel || strings.HasPrefix(d.rel, s.rel+"/") || s.isRoot()) {
		return f.fail("copy", d, fmt.Errorf("%w: destination is inside the source", ErrInvalidArgument))
	}
	return f.copy(ctx, s, d, opts.Recursive, opts.Overwrite)
}

func (f *FS) copy(ctx context.Context, s, d loc, recursive, overwrite bool) error {
	sr, err := s.root()
	if err != nil {
		return f.fail("copy", s, err)
	}
	defer sr.Close()
	fi, err := sr.Stat(s.rel)
	if err != nil {
		return f.fail("copy", s, err)
	}
	dr, err := d.root()
	if err != nil {
		return f.fail("copy", d, err)
	}
	defer dr.Close()
	if !fi.IsDir() {
		in, err := f.openRegular(s)
		if err != nil {
			return f.fail("copy", s, err)
		}
		defer in.Close()
		_, err = f.writeAtomic(ctx, dr, d, in, fi.Mode().Perm(), !overwrite)
		return f.fail("copy", d, err)
	}
	if !recursive {
		return f.fail("copy", s, ErrIsDir)
	}
	switch err := dr.Mkdir(d.rel, fi.Mode().Perm()); {
	case err == nil:
		if err := f.lchown(dr, d.rel); err != nil {
			return f.fail("copy", d, err)
		}
	case !overwrite || !errors.Is(err, fs.ErrExist):
		return f.fail("copy", d, err)
	}
	truncated, err := f.walk(ctx, s, 0, defaultMaxEntries, func(e *entry) error {
		to := d.join(e.rel)
		switch {
		case e.info.IsDir():
			err := dr.Mkdir(to.rel, e.info.Mode().Perm())
			if err == nil {
				err = f.lchown(dr, to.rel)
			} else if overwrite && errors.Is(err, fs.ErrExist) {
				err = nil
			}
			return f.fail("copy", to, err)
		case e.info.Mode().IsRegular():
			in, err := e.open()
			if err != nil {
				return nil // changed under us: skip, as for special files
			}
			defer in.Close()
			_, err = f.writeAtomic(ctx, dr, to, in, e.info.Mode().Perm(), !overwrite)
			return f.fail("copy", to, err)
		case e.info.Mode()&fs.ModeSymlink != 0:
			target := e.readlink()
			if target == "" {
				return nil
			}
			return f.fail("copy", to, f.symlink(dr, target, to, overwrite))
		}
		return nil
	})
	if err == nil && truncated {
		err = f.fail("copy", s, fmt.Errorf("%w: more than %d files", ErrTooLarge, defaultMaxEntries))
	}
	return err
}

// symlink creates a symlink to target (user data, copied verbatim) at l.
func (f *FS) symlink(root *os.Root, target string, l loc, overwrite bool) error {
	dir, base, err := l.openParent(root)
	if err != nil {
		return err
	}
	defer dir.Close()
	dfd := int(dir.Fd())
	err = unix.Symlinkat(target, dfd, base)
	if err == unix.EEXIST && overwrite {
		if err = unix.Unlinkat(dfd, base, 0); err == nil {
			err = unix.Symlinkat(target, dfd, base)
		}
	}
	if err == nil && (f.cfg.UID >= 0 || f.cfg.GID >= 0) {
		err = unix.Fchownat(dfd, base, f.cfg.UID, f.cfg.GID, unix.AT_SYMLINK_NOFOLLOW)
	}
	return err
}
