package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/codecell/codecell/internal/cgroup"
	"github.com/codecell/codecell/internal/jail"
	"github.com/codecell/codecell/internal/kernel"
)

// Python modes (Config.PythonMode).
const (
	// PythonSpawn starts every Python kernel as a new interpreter in a new jail.
	PythonSpawn = "spawn"
	// PythonFork forks every Python kernel from the sandbox's zygote (see
	// kernel.Zygote), which has already imported IPython and the preload
	// modules; each child enters its own namespaces, cgroup, capability
	// set and seccomp filter before any user code runs.
	PythonFork = "fork"
)

// ParsePythonMode accepts "spawn", "fork" and "" (fork).
func ParsePythonMode(s string) (string, error) {
	switch s {
	case PythonSpawn:
		return PythonSpawn, nil
	case "", PythonFork:
		return PythonFork, nil
	}
	return "", fmt.Errorf("unknown Python mode %q: use fork or spawn", s)
}

// zygote is a sandbox's fork server: started when a Python kernel is first
// wanted, restarted when it died, and stopped when no forked kernel of the
// sandbox is left and no Python pool keeps it (so that nothing of the
// sandbox's uid runs once its kernels are gone).
type zygote struct {
	sb *Sandbox

	mu       sync.Mutex
	z        *kernel.Zygote
	cg       *cgroup.Group
	refs     int // live forked kernels, plus one while Python pools exist
	starting bool
	starts   int // zygotes started
	served   int // kernels forked
	failures int
	lastErr  error
	closed   bool
	ready    chan struct{} // closed when a start attempt ends
}

func (s *Sandbox) forkMode() bool {
	return s.cfg.PythonMode != PythonSpawn && !s.cfg.Jail.Unsafe && s.cg != nil
}

// acquire returns a live zygote and counts one more user of it.
func (y *zygote) acquire(ctx context.Context) (*kernel.Zygote, error) {
	y.mu.Lock()
	for {
		if y.closed {
			y.mu.Unlock()
			return nil, errors.New("sandbox is closing")
		}
		if y.z != nil && y.z.Alive() {
			y.refs++
			y.served++
			z := y.z
			y.mu.Unlock()
			return z, nil
		}
		if !y.starting {
			break
		}
		ch := y.ready
		y.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		y.mu.Lock()
		if y.lastErr != nil && (y.z == nil || !y.z.Alive()) {
			err := y.lastErr
			y.mu.Unlock()
			return nil, err
		}
	}
	old := y.z
	y.z = nil
	y.starting = true
	y.ready = make(chan struct{})
	y.mu.Unlock()
	if old != nil {
		old.Close()
	}
	z, err := y.start(ctx)
	y.mu.Lock()
	defer y.mu.Unlock()
	y.starting = false
	close(y.ready)
	if err != nil {
		y.failures++
		y.lastErr = err
		return nil, err
	}
	if y.closed {
		go z.Close()
		return nil, errors.New("sandbox is closing")
	}
	y.failures, y.lastErr = 0, nil
	y.starts++
	y.z = z
	y.refs++
	y.served++
	return z, nil
}

func (y *zygote) start(ctx context.Context) (*kernel.Zygote, error) {
	s := y.sb
	if y.cg == nil {
		cg, err := s.cg.Child("zygote")
		if err != nil {
			return nil, fmt.Errorf("%w: sandbox %s: zygote cgroup: %w", kernel.ErrStartup, s.id, err)
		}
		y.cg = cg
	}
	return kernel.StartZygote(ctx, kernel.ZygoteConfig{
		Jail:    s.cfg.Jail,
		Spec:    s.jailSpec(y.cg, 0),
		Python:  s.cfg.Python,
		Preload: s.preload(),
	})
}

// hold counts a user that is not a kernel (a Python pool).
func (y *zygote) hold() {
	y.mu.Lock()
	y.refs++
	y.mu.Unlock()
}

// release drops one user; the last one stops the zygote.
func (y *zygote) release() {
	y.mu.Lock()
	y.refs--
	var z *kernel.Zygote
	if y.refs <= 0 && !y.starting {
		y.refs = 0
		z, y.z = y.z, nil
	}
	y.mu.Unlock()
	if z != nil {
		z.Close()
	}
}

// close stops the zygote for good and removes its cgroup.
func (y *zygote) close() {
	y.mu.Lock()
	y.closed = true
	z, ch, starting := y.z, y.ready, y.starting
	y.z = nil
	y.mu.Unlock()
	if starting {
		<-ch
		y.mu.Lock()
		z, y.z = y.z, nil
		y.mu.Unlock()
	}
	if z != nil {
		z.Close()
	}
	if y.cg != nil {
		y.cg.Remove()
	}
}

func (y *zygote) stats() PoolStats {
	y.mu.Lock()
	defer y.mu.Unlock()
	st := PoolStats{Size: 1, Served: y.served, Failures: y.failures}
	if y.z != nil && y.z.Alive() {
		st.Ready = 1
	} else if y.refs == 0 && !y.starting {
		st.Size = 0 // stopped: no Python kernel needs it
	}
	if y.starting {
		st.Starting = 1
	}
	if y.lastErr != nil {
		st.LastError = y.lastErr.Error()
	}
	return st
}

// jailSpec is the jail of a kernel (or the zygote) of the sandbox in cg.
func (s *Sandbox) jailSpec(cg *cgroup.Group, nice int) jail.Spec {
	return jail.Spec{
		Home:     s.home,
		Tmp:      s.tmp,
		HostUID:  s.uid,
		HostGID:  s.uid,
		Rlimits:  jail.Rlimits{FileSize: s.limits.FileSizeBytes, OpenFiles: s.limits.OpenFiles},
		ShmBytes: min(64<<20, s.limits.MemoryBytes/4),
		Nice:     nice,
		Cgroup:   cg,
	}
}
