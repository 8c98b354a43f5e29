package files

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultMaxReadBytes bounds what Read returns and ReadBytes accepts when
// the caller sets no limit: both hold the content in memory.
const DefaultMaxReadBytes = 16 << 20

// ReadOptions selects the lines Read returns (FileReadRequest).
type ReadOptions struct {
	StartLine int   // first line, 0-based (start_line)
	Limit     int   // number of lines; 0 means to the end (end_line - start_line)
	MaxBytes  int64 // cap on the content; 0 means DefaultMaxReadBytes
}

// ReadResult is the result of Read (FileReadResult).
type ReadResult struct {
	File      string `json:"file"`
	Content   string `json:"content"`
	Truncated bool   `json:"truncated,omitempty"` // MaxBytes cut the content
}

// Read returns lines of the text file p. Symlinks are followed inside the
// directory that holds p. Invalid UTF-8 is returned as is; encoding it is the
// caller's business.
func (f *FS) Read(ctx context.Context, p string, opts ReadOptions) (*ReadResult, error) {
	l, err := f.resolve("read", p)
	if err != nil {
		return nil, err
	}
	if opts.StartLine < 0 || opts.Limit < 0 || opts.MaxBytes < 0 {
		return nil, f.fail("read", l, ErrInvalidArgument)
	}
	file, err := f.openRegular(l)
	if err != nil {
		return nil, f.fail("read", l, err)
	}
	defer file.Close()
	maxBytes := int(opts.MaxBytes)
	if maxBytes == 0 {
		maxBytes = DefaultMaxReadBytes
	}
	end := -1
	if opts.Limit > 0 {
		end = opts.StartLine + opts.Limit
	}
	res := &ReadResult{File: l.path}
	var b strings.Builder
	br := bufio.NewReaderSize(file, 64<<10)
	for line := 0; end < 0 || line < end; {
		if err := ctx.Err(); err != nil {
			return nil, f.fail("read", l, err)
		}
		chunk, err := br.ReadSlice('\n')
		if line >= opts.StartLine && len(chunk) > 0 {
			if room := maxBytes - b.Len(); len(chunk) > room {
				for room > 0 && !utf8.RuneStart(chunk[room]) {
					room--
				}
				b.Write(chunk[:room])
				res.Truncated = true
				break
			}
			b.Write(chunk)
		}
		if err == io.EOF {
			break
		}
		if err != nil && err != bufio.ErrBufferFull {
			return nil, f.fail("read", l, err)
		}
		if err == nil { // a whole line, ending in '\n'
			line++
		}
	}
	res.Content = b.String()
	return res, nil
}

// ReadBytes returns the content of the regular file p, which must not be
// larger than limit bytes (0 means DefaultMaxReadBytes), for base64 encoding.
func (f *FS) ReadBytes(ctx context.Context, p string, limit int64) ([]byte, error) {
	l, err := f.resolve("read", p)
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = DefaultMaxReadBytes
	}
	file, err := f.openRegular(l)
	if err != nil {
		return nil, f.fail("read", l, err)
	}
	defer file.Close()
	// The file may grow while it is read: the size from fstat is only a hint.
	b, err := io.ReadAll(io.LimitReader(ctxReader{ctx, file}, limit+1))
	if err != nil {
		return nil, f.fail("read", l, err)
	}
	if int64(len(b)) > limit {
		return nil, f.fail("read", l, ErrTooLarge)
	}
	return b, nil
}

// Open opens the regular file p for download, following symlinks inside the
// directory that holds p. FIFOs, sockets, devices and directories are refused
// without blocking (ErrNotRegular, ErrIsDir). The file is named p as user
// code sees it; fi describes the opened file (use fi.Name, fi.Size and
// fi.ModTime with http.ServeContent). The caller closes the file.
func (f *FS) Open(p string) (file *os.File, fi fs.FileInfo, err error) {
	l, err := f.resolve("open", p)
	if err != nil {
		return nil, nil, err
	}
	file, err = f.openRegular(l)
	if err != nil {
		return nil, nil, f.fail("open", l, err)
	}
	if fi, err = file.Stat(); err != nil {
		file.Close()
		return nil, nil, f.fail("open", l, err)
	}
	return file, fi, nil
}

// FileInfo describes a file (FileInfo, GlobFileInfo).
type FileInfo struct {
	Name        string    `json:"name"`
	Path        string    `json:"path"` // as user code sees it
	IsDir       bool      `json:"is_directory"`
	Type        string    `json:"type"` // "file", "directory", "symlink" or "other"
	Size        int64     `json:"size"`
	ModTime     time.Time `json:"modified_time"`
	Permissions string    `json:"permissions"` // octal, e.g. "644"
	Extension   string    `json:"extension,omitempty"`
	LinkTarget  string    `json:"link_target,omitempty"` // for symlinks, as stored (user data)
}

func newFileInfo(p string, fi fs.FileInfo) FileInfo {
	info := FileInfo{
		Name:        path.Base(p),
		Path:        p,
		IsDir:       fi.IsDir(),
		Type:        "other",
		Size:        fi.Size(),
		ModTime:     fi.ModTime(),
		Permissions: fmt.Sprintf("%03o", fi.Mode().Perm()),
	}
	switch {
	case fi.Mode().IsRegular():
		info.Type = "file"
		info.Extension = path.Ext(info.Name)
	case fi.IsDir():
		info.Type = "directory"
	case fi.Mode()&fs.ModeSymlink != 0:
		info.Type = "symlink"
	}
	return info
}

// Stat describes p itself: a symlink is reported as a symlink, with its
// target, and not followed.
func (f *FS) Stat(p string) (*FileInfo, error) {
	l, err := f.resolve("stat", p)
	if err != nil {
		return nil, err
	}
	r, err := l.root()
	if err != nil {
		return nil, f.fail("stat", l, err)
	}
	defer r.Close()
	fi, err := r.Lstat(l.rel)
	if err != nil {
		return nil, f.fail("stat", l, err)
	}
	info := newFileInfo(l.path, fi)
	if info.Type == "symlink" {
		info.LinkTarget, _ = r.Readlink(l.rel)
	}
	return &info, nil
}

// ctxReader stops a copy when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

var errStop = errors.New("stop")
