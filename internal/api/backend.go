package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/observe"
	"github.com/codecell/codecell/internal/sandbox"
)

// Code backends (Config.CodeBackend): what runs Python on the code routes.
const (
	// BackendAuto uses the remote Jupyter server when one is configured
	// and reachable, else the native driver.
	BackendAuto = "auto"
	// BackendNative is codecell's own IPython driver in a jail (forked from
	// the sandbox's zygote): the fastest, and the default.
	BackendNative = observe.BackendNative
	// BackendKernel is a Jupyter kernel: the remote server's when it is
	// reachable, else the python3 kernelspec (ipykernel) in a jail.
	BackendKernel = observe.BackendKernel
)

// ParseBackend accepts auto, native, kernel and "" (auto).
func ParseBackend(s string) (string, error) {
	switch s {
	case "", BackendAuto:
		return BackendAuto, nil
	case BackendNative, BackendKernel:
		return s, nil
	}
	return "", fmt.Errorf("unknown code backend %q: use auto, native or kernel", s)
}

// pythonKernel is the kernelspec name for Python, as Jupyter calls it.
const pythonKernel = "python3"

// remoteProbe remembers for a while whether the remote server answered.
type remoteProbe struct {
	mu    sync.Mutex
	at    time.Time
	alive bool
}

func (s *Server) remoteAlive(ctx context.Context) bool {
	srv := s.cfg.Manager.Config().Sandbox.Remote
	if srv == nil {
		return false
	}
	s.remote.mu.Lock()
	defer s.remote.mu.Unlock()
	if time.Since(s.remote.at) > 10*time.Second {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		s.remote.alive = srv.Ping(ctx) == nil
		s.remote.at = time.Now()
	}
	return s.remote.alive
}

// python is the language Python code runs as on the code routes, and the
// backend's name.
func (s *Server) python(ctx context.Context) (kernel.Language, string) {
	mode := s.cfg.CodeBackend
	if mode == BackendNative {
		return kernel.Python, BackendNative
	}
	if s.remoteAlive(ctx) {
		return kernel.Remote(pythonKernel), observe.BackendRemote
	}
	if _, ok := s.cfg.Manager.Config().Sandbox.KernelSpecs[pythonKernel]; ok && mode == BackendKernel {
		return kernel.Jupyter(pythonKernel), BackendKernel
	}
	return kernel.Python, BackendNative
}

// resolve maps a language parsed from a request to what runs it.
func (s *Server) resolve(ctx context.Context, l kernel.Language) kernel.Language {
	if l == kernel.Python {
		l, _ = s.python(ctx)
	}
	return l
}

// resolveSession is resolve for session id of sb: a Python session that
// exists keeps the backend it started on, though the remote server came or
// went since, since its state lives there. Sessions are per language, so
// following the backend would silently give the caller a new, empty one.
func (s *Server) resolveSession(ctx context.Context, sb *sandbox.Sandbox, l kernel.Language, id string) kernel.Language {
	if l != kernel.Python || id == "" {
		return s.resolve(ctx, l)
	}
	search := s.pythonSearch(ctx)
	for _, on := range search {
		if _, _, err := sb.OpenSession(on, id, false); err == nil {
			return on
		}
	}
	return search[0]
}

// pythonSearch is where to look for a Python session by id: the current
// backend's language first, then every other, each once.
func (s *Server) pythonSearch(ctx context.Context) []kernel.Language {
	first := s.resolve(ctx, kernel.Python)
	search := []kernel.Language{first}
	for _, l := range []kernel.Language{kernel.Python, kernel.Jupyter(pythonKernel), kernel.Remote(pythonKernel)} {
		if l != first {
			search = append(search, l)
		}
	}
	return search
}

// jupyterKernel maps a kernel_name to what runs it: "" and python3 (or
// python) are Python, which follows the code backend when it runs
// (resolveSession), other names are kernelspecs run in jails. An unknown
// name is a 422 that lists the available ones.
func (s *Server) jupyterKernel(name string) (kernel.Language, error) {
	switch strings.ToLower(name) {
	case "", pythonKernel, "python":
		return kernel.Python, nil
	}
	if _, ok := s.cfg.Manager.Config().Sandbox.KernelSpecs[name]; ok {
		return kernel.Jupyter(name), nil
	}
	return "", invalid("kernel_name", fmt.Sprintf("unknown kernel %q; available: %q", name, s.kernelNames()), "value_error")
}

// kernelNames lists the kernels kernel_name may name.
func (s *Server) kernelNames() []string {
	names := []string{pythonKernel}
	for name := range s.cfg.Manager.Config().Sandbox.KernelSpecs {
		if name != pythonKernel {
			names = append(names, name)
		}
	}
	slices.Sort(names[1:])
	return names
}

// kernelNameOf is the kernel_name a session's language reports.
func kernelNameOf(l kernel.Language) string {
	if name, _, ok := l.Kernelspec(); ok {
		return name
	}
	return pythonKernel
}

// isJupyter reports whether l runs on a kernel the Jupyter routes serve:
// Python of any backend, or a kernelspec.
func isJupyter(l kernel.Language) bool {
	_, _, ok := l.Kernelspec()
	return ok || l == kernel.Python
}

// jupyterSession finds a session of the Jupyter routes by id.
func jupyterSession(r *http.Request, sb *sandbox.Sandbox) (*sandbox.Session, error) {
	id := r.PathValue("session_id")
	for _, sess := range sb.Sessions("") {
		if sess.ID == id && isJupyter(sess.Language) {
			return sess, nil
		}
	}
	return nil, fmt.Errorf("%w: no Jupyter session %q", sandbox.ErrNoSession, id)
}
