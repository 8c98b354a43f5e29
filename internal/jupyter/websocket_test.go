package jupyter

import (
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/coder/websocket"
)

func TestBinaryWS(t *testing.T) {
	parts := [][]byte{[]byte(`{"channel":"iopub","header":{"msg_id":"a"}}`), {1, 2, 3}, {}, []byte("buf")}
	data := joinBinaryWS(parts)
	got, err := splitBinaryWS(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, parts) {
		t.Errorf("split(join(p)) = %q, want %q", got, parts)
	}
	m, err := decodeWS(websocket.MessageBinary, data)
	if err != nil {
		t.Fatal(err)
	}
	if m.Channel != IOPub || m.Header.MsgID != "a" || len(m.Buffers) != 3 || string(m.Buffers[2]) != "buf" {
		t.Errorf("decodeWS = %+v", m)
	}
}

func TestBinaryWSMalformed(t *testing.T) {
	u32 := func(vs ...uint32) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.BigEndian.AppendUint32(b, v)
		}
		return b
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"no parts", u32(0)},
		{"more parts than bytes", u32(1 << 30)},
		{"offset inside the header", append(u32(1, 4), '{', '}')},
		{"offset past the end", append(u32(1, 100), '{', '}')},
		{"offsets backwards", append(u32(2, 14, 12), "{}{}"...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if parts, err := splitBinaryWS(tt.data); err == nil {
				t.Errorf("split = %q, want an error", parts)
			}
		})
	}
}
