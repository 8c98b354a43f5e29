package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// event is one Server-Sent Event.
type event struct {
	name string
	data map[string]any
}

// stream posts body to path asking for events and returns a channel of
// them, closed at the end of the stream, and the response.
func (ts *testServer) stream(t *testing.T, path string, body map[string]any, accept bool) (<-chan event, *http.Response) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequest("POST", ts.URL+path, strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if accept {
		req.Header.Set("Accept", "text/event-stream")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	ch := make(chan event, 100)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var ev event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data)
			case line == "" && ev.name != "":
				ch <- ev
				ev = event{}
			}
		}
	}()
	return ch, resp
}

// TestStreamArrivesWhileRunning: the first output reaches the client while
// the cell is still running. The cell waits for a file that the test only
// writes after it has received that output, so a server that held outputs
// back until the end would leave the cell waiting until its timeout.
func TestStreamArrivesWhileRunning(t *testing.T) {
	ts := newServer(t, serverOpts{})
	for _, tc := range []struct {
		name, path, lang string
		code             string
		v1               bool
	}{
		{"python-v2", "/v2/code/execute", "python",
			"import os, time\nprint('first', flush=True)\nwhile not os.path.exists('/tmp/go-py'): time.sleep(0.05)\nprint('second')", false},
		{"javascript-v1", "/v1/nodejs/execute", "javascript",
			"const fs = require('fs');\nconsole.log('first');\nwhile (!fs.existsSync('/tmp/go-js')) await new Promise(r => setTimeout(r, 50));\nconsole.log('second');", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"code": tc.code, "timeout": 20, "stream": true}
			if !tc.v1 {
				body["language"] = tc.lang
			}
			ch, resp := ts.stream(t, tc.path, body, false)
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
				t.Fatalf("status %d, content type %q", resp.StatusCode, ct)
			}
			first := <-ch
			if first.name != "output" || first.data["text"] != "first\n" {
				t.Fatalf("first event %+v, want the output \"first\"", first)
			}
			if tc.v1 && len(first.data) != 9 {
				t.Errorf("v1 route: output has keys %v, want the nine v1 keys", first.data)
			}
			name := "/tmp/go-py"
			if tc.lang == "javascript" {
				name = "/tmp/go-js"
			}
			ts.must(t, 200, "POST", "/v1/file/write", map[string]any{"file": name, "content": "go"})
			var names []string
			var last event
			for ev := range ch {
				names = append(names, ev.name)
				last = ev
			}
			if strings.Join(names, ",") != "output,done" {
				t.Fatalf("events after the first: %v, want output,done", names)
			}
			data, _ := last.data["data"].(map[string]any)
			if last.data["success"] != true || data["status"] != "ok" || !strings.Contains(data["stdout"].(string), "first\nsecond\n") {
				t.Errorf("done event %+v", last.data)
			}
		})
	}
}

// TestStreamEventsInOrder: the example, one event per print, in
// order, each before the final summary.
func TestStreamEventsInOrder(t *testing.T) {
	ts := newServer(t, serverOpts{})
	ch, _ := ts.stream(t, "/v1/jupyter/execute", map[string]any{"code": "import time\nfor i in range(5): print(i); time.sleep(0.2)\ni"}, true)
	var got []string
	var done event
	for ev := range ch {
		switch ev.name {
		case "output":
			if ev.data["output_type"] == "stream" {
				got = append(got, ev.data["text"].(string))
			} else {
				got = append(got, ev.data["output_type"].(string))
			}
		case "done":
			done = ev
		default:
			t.Errorf("unexpected event %+v", ev)
		}
	}
	if strings.Join(got, "") != "0\n1\n2\n3\n4\nexecute_result" || len(got) < 6 {
		t.Errorf("outputs %q, want one per print and then the result", got)
	}
	data, _ := done.data["data"].(map[string]any)
	if data == nil || data["status"] != "ok" || data["execution_count"] == nil || data["usage"] == nil {
		t.Errorf("done event lacks the summary: %+v", done.data)
	}
}

// TestStreamLLM: streamed with output_format "llm", the output events are
// the outputs as produced and the done event carries the rendering.
func TestStreamLLM(t *testing.T) {
	ts := newServer(t, serverOpts{})
	ch, _ := ts.stream(t, "/v2/code/execute", map[string]any{"language": "python", "output_format": "llm", "code": "print('x' * 50000)"}, true)
	var streamed int
	var done event
	for ev := range ch {
		switch ev.name {
		case "output":
			s, _ := ev.data["text"].(string)
			streamed += len(s)
		case "done":
			done = ev
		}
	}
	data, _ := done.data["data"].(map[string]any)
	summary, _ := data["summary"].(string)
	outs, _ := data["outputs"].([]any)
	var rendered string
	if len(outs) > 0 {
		rendered, _ = outs[0].(map[string]any)["text"].(string)
	}
	if streamed != 50001 || !strings.Contains(summary, "stdout") || len(rendered) >= 50000 || !strings.Contains(rendered, "cut from the middle") {
		t.Errorf("streamed %d characters; done: summary %q, rendered %d characters", streamed, summary, len(rendered))
	}
}

// TestStreamClientLeaves: a client that disconnects mid-stream does not
// stop the execution or end the session.
func TestStreamClientLeaves(t *testing.T) {
	ts := newServer(t, serverOpts{})
	ch, resp := ts.stream(t, "/v2/code/execute", map[string]any{"language": "python", "session_id": "leave",
		"code": "import time\nprint('started', flush=True)\ntime.sleep(1)\nx = 42"}, true)
	if ev := <-ch; ev.name != "output" {
		t.Fatalf("first event %+v", ev)
	}
	resp.Body.Close()
	// The session runs executions in arrival order: this one sees the end
	// of the abandoned cell.
	r := ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "session_id": "leave", "code": "x"})
	if outs := r.data()["outputs"].([]any); len(outs) != 1 || outs[0].(map[string]any)["data"].(map[string]any)["text/plain"] != "42" {
		t.Errorf("after the client left: %s", r.raw)
	}
}

// TestStreamClientLeavesWhileQueued: a streamed cell whose client leaves
// while it waits behind another cell of its session never runs, so that
// abandoned requests cannot pile up.
func TestStreamClientLeavesWhileQueued(t *testing.T) {
	ts := newServer(t, serverOpts{})
	first, resp1 := ts.stream(t, "/v2/code/execute", map[string]any{"language": "python", "session_id": "q",
		"code": "import time\nprint('started', flush=True)\ntime.sleep(2)"}, true)
	defer resp1.Body.Close()
	if ev := <-first; ev.name != "output" {
		t.Fatalf("first event %+v", ev)
	}
	// The stream's headers would come with its first event: the client
	// leaves before, by cancelling its request.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v2/code/execute",
		strings.NewReader(`{"language": "python", "session_id": "q", "code": "open('/tmp/ran', 'w').write('queued cell ran')"}`))
	req.Header.Set("Accept", "text/event-stream")
	left := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		left <- err
	}()
	time.Sleep(300 * time.Millisecond)
	cancel()
	if err := <-left; err == nil {
		t.Fatal("the queued request was answered before its client left")
	}
	r := ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "session_id": "q",
		"code": "import os; os.path.exists('/tmp/ran')"})
	if outs := r.data()["outputs"].([]any); len(outs) != 1 || outs[0].(map[string]any)["data"].(map[string]any)["text/plain"] != "False" {
		t.Errorf("the abandoned queued cell ran: %s", r.raw)
	}
}

// TestStreamEarlyErrorsKeepStatus: what fails before anything runs is an
// ordinary JSON error with its status, not a stream.
func TestStreamEarlyErrorsKeepStatus(t *testing.T) {
	ts := newServer(t, serverOpts{})
	_, resp := ts.stream(t, "/v2/code/execute", map[string]any{"language": "cobol", "code": "1"}, true)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(b), "language") {
		t.Errorf("status %d: %s", resp.StatusCode, b)
	}
	// stream: false wins over the Accept header.
	_, resp = ts.stream(t, "/v2/code/execute", map[string]any{"language": "python", "code": "1", "stream": false}, true)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("stream false: content type %q", ct)
	}
}

// TestOutputFormatLLM: output_format "llm" shapes a reply for a model:
// tables as text, images downscaled, long text cut in the middle with a
// marker, a summary, and the files the code wrote.
func TestOutputFormatLLM(t *testing.T) {
	ts := newServer(t, serverOpts{})
	r := ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "output_format": "llm", "code": `
import pandas as pd, matplotlib.pyplot as plt
print('\x1b[31mred\x1b[0m ' + 'y' * 50000)
plt.figure(figsize=(20, 16), dpi=100); plt.plot([1, 2]); plt.savefig('big.png'); plt.show()
pd.DataFrame({'a': range(500), 'b': range(500)})`})
	d := r.data()
	summary, _ := d["summary"].(string)
	var text strings.Builder
	var images []map[string]any
	for _, o := range d["outputs"].([]any) {
		o := o.(map[string]any)
		switch o["output_type"] {
		case "text":
			text.WriteString(o["text"].(string))
		case "image":
			images = append(images, o)
		}
	}
	switch {
	case !strings.Contains(summary, "500×2") || !strings.Contains(summary, "big.png"):
		t.Errorf("summary %q lacks the table's size or the file written", summary)
	case strings.Contains(text.String(), "\x1b[") || !strings.Contains(text.String(), "red y"):
		t.Errorf("ANSI codes kept: %.200q", text.String())
	case !strings.Contains(text.String(), "cut from the middle") || text.Len() > 21000:
		t.Errorf("long stdout not cut to the budget: %d characters", text.Len())
	case !strings.Contains(text.String(), "| a ") && !strings.Contains(text.String(), "|   | a"):
		t.Errorf("table not rendered as Markdown: %.500s", text.String())
	case strings.Contains(text.String(), "<table"):
		t.Error("raw HTML in the rendering")
	case len(images) != 1 || images[0]["width"].(float64) > 1024 || images[0]["height"].(float64) > 1024:
		t.Errorf("images %v, want one within 1024 px", len(images))
	}
	if d["stdout"] != nil {
		t.Error("the raw stdout is repeated next to the rendering")
	}
	if files, _ := d["files_written"].([]any); len(files) != 1 {
		t.Errorf("files_written = %v", d["files_written"])
	}
	ts.must(t, 422, "POST", "/v2/code/execute", map[string]any{"language": "python", "code": "1", "output_format": "yaml"})
}
