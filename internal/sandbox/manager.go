package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// Errors about sandboxes.
var (
	ErrNotFound = errors.New("sandbox not found")
	ErrExists   = errors.New("sandbox already exists")
	ErrClosed   = errors.New("server is shutting down")
)

// DefaultID names the sandbox that serves the unscoped API routes.
const DefaultID = "default"

// ManagerConfig configures the sandboxes of one server.
type ManagerConfig struct {
	Sandbox Config
	// MaxSandboxes bounds live sandboxes, the default one included; 0 means 100.
	MaxSandboxes int
	// SessionIdle ends sessions unused for that long; 0 means 5 minutes.
	SessionIdle time.Duration
	// Logger receives reaping and clean-up events; nil means slog.Default.
	Logger *slog.Logger
}

// Manager holds a server's sandboxes, reaps idle sessions and expired
// sandboxes, and cleans everything up at shutdown.
type Manager struct {
	cfg ManagerConfig
	log *slog.Logger

	mu        sync.Mutex
	sandboxes map[string]*Sandbox // nil value: being created
	closed    bool
}

// NewManager returns a manager with no sandboxes.
func NewManager(cfg ManagerConfig) *Manager {
	cfg.MaxSandboxes = cmp.Or(cfg.MaxSandboxes, 100)
	cfg.SessionIdle = cmp.Or(cfg.SessionIdle, 5*time.Minute)
	return &Manager{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()), sandboxes: map[string]*Sandbox{}}
}

// Config returns the manager's configuration with defaults filled in.
func (m *Manager) Config() ManagerConfig { return m.cfg }

// Create makes a new sandbox; an empty opt.ID makes one up.
func (m *Manager) Create(ctx context.Context, opt Options) (*Sandbox, error) {
	if opt.ID == "" {
		opt.ID = "sb-" + newSessionID()[:12]
	}
	m.mu.Lock()
	switch {
	case m.closed:
		m.mu.Unlock()
		return nil, ErrClosed
	case m.hasLocked(opt.ID):
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: %q", ErrExists, opt.ID)
	case len(m.sandboxes) >= m.cfg.MaxSandboxes:
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: %d sandboxes, the server's limit; delete one first", ErrCapacity, len(m.sandboxes))
	}
	m.sandboxes[opt.ID] = nil // reserved while it is made
	if opt.UID == 0 {
		opt.UID = m.freeUIDLocked()
	}
	m.mu.Unlock()

	sb, err := Create(ctx, m.cfg.Sandbox, opt)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		delete(m.sandboxes, opt.ID)
		return nil, err
	}
	m.sandboxes[opt.ID] = sb
	return sb, nil
}

func (m *Manager) hasLocked(id string) bool {
	_, ok := m.sandboxes[id]
	return ok
}

// freeUIDLocked picks a uid no live sandbox has. A sandbox re-opened from
// disk keeps its own (see Create), which can only collide with a fresh pick
// by a 1 in 16M chance, checked here for live sandboxes.
func (m *Manager) freeUIDLocked() int {
	for {
		uid := PickUID()
		taken := false
		for _, sb := range m.sandboxes {
			if sb != nil && sb.uid == uid {
				taken = true
			}
		}
		if !taken {
			return uid
		}
	}
}

// Get returns a live sandbox.
func (m *Manager) Get(id string) (*Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sb := m.sandboxes[id]; sb != nil {
		return sb, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
}

// Default returns the default sandbox, creating it on first use.
func (m *Manager) Default(ctx context.Context) (*Sandbox, error) {
	if sb, err := m.Get(DefaultID); err == nil {
		return sb, nil
	}
	sb, err := m.Create(ctx, Options{ID: DefaultID})
	if errors.Is(err, ErrExists) { // made meanwhile, or still being made
		for range 100 {
			if sb, err := m.Get(DefaultID); err == nil {
				return sb, nil
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return sb, err
}

// List returns the live sandboxes by id.
func (m *Manager) List() []*Sandbox {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Sandbox
	for _, sb := range m.sandboxes {
		if sb != nil {
			out = append(out, sb)
		}
	}
	slices.SortFunc(out, func(a, b *Sandbox) int { return strings.Compare(a.id, b.id) })
	return out
}

// Delete removes a sandbox with its processes, cgroup and files.
func (m *Manager) Delete(ctx context.Context, id string) error {
	m.mu.Lock()
	sb := m.sandboxes[id]
	if sb != nil {
		m.sandboxes[id] = nil // the id stays taken until its files are gone
	}
	m.mu.Unlock()
	if sb == nil {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	err := sb.Destroy(ctx)
	m.mu.Lock()
	delete(m.sandboxes, id)
	m.mu.Unlock()
	return err
}

// Run reaps idle sessions and expired sandboxes until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(min(m.cfg.SessionIdle/4, 10*time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.reap(ctx)
		}
	}
}

func (m *Manager) reap(ctx context.Context) {
	for _, sb := range m.List() {
		if exp := sb.ExpiresAt(); !exp.IsZero() && time.Now().After(exp) {
			m.log.Info("sandbox expired", "sandbox", sb.id, "ttl", sb.ttl)
			if err := m.Delete(ctx, sb.id); err != nil {
				m.log.Error("removing an expired sandbox", "sandbox", sb.id, "err", err)
			}
			continue
		}
		if n := sb.ReapIdle(m.cfg.SessionIdle); n > 0 {
			m.log.Info("idle sessions ended", "sandbox", sb.id, "count", n, "idle", m.cfg.SessionIdle)
		}
	}
}

// Shutdown ends every session and process, removes every cgroup and
// unmounts every sandbox disk. Sandboxes' files stay on disk.
func (m *Manager) Shutdown(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	var errs []error
	for _, sb := range m.List() {
		if err := sb.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("closing sandbox %s: %w", sb.id, err))
		}
		m.mu.Lock()
		delete(m.sandboxes, sb.id)
		m.mu.Unlock()
	}
	return errors.Join(errs...)
}
