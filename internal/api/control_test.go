package api_test

import (
	"strings"
	"testing"
	"time"
)

// waitBusy polls the session until an execution is running in it.
func waitBusy(t *testing.T, ts *testServer, path string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if r := ts.do(t, "GET", path, nil); r.data()["busy"] == true {
			return
		}
	}
	t.Fatalf("%s never became busy", path)
}

func TestInterruptKeepsState(t *testing.T) {
	ts := newServer(t, serverOpts{})
	for _, tc := range []struct {
		lang, setup, long, check, want string
	}{
		{"python", "x = 5", "import time\ntime.sleep(60)", "x", "5"},
		{"javascript", "var x = 5", "while (true) {}", "x", "5"},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			exec := func(code string) reply {
				return ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": tc.lang, "session_id": "int", "code": code, "timeout": 60})
			}
			exec(tc.setup)
			done := make(chan reply)
			go func() { done <- exec(tc.long) }()
			waitBusy(t, ts, "/v2/code/sessions/int?language="+tc.lang)
			r := ts.must(t, 200, "POST", "/v2/code/sessions/int/interrupt?language="+tc.lang, nil)
			if r.data()["interrupted"] != true {
				t.Errorf("interrupt: %s", r.raw)
			}
			long := <-done
			if long.data()["status"] != "error" || !strings.Contains(string(long.raw), "Interrupt") {
				t.Errorf("interrupted cell: %s", long.raw)
			}
			if r := exec(tc.check); !strings.Contains(string(r.raw), `"text/plain":"`+tc.want+`"`) {
				t.Errorf("state after the interrupt: %s", r.raw)
			}
		})
	}
}

func TestRestartClearsStateKeepsFiles(t *testing.T) {
	ts := newServer(t, serverOpts{})
	for _, tc := range []struct{ lang, base, setup, check, wantErr string }{
		{"python", "/v1/jupyter/sessions/rs", "y = 1\nopen('kept.txt', 'w').write('kept')", "y", "NameError"},
		{"javascript", "/v2/code/sessions/rs", "var y = 1; require('fs').writeFileSync('kept-js.txt', 'kept')", "y", "ReferenceError"},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			exec := func(code string) reply {
				return ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": tc.lang, "session_id": "rs", "code": code})
			}
			exec(tc.setup)
			path := tc.base + "/restart"
			if tc.lang == "javascript" {
				path += "?language=javascript"
			}
			if r := ts.must(t, 200, "POST", path, nil); r.data()["alive"] != true {
				t.Errorf("after restart: %s", r.raw)
			}
			if r := exec(tc.check); !strings.Contains(string(r.raw), tc.wantErr) {
				t.Errorf("state survived the restart: %s", r.raw)
			}
		})
	}
	r := ts.must(t, 200, "POST", "/v1/file/read", map[string]any{"file": "/home/user/kept.txt"})
	if r.data()["content"] != "kept" {
		t.Errorf("file after restart: %s", r.raw)
	}
}

func TestCompleteAndInspect(t *testing.T) {
	ts := newServer(t, serverOpts{})
	ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "session_id": "ci", "code": "import os\nmy_long_name = 1"})
	ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "javascript", "session_id": "ci", "code": "let myLongName = 1; var myObj = {alpha: 1}"})
	for _, tc := range []struct {
		name, path, code string
		pos              any
		want             string // a match
		replaced         string // code[cursor_start:cursor_end]
	}{
		{"python-attribute", "/v1/jupyter/sessions/ci/complete", "os.pa", nil, "path", "pa"},
		{"python-name", "/v2/code/sessions/ci/complete?language=python", "my_lo + 1", 5, "my_long_name", "my_lo"},
		{"python-unicode", "/v2/code/sessions/ci/complete?language=python", "'é'; my_lo", nil, "my_long_name", "my_lo"},
		{"javascript-name", "/v2/code/sessions/ci/complete?language=javascript", "myLo", nil, "myLongName", "myLo"},
		{"javascript-attribute", "/v2/code/sessions/ci/complete?language=javascript", "'é'; myObj.al", nil, "myObj.alpha", "myObj.al"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"code": tc.code}
			if tc.pos != nil {
				body["cursor_pos"] = tc.pos
			}
			d := ts.must(t, 200, "POST", tc.path, body).data()
			var matches []string
			for _, m := range d["matches"].([]any) {
				matches = append(matches, m.(string))
			}
			if !strings.Contains(strings.Join(matches, "\n")+"\n", tc.want+"\n") {
				t.Errorf("matches %q lack %q", matches, tc.want)
			}
			runes := []rune(tc.code)
			start, end := int(d["cursor_start"].(float64)), int(d["cursor_end"].(float64))
			if start < 0 || end > len(runes) || start > end || string(runes[start:end]) != tc.replaced {
				t.Errorf("cursor %d-%d of %q, want it to span %q", start, end, tc.code, tc.replaced)
			}
		})
	}
	// The JavaScript completer must not change what cells see.
	r := ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "javascript", "session_id": "ci",
		"code": "[typeof _, typeof _error, typeof require('fs').readFileSync].join(' ')"})
	if !strings.Contains(string(r.raw), "undefined undefined function") {
		t.Errorf("globals after completion: %s", r.raw)
	}

	for _, tc := range []struct {
		name, path, code string
		found            bool
		want             string
	}{
		{"python", "/v1/jupyter/sessions/ci/inspect", "len(", true, "Return the number of items"},
		{"python-missing", "/v1/jupyter/sessions/ci/inspect", "no_such_name", false, ""},
		{"javascript", "/v2/code/sessions/ci/inspect?language=javascript", "Math.max", true, "function"},
		{"javascript-missing", "/v2/code/sessions/ci/inspect?language=javascript", "noSuchName", false, ""},
	} {
		t.Run("inspect-"+tc.name, func(t *testing.T) {
			d := ts.must(t, 200, "POST", tc.path, map[string]any{"code": tc.code}).data()
			text, _ := d["data"].(map[string]any)["text/plain"].(string)
			if d["found"] != tc.found || !strings.Contains(text, tc.want) {
				t.Errorf("found %v, text %q; want %v and %q", d["found"], text, tc.found, tc.want)
			}
		})
	}

	for _, bad := range []struct {
		path   string
		body   map[string]any
		status int
	}{
		{"/v1/jupyter/sessions/ci/complete", map[string]any{"code": "os", "cursor_pos": 3}, 422},
		{"/v1/jupyter/sessions/ci/complete", map[string]any{"cursor_pos": 0}, 422},
		{"/v1/jupyter/sessions/ci/inspect", map[string]any{"code": "os", "detail_level": 2}, 422},
		{"/v1/jupyter/sessions/nope/complete", map[string]any{"code": "os"}, 404},
		{"/v2/code/sessions/nope/interrupt", nil, 404},
	} {
		ts.must(t, bad.status, "POST", bad.path, bad.body)
	}
}
