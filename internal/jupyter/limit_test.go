package jupyter

import (
	"bytes"
	"encoding/binary"
	"net"
	"strings"
	"testing"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

// zmtpFrame returns one ZMTP frame header announcing size bytes.
func zmtpFrame(flags byte, size uint64) []byte {
	if size > 255 || flags&zmtpLong != 0 {
		return binary.BigEndian.AppendUint64([]byte{flags | zmtpLong}, size)
	}
	return []byte{flags, byte(size)}
}

func TestLimitConnScan(t *testing.T) {
	const max = 1000
	greeting := make([]byte, zmtpGreeting)
	body := func(n int) []byte { return make([]byte, n) }
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := []struct {
		name   string
		stream []byte
		ok     bool
	}{
		{"small frames", join(greeting, zmtpFrame(zmtpCommand, 3), body(3), zmtpFrame(zmtpMore, 0), zmtpFrame(0, 300), body(300)), true},
		{"largest frame", join(greeting, zmtpFrame(0, max), body(max)), true},
		{"frame too large", join(greeting, zmtpFrame(0, max+1)), false},
		{"forged length", join(greeting, zmtpFrame(zmtpLong, 1<<62)), false},
		{"length that overflows", join(greeting, zmtpFrame(zmtpMore, max), body(max), zmtpFrame(0, ^uint64(0))), false},
		{"command too large", join(greeting, zmtpFrame(zmtpCommand, max+1)), false},
		{"message too large", join(greeting, zmtpFrame(zmtpMore, max/2), body(max/2), zmtpFrame(0, max/2+1)), false},
		{"frames of separate messages", join(greeting, zmtpFrame(0, max/2), body(max/2), zmtpFrame(0, max/2+1), body(max/2+1)), true},
		{"continued command frames", join(greeting, zmtpFrame(zmtpCommand|zmtpMore, 10), body(10)), false},
		{"commands add up in a message", join(greeting, zmtpFrame(zmtpMore, max/2), body(max/2), zmtpFrame(zmtpCommand, max/2+1)), false},
		{"endless empty frames", join(greeting, bytes.Repeat(zmtpFrame(zmtpMore, 0), maxFrames+1)), false},
		{"many frames over messages", join(greeting, bytes.Repeat(zmtpFrame(0, 0), maxFrames+1)), true},
		// The greeting's bytes are not frames.
		{"greeting not parsed", join(bytes.Repeat([]byte{0xff}, zmtpGreeting), zmtpFrame(0, 1), body(1)), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Feed byte by byte, then all at once.
			for _, step := range []int{1, len(tt.stream)} {
				l := &limitConn{max: max, greeting: zmtpGreeting}
				var err error
				for i := 0; i < len(tt.stream) && err == nil; i += step {
					err = l.scan(tt.stream[i:min(i+step, len(tt.stream))])
				}
				if (err == nil) != tt.ok {
					t.Errorf("step %d: scan = %v, want ok %v", step, err, tt.ok)
				}
			}
		})
	}
}

// TestLimitConnZMTP handshakes zmq4 through a limitConn and sends it a
// frame announcing 2^62 bytes, as code in a kernel could by writing to its
// socket: reading fails instead of allocating.
func TestLimitConnZMTP(t *testing.T) {
	// Not net.Pipe: both ends write their greeting before reading.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	errc := make(chan error, 1)
	go func() {
		peer, err := zmq4.Open(server, null.Security(), zmq4.Router, nil, true, nil)
		if err == nil {
			err = peer.SendMsg(zmq4.NewMsgFrom([]byte("ok")))
		}
		if err == nil {
			_, err = server.Write(zmtpFrame(zmtpLong, 1<<62))
		}
		errc <- err
	}()
	z, err := zmq4.Open(newLimitConn(client), null.Security(), zmq4.Dealer, zmq4.SocketIdentity("id"), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := z.RecvMsg()
	if err != nil || string(msg.Frames[0]) != "ok" {
		t.Fatalf("first message %q, %v", msg.Frames, err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if _, err := z.RecvMsg(); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("reading a forged frame = %v, want the size error", err)
	}
}
