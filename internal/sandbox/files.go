package sandbox

import (
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/codecell/codecell/internal/jail"
)

// resolve maps a path as user code sees it (absolute under /home/user or
// /tmp, or relative to /home/user) to the host directory that backs it and
// the path inside that directory. The path is untrusted: it is only ever
// used through an os.Root, which refuses to leave the directory by "..",
// by absolute symlinks or by symlinks planted by user code.
func (s *Sandbox) resolve(p string) (dir, rel string, err error) {
	clean := path.Clean("/" + strings.TrimPrefix(p, "/"))
	if !strings.HasPrefix(p, "/") {
		clean = path.Clean(jail.HomeDir + "/" + p)
	}
	for _, m := range []struct{ prefix, dir string }{{jail.HomeDir, s.home}, {jail.TmpDir, s.tmp}} {
		if clean == m.prefix {
			return m.dir, ".", nil
		}
		if r, ok := strings.CutPrefix(clean, m.prefix+"/"); ok {
			return m.dir, r, nil
		}
	}
	return "", "", fmt.Errorf("sandbox %s: path %q is outside the sandbox's writable directories (%s and %s)", s.id, p, jail.HomeDir, jail.TmpDir)
}

// WriteFile writes r to the sandbox path p, creating parent directories,
// owned by the sandbox's uid as if user code had written it.
func (s *Sandbox) WriteFile(p string, r io.Reader) error {
	dir, rel, err := s.resolve(p)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", s.id, err)
	}
	defer root.Close()
	if parent := path.Dir(rel); parent != "." {
		if err := root.MkdirAll(parent, 0o755); err != nil {
			return fmt.Errorf("sandbox %s: creating %s: %w", s.id, path.Dir(p), err)
		}
		if err := s.chownAll(root, parent); err != nil {
			return err
		}
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("sandbox %s: writing %s: %w", s.id, p, err)
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("sandbox %s: writing %s: %w", s.id, p, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("sandbox %s: writing %s: %w", s.id, p, err)
	}
	return s.chown(root, rel)
}

// chownAll gives every directory on rel's path to the sandbox's uid.
func (s *Sandbox) chownAll(root *os.Root, rel string) error {
	for d := rel; d != "."; d = path.Dir(d) {
		if err := s.chown(root, d); err != nil {
			return err
		}
	}
	return nil
}

func (s *Sandbox) chown(root *os.Root, rel string) error {
	if s.cfg.Jail.Unsafe {
		return nil
	}
	if err := root.Lchown(rel, s.uid, s.uid); err != nil {
		return fmt.Errorf("sandbox %s: chown %s: %w", s.id, rel, err)
	}
	return nil
}
