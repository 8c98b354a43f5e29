package store_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/codecell/codecell/internal/store"
)

type rec struct {
	N    int       `json:"n"`
	When time.Time `json:"when"`
}

func TestStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", store.FileName)
	db, err := store.Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	type step struct {
		name   string
		do     func() error
		bucket string
		prefix string
		want   []string // keys listed after the step
	}
	steps := []step{
		{"empty", func() error { return nil }, store.Sandboxes, "", nil},
		{"put", func() error { return db.Put(store.Sandboxes, "a", rec{1, when}) }, store.Sandboxes, "", []string{"a"}},
		{"put more", func() error {
			return errors.Join(db.Put(store.Sandboxes, "b", rec{2, when}), db.Put(store.Sessions, "a/python/s1", rec{3, when}),
				db.Put(store.Sessions, "a/python/s2", rec{4, when}), db.Put(store.Sessions, "ab/python/s1", rec{5, when}))
		}, store.Sandboxes, "", []string{"a", "b"}},
		{"buckets are apart", func() error { return nil }, store.Sessions, "", []string{"a/python/s1", "a/python/s2", "ab/python/s1"}},
		{"prefix", func() error { return nil }, store.Sessions, "a/", []string{"a/python/s1", "a/python/s2"}},
		{"replace", func() error { return db.Put(store.Sandboxes, "a", rec{10, when}) }, store.Sandboxes, "", []string{"a", "b"}},
		{"delete", func() error { return db.Delete(store.Sandboxes, "b") }, store.Sandboxes, "", []string{"a"}},
		{"delete missing", func() error { return db.Delete(store.Sandboxes, "zz") }, store.Sandboxes, "", []string{"a"}},
		{"delete prefix", func() error { return db.DeletePrefix(store.Sessions, "a/") }, store.Sessions, "", []string{"ab/python/s1"}},
		{"unknown bucket", func() error {
			if db.Put("nope", "k", 1) == nil {
				return errors.New("put into an unknown bucket worked")
			}
			return nil
		}, store.Sandboxes, "", []string{"a"}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got, err := db.List(s.bucket, s.prefix)
		if err != nil {
			t.Fatalf("%s: list: %v", s.name, err)
		}
		var keys []string
		for _, e := range got {
			keys = append(keys, e.Key)
		}
		if len(keys) != len(s.want) {
			t.Fatalf("%s: keys %v, want %v", s.name, keys, s.want)
		}
		for i := range keys {
			if keys[i] != s.want[i] {
				t.Fatalf("%s: keys %v, want %v", s.name, keys, s.want)
			}
		}
	}

	// A second opener of the same file fails after its timeout, not hangs.
	start := time.Now()
	if _, err := store.Open(path, 200*time.Millisecond); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("second open took %v", d)
	}

	// Records survive closing and reopening.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = store.Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var r rec
	if found, err := db.Get(store.Sandboxes, "a", &r); err != nil || !found || r.N != 10 || !r.When.Equal(when) {
		t.Fatalf("after reopen: %+v found=%v err=%v", r, found, err)
	}
	if found, err := db.Get(store.Sandboxes, "b", &r); err != nil || found {
		t.Fatalf("deleted record: found=%v err=%v", found, err)
	}
}
