package client

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// The stream reader on streams a server could send: keep-alive comments,
// CRLF line ends, data in several lines, unknown events, and the ways a
// stream ends. (The client's tests against a real server cover the rest;
// a server cannot be made to send an error event on demand.)
func TestReadStream(t *testing.T) {
	const done = "event: done\ndata: {\"success\":false,\"message\":\"ZeroDivisionError: division by zero\",\"data\":{\"status\":\"error\",\"execution_count\":3,\"session_id\":\"s\",\"usage\":{\"wall_time_ms\":12}}}\n\n"
	tests := []struct {
		name, stream string
		outputs      []string
		status       int // of the *APIError, or 0
		err          string
	}{
		{"done", ": keep-alive\n\nevent: output\ndata: {\"output_type\":\"stream\",\"name\":\"stdout\",\"text\":\"a\\n\"}\n\n" +
			"event: progress\ndata: {}\n\n" + done, []string{"a\n"}, 0, ""},
		{"crlf and split data", "event: output\r\ndata: {\"output_type\":\"stream\",\r\ndata: \"text\":\"b\"}\r\n\r\n" + done, []string{"b"}, 0, ""},
		{"error event", "event: output\ndata: {\"output_type\":\"stream\",\"text\":\"c\"}\n\nevent: error\ndata: {\"status\":503,\"message\":\"shutting down\"}\n\n",
			[]string{"c"}, 503, "shutting down"},
		{"cut short", "event: output\ndata: {\"output_type\":\"stream\",\"text\":\"d\"}\n\nevent: done\ndata: {\"succ", []string{"d"}, 0, "unexpected EOF"},
		{"no done", ": keep-alive\n\n", nil, 0, "without a result"},
		{"bad output", "event: output\ndata: [\n\n", nil, 0, "decoding an output event"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			res, err := readStream(strings.NewReader(tt.stream), func(o Output) { got = append(got, o.Text) })
			if strings.Join(got, "|") != strings.Join(tt.outputs, "|") {
				t.Errorf("outputs %q, want %q", got, tt.outputs)
			}
			if tt.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if res.Status != StatusError || res.ExecutionCount != 3 || res.SessionID != "s" || res.Message != "ZeroDivisionError: division by zero" || res.Usage.WallTime.Milliseconds() != 12 {
					t.Errorf("result: %+v", res)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error %v, want one saying %q", err, tt.err)
			}
			if ae, ok := errors.AsType[*APIError](err); ok != (tt.status != 0) || ok && ae.StatusCode != tt.status {
				t.Errorf("error %#v, want an APIError of status %d", err, tt.status)
			}
			if tt.err == "unexpected EOF" && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("error %v is not io.ErrUnexpectedEOF", err)
			}
		})
	}
}
