package jupyter

import (
	"fmt"
	"net"
)

// ZMTP 3 framing, as far as limitConn needs it.
const (
	zmtpGreeting = 64 // bytes of greeting before the first frame
	zmtpMore     = 0x1
	zmtpLong     = 0x2 // the size is 8 bytes, not 1
	zmtpCommand  = 0x4
)

// limitConn is a net.Conn that fails reads once the peer announces a ZMTP
// frame, or a multi-frame message, larger than max (MaxMessageSize in use). It watches
// the frame headers go by and changes no bytes; zmq4 still does the parsing.
// Checking the announced sizes, before zmq4 allocates a buffer for them, is
// what keeps a forged length from exhausting memory.
type limitConn struct {
	net.Conn
	max      uint64
	greeting int    // greeting bytes still to come
	sizeLeft int    // bytes of the current frame's size still to come
	size     uint64 // the current frame's size, as read so far
	flags    byte   // the current frame's flags
	body     uint64 // bytes of the current frame's body still to come
	msg      uint64 // bytes of the current message so far
	frames   int    // frames of the current message so far
	err      error  // sticky: the stream is not trusted once it failed
}

func (l *limitConn) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.Conn.Read(p)
	if l.err = l.scan(p[:n]); l.err != nil {
		return 0, l.err
	}
	return n, err
}

// scan follows the frame boundaries through b.
func (l *limitConn) scan(b []byte) error {
	for len(b) > 0 {
		switch {
		case l.greeting > 0:
			k := min(l.greeting, len(b))
			l.greeting -= k
			b = b[k:]
		case l.sizeLeft > 0:
			l.size = l.size<<8 | uint64(b[0])
			l.sizeLeft--
			b = b[1:]
			if l.sizeLeft == 0 {
				if err := l.frame(); err != nil {
					return err
				}
			}
		case l.body > 0:
			k := uint64(len(b))
			if l.body < k {
				k = l.body
			}
			l.body -= k
			b = b[k:]
		default: // a frame starts with its flags
			l.flags = b[0]
			l.size = 0
			l.sizeLeft = 1
			if l.flags&zmtpLong != 0 {
				l.sizeLeft = 8
			}
			b = b[1:]
		}
	}
	return nil
}

// maxFrames bounds the frames of one message: a Jupyter message has a
// handful plus its buffers, and each frame costs the reader memory even
// when it is empty.
const maxFrames = 1024

// frame checks the size of the frame whose header was just read. Command
// frames count like message frames, and may not claim more to follow
// (ZMTP forbids it; a reader would otherwise keep collecting them).
func (l *limitConn) frame() error {
	if l.flags&zmtpCommand != 0 && l.flags&zmtpMore != 0 {
		return fmt.Errorf("jupyter: peer sent a command frame marked as continued")
	}
	l.msg += l.size
	l.frames++
	total, frames := l.msg, l.frames
	if l.flags&zmtpMore == 0 {
		l.msg, l.frames = 0, 0
	}
	switch {
	case l.size > l.max || total > l.max:
		return fmt.Errorf("jupyter: peer sent a message of more than %d bytes", l.max)
	case frames > maxFrames:
		return fmt.Errorf("jupyter: peer sent a message of more than %d frames", maxFrames)
	}
	l.body = l.size
	return nil
}

// newLimitConn returns conn limited to messages of MaxMessageSize bytes,
// before the greeting.
func newLimitConn(conn net.Conn) *limitConn {
	return &limitConn{Conn: conn, max: MaxMessageSize, greeting: zmtpGreeting}
}
