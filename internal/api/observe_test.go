package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/codecell/codecell/internal/audit"
)

// syncBuffer is a bytes.Buffer for a logger written from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestObservability: request ids, Prometheus metrics and the audit log
// record what was executed, and never the API key.
func TestObservability(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	log, err := audit.Open(audit.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	var logged syncBuffer
	ts := newServer(t, serverOpts{key: "k-secret", metrics: true, audit: log,
		logger: slog.New(slog.NewJSONHandler(&logged, &slog.HandlerOptions{Level: slog.LevelInfo}))})

	ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "session_id": "obs", "code": "open('/tmp/out.txt', 'w').write('x'); 1"})
	ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "code": "1/0"})
	ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "javascript", "code": "1"})

	req, _ := http.NewRequest("GET", ts.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer k-secret")
	req.Header.Set("X-Request-Id", "my-request-7")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := resp.Header.Get("X-Request-Id"); got != "my-request-7" {
		t.Errorf("X-Request-Id = %q, want the client's", got)
	}
	for _, want := range []string{
		`codecell_executions_total{backend="native",language="python",status="ok"} 1`,
		`codecell_executions_total{backend="native",language="python",status="error"} 1`,
		`codecell_executions_total{backend="native",language="javascript",status="ok"} 1`,
		`codecell_http_requests_total{code="200",route="POST /v2/code/execute"} 3`,
		`codecell_queue_wait_seconds_count 1`,
		`codecell_sandboxes 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if r := ts.do(t, "GET", "/metrics", nil); r.status != 200 {
		t.Errorf("/metrics with the key: %d", r.status)
	}
	// One line per request with its id, at Info; health probes and metric
	// scrapes that succeed only at Debug.
	ts.must(t, 200, "GET", "/health", nil)
	byRoute := map[string]int{}
	for line := range strings.Lines(logged.String()) {
		var l struct{ Msg, ID, Route string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "request" && l.ID != "" {
			byRoute[l.Route]++
		}
	}
	if byRoute["POST /v2/code/execute"] != 3 || byRoute["GET /health"] != 0 || byRoute["GET /metrics"] != 0 {
		t.Errorf("request lines by route: %v", byRoute)
	}
	noKey, _ := http.Get(ts.URL + "/metrics")
	noKey.Body.Close()
	if noKey.StatusCode != http.StatusUnauthorized {
		t.Errorf("/metrics without the key: %d", noKey.StatusCode)
	}

	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "k-secret") || strings.Contains(string(b), "1/0") {
		t.Error("the audit log holds the API key or code text it was not asked to keep")
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 {
		t.Fatalf("audit log has %d lines, want 3:\n%s", len(lines), b)
	}
	var first audit.Entry
	json.Unmarshal([]byte(lines[0]), &first)
	if first.KeyID != audit.KeyID("k-secret") || first.Session != "obs" || first.Status != "ok" || len(first.CodeSHA256) != 64 ||
		first.Sandbox != "default" || len(first.FilesWritten) != 1 || first.FilesWritten[0] != "/tmp/out.txt" || first.BytesOut == 0 {
		t.Errorf("first audit entry %+v", first)
	}
}
