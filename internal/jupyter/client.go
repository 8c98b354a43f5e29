package jupyter

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is returned, wrapped, by the methods of a closed Client.
var ErrClosed = errors.New("client closed")

// readyPoll is how often Dial and Connect repeat kernel_info_request while
// they wait for a kernel to be ready.
const readyPoll = 200 * time.Millisecond

// transport carries messages between a Client and a kernel: ZeroMQ to a
// local kernel, or a Jupyter Server's websocket.
type transport interface {
	// start reads messages until the transport is closed or fails,
	// calling c.deliver for each and c.channelLost once per channel when
	// reading it stops.
	start(c *Client)
	// send writes m on m.Channel.
	send(ctx context.Context, m *Message) error
	// close stops the transport and waits for its goroutines.
	close() error
}

// A Client talks to one kernel. Its methods may be called concurrently; a
// kernel handles shell requests one at a time, in order.
type Client struct {
	tr      transport
	session string

	// For a kernel of a Jupyter Server: interrupts and heartbeats go
	// through its REST API.
	server   *Server
	kernelID string

	done      chan struct{} // closed by Close
	closeOnce sync.Once
	closeErr  error

	iopubSeen chan struct{} // closed when iopub delivers its first message
	iopubOnce sync.Once

	lost map[Channel]*lostChannel // fixed at creation

	mu      sync.Mutex
	waiters map[string]*waiter // by the msg_id of the request they wait on

	dropped atomic.Uint64
}

// lostChannel records that reading a channel stopped, and why.
type lostChannel struct {
	once sync.Once
	done chan struct{}
	err  error // set before done is closed
}

// waiter receives the messages whose parent is one request.
type waiter struct {
	ch   chan *Message
	done chan struct{} // closed when nobody waits any more
}

// Dial connects to the kernel described by info and waits until it is
// ready. The kernel may still be starting: Dial retries connecting until ctx
// is done. It is ready, as jupyter_client judges it, once it has answered a
// kernel_info_request and iopub has delivered a message; a message published
// before the iopub subscription took effect is lost, so waiting for iopub
// keeps early output of the first cell from being lost.
func Dial(ctx context.Context, info ConnectionInfo) (*Client, error) {
	if err := info.check(); err != nil {
		return nil, fmt.Errorf("jupyter: dial: %w", err)
	}
	session := rand.Text()
	tr, err := dialZMQ(ctx, info, session)
	if err != nil {
		return nil, fmt.Errorf("jupyter: dial: %w", err)
	}
	c := newClient(tr, session, nil, "")
	if err := c.waitReady(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("jupyter: dial: %w", err)
	}
	return c, nil
}

// newClient returns a Client reading from tr. server and kernelID are set
// for a kernel of a Jupyter Server.
func newClient(tr transport, session string, server *Server, kernelID string) *Client {
	c := &Client{
		tr:        tr,
		session:   session,
		server:    server,
		kernelID:  kernelID,
		done:      make(chan struct{}),
		iopubSeen: make(chan struct{}),
		lost:      make(map[Channel]*lostChannel),
		waiters:   make(map[string]*waiter),
	}
	for _, ch := range allChannels() {
		c.lost[ch] = &lostChannel{done: make(chan struct{})}
	}
	tr.start(c)
	return c
}

// Close closes the connection to the kernel, which keeps running. Calls in
// progress return ErrClosed.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		close(c.done)
		if err := c.tr.close(); err != nil {
			c.closeErr = fmt.Errorf("jupyter: close: %w", err)
		}
	})
	return c.closeErr
}

// Dropped returns how many messages were received and dropped because
// they were malformed or their signature did not match.
func (c *Client) Dropped() uint64 { return c.dropped.Load() }

// deliver hands m to whoever waits on its parent request. Messages nobody
// waits on, such as output of requests that timed out or of other clients
// of the same kernel, are dropped.
func (c *Client) deliver(m *Message) {
	if m.Channel == IOPub {
		c.iopubOnce.Do(func() { close(c.iopubSeen) })
	}
	c.mu.Lock()
	w := c.waiters[m.ParentHeader.MsgID]
	c.mu.Unlock()
	if w == nil {
		return
	}
	select {
	case w.ch <- m:
	case <-w.done:
	case <-c.done:
	}
}

// channelLost records that reading ch stopped because of err.
func (c *Client) channelLost(ch Channel, err error) {
	l := c.lost[ch]
	if l == nil {
		return
	}
	l.once.Do(func() {
		l.err = fmt.Errorf("%s channel lost: %w", ch, err)
		close(l.done)
	})
}

// wait registers a new waiter for the replies to the request msgID. Call
// unwait when done.
func (c *Client) wait(msgID string) *waiter {
	w := newWaiter()
	c.register(w, msgID)
	return w
}

func newWaiter() *waiter {
	return &waiter{ch: make(chan *Message, 16), done: make(chan struct{})}
}

// register makes w the waiter of the request msgID too.
func (c *Client) register(w *waiter, msgID string) {
	c.mu.Lock()
	c.waiters[msgID] = w
	c.mu.Unlock()
}

// send sends m, or fails with ErrClosed once the client is closed.
func (c *Client) send(ctx context.Context, m *Message) error {
	select {
	case <-c.done:
		return ErrClosed
	default:
	}
	err := c.tr.send(ctx, m)
	if err != nil {
		select {
		case <-c.done:
			return ErrClosed // Close closed the connection under the write
		default:
		}
	}
	return err
}

// unwait removes the waiter of the requests msgIDs.
func (c *Client) unwait(w *waiter, msgIDs ...string) {
	c.mu.Lock()
	for _, id := range msgIDs {
		delete(c.waiters, id)
	}
	c.mu.Unlock()
	close(w.done)
}

// next returns the next message for w. It fails if ctx is done, the client
// is closed, or reading a or b stopped; in that last case messages read
// before the loss are still returned first (a kernel that shuts down sends
// its reply and then closes every socket).
func (c *Client) next(ctx context.Context, w *waiter, a, b Channel) (*Message, error) {
	select {
	case m := <-w.ch:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		return nil, ErrClosed
	case <-c.lost[a].done:
		return w.drain(c.lost[a].err)
	case <-c.lost[b].done:
		return w.drain(c.lost[b].err)
	}
}

// drain returns a message still queued for w, or err.
func (w *waiter) drain(err error) (*Message, error) {
	select {
	case m := <-w.ch:
		return m, nil
	default:
		return nil, err
	}
}

// newMessage returns a request of msgType on ch with content.
func (c *Client) newMessage(ch Channel, msgType string, content any) (*Message, error) {
	data, err := json.Marshal(content)
	if err != nil {
		return nil, err
	}
	return &Message{
		Header: Header{
			MsgID:    rand.Text(),
			Session:  c.session,
			Username: "codecell",
			Date:     time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"),
			MsgType:  msgType,
			Version:  ProtocolVersion,
		},
		Content: data,
		Channel: ch,
	}, nil
}

// replyStatus is the part every reply has.
type replyStatus struct {
	Status    string   `json:"status"`
	Ename     string   `json:"ename"`
	Evalue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// KernelError is a reply whose status is "error".
type KernelError struct {
	MsgType   string // of the reply
	Ename     string
	Evalue    string
	Traceback []string
}

func (e *KernelError) Error() string {
	return fmt.Sprintf("kernel answered %s with error %s: %s", e.MsgType, e.Ename, e.Evalue)
}

// request sends a msgType request with content on ch, waits for its reply
// and decodes the reply's content into reply. A reply with status "error"
// is returned as a *KernelError.
func (c *Client) request(ctx context.Context, ch Channel, msgType string, content, reply any) error {
	m, err := c.newMessage(ch, msgType, content)
	if err != nil {
		return err
	}
	w := c.wait(m.Header.MsgID)
	defer c.unwait(w, m.Header.MsgID)
	if err := c.send(ctx, m); err != nil {
		return err
	}
	for {
		r, err := c.next(ctx, w, ch, ch)
		if err != nil {
			return err
		}
		if r.Channel != ch || r.Header.MsgType != replyType(msgType) {
			continue // iopub status of the request
		}
		var st replyStatus
		if err := json.Unmarshal(r.Content, &st); err != nil {
			return fmt.Errorf("decoding %s: %w", r.Header.MsgType, err)
		}
		if st.Status == "error" {
			return &KernelError{MsgType: r.Header.MsgType, Ename: st.Ename, Evalue: st.Evalue, Traceback: st.Traceback}
		}
		if err := json.Unmarshal(r.Content, reply); err != nil {
			return fmt.Errorf("decoding %s: %w", r.Header.MsgType, err)
		}
		return nil
	}
}

// replyType returns the type of the reply to a request of type msgType.
func replyType(msgType string) string {
	if base, ok := strings.CutSuffix(msgType, "_request"); ok {
		return base + "_reply"
	}
	return msgType
}

// waitReady sends kernel_info_request every readyPoll until one is
// answered and iopub has delivered a message (any message: the kernel
// publishes its busy and idle status for each request).
func (c *Client) waitReady(ctx context.Context) error {
	w := newWaiter()
	var ids []string
	defer func() { c.unwait(w, ids...) }()
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	replied := false
	iopubPending := c.iopubSeen // nil once iopub delivered
	for {
		m, err := c.newMessage(Shell, "kernel_info_request", struct{}{})
		if err != nil {
			return err
		}
		c.register(w, m.Header.MsgID)
		ids = append(ids, m.Header.MsgID)
		if err := c.send(ctx, m); err != nil {
			return fmt.Errorf("sending kernel_info_request: %w", err)
		}
	wait:
		for !replied || iopubPending != nil {
			select {
			case r := <-w.ch:
				replied = replied || r.Header.MsgType == "kernel_info_reply"
			case <-iopubPending:
				iopubPending = nil
			case <-tick.C:
				break wait
			case <-ctx.Done():
				return fmt.Errorf("waiting for the kernel to be ready: %w", ctx.Err())
			case <-c.lost[Shell].done:
				return c.lost[Shell].err
			case <-c.lost[IOPub].done:
				return c.lost[IOPub].err
			}
		}
		if replied && iopubPending == nil {
			return nil
		}
	}
}
