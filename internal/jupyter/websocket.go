package jupyter

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/coder/websocket"
)

// wsTransport talks to a kernel through a Jupyter Server's kernel
// websocket, in the server's default ("legacy") format: each message is a
// JSON text frame naming its channel, or a binary frame when it has
// buffers.
type wsTransport struct {
	conn   *websocket.Conn
	ctx    context.Context // the reader's; cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newWSTransport(conn *websocket.Conn) *wsTransport {
	ctx, cancel := context.WithCancel(context.Background())
	return &wsTransport{conn: conn, ctx: ctx, cancel: cancel}
}

// wsMessage is a message as the websocket carries it.
type wsMessage struct {
	Header       Header          `json:"header"`
	ParentHeader Header          `json:"parent_header"`
	Metadata     map[string]any  `json:"metadata"`
	Content      json.RawMessage `json:"content"`
	Buffers      []any           `json:"buffers"` // in binary frames instead
	Channel      Channel         `json:"channel"`
}

func (t *wsTransport) start(c *Client) {
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		err := t.read(c)
		for _, ch := range allChannels() {
			c.channelLost(ch, err)
		}
	}()
}

// read delivers messages to c until reading fails.
func (t *wsTransport) read(c *Client) error {
	for {
		typ, data, err := t.conn.Read(t.ctx)
		if err != nil {
			return err
		}
		m, err := decodeWS(typ, data)
		if err != nil {
			c.dropped.Add(1)
			continue
		}
		c.deliver(m)
	}
}

// decodeWS decodes one websocket message.
func decodeWS(typ websocket.MessageType, data []byte) (*Message, error) {
	var buffers [][]byte
	if typ == websocket.MessageBinary {
		parts, err := splitBinaryWS(data)
		if err != nil {
			return nil, err
		}
		data, buffers = parts[0], parts[1:]
	}
	var wm wsMessage
	if err := json.Unmarshal(data, &wm); err != nil {
		return nil, fmt.Errorf("jupyter: decode websocket message: %w", err)
	}
	return &Message{
		Header:       wm.Header,
		ParentHeader: wm.ParentHeader,
		Metadata:     wm.Metadata,
		Content:      wm.Content,
		Buffers:      buffers,
		Channel:      wm.Channel,
	}, nil
}

// splitBinaryWS splits a binary websocket message into its JSON part and
// buffers. Jupyter Server lays it out as: the number of parts n (big-endian
// uint32), the n offsets of the parts from the start (uint32 each), then
// the parts.
func splitBinaryWS(data []byte) ([][]byte, error) {
	if len(data) < 4 {
		return nil, errors.New("jupyter: binary websocket message too short")
	}
	n := binary.BigEndian.Uint32(data)
	if n == 0 || uint64(n) >= uint64(len(data)/4) {
		return nil, fmt.Errorf("jupyter: binary websocket message claims %d parts", n)
	}
	offsets := make([]int, n+1)
	for i := range n {
		offsets[i] = int(binary.BigEndian.Uint32(data[4*(i+1):]))
	}
	offsets[n] = len(data)
	if offsets[0] < 4*(int(n)+1) {
		return nil, errors.New("jupyter: binary websocket message overlaps its offsets")
	}
	parts := make([][]byte, n)
	for i := range parts {
		if offsets[i] > offsets[i+1] {
			return nil, errors.New("jupyter: binary websocket message has bad offsets")
		}
		parts[i] = data[offsets[i]:offsets[i+1]]
	}
	return parts, nil
}

// joinBinaryWS is the inverse of splitBinaryWS.
func joinBinaryWS(parts [][]byte) []byte {
	n := len(parts)
	out := binary.BigEndian.AppendUint32(nil, uint32(n))
	off := 4 * (n + 1)
	for _, p := range parts {
		out = binary.BigEndian.AppendUint32(out, uint32(off))
		off += len(p)
	}
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func (t *wsTransport) send(ctx context.Context, m *Message) error {
	if m.Channel == Heartbeat {
		return errors.New("no heartbeat channel through a Jupyter Server")
	}
	wm := wsMessage{
		Header:       m.Header,
		ParentHeader: m.ParentHeader,
		Metadata:     m.Metadata,
		Content:      m.Content,
		Buffers:      []any{},
		Channel:      m.Channel,
	}
	if wm.Metadata == nil {
		wm.Metadata = map[string]any{}
	}
	if len(wm.Content) == 0 {
		wm.Content = json.RawMessage("{}")
	}
	data, err := json.Marshal(wm)
	if err != nil {
		return err
	}
	typ := websocket.MessageText
	if len(m.Buffers) > 0 {
		typ, data = websocket.MessageBinary, joinBinaryWS(append([][]byte{data}, m.Buffers...))
	}
	if err := t.conn.Write(ctx, typ, data); err != nil {
		return fmt.Errorf("writing to the websocket: %w", err)
	}
	return nil
}

func (t *wsTransport) close() error {
	err := t.conn.Close(websocket.StatusNormalClosure, "")
	t.cancel()
	t.wg.Wait()
	return err
}
