package jupyter

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// ProtocolVersion is the version of the Jupyter messaging protocol spoken.
const ProtocolVersion = "5.3"

// MaxMessageSize bounds a message received from a kernel or a server: all
// its frames together, or one websocket message. Code in a kernel can write
// to the kernel's sockets, so an unbounded size would let it make the server
// allocate as much memory as it likes.
const MaxMessageSize = 64 << 20

// errBadSignature reports a message whose HMAC does not match its content.
var errBadSignature = errors.New("jupyter: bad message signature")

// delimiter separates routing identities from the message on the wire.
const delimiter = "<IDS|MSG>"

// Header is a message header (and, as ParentHeader, the header of the
// message being answered).
type Header struct {
	MsgID    string `json:"msg_id,omitempty"`
	Session  string `json:"session,omitempty"`
	Username string `json:"username,omitempty"`
	Date     string `json:"date,omitempty"` // ISO 8601
	MsgType  string `json:"msg_type,omitempty"`
	Version  string `json:"version,omitempty"`
}

// Message is one Jupyter message. Content is left as JSON for the caller to
// decode by MsgType.
type Message struct {
	Identities   [][]byte // ZeroMQ routing prefix; on iopub, the topic
	Header       Header
	ParentHeader Header
	Metadata     map[string]any
	Content      json.RawMessage
	Buffers      [][]byte
	Channel      Channel // the channel it came or goes on
}

// sign returns the hex HMAC-SHA256 of parts keyed with key, or nil if key is
// empty, which means that signing is off.
func sign(key []byte, parts ...[]byte) []byte {
	if len(key) == 0 {
		return nil
	}
	mac := hmac.New(sha256.New, key)
	for _, p := range parts {
		mac.Write(p)
	}
	return hex.AppendEncode(nil, mac.Sum(nil))
}

// encode returns m's wire frames, signed with key:
// identities..., <IDS|MSG>, signature, header, parent_header, metadata,
// content, buffers...
func (m *Message) encode(key []byte) ([][]byte, error) {
	header, err := json.Marshal(m.Header)
	if err != nil {
		return nil, fmt.Errorf("jupyter: encode header: %w", err)
	}
	parent, err := json.Marshal(m.ParentHeader)
	if err != nil {
		return nil, fmt.Errorf("jupyter: encode parent header: %w", err)
	}
	metadata := []byte("{}")
	if m.Metadata != nil {
		if metadata, err = json.Marshal(m.Metadata); err != nil {
			return nil, fmt.Errorf("jupyter: encode metadata: %w", err)
		}
	}
	content := []byte(m.Content)
	if len(content) == 0 {
		content = []byte("{}")
	}
	frames := make([][]byte, 0, len(m.Identities)+6+len(m.Buffers))
	frames = append(frames, m.Identities...)
	frames = append(frames, []byte(delimiter), sign(key, header, parent, metadata, content),
		header, parent, metadata, content)
	return append(frames, m.Buffers...), nil
}

// decodeMessage parses wire frames. If key is not empty, a message whose
// signature does not match is rejected with errBadSignature.
func decodeMessage(frames [][]byte, key []byte) (*Message, error) {
	i := 0
	for i < len(frames) && !bytes.Equal(frames[i], []byte(delimiter)) {
		i++
	}
	if i == len(frames) {
		return nil, errors.New("jupyter: decode: no " + delimiter + " delimiter")
	}
	if len(frames)-i < 6 {
		return nil, fmt.Errorf("jupyter: decode: %d frames after the delimiter, want at least 5", len(frames)-i-1)
	}
	sig, header, parent, metadata, content := frames[i+1], frames[i+2], frames[i+3], frames[i+4], frames[i+5]
	if len(key) > 0 && !hmac.Equal(sig, sign(key, header, parent, metadata, content)) {
		return nil, errBadSignature
	}
	m := &Message{Content: json.RawMessage(content)}
	if i > 0 {
		m.Identities = frames[:i]
	}
	if len(frames) > i+6 {
		m.Buffers = frames[i+6:]
	}
	if err := m.decodeParts(header, parent, metadata); err != nil {
		return nil, err
	}
	if !json.Valid(content) {
		return nil, errors.New("jupyter: decode: content is not JSON")
	}
	return m, nil
}

// decodeParts fills m's headers and metadata from their JSON.
func (m *Message) decodeParts(header, parent, metadata []byte) error {
	if err := json.Unmarshal(header, &m.Header); err != nil {
		return fmt.Errorf("jupyter: decode header: %w", err)
	}
	if err := json.Unmarshal(parent, &m.ParentHeader); err != nil {
		return fmt.Errorf("jupyter: decode parent header: %w", err)
	}
	if err := json.Unmarshal(metadata, &m.Metadata); err != nil {
		return fmt.Errorf("jupyter: decode metadata: %w", err)
	}
	return nil
}
