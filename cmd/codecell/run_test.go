package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunPandasExample runs the real binary on the seed's pandas example,
// as the README's first command does.
func TestRunPandasExample(t *testing.T) {
	requireJail(t)
	bin := buildBinary(t)
	dataDir := newDataDir(t)
	tests := []struct {
		name   string
		args   []string
		stdin  string
		exit   int
		stdout []string
	}{
		{"pandas example", []string{"--put", "../../examples/sales.csv:/tmp/analysis/sales.csv", "../../examples/margin.py"}, "", 0,
			[]string{"count     6.000000", "mean     57.500000", "std      13.546217", "Name: margin, dtype: float64"}},
		{"javascript from stdin", []string{"--lang", "javascript", "-"}, "await Promise.resolve(6 * 7)", 0, []string{"42"}},
		{"error exits 1", []string{"-"}, "1/0", 1, nil},
		{"timeout exits 124", []string{"--timeout", "1s", "-"}, "while True: pass", 124, nil},
		{"json", []string{"--json", "-"}, "print('hi')", 0, []string{`"output_type": "stream"`, `"text": "hi\n"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"run", "--data-dir", dataDir}, tt.args...)...)
			cmd.Stdin = strings.NewReader(tt.stdin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != tt.exit {
				t.Fatalf("exit %d (%v), want %d\nstdout: %s\nstderr: %s", code, err, tt.exit, stdout.String(), stderr.String())
			}
			for _, want := range tt.stdout {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
				}
			}
		})
	}
	// Every run's sandbox is gone afterwards.
	if left, _ := os.ReadDir(filepath.Join(dataDir, "sandboxes")); len(left) != 0 {
		t.Errorf("sandboxes left behind: %v", left)
	}
}

// requireJail skips where the host truly cannot run sandboxes.
func requireJail(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: sandboxes get their own host uid, cgroup and loop-mounted disk")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("needs bubblewrap: apt-get install bubblewrap")
	}
}

// buildBinary builds codecell for a test.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "codecell")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// newDataDir is a data directory that sandbox uids can traverse.
func newDataDir(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	os.Chmod(tmp, 0o711)
	os.Chmod(filepath.Dir(tmp), 0o711)
	return filepath.Join(tmp, "data")
}
