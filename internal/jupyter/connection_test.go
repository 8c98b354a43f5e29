package jupyter

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNewIPC(t *testing.T) {
	tests := []struct {
		name    string
		prefix  string
		wantErr bool
	}{
		{"short", "/tmp/k/kernel", false},
		{"longest", "/" + strings.Repeat("a", maxSocketPath-3), false}, // + "-5"
		{"too long", "/" + strings.Repeat("a", maxSocketPath-2), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewIPC(tt.prefix)
			if (err != nil) != tt.wantErr {
				t.Fatalf("NewIPC: %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if c.Transport != "ipc" || c.SignatureScheme != "hmac-sha256" || len(c.Key) != 64 {
				t.Errorf("NewIPC = %+v", c)
			}
			if got, want := c.Endpoint(Control), "ipc://"+tt.prefix+"-4"; got != want {
				t.Errorf("Endpoint(Control) = %q, want %q", got, want)
			}
		})
	}
	a, _ := NewIPC("/tmp/a")
	b, _ := NewIPC("/tmp/a")
	if a.Key == b.Key {
		t.Error("two connections have the same key")
	}
}

func TestNewTCP(t *testing.T) {
	c, err := NewTCP("")
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[int]bool)
	for _, ch := range allChannels() {
		p := c.port(ch)
		if p <= 0 || seen[p] {
			t.Errorf("port %d of %s is zero or repeated", p, ch)
		}
		seen[p] = true
	}
	if got := c.Endpoint(Shell); !strings.HasPrefix(got, "tcp://127.0.0.1:") {
		t.Errorf("Endpoint(Shell) = %q", got)
	}
	v6 := ConnectionInfo{Transport: "tcp", IP: "::1", HBPort: 9}
	if got := v6.Endpoint(Heartbeat); got != "tcp://[::1]:9" {
		t.Errorf("Endpoint of ::1 = %q", got)
	}
}

func TestConnectionCheck(t *testing.T) {
	good, _ := NewIPC("/tmp/k")
	tests := []struct {
		name   string
		change func(*ConnectionInfo)
		ok     bool
	}{
		{"good", func(*ConnectionInfo) {}, true},
		{"unsigned", func(c *ConnectionInfo) { c.Key, c.SignatureScheme = "", "" }, true},
		{"unknown transport", func(c *ConnectionInfo) { c.Transport = "udp" }, false},
		{"no ip", func(c *ConnectionInfo) { c.IP = "" }, false},
		{"no port", func(c *ConnectionInfo) { c.StdinPort = 0 }, false},
		{"port too big", func(c *ConnectionInfo) { c.HBPort = 70000 }, false},
		{"other scheme", func(c *ConnectionInfo) { c.SignatureScheme = "hmac-md5" }, false},
		{"path too long", func(c *ConnectionInfo) { c.IOPubPort = 1 << 30; c.IP = "/" + strings.Repeat("x", 100) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.change(&c)
			if err := c.check(); (err == nil) != tt.ok {
				t.Errorf("check = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func TestWriteFile(t *testing.T) {
	c, _ := NewIPC("/tmp/k")
	c.KernelName = "python3"
	path := filepath.Join(t.TempDir(), "kernel-1.json")
	if err := c.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"transport", "ip", "shell_port", "iopub_port", "stdin_port", "control_port", "hb_port", "key", "signature_scheme", "kernel_name"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("connection file lacks %q: %s", k, data)
		}
	}
	var back ConnectionInfo
	json.Unmarshal(data, &back)
	if back != c {
		t.Errorf("read back %+v, want %+v", back, c)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("%d files left in the directory, want 1", len(entries))
	}
}
