package main

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// TestPackageGraph keeps dependencies pointing one way (doctor → sandbox →
// kernel → jail → seccomp, cgroup; kernel → jupyter) and every package
// documented.
func TestPackageGraph(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "github.com/codecell/codecell/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/codecell/codecell/"
	// forbidden[a] lists packages a must not import, directly or not.
	forbidden := map[string][]string{
		"internal/jail":    {"internal/kernel", "internal/sandbox", "internal/doctor", "internal/quota"},
		"internal/seccomp": {"internal/jail", "internal/cgroup", "internal/kernel", "internal/sandbox"},
		"internal/cgroup":  {"internal/jail", "internal/seccomp", "internal/kernel", "internal/sandbox"},
		"internal/quota":   {"internal/jail", "internal/kernel", "internal/sandbox", "internal/cgroup"},
		"internal/kernel":  {"internal/sandbox", "internal/doctor", "internal/quota"},
		"internal/sandbox": {"internal/doctor"},
		// Rendering for models knows kernel results and nothing else.
		"internal/llm": {"internal/sandbox", "internal/api", "internal/mcp", "internal/files", "internal/doctor"},
		// The MCP server works on sandboxes, not through the HTTP API.
		"internal/mcp": {"internal/api"},
		// The public client speaks HTTP only.
		"client": {"internal/sandbox", "internal/kernel", "internal/jail", "internal/api", "internal/files"},
		// Metrics and the audit log are leaves: the server feeds them.
		"internal/metrics": {"internal/sandbox", "internal/kernel", "internal/api"},
		"internal/audit":   {"internal/sandbox", "internal/kernel", "internal/api"},
		// Recording executions is shared by the API and MCP, below both.
		"internal/observe": {"internal/sandbox", "internal/api", "internal/mcp"},
		// The Jupyter protocol is a leaf: it knows nothing of jails or kernels.
		"internal/jupyter": {"internal/jail", "internal/kernel", "internal/sandbox", "internal/cgroup", "internal/seccomp", "internal/quota", "internal/files", "internal/api", "internal/doctor"},
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for {
		var p struct {
			ImportPath string
			Doc        string
			Name       string
			Deps       []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		seen++
		rel := strings.TrimPrefix(p.ImportPath, mod)
		if p.Doc == "" {
			t.Errorf("%s has no package comment", rel)
		}
		for _, bad := range forbidden[rel] {
			for _, d := range p.Deps {
				if d == mod+bad {
					t.Errorf("%s depends on %s", rel, bad)
				}
			}
		}
	}
	if seen < 7 {
		t.Errorf("go list saw %d packages", seen)
	}
}
