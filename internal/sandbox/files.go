package sandbox

import (
	"context"
	"io"

	"github.com/codecell/codecell/internal/files"
)

// Files is the sandbox's file plane: its home and /tmp as code sees them.
func (s *Sandbox) Files() *files.FS { return s.fs }

// WriteFile writes r to the sandbox path p (as code sees it), creating
// parent directories, owned by the sandbox's uid as if code had written it.
func (s *Sandbox) WriteFile(p string, r io.Reader) error {
	_, err := s.fs.Write(context.Background(), p, r, files.WriteOptions{MkdirAll: true})
	return err
}
