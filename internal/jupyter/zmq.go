package jupyter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
	"golang.org/x/sys/unix"
)

// dialRetry is how long to wait before connecting again to a kernel that
// is not listening yet.
const dialRetry = 50 * time.Millisecond

// zmqTransport talks to a kernel over ZeroMQ: one ZMTP connection per
// channel, each handshaken by zmq4.Open over a connection dialed here.
//
// zmq4's Socket types are not used, for three reasons. Their Dial retries
// with sleeps that ignore any context; REQ's Recv ignores deadlines, so a
// lost heartbeat would wedge it; and they read frames of whatever length the
// peer announces in goroutines of their own, where a forged length from code
// in the kernel panics the whole server. Owning the net.Conn lets limitConn
// bound frames before zmq4 allocates them.
type zmqTransport struct {
	key   []byte
	conns map[Channel]*zmqConn
	wg    sync.WaitGroup
}

// zmqConn is the connection of one channel.
type zmqConn struct {
	ch  Channel
	raw net.Conn
	z   *zmq4.Conn
	mu  sync.Mutex // held while writing: a message's frames must not interleave
}

// dialZMQ connects to every channel of the kernel described by info,
// retrying while the kernel is not listening yet, until ctx is done. The
// shell, control and stdin connections are DEALERs with the session as their
// identity: a kernel sends input_request on stdin to the identity that sent
// the execute_request on shell, so those two must match.
func dialZMQ(ctx context.Context, info ConnectionInfo, session string) (*zmqTransport, error) {
	t := &zmqTransport{key: []byte(info.Key), conns: make(map[Channel]*zmqConn)}
	for _, ch := range allChannels() {
		typ := zmq4.Dealer
		switch ch {
		case IOPub:
			typ = zmq4.Sub
		case Heartbeat:
			typ = zmq4.Req
		}
		zc, err := dialChannel(ctx, info, ch, typ, zmq4.SocketIdentity(session))
		if err != nil {
			t.close()
			return nil, err
		}
		t.conns[ch] = zc
	}
	return t, nil
}

// dialChannel connects to ch and performs the ZMTP handshake as a socket of
// type typ.
func dialChannel(ctx context.Context, info ConnectionInfo, ch Channel, typ zmq4.SocketType, id zmq4.SocketIdentity) (*zmqConn, error) {
	network, addr := info.netAddr(ch)
	var d net.Dialer
	var raw net.Conn
	for {
		var err error
		if network == "unix" {
			raw, err = dialUnixNoFollow(ctx, &d, addr)
		} else {
			raw, err = d.DialContext(ctx, network, addr)
		}
		if err == nil {
			break
		}
		// A kernel that is still starting has not created its socket or
		// bound its port yet (or another process briefly held the port);
		// anything else will not fix itself.
		if !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ECONNRESET) {
			return nil, fmt.Errorf("connecting %s: %w", ch, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connecting %s to %s: %w (last error: %v)", ch, addr, ctx.Err(), err)
		case <-time.After(dialRetry):
		}
	}
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	z, err := zmq4.Open(newLimitConn(raw), null.Security(), typ, id, false, nil)
	if !stop() {
		err = ctx.Err()
	}
	if err == nil && typ == zmq4.Sub {
		err = z.SendMsg(zmq4.NewMsg([]byte{1})) // subscribe to every topic
	}
	if err != nil {
		raw.Close()
		return nil, fmt.Errorf("handshake on %s: %w", ch, err)
	}
	return &zmqConn{ch: ch, raw: raw, z: z}, nil
}

// start reads every channel on a goroutine of its own until it fails or the
// transport is closed.
func (t *zmqTransport) start(c *Client) {
	for _, zc := range t.conns {
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			c.channelLost(zc.ch, t.read(c, zc))
		}()
	}
}

// read delivers zc's messages to c until reading fails.
func (t *zmqTransport) read(c *Client, zc *zmqConn) error {
	for {
		msg, err := zc.z.RecvMsg()
		if err != nil {
			return err
		}
		if msg.Type == zmq4.CmdMsg || len(msg.Frames) == 0 {
			continue
		}
		if zc.ch == Heartbeat {
			// A pong echoes the ping: an empty delimiter (REQ framing),
			// then the id it was sent with.
			id := msg.Frames[len(msg.Frames)-1]
			c.deliver(&Message{Channel: Heartbeat, ParentHeader: Header{MsgID: string(id)}})
			continue
		}
		m, err := decodeMessage(msg.Frames, t.key)
		if err != nil {
			c.dropped.Add(1)
			continue
		}
		m.Channel = zc.ch
		c.deliver(m)
	}
}

// send writes m to its channel. A heartbeat ping carries only
// m.Header.MsgID, which the kernel echoes back.
func (t *zmqTransport) send(ctx context.Context, m *Message) error {
	zc := t.conns[m.Channel]
	if zc == nil {
		return fmt.Errorf("no %q channel", m.Channel)
	}
	if m.Channel == Heartbeat {
		return zc.write(ctx, [][]byte{{}, []byte(m.Header.MsgID)})
	}
	frames, err := m.encode(t.key)
	if err != nil {
		return err
	}
	return zc.write(ctx, frames)
}

// write sends one message, giving up when ctx is done. A write cut short
// leaves the stream in the middle of a frame, so the connection is closed.
func (zc *zmqConn) write(ctx context.Context, frames [][]byte) error {
	zc.mu.Lock()
	defer zc.mu.Unlock()
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		zc.raw.SetWriteDeadline(time.Now())
		close(fired)
	})
	err := zc.z.SendMsg(zmq4.NewMsgFrom(frames...))
	if !stop() {
		<-fired
		zc.raw.SetWriteDeadline(time.Time{})
		if err != nil {
			err = ctx.Err()
		}
	}
	if err != nil {
		zc.raw.Close()
		return fmt.Errorf("writing to %s: %w", zc.ch, err)
	}
	return nil
}

// close closes every connection and waits for the readers to stop.
func (t *zmqTransport) close() error {
	var errs []error
	for _, zc := range t.conns {
		// A connection whose write failed is closed already.
		if err := zc.raw.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	t.wg.Wait()
	return errors.Join(errs...)
}

// dialUnixNoFollow connects to the unix socket at path without following a
// symlink there. The sockets live in a directory the kernel's own code can
// write, and whoever dials (codecell runs as root) must not be led to
// another socket of the host.
func dialUnixNoFollow(ctx context.Context, d *net.Dialer, path string) (net.Conn, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("%s is not a socket (a symlink or a file put in its place)", path)
	}
	// Connecting through the descriptor reaches exactly the inode opened.
	return d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
}
