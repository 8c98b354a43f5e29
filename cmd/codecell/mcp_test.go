package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell/codecell/internal/audit"
)

// tsResult is what testdata/mcpclient/client.mjs prints.
type tsResult struct {
	Tools []struct {
		Name        string `json:"name"`
		HasSchema   bool   `json:"hasSchema"`
		Description string `json:"description"`
	} `json:"tools"`
	Write, Analysis, Chart, Error, Read, List, Info toolResult
}

type toolResult struct {
	IsError bool `json:"isError"`
	Content []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Data     string `json:"data"`
		MimeType string `json:"mimeType"`
	} `json:"content"`
}

func (r toolResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text + "\n")
	}
	return b.String()
}

func (r toolResult) images() int {
	n := 0
	for _, c := range r.Content {
		if c.Type == "image" && c.MimeType == "image/png" && strings.HasPrefix(c.Data, "iVBOR") {
			n++
		}
	}
	return n
}

// runTSClient runs the official TypeScript SDK's client (npm
// @modelcontextprotocol/sdk, installed by `make test`) against codecell.
func runTSClient(t *testing.T, args ...string) tsResult {
	t.Helper()
	dir, _ := filepath.Abs("testdata/mcpclient")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatalf("the TypeScript MCP SDK is not installed: run `npm install` in %s (make test does)", dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"client.mjs"}, args...)...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("TypeScript client: %v\n%s", err, stderr.String())
	}
	var r tsResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("TypeScript client printed %q: %v", out, err)
	}
	return r
}

// checkFlow checks the pandas-and-chart flow as a model would see it.
func checkFlow(t *testing.T, r tsResult) {
	t.Helper()
	var names []string
	for _, tool := range r.Tools {
		names = append(names, tool.Name)
		if !tool.HasSchema && tool.Name != "list_sessions" && tool.Name != "sandbox_info" {
			t.Errorf("tool %s has no input schema", tool.Name)
		}
		if len(tool.Description) < 20 {
			t.Errorf("tool %s: description %q is not written for a model", tool.Name, tool.Description)
		}
	}
	for _, want := range []string{"execute_code", "list_files", "read_file", "write_file", "create_session", "end_session", "list_sessions", "sandbox_info"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools %v lack %s", names, want)
		}
	}
	if r.Write.IsError {
		t.Errorf("write_file: %s", r.Write.text())
	}
	if txt := r.Analysis.text(); r.Analysis.IsError || !strings.Contains(txt, "north") || !strings.Contains(txt, "15") || !strings.Contains(txt, "32") {
		t.Errorf("analysis: %s", txt)
	}
	if r.Chart.IsError || r.Chart.images() != 1 || !strings.Contains(r.Chart.text(), "chart.png") {
		t.Errorf("chart: %d images, text %q", r.Chart.images(), r.Chart.text())
	}
	if txt := r.Error.text(); !r.Error.IsError || !strings.Contains(txt, "ZeroDivisionError") {
		t.Errorf("error result: isError %v, %s", r.Error.IsError, txt)
	}
	if r.Read.IsError || r.Read.images() != 1 {
		t.Errorf("read_file of the chart: %+v", r.Read)
	}
	if !strings.Contains(r.List.text(), "chart.png") {
		t.Errorf("list_files: %s", r.List.text())
	}
	if !strings.Contains(r.Info.text(), "pandas") {
		t.Errorf("sandbox_info: %s", r.Info.text())
	}
}

// TestMCPStdio: `codecell mcp` driven over stdio by the TypeScript SDK.
func TestMCPStdio(t *testing.T) {
	requireJail(t)
	bin := buildBinary(t)
	parent := fmt.Sprintf("codecell-mcptest-%d", os.Getpid())
	t.Cleanup(func() {
		for _, ctl := range []string{"", "memory", "pids", "cpu", "freezer"} {
			os.Remove(filepath.Join("/sys/fs/cgroup", ctl, parent))
		}
	})
	r := runTSClient(t, "stdio", bin, "--data-dir", newDataDir(t), "--cgroup-parent", parent)
	checkFlow(t, r)
	for _, tool := range r.Tools {
		if tool.Name == "upload" {
			return
		}
	}
	t.Error("stdio mode has no upload tool")
}

// TestMCPHTTP: /mcp of `codecell serve`, behind its API key, driven by the
// TypeScript SDK and by the Go SDK's client; its executions are counted in
// the metrics and written to the audit log as the API's are.
func TestMCPHTTP(t *testing.T) {
	requireJail(t)
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	base := startServer(t, buildBinary(t), "--audit-log", auditPath)
	r := runTSClient(t, "http", base+"/mcp", cliTestKey)
	checkFlow(t, r)
	for _, tool := range r.Tools {
		if tool.Name == "upload" {
			t.Error("the HTTP endpoint offers upload, which reads the server's own files")
		}
	}

	resp, err := http.Post(base+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/mcp without the key: %d", resp.StatusCode)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := gomcp.NewClient(&gomcp.Implementation{Name: "go-test", Version: "1"}, nil)
	hc := &http.Client{Transport: keyTransport{cliTestKey}}
	cs, err := client.Connect(ctx, &gomcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &gomcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{
		"language": "javascript", "code": "console.log('x'.repeat(100000)); 6 * 7"}})
	if err != nil {
		t.Fatal(err)
	}
	var txt strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*gomcp.TextContent); ok {
			txt.WriteString(tc.Text)
		}
	}
	if res.IsError || !strings.Contains(txt.String(), "42") || !strings.Contains(txt.String(), "cut from the middle") || txt.Len() > 25000 {
		t.Errorf("Go client, a long output: isError %v, %d characters: %.300s", res.IsError, txt.Len(), txt.String())
	}

	// MCP is held to --max-timeout like the HTTP API.
	res, err = cs.CallTool(ctx, &gomcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{
		"language": "python", "code": "1", "timeout": 1e6}})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := res.Content[0].(*gomcp.TextContent); !res.IsError || !ok || !strings.Contains(c.Text, "at most 15m0s") {
		t.Errorf("execute_code with a timeout of 1e6 s: isError %v, %+v", res.IsError, res.Content[0])
	}

	b, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("console.log('x'.repeat(100000)); 6 * 7"))
	var found bool
	for line := range strings.Lines(string(b)) {
		var e audit.Entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if e.CodeSHA256 == hex.EncodeToString(sum[:]) {
			found = true
			if e.Language != "javascript" || e.Status != "ok" || e.KeyID != audit.KeyID(cliTestKey) || e.BytesOut < 100000 || e.Sandbox != "default" {
				t.Errorf("audit entry of the MCP execution: %+v", e)
			}
		}
	}
	if !found {
		t.Errorf("the MCP execution is not in the audit log:\n%s", b)
	}
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+cliTestKey)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`(?m)^codecell_executions_total\{backend="native",language="javascript",status="ok"\} [1-9]`).Match(m) {
		t.Errorf("/metrics does not count the MCP executions:\n%s", m)
	}
}

type keyTransport struct{ key string }

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return http.DefaultTransport.RoundTrip(r)
}
