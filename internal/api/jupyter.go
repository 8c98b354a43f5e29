package api

import (
	"cmp"
	"fmt"
	"net/http"
	"time"

	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

// The only Jupyter kernel codecell runs: Python on IPython.
const kernelName = "python3"

func checkKernelName(name string) error {
	if name != "" && name != kernelName && name != "python" {
		return invalid("kernel_name", fmt.Sprintf("unknown kernel %q; available: [%q]", name, kernelName), "value_error")
	}
	return nil
}

// POST /v1/jupyter/execute: JupyterExecuteRequest → JupyterExecuteResponse.
// Without a session_id it runs in a fresh kernel discarded afterwards.
func (s *Server) jupyterExecute(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body struct {
		Code       *string  `json:"code"`
		Timeout    *float64 `json:"timeout"`
		KernelName *string  `json:"kernel_name"`
		SessionID  *string  `json:"session_id"`
		Cwd        *string  `json:"cwd"`
		Stream     *bool    `json:"stream"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if err := required("code", body.Code); err != nil {
		return err
	}
	if err := checkKernelName(deref(body.KernelName)); err != nil {
		return err
	}
	t, err := s.timeout("timeout", body.Timeout)
	if err != nil {
		return err
	}
	req := execRequest{lang: kernel.Python, code: *body.Code, timeout: t, sessionID: deref(body.SessionID), cwd: deref(body.Cwd)}
	return s.run(w, r, sb, req, wantsStream(r, body.Stream), true, func(o *execOutcome) map[string]any {
		data := o.common()
		data["kernel_name"] = kernelName
		data["code"] = *body.Code
		data["outputs"] = outputsV1(o.Outputs)
		data["msg_id"] = nil
		return data
	})
}

// POST /v1/jupyter/sessions/create: JupyterCreateSessionRequest.
func (s *Server) jupyterCreateSession(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body struct {
		SessionID  *string `json:"session_id"`
		KernelName *string `json:"kernel_name"`
		Cwd        *string `json:"cwd"`
	}
	if r.ContentLength != 0 {
		if err := decode(r, &body); err != nil {
			return err
		}
	}
	if err := checkKernelName(deref(body.KernelName)); err != nil {
		return err
	}
	info, created, err := s.startSession(r, sb, kernel.Python, deref(body.SessionID))
	if err != nil {
		return err
	}
	msg := "session created"
	if !created {
		msg = "session already exists"
	}
	return ok(w, map[string]any{"session_id": info.ID, "kernel_name": kernelName, "message": msg})
}

// GET /v1/jupyter/sessions: ActiveSessionsResult, keyed by session id.
func (s *Server) jupyterSessions(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	sessions := map[string]any{}
	for _, sess := range sb.Sessions(kernel.Python) {
		info := sess.Info()
		sessions[info.ID] = map[string]any{
			"kernel_name": kernelName,
			"last_used":   float64(info.LastUsed.UnixMilli()) / 1000,
			"age_seconds": int(time.Since(info.Created).Seconds()),
			"busy":        info.Busy,
			"alive":       info.Alive,
		}
	}
	return ok(w, map[string]any{"sessions": sessions})
}

// DELETE /v1/jupyter/sessions/{session_id}
func (s *Server) jupyterDeleteSession(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	id := r.PathValue("session_id")
	if err := sb.EndSession(kernel.Python, id); err != nil {
		return err
	}
	return ok(w, map[string]any{"session_id": id, "deleted": true})
}

// DELETE /v1/jupyter/sessions: ends every Python session.
func (s *Server) jupyterDeleteSessions(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	n := 0
	for _, sess := range sb.Sessions(kernel.Python) {
		if sb.EndSession(kernel.Python, sess.ID) == nil {
			n++
		}
	}
	return ok(w, map[string]any{"deleted": n})
}

// GET /v1/jupyter/info: JupyterInfoResponse.
func (s *Server) jupyterInfo(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	rt := s.runtime.of(kernel.Python)
	return ok(w, map[string]any{
		"default_kernel":          kernelName,
		"available_kernels":       []string{kernelName},
		"active_sessions":         len(sb.Sessions(kernel.Python)),
		"session_timeout_seconds": int(s.cfg.Manager.Config().SessionIdle / time.Second),
		"max_sessions":            s.maxSessions(),
		"description":             "IPython " + cmp.Or(rt.Packages["IPython"], "?") + " on Python " + rt.Version + ", in a jail per session",
		"kernel_detection":        "codecell's own IPython kernel driver",
		"backend":                 backendOf(kernel.Python),
	})
}

func (s *Server) maxSessions() int {
	return cmp.Or(s.cfg.Manager.Config().Sandbox.MaxSessions, sandbox.DefaultMaxSessions)
}
