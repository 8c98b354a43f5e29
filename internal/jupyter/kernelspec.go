package jupyter

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KernelSpec describes how to start a kernel: the kernel.json of a kernelspec
// directory.
type KernelSpec struct {
	Name        string            `json:"-"` // directory name, lower-cased
	DisplayName string            `json:"display_name"`
	Language    string            `json:"language"`
	Argv        []string          `json:"argv"`
	Env         map[string]string `json:"env,omitempty"`
	// InterruptMode is "signal" (send SIGINT to the kernel process; the
	// default) or "message" (send an interrupt_request, Client.Interrupt).
	InterruptMode string `json:"interrupt_mode,omitempty"`
	Dir           string `json:"-"` // the kernelspec directory; empty for a remote spec
}

// DataDirs returns the system-wide Jupyter data directories, the parents of
// the kernels directories, in lookup order: each entry of $JUPYTER_PATH, then
// /usr/local/share/jupyter, then /usr/share/jupyter. Earlier directories win
// when two define a kernel of the same name.
//
// The user's own data directory (~/.local/share/jupyter) is left out on
// purpose: the server runs as root, and a kernel picked up from root's home
// directory would be a surprise.
func DataDirs() []string {
	var dirs []string
	seen := make(map[string]bool)
	add := func(d string) {
		if d == "" || seen[d] {
			return
		}
		seen[d] = true
		dirs = append(dirs, d)
	}
	for _, d := range filepath.SplitList(os.Getenv("JUPYTER_PATH")) {
		add(filepath.Clean(d))
	}
	add("/usr/local/share/jupyter")
	add("/usr/share/jupyter")
	return dirs
}

// FindKernelSpecs reads <dir>/kernels/<name>/kernel.json in each of dirs, in
// order; the first valid spec of a name wins. A missing directory is not an
// error. Unreadable, malformed or invalid specs are skipped and reported
// together in the returned error, alongside the specs that were found.
func FindKernelSpecs(dirs []string) (map[string]KernelSpec, error) {
	specs := make(map[string]KernelSpec)
	var errs []error
	for _, dir := range dirs {
		kernels := filepath.Join(dir, "kernels")
		entries, err := os.ReadDir(kernels)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("jupyter: kernelspecs: %w", err))
			}
			continue
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			name := strings.ToLower(e.Name())
			if _, ok := specs[name]; ok {
				continue
			}
			spec, err := readKernelSpec(filepath.Join(kernels, e.Name()))
			if errors.Is(err, fs.ErrNotExist) {
				continue // a directory without kernel.json is not a kernelspec
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("jupyter: kernelspec %s: %w", filepath.Join(kernels, e.Name()), err))
				continue
			}
			specs[name] = spec
		}
	}
	return specs, errors.Join(errs...)
}

// readKernelSpec reads and validates dir/kernel.json.
func readKernelSpec(dir string) (KernelSpec, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kernel.json"))
	if err != nil {
		return KernelSpec{}, err
	}
	var s KernelSpec
	if err := json.Unmarshal(data, &s); err != nil {
		return KernelSpec{}, fmt.Errorf("parsing kernel.json: %w", err)
	}
	s.Name = strings.ToLower(filepath.Base(dir))
	s.Dir = dir
	if err := s.normalize(); err != nil {
		return KernelSpec{}, err
	}
	return s, nil
}

// normalize validates s and fills in defaults.
func (s *KernelSpec) normalize() error {
	if !validKernelName(s.Name) {
		return fmt.Errorf("invalid kernel name %q", s.Name)
	}
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return errors.New("empty argv")
	}
	switch s.InterruptMode {
	case "":
		s.InterruptMode = "signal"
	case "signal", "message":
	default:
		return fmt.Errorf("unknown interrupt_mode %q", s.InterruptMode)
	}
	return nil
}

// Command returns the spec's argv with {connection_file} replaced by
// connectionFile. Other {placeholders} are left as they are.
func (s KernelSpec) Command(connectionFile string) []string {
	argv := make([]string, len(s.Argv))
	for i, a := range s.Argv {
		argv[i] = strings.ReplaceAll(a, "{connection_file}", connectionFile)
	}
	return argv
}

// validKernelName reports whether name is one jupyter_client accepts
// ([a-z0-9._-]+). Names end up in paths and URLs, so unlike jupyter_client,
// which only warns, FindKernelSpecs skips specs with other names.
func validKernelName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		switch {
		case 'a' <= r && r <= 'z', '0' <= r && r <= '9', r == '.', r == '_', r == '-':
		default:
			return false
		}
	}
	return true
}
