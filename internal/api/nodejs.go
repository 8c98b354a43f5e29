package api

import (
	"cmp"
	"net/http"
	"time"

	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

// POST /v1/nodejs/execute: NodeJSExecuteRequest → NodeJSExecuteResponse.
func (s *Server) nodeExecute(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body struct {
		Code      *string           `json:"code"`
		Timeout   *float64          `json:"timeout"`
		Stdin     *string           `json:"stdin"`
		Files     map[string]string `json:"files"`
		Stateful  *bool             `json:"stateful"`
		SessionID *string           `json:"session_id"`
		Cwd       *string           `json:"cwd"`
		Version   *string           `json:"version"`
		Stream    *bool             `json:"stream"`
		Format    *string           `json:"output_format"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if err := required("code", body.Code); err != nil {
		return err
	}
	t, err := s.timeout("timeout", body.Timeout)
	if err != nil {
		return err
	}
	req := execRequest{lang: kernel.JavaScript, code: *body.Code, timeout: t, sessionID: deref(body.SessionID),
		stateful: deref(body.Stateful), cwd: deref(body.Cwd), stdin: deref(body.Stdin), files: body.Files}
	if req.llm, err = outputFormat(body.Format); err != nil {
		return err
	}
	return s.run(w, r, sb, req, wantsStream(r, body.Stream), true, func(o *execOutcome) map[string]any {
		data := o.common()
		data["language"] = kernel.JavaScript
		data["code"] = *body.Code
		data["outputs"] = outputsV1(o.Outputs)
		data["stdout"] = o.Text("stdout")
		data["stderr"] = o.Text("stderr")
		data["exit_code"] = o.exitCode()
		return data
	})
}

// nodeSessionInfo is NodeJSSessionInfo.
func (s *Server) nodeSessionInfo(info sandbox.SessionInfo) map[string]any {
	state := "idle"
	switch {
	case info.Busy:
		state = "busy"
	case !info.Alive:
		state = "stopped"
	}
	return map[string]any{
		"session_id":    info.ID,
		"cwd":           info.Cwd,
		"created_at":    float64(info.Created.UnixMilli()) / 1000,
		"last_used":     float64(info.LastUsed.UnixMilli()) / 1000,
		"max_idle_time": int(cmp.Or(info.MaxIdle, s.cfg.Manager.Config().SessionIdle) / time.Second),
		"age_seconds":   int(time.Since(info.Created).Seconds()),
		"state":         state,
	}
}

// POST /v1/nodejs/sessions: NodeJSCreateSessionRequest.
func (s *Server) nodeCreateSession(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body struct {
		SessionID   *string `json:"session_id"`
		Cwd         *string `json:"cwd"`
		MaxIdleTime *int64  `json:"max_idle_time"`
	}
	if r.ContentLength != 0 {
		if err := decode(r, &body); err != nil {
			return err
		}
	}
	if err := s.runtime.check(kernel.JavaScript); err != nil {
		return err
	}
	sess, created, err := sb.OpenSession(kernel.JavaScript, deref(body.SessionID), true)
	if err != nil {
		return err
	}
	sess.Configure(deref(body.Cwd), time.Duration(deref(body.MaxIdleTime))*time.Second)
	if err := sess.Start(r.Context()); err != nil {
		if created {
			sb.EndSession(kernel.JavaScript, sess.ID)
		}
		return err
	}
	msg := "session created"
	if !created {
		msg = "session already exists"
	}
	return ok(w, map[string]any{"session_id": sess.ID, "created": created, "message": msg, "session": s.nodeSessionInfo(sess.Info())})
}

// GET /v1/nodejs/sessions: NodeJSSessionListResponse, keyed by id.
func (s *Server) nodeSessions(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	sessions := map[string]any{}
	for _, sess := range sb.Sessions(kernel.JavaScript) {
		sessions[sess.ID] = s.nodeSessionInfo(sess.Info())
	}
	return ok(w, map[string]any{"sessions": sessions})
}

// GET /v1/nodejs/sessions/{session_id}: NodeJSSessionResponse.
func (s *Server) nodeGetSession(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	sess, _, err := sb.OpenSession(kernel.JavaScript, r.PathValue("session_id"), false)
	if err != nil {
		return err
	}
	return ok(w, map[string]any{"session": s.nodeSessionInfo(sess.Info())})
}

// PATCH /v1/nodejs/sessions/{session_id}: NodeJSUpdateSessionRequest.
func (s *Server) nodeUpdateSession(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body struct {
		MaxIdleTime *int64  `json:"max_idle_time"`
		Cwd         *string `json:"cwd"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.MaxIdleTime != nil && *body.MaxIdleTime <= 0 {
		return invalid("max_idle_time", "must be a positive number of seconds", "value_error.number")
	}
	sess, _, err := sb.OpenSession(kernel.JavaScript, r.PathValue("session_id"), false)
	if err != nil {
		return err
	}
	sess.Configure(deref(body.Cwd), time.Duration(deref(body.MaxIdleTime))*time.Second)
	return ok(w, map[string]any{"updated": true, "session": s.nodeSessionInfo(sess.Info())})
}

// DELETE /v1/nodejs/sessions/{session_id}: NodeJSDeleteSessionResponse.
func (s *Server) nodeDeleteSession(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	if err := sb.EndSession(kernel.JavaScript, r.PathValue("session_id")); err != nil {
		return err
	}
	return ok(w, map[string]any{"deleted": true})
}

// GET /v1/nodejs/info: NodeJSRuntimeInfo.
func (s *Server) nodeInfo(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	rt := s.runtime.of(kernel.JavaScript)
	var errText *string
	if rt.Err != nil {
		e := rt.Err.Error()
		errText = &e
	}
	return ok(w, map[string]any{
		"node_version":         "v" + rt.Version,
		"npm_version":          "",
		"supported_languages":  []string{"javascript"},
		"description":          "Node.js REPL in a jail per session: persistent globals, top-level await, require of built-in modules",
		"runtime_directory":    nil,
		"global_npm_directory": nil,
		"runtime_packages":     []any{},
		"global_packages":      []any{},
		"error":                errText,
		"available_versions":   []string{"v" + rt.Version},
		"current_version":      "v" + rt.Version,
	})
}
