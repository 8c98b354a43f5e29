package api

import (
	"net/http"
	"strings"
)

// route is one operation: how it is served and how /openapi.json
// documents it, from the same table so that the two cannot drift apart.
type route struct {
	pattern string // "METHOD /path"
	summary string
	body    schema // JSON request body, nil if none
	query   []param
	// Exactly one of the handlers is set: sandbox routes are served for the
	// default sandbox and under /sandboxes/{sandbox_id}.
	sb  sandboxHandler
	srv func(http.ResponseWriter, *http.Request) error
	// raw marks a reply that is not a JSON envelope (downloads, openapi).
	raw string
}

type param struct {
	name, typ, doc string
	required       bool
}

// schema is a JSON Schema object.
type schema = map[string]any

// obj is an object schema; required fields are marked with a "*" suffix.
func obj(props ...any) schema {
	p := map[string]any{}
	var req []string
	for i := 0; i+1 < len(props); i += 2 {
		name := props[i].(string)
		if n, ok := strings.CutSuffix(name, "*"); ok {
			name = n
			req = append(req, n)
		}
		p[name] = props[i+1]
	}
	s := schema{"type": "object", "properties": p}
	if req != nil {
		s["required"] = req
	}
	return s
}

func typ(t, doc string) schema { return schema{"type": t, "description": doc} }

var (
	strT         = func(doc string) schema { return typ("string", doc) }
	numT         = func(doc string) schema { return typ("number", doc) }
	intT         = func(doc string) schema { return typ("integer", doc) }
	boolT        = func(doc string) schema { return typ("boolean", doc) }
	langT        = schema{"type": "string", "enum": []string{"python", "javascript"}}
	timeout      = numT("seconds; default 30, at most the server's maximum (900)")
	assistSchema = obj("code*", strT(""), "cursor_pos", intT("in code points; default: the end of code"),
		"detail_level", intT("inspect only: 0 (summary) or 1 (with source)"))
	formatT = schema{"type": "string", "enum": []string{"json", "llm"}, "description": "llm: outputs rendered for a language model (tables as text, images downscaled, long text cut in the middle with a marker), plus summary and files_written. When streaming, the output events stay as produced and the rendering is in the done event, since it fits the whole result into one budget"}
	streamT = boolT("reply with Server-Sent Events (also chosen by Accept: text/event-stream): an `output` event per output as it is produced, then `done` with the envelope the JSON reply would have; an `error` event if the execution could not be completed")
	mapT    = func(doc string) schema {
		return schema{"type": "object", "additionalProperties": schema{"type": "string"}, "description": doc}
	}
)

// table lists every operation codecell serves.
func (s *Server) table() []route {
	rs := []route{
		{pattern: "GET /health", summary: "Liveness; needs no API key", srv: s.health},
		{pattern: "GET /openapi.json", summary: "This document", srv: s.openAPI, raw: "application/json"},
		{pattern: "POST /v2/sandboxes", summary: "Create a sandbox (limits may only be lowered)", srv: s.createSandbox,
			body: obj("id", strT("1-64 letters, digits, '-' or '_'; made up if absent"), "ttl_seconds", numT("lifetime"),
				"labels", mapT("kept as given"),
				"limits", obj("memory_mb", intT(""), "pids", intT(""), "cpus", numT(""), "disk_mb", intT(""),
					"output_bytes", intT("per cell"), "timeout_seconds", numT("default execution timeout")))},
		{pattern: "GET /v2/sandboxes", summary: "List sandboxes", srv: s.listSandboxes,
			query: []param{{"label", "string", "key=value; repeatable; all must match", false}}},
		{pattern: "GET /v2/sandboxes/{sandbox_id}", summary: "Inspect a sandbox", srv: s.getSandbox},
		{pattern: "DELETE /v2/sandboxes/{sandbox_id}", summary: "Delete a sandbox with its processes and files", srv: s.deleteSandbox},

		{pattern: "GET /v1/sandbox", summary: "Sandbox environment (SandboxResponse)", sb: s.sandboxV1},
		{pattern: "GET /v2/sandbox", summary: "Sandbox and its capabilities", sb: s.sandboxV2},
		{pattern: "GET /v1/capabilities", summary: "Code interpreter, limits and active isolation layers", sb: s.capabilitiesV1},

		{pattern: "POST /v1/code/execute", summary: "Execute Python or JavaScript (CodeExecuteRequest)", sb: s.codeExecuteV1,
			body: obj("language*", langT, "code*", strT(""), "timeout", timeout, "cwd", strT("working directory"),
				"stateful", boolT("keep state in a session (one is made up if session_id is absent)"), "session_id", strT(""), "stream", streamT, "output_format", formatT)},
		{pattern: "GET /v1/code/info", summary: "Runtimes, versions, timeouts (CodeInfoResponse)", sb: s.codeInfo},
		{pattern: "POST /v2/code/execute", summary: "Execute; an unknown session_id is created on first use", sb: s.codeExecuteV2,
			body: obj("language*", langT, "code*", strT(""), "session_id", strT(""), "timeout", timeout, "cwd", strT(""), "stream", streamT, "output_format", formatT)},
		{pattern: "GET /v2/code/sessions", summary: "List sessions", sb: s.codeSessions,
			query: []param{{"language", "string", "python or javascript", false}}},
		{pattern: "POST /v2/code/sessions", summary: "Create a session and start its kernel", sb: s.codeCreateSession,
			body: obj("language*", langT, "session_id", strT("made up if absent"))},
		{pattern: "GET /v2/code/sessions/{session_id}", summary: "Inspect a session", sb: s.codeGetSession,
			query: []param{{"language", "string", "python or javascript (default: Python, then JavaScript)", false}}},
		{pattern: "DELETE /v2/code/sessions/{session_id}", summary: "End a session at once", sb: s.codeDeleteSession,
			query: []param{{"language", "string", "python or javascript (default: Python, then JavaScript)", false}}},

		{pattern: "POST /v2/code/sessions/{session_id}/interrupt", summary: "Interrupt the running execution; the session keeps its state", sb: s.interrupt(s.findSession),
			query: []param{{"language", "string", "python or javascript (default: Python, then JavaScript)", false}}},
		{pattern: "POST /v2/code/sessions/{session_id}/restart", summary: "Restart the session's kernel: state cleared, files kept", sb: s.restart(s.findSession),
			query: []param{{"language", "string", "python or javascript (default: Python, then JavaScript)", false}}},
		{pattern: "POST /v2/code/sessions/{session_id}/complete", summary: "Completions at a cursor (Jupyter complete_reply)", sb: s.complete(s.findSession),
			body: assistSchema, query: []param{{"language", "string", "python or javascript (default: Python, then JavaScript)", false}}},
		{pattern: "POST /v2/code/sessions/{session_id}/inspect", summary: "What the name at a cursor is (Jupyter inspect_reply)", sb: s.inspect(s.findSession),
			body: assistSchema, query: []param{{"language", "string", "python or javascript (default: Python, then JavaScript)", false}}},

		{pattern: "POST /v1/jupyter/execute", summary: "Execute Python in a kernel (JupyterExecuteRequest)", sb: s.jupyterExecute,
			body: obj("code*", strT(""), "timeout", timeout, "kernel_name", strT("python3"), "session_id", strT(""), "cwd", strT(""), "stream", streamT, "output_format", formatT)},
		{pattern: "POST /v1/jupyter/sessions/create", summary: "Create a Python session", sb: s.jupyterCreateSession,
			body: obj("session_id", strT(""), "kernel_name", strT("python3"), "cwd", strT(""))},
		{pattern: "GET /v1/jupyter/sessions", summary: "List Python sessions", sb: s.jupyterSessions},
		{pattern: "DELETE /v1/jupyter/sessions", summary: "End every Python session", sb: s.jupyterDeleteSessions},
		{pattern: "DELETE /v1/jupyter/sessions/{session_id}", summary: "End a Python session", sb: s.jupyterDeleteSession},
		{pattern: "POST /v1/jupyter/sessions/{session_id}/interrupt", summary: "Interrupt the running execution; the session keeps its state", sb: s.interrupt(jupyterSession)},
		{pattern: "POST /v1/jupyter/sessions/{session_id}/restart", summary: "Restart the session's kernel: state cleared, files kept", sb: s.restart(jupyterSession)},
		{pattern: "POST /v1/jupyter/sessions/{session_id}/complete", summary: "Completions at a cursor (Jupyter complete_reply)", sb: s.complete(jupyterSession), body: assistSchema},
		{pattern: "POST /v1/jupyter/sessions/{session_id}/inspect", summary: "What the name at a cursor is (Jupyter inspect_reply)", sb: s.inspect(jupyterSession), body: assistSchema},
		{pattern: "GET /v1/jupyter/info", summary: "Kernels and session limits (JupyterInfoResponse)", sb: s.jupyterInfo},

		{pattern: "POST /v1/nodejs/execute", summary: "Execute JavaScript (NodeJSExecuteRequest)", sb: s.nodeExecute,
			body: obj("code*", strT(""), "timeout", timeout, "stdin", strT(""), "files", mapT("name → content, written into cwd first"),
				"stateful", boolT(""), "session_id", strT(""), "cwd", strT(""), "version", strT("ignored: one Node.js"), "stream", streamT, "output_format", formatT)},
		{pattern: "POST /v1/nodejs/sessions", summary: "Create a JavaScript session", sb: s.nodeCreateSession,
			body: obj("session_id", strT(""), "cwd", strT(""), "max_idle_time", intT("seconds"))},
		{pattern: "GET /v1/nodejs/sessions", summary: "List JavaScript sessions", sb: s.nodeSessions},
		{pattern: "GET /v1/nodejs/sessions/{session_id}", summary: "Inspect a JavaScript session", sb: s.nodeGetSession},
		{pattern: "PATCH /v1/nodejs/sessions/{session_id}", summary: "Change a session's cwd or idle time", sb: s.nodeUpdateSession,
			body: obj("max_idle_time", intT("seconds"), "cwd", strT(""))},
		{pattern: "DELETE /v1/nodejs/sessions/{session_id}", summary: "End a JavaScript session", sb: s.nodeDeleteSession},
		{pattern: "GET /v1/nodejs/info", summary: "Node.js runtime (NodeJSRuntimeInfo)", sb: s.nodeInfo},
	}
	return append(rs, s.fileTable()...)
}

// routes registers the table.
func (s *Server) routes() {
	for _, r := range s.table() {
		if r.sb != nil {
			s.handle(r.pattern, r.sb)
		} else {
			s.handleServer(r.pattern, r.srv)
		}
	}
	if s.cfg.Metrics != nil {
		s.mux.Handle("GET /metrics", s.cfg.Metrics.Handler()) // Prometheus text format, not in /openapi.json
	}
	if s.cfg.MCP != nil {
		s.mux.Handle("/mcp", s.cfg.MCP) // MCP's streamable HTTP: its own protocol, not in /openapi.json
	}
}
