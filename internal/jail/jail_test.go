package jail

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/codecell/codecell/internal/cgroup"
)

func TestMain(m *testing.M) {
	RunHelperIfRequested()
	os.Exit(m.Run())
}

// TestFailClosed: when a layer is missing, Start refuses to run anything and
// says which layer.
func TestFailClosed(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	base := Spec{
		Argv:    []string{"/bin/sh", "-c", "touch " + marker},
		Home:    dir,
		Tmp:     dir,
		HostUID: 1_600_000_001,
		HostGID: 1_600_000_001,
		Cgroup:  &cgroup.Group{},
	}
	tests := []struct {
		name string
		cfg  Config
		edit func(*Spec)
		want error
	}{
		{"no bubblewrap", Config{Bwrap: "/nonexistent/bwrap"}, nil, ErrNoBwrap},
		{"no cgroup", Config{}, func(s *Spec) { s.Cgroup = nil }, ErrNoCgroup},
		{"host root", Config{}, func(s *Spec) { s.HostUID = 0 }, ErrRootOwned},
		{"root group", Config{}, func(s *Spec) { s.HostGID = 0 }, ErrRootOwned},
		{"server's own uid", Config{}, func(s *Spec) { s.HostUID = os.Getuid() }, ErrRootOwned},
		{"no argv", Config{}, func(s *Spec) { s.Argv = nil }, ErrBadSpec},
		{"no home", Config{}, func(s *Spec) { s.Home = "" }, ErrBadSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := base
			if tt.edit != nil {
				tt.edit(&spec)
			}
			p, err := Start(context.Background(), tt.cfg, spec)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Start = %v, %v; want %v", p, err, tt.want)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the program ran although a layer was missing")
			}
		})
	}
}

// TestUnsafeWarnsEveryTime: the explicit escape hatch logs on every start.
func TestUnsafeWarnsEveryTime(t *testing.T) {
	var log bytes.Buffer
	cfg := Config{Unsafe: true, Logger: slog.New(slog.NewTextHandler(&log, nil))}
	dir := t.TempDir()
	for range 2 {
		p, err := Start(context.Background(), cfg, Spec{Argv: []string{"/bin/true"}, Home: dir, Tmp: dir})
		if err != nil {
			t.Fatal(err)
		}
		p.Wait()
	}
	if n := strings.Count(log.String(), "WITHOUT a sandbox"); n != 2 {
		t.Fatalf("%d warnings for 2 unsafe runs; log:\n%s", n, log.String())
	}
}

func TestEnviron(t *testing.T) {
	t.Setenv("CODECELL_API_KEY", "secret")
	env := Environ("/home/user/x", []string{"AWS_SECRET_ACCESS_KEY=leak", "LD_PRELOAD=/tmp/x.so", "TZ=UTC", "PATH=/evil", "CODECELL_USER_FOO=bar", "MPLBACKEND=svg", "garbage"})
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if strings.Contains(kv, "secret") || strings.Contains(kv, "leak") || name == "LD_PRELOAD" || kv == "PATH=/evil" {
			t.Errorf("environment has %q", kv)
		}
	}
	for _, want := range []string{"HOME=/home/user", "PWD=/home/user/x", "TZ=UTC", "CODECELL_USER_FOO=bar", "MPLBACKEND=svg", "LANG=C.UTF-8"} {
		if !slices.Contains(env, want) {
			t.Errorf("environment lacks %q: %q", want, env)
		}
	}
}

// TestCgroupJoinFailureRefuses: a helper that cannot join the cgroup never
// execs bwrap, so no code runs without its limits.
func TestCgroupJoinFailureRefuses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	host, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	g, err := host.Create("codecell-test/jail-gone-"+filepath.Base(t.TempDir()), cgroup.Limits{Pids: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	marker := filepath.Join(dir, "ran")
	var stderr bytes.Buffer
	r, w, _ := os.Pipe()
	done := make(chan struct{})
	go func() { stderr.ReadFrom(r); close(done) }()
	_, err = Start(context.Background(), Config{}, Spec{
		Argv: []string{"/bin/sh", "-c", "touch " + marker}, Home: dir, Tmp: dir,
		HostUID: 1_600_000_002, HostGID: 1_600_000_002, Cgroup: g, Stderr: w,
	})
	w.Close()
	<-done
	if err == nil {
		t.Fatal("Start succeeded without a cgroup to join")
	}
	if !strings.Contains(stderr.String(), "joining cgroup") {
		t.Errorf("stderr %q does not name the cgroup step", stderr.String())
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the program ran outside its cgroup")
	}
}
