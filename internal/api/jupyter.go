package api

import (
	"cmp"
	"net/http"
	"time"

	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

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
		Format     *string  `json:"output_format"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if err := required("code", body.Code); err != nil {
		return err
	}
	lang, err := s.jupyterKernel(deref(body.KernelName))
	if err != nil {
		return err
	}
	t, err := s.timeout("timeout", body.Timeout)
	if err != nil {
		return err
	}
	req := execRequest{lang: lang, code: *body.Code, timeout: t, sessionID: deref(body.SessionID), cwd: deref(body.Cwd)}
	if req.llm, err = outputFormat(body.Format); err != nil {
		return err
	}
	return s.run(w, r, sb, req, wantsStream(r, body.Stream), true, func(o *execOutcome) map[string]any {
		data := o.common()
		data["kernel_name"] = kernelNameOf(lang)
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
	lang, err := s.jupyterKernel(deref(body.KernelName))
	if err != nil {
		return err
	}
	info, created, err := s.startSession(r, sb, lang, deref(body.SessionID))
	if err != nil {
		return err
	}
	msg := "session created"
	if !created {
		msg = "session already exists"
	}
	return ok(w, map[string]any{"session_id": info.ID, "kernel_name": kernelNameOf(lang), "message": msg})
}

// GET /v1/jupyter/sessions: ActiveSessionsResult, keyed by session id.
func (s *Server) jupyterSessions(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	sessions := map[string]any{}
	for _, sess := range sb.Sessions("") {
		if !isJupyter(sess.Language) {
			continue
		}
		info := sess.Info()
		sessions[info.ID] = map[string]any{
			"kernel_name": kernelNameOf(sess.Language),
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
	sess, err := jupyterSession(r, sb)
	if err != nil {
		return err
	}
	if err := sb.EndSession(sess.Language, sess.ID); err != nil {
		return err
	}
	return ok(w, map[string]any{"session_id": sess.ID, "deleted": true})
}

// DELETE /v1/jupyter/sessions: ends every Python session.
func (s *Server) jupyterDeleteSessions(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	n := 0
	for _, sess := range sb.Sessions("") {
		if isJupyter(sess.Language) && sb.EndSession(sess.Language, sess.ID) == nil {
			n++
		}
	}
	return ok(w, map[string]any{"deleted": n})
}

// GET /v1/jupyter/info: JupyterInfoResponse.
func (s *Server) jupyterInfo(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	rt := s.runtime.of(kernel.Python)
	_, backend := s.python(r.Context())
	kernels := []map[string]any{{"name": pythonKernel, "display_name": "Python 3 (IPython)", "language": "python", "backend": backend}}
	specs := s.cfg.Manager.Config().Sandbox.KernelSpecs
	for _, name := range s.kernelNames()[1:] {
		ks := specs[name]
		kernels = append(kernels, map[string]any{"name": name, "display_name": ks.DisplayName, "language": ks.Language, "backend": BackendKernel})
	}
	active := 0
	for _, sess := range sb.Sessions("") {
		if isJupyter(sess.Language) {
			active++
		}
	}
	return ok(w, map[string]any{
		"default_kernel":          pythonKernel,
		"available_kernels":       s.kernelNames(),
		"kernels":                 kernels,
		"active_sessions":         active,
		"session_timeout_seconds": int(s.cfg.Manager.Config().SessionIdle / time.Second),
		"max_sessions":            s.maxSessions(),
		"description":             "IPython " + cmp.Or(rt.Packages["IPython"], "?") + " on Python " + rt.Version + ", in a jail per session",
		"kernel_detection":        "python3: codecell's own IPython driver (or ipykernel with the kernel backend); others: Jupyter kernelspecs (kernel.json) in the Jupyter data directories",
		"backend":                 backend,
	})
}

func (s *Server) maxSessions() int {
	return cmp.Or(s.cfg.Manager.Config().Sandbox.MaxSessions, sandbox.DefaultMaxSessions)
}
