// Package audit writes the audit log: one JSON line per execution, saying
// who ran what where and what it cost, appended to a file rotated by size.
// The API key itself is never written, only an id derived from it; the
// code is written as its sha256 unless the operator asks for the text.
package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"
)

// Config configures the log.
type Config struct {
	// Path is the file; rotated files are kept beside it.
	Path string
	// MaxSizeMB rotates the file when it reaches this size; 0 means 100.
	MaxSizeMB int
	// MaxBackups is how many rotated files are kept; 0 means 10.
	MaxBackups int
	// FullCode writes the code's text as well as its hash.
	FullCode bool
}

// Entry is one execution.
type Entry struct {
	Time            time.Time `json:"time"`
	KeyID           string    `json:"key_id,omitempty"` // see KeyID
	Sandbox         string    `json:"sandbox"`
	Session         string    `json:"session,omitempty"` // empty for a one-shot run
	Language        string    `json:"language"`
	CodeSHA256      string    `json:"code_sha256"`
	Code            string    `json:"code,omitempty"` // only with Config.FullCode
	Status          string    `json:"status"`         // ok, error, timeout, or failed (no result)
	Error           string    `json:"error,omitempty"`
	DurationMS      int64     `json:"duration_ms"`
	CPUMS           int64     `json:"cpu_ms"`
	PeakMemoryBytes int64     `json:"peak_memory_bytes"`
	BytesOut        int64     `json:"bytes_out"`
	FilesWritten    []string  `json:"files_written,omitempty"`
}

// Log is an open audit log. It is safe for concurrent use.
type Log struct {
	cfg Config
	mu  sync.Mutex
	w   io.WriteCloser
}

// Open opens (creating) the log at cfg.Path for appending.
func Open(cfg Config) (*Log, error) {
	if cfg.Path == "" {
		return nil, fmt.Errorf("audit: no path")
	}
	w := &lumberjack.Logger{Filename: cfg.Path, MaxSize: max(cfg.MaxSizeMB, 0), MaxBackups: max(cfg.MaxBackups, 0)}
	if w.MaxSize == 0 {
		w.MaxSize = 100
	}
	if w.MaxBackups == 0 {
		w.MaxBackups = 10
	}
	// Fail now, not at the first execution, if the file cannot be written.
	if _, err := w.Write(nil); err != nil {
		return nil, fmt.Errorf("audit: opening %s: %w", cfg.Path, err)
	}
	return &Log{cfg: cfg, w: w}, nil
}

// Record appends e, filling in the code's hash (and text if configured)
// from code.
func (l *Log) Record(e Entry, code string) error {
	sum := sha256.Sum256([]byte(code))
	e.CodeSHA256 = hex.EncodeToString(sum[:])
	if l.cfg.FullCode {
		e.Code = code
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("audit: writing %s: %w", l.cfg.Path, err)
	}
	return nil
}

// Close closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Close()
}

// KeyID names an API key in logs without revealing it: the first 12 hex
// digits of its sha256. Empty for no key.
func KeyID(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("codecell api key\x00" + key))
	return hex.EncodeToString(sum[:6])
}
