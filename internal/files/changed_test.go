package files

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestChanged(t *testing.T) {
	e := newEnv(t)
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{"before.csv", "sub/before.txt"} {
		write(t, e, p, "x")
		must(t, os.Chtimes(e.h(p), old, old))
	}
	since := time.Now()
	write(t, e, "chart.png", "png")
	write(t, e, "out/result.csv", "a,b\n")
	must(t, os.WriteFile(filepath.Join(e.tmp, "scratch.bin"), []byte("12345"), 0o600))
	must(t, os.MkdirAll(e.h(".cache/x"), 0o700))
	must(t, os.WriteFile(e.h(".cache/x/blob"), []byte("cache"), 0o600))
	must(t, os.Symlink("/etc/shadow", e.h("link")))

	got, truncated, err := e.fs.Changed(context.Background(), since, 0)
	must(t, err)
	paths := map[string]int64{}
	for _, f := range got {
		paths[f.Path] = f.Size
	}
	want := map[string]int64{"/home/user/chart.png": 3, "/home/user/out/result.csv": 4, "/tmp/scratch.bin": 5}
	if truncated || len(paths) != len(want) {
		t.Fatalf("changed = %v (truncated %v), want %v", paths, truncated, want)
	}
	for p, size := range want {
		if paths[p] != size {
			t.Errorf("%s: size %d, want %d (all: %v)", p, paths[p], size, paths)
		}
	}
	for i := 1; i < len(got); i++ {
		if got[i].ModTime.After(got[i-1].ModTime) {
			t.Errorf("not newest first: %v", got)
		}
	}
	if _, cut, _ := e.fs.Changed(context.Background(), since, 2); !cut {
		t.Error("a walk over its entry limit is not reported as truncated")
	}
	// The limit holds for home and /tmp together: every file listed is an
	// entry visited, so no listing is longer than the limit.
	for i := range 20 {
		must(t, os.WriteFile(filepath.Join(e.tmp, fmt.Sprintf("f%02d", i)), nil, 0o600))
	}
	for limit := 1; limit <= 20; limit++ {
		got, cut, err := e.fs.Changed(context.Background(), since, limit)
		if err != nil || !cut || len(got) > limit {
			t.Errorf("limit %d: %d files listed, truncated %v, %v", limit, len(got), cut, err)
		}
	}
}

// TestDeepPathRefused: a path deeper than maxPathDepth is refused before
// any work (creating its parents would cost time quadratic in its depth).
func TestDeepPathRefused(t *testing.T) {
	e := newEnv(t)
	deep := "/home/user/" + strings.Repeat("a/", maxPathDepth) + "f"
	_, err := e.fs.Write(context.Background(), deep, strings.NewReader("x"), WriteOptions{MkdirAll: true})
	wantErr(t, err, ErrInvalidPath)
	// Depth is counted in the clean path's components, below home or /tmp:
	// the deepest allowed, and a shallow path spelled with many slashes.
	for _, ok := range []string{"/home/user/" + strings.Repeat("a/", maxPathDepth-1) + "f", "/tmp/" + strings.Repeat(".//", 300) + "g"} {
		_, err = e.fs.Write(context.Background(), ok, strings.NewReader("x"), WriteOptions{MkdirAll: true})
		must(t, err)
	}
}
