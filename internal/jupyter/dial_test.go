package jupyter

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDialUnixNoFollow: a kernel's code can put a symlink (to any socket of
// the host) where its socket should be; dialing must refuse it.
func TestDialUnixNoFollow(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "host.sock")
	ln, err := net.Listen("unix", real)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	link := filepath.Join(dir, "k-1")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	var d net.Dialer
	if c, err := dialUnixNoFollow(context.Background(), &d, real); err != nil {
		t.Fatalf("a real socket: %v", err)
	} else {
		c.Close()
	}
	if c, err := dialUnixNoFollow(context.Background(), &d, link); err == nil || !strings.Contains(err.Error(), "not a socket") {
		if c != nil {
			c.Close()
		}
		t.Fatalf("a symlink to a socket was dialed (err %v)", err)
	}
	plain := filepath.Join(dir, "k-2")
	os.WriteFile(plain, nil, 0o600)
	if _, err := dialUnixNoFollow(context.Background(), &d, plain); err == nil {
		t.Fatal("a regular file was dialed")
	}
}
