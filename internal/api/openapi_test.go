package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestOpenAPI keeps /openapi.json true: every documented operation is
// routed (never the router's own 404 or 405), the routes the AIO API
// defines and codecell promises are all documented, and what is not
// documented is not served.
func TestOpenAPI(t *testing.T) {
	ts := newServer(t, serverOpts{})
	resp, err := http.Get(ts.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi.json: %v %q", err, doc.OpenAPI)
	}
	resp.Body.Close()

	var ops []string
	for path, methods := range doc.Paths {
		for m := range methods {
			ops = append(ops, strings.ToUpper(m)+" "+path)
		}
	}
	sort.Strings(ops)
	// Deletions last, so that they do not remove what later requests use.
	slices.SortStableFunc(ops, func(a, b string) int {
		return boolInt(strings.HasPrefix(a, "DELETE")) - boolInt(strings.HasPrefix(b, "DELETE"))
	})
	for _, op := range ops {
		method, path, _ := strings.Cut(op, " ")
		url := strings.NewReplacer("{sandbox_id}", "default", "{session_id}", "nope").Replace(path)
		var body io.Reader
		if method == "POST" || method == "PATCH" {
			body = strings.NewReader("{}")
		}
		req, _ := http.NewRequest(method, ts.URL+url, body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusMethodNotAllowed || strings.HasPrefix(string(b), "404 page not found") {
			t.Errorf("%s is documented but not routed: %d %s", op, resp.StatusCode, b)
		}
	}

	for _, want := range []string{
		"POST /v1/code/execute", "GET /v1/code/info", "POST /v2/code/execute", "GET /v2/code/sessions", "POST /v2/code/sessions",
		"GET /v2/code/sessions/{session_id}", "DELETE /v2/code/sessions/{session_id}",
		"POST /v1/jupyter/execute", "POST /v1/jupyter/sessions/create", "GET /v1/jupyter/sessions", "DELETE /v1/jupyter/sessions",
		"DELETE /v1/jupyter/sessions/{session_id}", "GET /v1/jupyter/info",
		"POST /v1/nodejs/execute", "POST /v1/nodejs/sessions", "GET /v1/nodejs/sessions", "GET /v1/nodejs/sessions/{session_id}",
		"DELETE /v1/nodejs/sessions/{session_id}", "GET /v1/nodejs/info",
		"GET /health", "GET /v1/sandbox", "GET /v2/sandbox", "GET /v1/capabilities", "GET /openapi.json",
		"POST /v2/sandboxes", "GET /v2/sandboxes", "GET /v2/sandboxes/{sandbox_id}", "DELETE /v2/sandboxes/{sandbox_id}",
		"POST /sandboxes/{sandbox_id}/v2/code/execute",
	} {
		if !slices.Contains(ops, want) {
			t.Errorf("%s is not documented", want)
		}
	}

	for _, op := range []string{"POST /v1/shell/exec", "GET /v1/browser/info", "PUT /v1/code/execute"} {
		method, path, _ := strings.Cut(op, " ")
		req, _ := http.NewRequest(method, ts.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 && resp.StatusCode != 405 {
			t.Errorf("%s is served (%d) but not documented", op, resp.StatusCode)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
