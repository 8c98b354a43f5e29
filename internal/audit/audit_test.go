package audit

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRecord(t *testing.T) {
	for _, full := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "audit.log")
		l, err := Open(Config{Path: path, FullCode: full})
		if err != nil {
			t.Fatal(err)
		}
		const code = "print('secret code')"
		if err := l.Record(Entry{KeyID: KeyID("the-key"), Sandbox: "default", Language: "python", Status: "ok", FilesWritten: []string{"/tmp/x"}}, code); err != nil {
			t.Fatal(err)
		}
		l.Close()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var e Entry
		if err := json.Unmarshal(b, &e); err != nil || strings.Count(string(b), "\n") != 1 {
			t.Fatalf("not one JSON line: %q (%v)", b, err)
		}
		sum := sha256.Sum256([]byte(code))
		if e.CodeSHA256 != hex.EncodeToString(sum[:]) || e.Time.IsZero() || e.FilesWritten[0] != "/tmp/x" {
			t.Errorf("entry %+v", e)
		}
		if got := strings.Contains(string(b), "secret code"); got != full {
			t.Errorf("FullCode %v: code text in the log: %v", full, got)
		}
		if strings.Contains(string(b), "the-key") || e.KeyID == "" {
			t.Errorf("key id %q; the key itself must never be written: %s", e.KeyID, b)
		}
	}
}

// TestRotation: past its size the log is rotated, and every line of every
// file is still a whole JSON entry.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Config{Path: filepath.Join(dir, "audit.log"), MaxSizeMB: 1, FullCode: true})
	if err != nil {
		t.Fatal(err)
	}
	code := strings.Repeat("x", 10<<10)
	for range 250 { // ~2.5 MB
		if err := l.Record(Entry{Sandbox: "s", Language: "python", Status: "ok"}, code); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "audit*.log"))
	if len(files) < 2 {
		t.Fatalf("files %v: no rotation", files)
	}
	lines := 0
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e Entry
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Errorf("%s: a line is not JSON: %v", f, err)
			}
			lines++
		}
		fh.Close()
		if fi, _ := os.Stat(f); fi.Size() > 1<<20+20<<10 {
			t.Errorf("%s is %d bytes, over the 1 MB limit", f, fi.Size())
		}
	}
	if lines != 250 {
		t.Errorf("%d lines across the files, want 250", lines)
	}
}

func TestOpenFailsEarly(t *testing.T) {
	if _, err := Open(Config{Path: "/proc/no/such/dir/audit.log"}); err == nil {
		t.Error("an unwritable path was accepted")
	}
}

func TestKeyID(t *testing.T) {
	if KeyID("") != "" || KeyID("a") == KeyID("b") || len(KeyID("a")) != 12 {
		t.Errorf("KeyID: %q %q %q", KeyID(""), KeyID("a"), KeyID("b"))
	}
}
