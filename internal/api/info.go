package api

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"time"

	"github.com/codecell/codecell/internal/doctor"
	"github.com/codecell/codecell/internal/jail"
	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

// runtimeInfo is one interpreter, probed once at start.
type runtimeInfo struct {
	doctor.Runtime
	description string
}

type runtimes struct{ python, node runtimeInfo }

func newRuntimes(rt doctor.Runtimes) runtimes {
	return runtimes{
		python: runtimeInfo{rt.Python, "Python " + rt.Python.Version + " (Debian) on IPython, with pandas, numpy and matplotlib"},
		node:   runtimeInfo{rt.Node, "Node.js v" + rt.Node.Version},
	}
}

func (rt *runtimes) of(l kernel.Language) *runtimeInfo {
	if l == kernel.JavaScript {
		return &rt.node
	}
	return &rt.python
}

// check is a 503 naming what was looked for when l cannot run here.
func (rt *runtimes) check(l kernel.Language) error {
	if _, _, ok := l.Kernelspec(); ok {
		return nil // a Jupyter kernel: a start failure says what is missing
	}
	if r := rt.of(l); r.Err != nil {
		return errorf(http.StatusServiceUnavailable, "no interpreter for %s: looked for %s: %v", l, r.Path, r.Err)
	}
	return nil
}

// GET /health needs no API key.
func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	return ok(w, map[string]any{"status": "ok", "version": s.cfg.Version})
}

// capabilities is what /v1/capabilities and /v2/sandbox report.
func (s *Server) capabilities(ctx context.Context, sb *sandbox.Sandbox) map[string]any {
	py, node := s.runtime.of(kernel.Python), s.runtime.of(kernel.JavaScript)
	l := sb.Limits()
	layers := map[string]any{}
	for _, c := range s.cfg.Layers {
		layers[c.Layer] = map[string]any{"active": c.OK, "detail": c.Detail}
	}
	return map[string]any{
		"code_interpreter": map[string]any{
			"backend":         s.backendOf(ctx, kernel.Python),
			"languages":       []string{"python", "javascript"},
			"python_kernels":  []string{pythonKernel},
			"jupyter_kernels": s.kernelNames(),
			"python_version":  py.Version,
			"python_packages": py.Packages,
			"node_version":    node.Version,
			"default_timeout": int(s.cfg.DefaultTimeout / time.Second),
			"max_timeout":     int(s.cfg.MaxTimeout / time.Second),
			"session_idle":    int(s.cfg.Manager.Config().SessionIdle / time.Second),
			"max_sessions":    s.maxSessions(),
		},
		"file_system": map[string]any{"home_dir": jail.HomeDir, "tmp_dir": jail.TmpDir},
		"limits": map[string]any{
			"memory_bytes":       l.MemoryBytes,
			"pids":               l.Pids,
			"cpus":               l.CPUs,
			"disk_bytes":         l.DiskBytes,
			"output_bytes":       l.OutputBytes,
			"max_sandboxes":      s.cfg.Manager.Config().MaxSandboxes,
			"max_body_bytes":     s.cfg.MaxBodyBytes,
			"default_timeout_ms": s.cfg.DefaultTimeout.Milliseconds(),
		},
		"isolation": layers,
		"pools":     sb.PoolStats(),
	}
}

// GET /v1/capabilities
func (s *Server) capabilitiesV1(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	return ok(w, s.capabilities(r.Context(), sb))
}

// GET /v2/sandbox: the sandbox and its capabilities.
func (s *Server) sandboxV2(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	info := s.sandboxInfo(sb)
	info["capabilities"] = s.capabilities(r.Context(), sb)
	info["version"] = s.cfg.Version
	return ok(w, info)
}

// GET /v1/sandbox: SandboxResponse, whose fields sit beside the envelope's.
func (s *Server) sandboxV1(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	py, node := s.runtime.of(kernel.Python), s.runtime.of(kernel.JavaScript)
	info := s.sandboxInfo(sb)
	writeJSON(w, http.StatusOK, map[string]any{
		"success":   true,
		"message":   "ok",
		"data":      nil,
		"hint":      nil,
		"home_dir":  jail.HomeDir,
		"workspace": jail.HomeDir,
		"version":   s.cfg.Version,
		"detail": map[string]any{
			"system": map[string]any{
				"os": "linux", "os_version": "", "arch": runtime.GOARCH, "user": "user",
				"home_dir": jail.HomeDir, "workspace": jail.HomeDir, "timezone": "UTC", "occupied_ports": []int{},
			},
			"runtime": map[string]any{
				"python": []map[string]any{{"name": "python3", "version": py.Version, "path": "/usr/bin/python3"}},
				"nodejs": []map[string]any{{"name": "node", "version": node.Version, "path": "/usr/bin/node"}},
			},
			"utils": []any{},
		},
		"sandbox": info,
		"disk":    info["disk"],
	})
	return nil
}

// sandboxInfo describes one sandbox in the sandboxes API.
func (s *Server) sandboxInfo(sb *sandbox.Sandbox) map[string]any {
	l := sb.Limits()
	var expires any
	if t := sb.ExpiresAt(); !t.IsZero() {
		expires = t.UTC().Format(time.RFC3339)
	}
	used, total, _ := sb.DiskUsage()
	labels := sb.Labels()
	if labels == nil {
		labels = map[string]string{}
	}
	sessions := map[string]int{}
	for _, sess := range sb.Sessions("") {
		sessions[string(sess.Language)]++
	}
	u := sb.Usage()
	return map[string]any{
		"id":         sb.ID(),
		"base_path":  fmt.Sprintf("/sandboxes/%s", sb.ID()),
		"created_at": sb.Created().UTC().Format(time.RFC3339),
		"expires_at": expires,
		"labels":     labels,
		"limits": map[string]any{
			"memory_mb":       l.MemoryBytes >> 20,
			"pids":            l.Pids,
			"cpus":            l.CPUs,
			"disk_mb":         l.DiskBytes >> 20,
			"output_bytes":    l.OutputBytes,
			"timeout_seconds": int(l.DefaultTimeout / time.Second),
		},
		"sessions": sessions,
		"disk":     map[string]int64{"used_bytes": used, "total_bytes": total},
		// Live use, read from the sandbox's cgroup and disk at each request.
		"usage": map[string]any{
			"memory_bytes":    u.MemoryBytes,
			"pids":            u.Pids,
			"disk_bytes":      used,
			"executions":      u.Executions,
			"cpu_seconds":     u.CPUTime.Seconds(),
			"oom_kills":       u.OOMKills,
			"pids_limit_hits": u.PidsLimitHits,
		},
	}
}
