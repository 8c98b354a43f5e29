// Package store is codecell's embedded database: what a server must know
// about its sandboxes and sessions to carry on after a restart or a crash.
// It is one bbolt file under the data directory with one bucket per kind
// of record (Sandboxes, Sessions); keys are strings and values JSON. A
// bbolt file is locked by the process that has it open, so Open fails with
// ErrLocked after its timeout when another server uses the same data
// directory, rather than waiting for it. Every write is a transaction
// synced to disk before it returns, so a record written survives a SIGKILL.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Buckets.
const (
	Sandboxes = "sandboxes"
	Sessions  = "sessions"
)

// FileName is the store's file in a data directory.
const FileName = "codecell.db"

// ErrLocked means another process has the store open.
var ErrLocked = errors.New("store is in use by another process")

// DB is an open store.
type DB struct {
	db *bolt.DB
}

// Open opens (or creates) the store at path, waiting up to timeout for
// another process to release it; 0 means one second.
func Open(path string, timeout time.Duration) (*DB, error) {
	if timeout <= 0 {
		timeout = time.Second
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o711); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("store %s: %w (is another codecell serving this data directory?)", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range []string{Sandboxes, Sessions} {
			if _, err := tx.CreateBucketIfNotExists([]byte(b)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	return &DB{db: db}, nil
}

// Close closes the store, releasing its lock.
func (d *DB) Close() error { return d.db.Close() }

// Put stores v as JSON under key in bucket, replacing what was there.
func (d *DB) Put(bucket, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("store: encoding %s/%s: %w", bucket, key, err)
	}
	return d.db.Update(func(tx *bolt.Tx) error {
		bk, err := bucketOf(tx, bucket)
		if err != nil {
			return err
		}
		return bk.Put([]byte(key), b)
	})
}

// Get decodes the value under key in bucket into v; found is false if
// there is none.
func (d *DB) Get(bucket, key string, v any) (found bool, err error) {
	err = d.db.View(func(tx *bolt.Tx) error {
		bk, err := bucketOf(tx, bucket)
		if err != nil {
			return err
		}
		b := bk.Get([]byte(key))
		if b == nil {
			return nil
		}
		found = true
		return json.Unmarshal(b, v)
	})
	return found, err
}

// Delete removes key from bucket; a missing key is not an error.
func (d *DB) Delete(bucket, key string) error {
	return d.db.Update(func(tx *bolt.Tx) error {
		bk, err := bucketOf(tx, bucket)
		if err != nil {
			return err
		}
		return bk.Delete([]byte(key))
	})
}

// DeletePrefix removes every key of bucket that starts with prefix.
func (d *DB) DeletePrefix(bucket, prefix string) error {
	return d.db.Update(func(tx *bolt.Tx) error {
		bk, err := bucketOf(tx, bucket)
		if err != nil {
			return err
		}
		c := bk.Cursor()
		for k, _ := c.Seek([]byte(prefix)); k != nil && strings.HasPrefix(string(k), prefix); k, _ = c.Seek([]byte(prefix)) {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
}

// Entry is one record: its key and its JSON value.
type Entry struct {
	Key   string
	Value json.RawMessage
}

// List returns the records of bucket whose keys start with prefix, by key.
func (d *DB) List(bucket, prefix string) ([]Entry, error) {
	var out []Entry
	err := d.db.View(func(tx *bolt.Tx) error {
		bk, err := bucketOf(tx, bucket)
		if err != nil {
			return err
		}
		c := bk.Cursor()
		for k, v := c.Seek([]byte(prefix)); k != nil && strings.HasPrefix(string(k), prefix); k, v = c.Next() {
			out = append(out, Entry{Key: string(k), Value: append(json.RawMessage(nil), v...)})
		}
		return nil
	})
	return out, err
}

func bucketOf(tx *bolt.Tx, name string) (*bolt.Bucket, error) {
	if b := tx.Bucket([]byte(name)); b != nil {
		return b, nil
	}
	return nil, fmt.Errorf("store: no bucket %q", name)
}
