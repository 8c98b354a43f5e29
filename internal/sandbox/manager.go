package sandbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/store"
)

// Errors about sandboxes.
var (
	ErrNotFound = errors.New("sandbox not found")
	ErrExists   = errors.New("sandbox already exists")
	ErrClosed   = errors.New("server is shutting down")
	// ErrNoSpace: the data disk cannot hold a new sandbox's disk.
	ErrNoSpace = errors.New("no space left on the server's data disk")
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
	db        *store.DB // set by Restore; nil: nothing is recorded
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
	if err == nil {
		if db := m.store(); db != nil {
			sb.db = db
			if err = db.Put(store.Sandboxes, sb.id, recordOf(sb)); err != nil {
				err = fmt.Errorf("sandbox %s: recording it: %w", sb.id, err)
				sb.Destroy(context.WithoutCancel(ctx))
			}
		}
	}
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
	err = errors.Join(err, m.forget(id))
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
// unmounts every sandbox disk. Sandboxes' files stay on disk, and their
// records in the store, which it closes.
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
	m.mu.Lock()
	db := m.db
	m.db = nil
	m.mu.Unlock()
	if db != nil {
		if err := db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the store: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Persistence. With a store (see Restore), the manager records every
// sandbox it makes (id, uid, limits, labels, TTL, creation and expiry) and
// every session (sandbox, language, id, creation, last use), and forgets
// them when they are deleted or reaped. Shutdown and a crash keep them: the
// next server re-opens the sandboxes and lists their sessions as lost.

// sandboxRecord is a sandbox in the store, under its id.
type sandboxRecord struct {
	ID        string            `json:"id"`
	UID       int               `json:"uid"`
	Limits    Limits            `json:"limits"`
	Labels    map[string]string `json:"labels,omitempty"`
	TTL       time.Duration     `json:"ttl,omitempty"`
	Created   time.Time         `json:"created"`
	ExpiresAt time.Time         `json:"expires_at,omitzero"`
}

// sessionRecord is a session in the store, under sessionKeyOf.
type sessionRecord struct {
	Sandbox  string          `json:"sandbox"`
	Language kernel.Language `json:"language"`
	ID       string          `json:"id"`
	Created  time.Time       `json:"created"`
	LastUsed time.Time       `json:"last_used"`
	Cwd      string          `json:"cwd,omitempty"`
	MaxIdle  time.Duration   `json:"max_idle,omitempty"`
}

func sessionKeyOf(sandbox string, lang kernel.Language, id string) string {
	return sandbox + "/" + string(lang) + "/" + id
}

// saveInterval is how stale a session's recorded last use may get before an
// execution records it again: idle limits are minutes, and a write costs an
// fsync.
const saveInterval = 10 * time.Second

// saveSession records sess unless it was ended; with force, even if its
// recorded last use is recent.
func (s *Sandbox) saveSession(sess *Session, force bool) {
	if s.db == nil {
		return
	}
	due := func() bool { return !sess.closed && (force || sess.lastUsed.Sub(sess.saved) >= saveInterval) }
	sess.mu.Lock()
	skip := !due() // most executions: without waiting for other sessions' writes
	sess.mu.Unlock()
	if skip {
		return
	}
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	sess.mu.Lock()
	if !due() {
		sess.mu.Unlock()
		return
	}
	rec := sessionRecord{Sandbox: s.id, Language: sess.Language, ID: sess.ID, Created: sess.Created,
		LastUsed: sess.lastUsed, Cwd: sess.cwd, MaxIdle: sess.maxIdle}
	sess.saved = sess.lastUsed
	sess.mu.Unlock()
	if err := s.db.Put(store.Sessions, sessionKeyOf(s.id, rec.Language, rec.ID), rec); err != nil {
		slog.Error("recording a session", "sandbox", s.id, "session", rec.ID, "err", err)
	}
}

// forgetSession removes a session's record.
func (s *Sandbox) forgetSession(lang kernel.Language, id string) {
	if s.db == nil {
		return
	}
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if err := s.db.Delete(store.Sessions, sessionKeyOf(s.id, lang, id)); err != nil {
		slog.Error("forgetting a session", "sandbox", s.id, "session", id, "err", err)
	}
}

func recordOf(sb *Sandbox) sandboxRecord {
	return sandboxRecord{ID: sb.id, UID: sb.uid, Limits: sb.limits, Labels: sb.labels, TTL: sb.ttl,
		Created: sb.created, ExpiresAt: sb.ExpiresAt()}
}

// store is the manager's store, nil before Restore and after Shutdown.
func (m *Manager) store() *store.DB {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.db
}

// forget removes the records of sandbox id and of its sessions.
func (m *Manager) forget(id string) error {
	db := m.store()
	if db == nil {
		return nil
	}
	return errors.Join(db.Delete(store.Sandboxes, id), db.DeletePrefix(store.Sessions, id+"/"))
}

// Restore opens the store in the data directory (failing after a few
// seconds, with store.ErrLocked, if another server has it) and re-opens
// every sandbox recorded there, as a previous server left it at shutdown
// or at a crash: its files, with leftover processes killed, the leftover
// cgroup replaced and a leftover mount reused (see Create). Sandboxes whose
// TTL ended meanwhile are removed. Their sessions are listed as lost. From
// then on the manager records what it makes; call Restore before serving.
// A sandbox that cannot be re-opened is logged and kept in the store for
// the next start.
func (m *Manager) Restore(ctx context.Context) error {
	if m.cfg.Sandbox.DataDir == "" {
		return errors.New("sandbox: no data directory configured")
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	if m.db != nil {
		m.mu.Unlock()
		return errors.New("sandbox: Restore called twice")
	}
	m.mu.Unlock()
	// Like sandbox directories, the data directory must be traversable.
	if err := os.MkdirAll(m.cfg.Sandbox.DataDir, 0o711); err != nil {
		return err
	}
	db, err := store.Open(filepath.Join(m.cfg.Sandbox.DataDir, store.FileName), 3*time.Second)
	if err != nil {
		return err
	}
	entries, err := db.List(store.Sandboxes, "")
	if err != nil {
		db.Close()
		return err
	}
	m.mu.Lock()
	m.db = db
	m.mu.Unlock()
	live := map[string]bool{}
	for _, e := range entries {
		var rec sandboxRecord
		if err := json.Unmarshal(e.Value, &rec); err != nil || rec.ID != e.Key {
			m.log.Error("unreadable sandbox record, dropped", "key", e.Key, "err", err)
			db.Delete(store.Sandboxes, e.Key)
			continue
		}
		if err := m.restore(ctx, rec); err != nil {
			m.log.Error("re-opening a sandbox", "sandbox", rec.ID, "err", err)
			live[rec.ID] = true // kept for the next start, with its sessions
			continue
		}
		if _, err := m.Get(rec.ID); err == nil {
			live[rec.ID] = true
		}
	}
	// Sessions of sandboxes that are gone.
	sessions, err := db.List(store.Sessions, "")
	if err != nil {
		return err
	}
	for _, e := range sessions {
		if id, _, _ := strings.Cut(e.Key, "/"); !live[id] {
			db.Delete(store.Sessions, e.Key)
		}
	}
	return nil
}

// restore re-opens one recorded sandbox, or removes it if it expired.
func (m *Manager) restore(ctx context.Context, rec sandboxRecord) error {
	m.mu.Lock()
	if m.hasLocked(rec.ID) {
		m.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrExists, rec.ID)
	}
	m.sandboxes[rec.ID] = nil
	m.mu.Unlock()
	sb, err := Create(ctx, m.cfg.Sandbox, Options{ID: rec.ID, UID: rec.UID, Limits: rec.Limits, Labels: rec.Labels, TTL: rec.TTL})
	if err != nil {
		m.mu.Lock()
		delete(m.sandboxes, rec.ID)
		m.mu.Unlock()
		return err
	}
	if !rec.Created.IsZero() && !rec.Created.Equal(sb.created) {
		sb.created = rec.Created // the store is the record of the TTL
		sb.writeMeta()
	}
	if exp := sb.ExpiresAt(); !exp.IsZero() && time.Now().After(exp) {
		m.log.Info("sandbox expired while the server was down", "sandbox", rec.ID, "ttl", rec.TTL)
		err := sb.Destroy(ctx)
		m.mu.Lock()
		delete(m.sandboxes, rec.ID)
		m.mu.Unlock()
		return errors.Join(err, m.forget(rec.ID))
	}
	db := m.store()
	sessions, err := db.List(store.Sessions, rec.ID+"/")
	if err != nil {
		m.log.Error("reading a sandbox's sessions", "sandbox", rec.ID, "err", err)
	}
	sb.sessions.m = map[sessionKey]*Session{}
	for _, e := range sessions {
		var sr sessionRecord
		if err := json.Unmarshal(e.Value, &sr); err != nil || sr.Sandbox != rec.ID || !validID.MatchString(sr.ID) {
			db.Delete(store.Sessions, e.Key)
			continue
		}
		sb.sessions.m[sessionKey{sr.Language, sr.ID}] = &Session{ID: sr.ID, Language: sr.Language, Created: sr.Created, sb: sb,
			lastUsed: sr.LastUsed, saved: sr.LastUsed, cwd: sr.Cwd, maxIdle: sr.MaxIdle, lost: true}
	}
	sb.db = db
	m.mu.Lock()
	m.sandboxes[rec.ID] = sb
	m.mu.Unlock()
	m.log.Info("sandbox restored", "sandbox", rec.ID, "sessions", len(sb.sessions.m))
	return nil
}
