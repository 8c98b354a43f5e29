package sandbox

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/codecell/codecell/internal/jail"
	"github.com/codecell/codecell/internal/kernel"
)

// Errors about sessions.
var (
	ErrNoSession = errors.New("session not found")
	ErrCapacity  = errors.New("capacity reached")
	ErrInvalidID = errors.New("invalid id")
	ErrNoKernel  = errors.New("no such kernel")
	// ErrBadTimeout is a cell's timeout outside the server's bounds.
	ErrBadTimeout = errors.New("invalid timeout")
	// ErrSessionLost is the first execution on a session whose kernel was
	// lost when the server restarted; the next one starts a fresh kernel.
	ErrSessionLost = errors.New("session lost")
)

// A Session is a named kernel that keeps state across executions. Its id is
// per language: the Python session "s1" and the JavaScript session "s1" are
// two sessions. Executions on one session run one at a time, in arrival
// order; a kernel that died is replaced on the next execution.
type Session struct {
	ID       string
	Language kernel.Language
	Created  time.Time

	sb    *Sandbox
	queue fifo // one execution at a time, first come first served

	mu       sync.Mutex // guards the fields below
	k        *Kernel    // nil until started, and after the kernel died
	cwd      string     // working directory of executions that name none
	maxIdle  time.Duration
	lastUsed time.Time
	cells    int
	running  bool
	closed   bool
	lost     bool      // restored after a restart, its kernel gone; cleared by the next execution
	saved    time.Time // lastUsed as last recorded in the store
}

// SessionInfo describes a session for listings.
type SessionInfo struct {
	ID         string          `json:"session_id"`
	Language   kernel.Language `json:"language"`
	Cwd        string          `json:"cwd"`
	MaxIdle    time.Duration   `json:"-"`
	Created    time.Time       `json:"created_at"`
	LastUsed   time.Time       `json:"last_used_at"`
	Executions int             `json:"execution_count"`
	Busy       bool            `json:"busy"`
	Alive      bool            `json:"alive"`
	// Lost is set for a session restored after the server restarted: its
	// kernel, and the state in it, did not survive. Its next execution
	// fails with ErrSessionLost and clears it.
	Lost bool `json:"lost,omitempty"`
}

// Info returns the session's state.
func (s *Session) Info() SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SessionInfo{ID: s.ID, Language: s.Language, Cwd: cmp.Or(s.cwd, jail.HomeDir), MaxIdle: s.maxIdle,
		Created: s.Created, LastUsed: s.lastUsed,
		Executions: s.cells, Busy: s.running, Alive: s.k != nil && s.k.Alive(), Lost: s.lost}
}

// Result is a kernel result plus what the session did about it.
type Result struct {
	*kernel.Result
	// Restarted is set when the kernel died during this execution (it was
	// killed at its timeout, ran out of memory, or crashed): the session
	// starts a fresh kernel on its next execution, and its state is lost.
	Restarted bool
	// QueueWait is how long the execution waited behind earlier ones.
	QueueWait time.Duration
}

// Execute runs a cell in the session, starting its kernel if needed.
func (s *Session) Execute(ctx context.Context, req kernel.Request) (*Result, error) {
	var err error
	if req.Timeout, err = s.sb.timeout(req.Timeout); err != nil {
		return nil, err
	}
	queued := time.Now()
	if err := s.queue.Lock(ctx); err != nil {
		return nil, err
	}
	defer s.queue.Unlock()
	wait := time.Since(queued)
	if s.takeLost() {
		return nil, fmt.Errorf("%w: the kernel of %s session %q was lost when codecell restarted, with its variables and imports; re-run the session's setup cells (this execution did not run; the next one starts a fresh kernel)",
			ErrSessionLost, s.Language, s.ID)
	}
	s.setRunning(true) // from before the kernel starts: see Interrupt
	k, err := s.kernel(ctx)
	if err != nil {
		s.setRunning(false)
		return nil, err
	}
	s.mu.Lock()
	req.Cwd = cmp.Or(req.Cwd, s.cwd)
	s.mu.Unlock()
	res, err := k.Do(ctx, req)
	s.setRunning(false)
	s.mu.Lock()
	s.cells++
	s.mu.Unlock()
	s.sb.account(res)
	s.sb.saveSession(s, false)
	if err != nil {
		s.drop(k)
		return nil, err
	}
	out := &Result{Result: res, QueueWait: wait}
	if res.Died {
		s.drop(k)
		out.Restarted = true
	}
	return out, nil
}

// Restart replaces the session's kernel with a fresh one: its state is
// cleared, the sandbox's files stay. A running execution ends with the old
// kernel (reported as KernelDied).
func (s *Session) Restart(ctx context.Context) error {
	s.mu.Lock()
	k := s.k
	s.k, s.lost = nil, false
	s.mu.Unlock()
	if k != nil {
		k.Close()
	}
	return s.Start(ctx)
}

// Complete asks the session's kernel for completions of code at cursorPos
// (code points), after the executions queued before it.
func (s *Session) Complete(ctx context.Context, code string, cursorPos int) (*kernel.Completion, error) {
	return assist(ctx, s, func(k *Kernel) (*kernel.Completion, error) { return k.Complete(ctx, code, cursorPos) })
}

// Inspect asks the session's kernel about the name at cursorPos.
func (s *Session) Inspect(ctx context.Context, code string, cursorPos, detail int) (*kernel.Inspection, error) {
	return assist(ctx, s, func(k *Kernel) (*kernel.Inspection, error) { return k.Inspect(ctx, code, cursorPos, detail) })
}

func assist[T any](ctx context.Context, s *Session, f func(*Kernel) (T, error)) (T, error) {
	var zero T
	if err := s.queue.Lock(ctx); err != nil {
		return zero, err
	}
	defer s.queue.Unlock()
	k, err := s.kernel(ctx)
	if err != nil {
		return zero, err
	}
	s.touch()
	return f(k)
}

// takeLost clears the lost mark and reports whether it was set.
func (s *Session) takeLost() bool {
	s.mu.Lock()
	lost := s.lost
	s.lost = false
	s.lastUsed = time.Now()
	s.mu.Unlock()
	if lost {
		s.sb.saveSession(s, true)
	}
	return lost
}

// touch marks the session used now.
func (s *Session) touch() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

// Start starts the session's kernel now rather than at its first execution.
func (s *Session) Start(ctx context.Context) error {
	if err := s.queue.Lock(ctx); err != nil {
		return err
	}
	defer s.queue.Unlock()
	_, err := s.kernel(ctx)
	return err
}

// kernel returns the live kernel, starting one if there is none.
// Preconditions: s.queue is held.
func (s *Session) kernel(ctx context.Context) (*Kernel, error) {
	s.mu.Lock()
	k, closed := s.k, s.closed
	s.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("%w: %s session %q was ended", ErrNoSession, s.Language, s.ID)
	}
	if k != nil && k.Alive() {
		return k, nil
	}
	if k != nil {
		s.drop(k)
	}
	k, err := s.sb.kernel(ctx, s.Language, data)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed { // ended while starting
		k.Close()
		return nil, fmt.Errorf("%w: %s session %q was ended", ErrNoSession, s.Language, s.ID)
	}
	s.k = k
	return k, nil
}

func (s *Session) setRunning(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = on
	s.lastUsed = time.Now()
}

// drop closes k if it is still the session's kernel.
func (s *Session) drop(k *Kernel) {
	s.mu.Lock()
	if s.k == k {
		s.k = nil
	}
	s.mu.Unlock()
	k.Close()
}

// Configure sets the working directory of executions that name none ("":
// unchanged) and how long the session may stay idle (0: unchanged).
func (s *Session) Configure(cwd string, maxIdle time.Duration) {
	s.mu.Lock()
	s.cwd = cmp.Or(cwd, s.cwd)
	s.maxIdle = cmp.Or(maxIdle, s.maxIdle)
	s.mu.Unlock()
	s.sb.saveSession(s, true)
}

// HostPid is the host pid of the session's interpreter, 0 if none runs.
func (s *Session) HostPid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.k == nil {
		return 0
	}
	return s.k.Pid()
}

// Interrupt interrupts the running execution, if any. An execution is
// marked running before its kernel has started and before its cell has
// reached the kernel; a signal sent then would find nothing to stop, so
// Interrupt waits for the kernel to start (bounded by the start's own
// timeout) and then a few seconds at most for the cell to get there.
func (s *Session) Interrupt() error {
	var deadline time.Time // set once the kernel is up
	for {
		s.mu.Lock()
		k, running := s.k, s.running
		s.mu.Unlock()
		switch {
		case !running && k == nil:
			return nil
		case !running || k != nil && k.InCell():
			return k.Interrupt()
		case k == nil: // starting
		case deadline.IsZero():
			deadline = time.Now().Add(5 * time.Second)
		case time.Now().After(deadline):
			return k.Interrupt()
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// close ends the session at once, killing a running execution.
func (s *Session) close() {
	s.mu.Lock()
	k := s.k
	s.k, s.closed = nil, true
	s.mu.Unlock()
	if k != nil {
		k.Close()
	}
}

// idle reports whether the session has been unused for longer than its own
// limit, or than def if it has none.
func (s *Session) idle(def time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.running && time.Since(s.lastUsed) > cmp.Or(s.maxIdle, def)
}

type sessionKey struct {
	lang kernel.Language
	id   string
}

// sessions is a sandbox's set of sessions.
type sessions struct {
	mu sync.Mutex
	m  map[sessionKey]*Session
}

// OpenSession returns the session id of lang, creating it if create is set
// (an empty id makes up a new one). It does not start the kernel.
func (s *Sandbox) OpenSession(lang kernel.Language, id string, create bool) (sess *Session, created bool, err error) {
	if id == "" {
		if !create {
			return nil, false, fmt.Errorf("%w: no session id", ErrNoSession)
		}
		id = newSessionID()
	}
	if !validID.MatchString(id) {
		return nil, false, fmt.Errorf("%w %q for a session: use 1-64 letters, digits, '-' or '_'", ErrInvalidID, id)
	}
	s.sessions.mu.Lock()
	key := sessionKey{lang, id}
	if sess := s.sessions.m[key]; sess != nil {
		s.sessions.mu.Unlock()
		return sess, false, nil
	}
	if !create {
		s.sessions.mu.Unlock()
		return nil, false, fmt.Errorf("%w: no %s session %q", ErrNoSession, lang, id)
	}
	if n := len(s.sessions.m); n >= s.cfg.MaxSessions {
		s.sessions.mu.Unlock()
		return nil, false, fmt.Errorf("%w: the sandbox has %d sessions, its limit; end one first", ErrCapacity, n)
	}
	if s.sessions.m == nil {
		s.sessions.m = map[sessionKey]*Session{}
	}
	now := time.Now()
	sess = &Session{ID: id, Language: lang, Created: now, lastUsed: now, sb: s}
	s.sessions.m[key] = sess
	s.sessions.mu.Unlock()
	// Recorded outside the lock: every lookup in the sandbox would wait for
	// the store's fsync. An EndSession meanwhile is safe (see saveSession).
	s.saveSession(sess, true)
	return sess, true, nil
}

// EndSession ends a session and frees its processes at once; it is
// forgotten, also after a restart.
func (s *Sandbox) EndSession(lang kernel.Language, id string) error {
	if err := s.endSession(lang, id); err != nil {
		return err
	}
	s.forgetSession(lang, id)
	return nil
}

// endSession ends a session, keeping its record in the store.
func (s *Sandbox) endSession(lang kernel.Language, id string) error {
	s.sessions.mu.Lock()
	sess := s.sessions.m[sessionKey{lang, id}]
	delete(s.sessions.m, sessionKey{lang, id})
	s.sessions.mu.Unlock()
	if sess == nil {
		return fmt.Errorf("%w: no %s session %q", ErrNoSession, lang, id)
	}
	sess.close()
	return nil
}

// Sessions lists the sessions of lang ("" for all), oldest first.
func (s *Sandbox) Sessions(lang kernel.Language) []*Session {
	s.sessions.mu.Lock()
	var out []*Session
	for k, sess := range s.sessions.m {
		if lang == "" || k.lang == lang {
			out = append(out, sess)
		}
	}
	s.sessions.mu.Unlock()
	slices.SortFunc(out, func(a, b *Session) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// ReapIdle ends the sessions idle for longer than their own limit or, for
// those without one, than maxIdle, and returns how many.
func (s *Sandbox) ReapIdle(maxIdle time.Duration) int {
	n := 0
	for _, sess := range s.Sessions("") {
		if sess.idle(maxIdle) && s.EndSession(sess.Language, sess.ID) == nil {
			n++
		}
	}
	return n
}

// closeSessions ends every session. Their records stay: a sandbox closed
// at shutdown lists them as lost when it is restored.
func (s *Sandbox) closeSessions() {
	for _, sess := range s.Sessions("") {
		s.endSession(sess.Language, sess.ID)
	}
}

func newSessionID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// fifo is a lock granted in arrival order, so executions queued on one
// session never overtake each other.
type fifo struct {
	mu      sync.Mutex
	busy    bool
	waiters []chan struct{}
}

// Lock waits for the lock or for ctx to end.
func (f *fifo) Lock(ctx context.Context) error {
	f.mu.Lock()
	if !f.busy {
		f.busy = true
		f.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	f.waiters = append(f.waiters, ch)
	f.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		f.mu.Lock()
		if i := slices.Index(f.waiters, ch); i >= 0 {
			f.waiters = slices.Delete(f.waiters, i, i+1)
			f.mu.Unlock()
			return ctx.Err()
		}
		f.mu.Unlock()
		// Granted while giving up: pass the lock on.
		f.Unlock()
		return ctx.Err()
	}
}

// Unlock hands the lock to the longest waiter.
func (f *fifo) Unlock() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.waiters) == 0 {
		f.busy = false
		return
	}
	close(f.waiters[0])
	f.waiters = f.waiters[1:]
}
