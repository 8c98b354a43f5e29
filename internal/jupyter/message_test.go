package jupyter

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func testMessage() *Message {
	return &Message{
		Identities:   [][]byte{[]byte("client-1")},
		Header:       Header{MsgID: "m1", Session: "s", Username: "u", Date: "2024-01-01T00:00:00.000000Z", MsgType: "execute_request", Version: ProtocolVersion},
		ParentHeader: Header{MsgID: "p1", MsgType: "kernel_info_request"},
		Metadata:     map[string]any{"cell": "a"},
		Content:      json.RawMessage(`{"code":"1+1"}`),
		Buffers:      [][]byte{{0, 1, 2}},
	}
}

func TestMessageRoundTrip(t *testing.T) {
	key := []byte("secret")
	tests := []struct {
		name string
		msg  *Message
		key  []byte
	}{
		{"signed", testMessage(), key},
		{"unsigned", testMessage(), nil},
		{"no identities, buffers or parent", &Message{Header: Header{MsgID: "x", MsgType: "status"}, Content: json.RawMessage(`{}`), Metadata: map[string]any{}}, key},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frames, err := tt.msg.encode(tt.key)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeMessage(frames, tt.key)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.msg) {
				t.Errorf("decode(encode(m)) = %+v, want %+v", got, tt.msg)
			}
		})
	}
}

func TestMessageWireFormat(t *testing.T) {
	m := testMessage()
	frames, err := m.encode([]byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != 8 || string(frames[0]) != "client-1" || string(frames[1]) != delimiter {
		t.Fatalf("frames %q", frames)
	}
	// The signature is the hex HMAC-SHA256 of the four JSON frames.
	want := sign([]byte("secret"), frames[3], frames[4], frames[5], frames[6])
	if len(frames[2]) != 64 || !bytes.Equal(frames[2], want) {
		t.Errorf("signature %q, want %q", frames[2], want)
	}
	if unsigned, _ := m.encode(nil); len(unsigned[2]) != 0 {
		t.Errorf("signature %q without a key, want none", unsigned[2])
	}
	// An empty parent header is {}, as Jupyter sends it.
	empty, _ := (&Message{}).encode(nil)
	for i, want := range []string{"{}", "{}", "{}", "{}"} {
		if string(empty[i+2]) != want {
			t.Errorf("frame %d of an empty message = %s, want %s", i+2, empty[i+2], want)
		}
	}
}

func TestMessageVerify(t *testing.T) {
	key := []byte("secret")
	// tamper changes one part of the encoded frames of testMessage.
	tests := []struct {
		name   string
		tamper func(frames [][]byte) [][]byte
		want   error // nil: accepted
	}{
		{"intact", func(f [][]byte) [][]byte { return f }, nil},
		{"content changed", func(f [][]byte) [][]byte { f[6] = []byte(`{"code":"rm -rf /"}`); return f }, errBadSignature},
		{"header changed", func(f [][]byte) [][]byte { f[3] = bytes.Replace(f[3], []byte("m1"), []byte("m2"), 1); return f }, errBadSignature},
		{"parent changed", func(f [][]byte) [][]byte { f[4] = []byte(`{}`); return f }, errBadSignature},
		{"metadata changed", func(f [][]byte) [][]byte { f[5] = []byte(`{}`); return f }, errBadSignature},
		{"signature flipped", func(f [][]byte) [][]byte { f[2][0] ^= 1; return f }, errBadSignature},
		{"signature missing", func(f [][]byte) [][]byte { f[2] = nil; return f }, errBadSignature},
		{"signature uppercase", func(f [][]byte) [][]byte { f[2] = bytes.ToUpper(f[2]); return f }, errBadSignature},
		{"signed with another key", func(f [][]byte) [][]byte { f[2] = sign([]byte("other"), f[3], f[4], f[5], f[6]); return f }, errBadSignature},
		// Identities and buffers are not signed, as in Jupyter.
		{"identity changed", func(f [][]byte) [][]byte { f[0] = []byte("x"); return f }, nil},
		{"buffer changed", func(f [][]byte) [][]byte { f[7] = []byte("x"); return f }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frames, err := testMessage().encode(key)
			if err != nil {
				t.Fatal(err)
			}
			_, err = decodeMessage(tt.tamper(frames), key)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("decode = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestMessageMalformed(t *testing.T) {
	j := []byte("{}")
	tests := []struct {
		name   string
		frames [][]byte
	}{
		{"no delimiter", [][]byte{j, j, j, j, j}},
		{"too few frames", [][]byte{[]byte(delimiter), nil, j, j, j}},
		{"header not JSON", [][]byte{[]byte(delimiter), nil, []byte("{"), j, j, j}},
		{"parent not JSON", [][]byte{[]byte(delimiter), nil, j, []byte("x"), j, j}},
		{"metadata not an object", [][]byte{[]byte(delimiter), nil, j, j, []byte("[]"), j}},
		{"content not JSON", [][]byte{[]byte(delimiter), nil, j, j, j, []byte("{")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if m, err := decodeMessage(tt.frames, nil); err == nil {
				t.Errorf("decode = %+v, want an error", m)
			}
		})
	}
}

func TestReplyType(t *testing.T) {
	for req, want := range map[string]string{
		"execute_request":     "execute_reply",
		"kernel_info_request": "kernel_info_reply",
		"odd":                 "odd",
	} {
		if got := replyType(req); got != want {
			t.Errorf("replyType(%q) = %q, want %q", req, got, want)
		}
	}
}
