package api

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

// POST /v1/code/execute: CodeExecuteRequest → CodeExecuteResponse, with
// outputs carrying all nine keys of the v1 schema.
func (s *Server) codeExecuteV1(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	return s.codeExecute(w, r, sb, true)
}

// POST /v2/code/execute: {language, code, session_id, timeout}; an unknown
// session_id is created on first use. Outputs carry only the keys they use.
func (s *Server) codeExecuteV2(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	return s.codeExecute(w, r, sb, false)
}

func (s *Server) codeExecute(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox, v1 bool) error {
	var body struct {
		Language  *string  `json:"language"`
		Code      *string  `json:"code"`
		Timeout   *float64 `json:"timeout"`
		Cwd       *string  `json:"cwd"`
		Stateful  *bool    `json:"stateful"`
		SessionID *string  `json:"session_id"`
		Stream    *bool    `json:"stream"`
		Format    *string  `json:"output_format"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	req, err := s.codeRequest(body.Language, body.Code, body.Timeout, body.SessionID)
	if err != nil {
		return err
	}
	if req.llm, err = outputFormat(body.Format); err != nil {
		return err
	}
	req.cwd = deref(body.Cwd)
	req.stateful = deref(body.Stateful)
	return s.run(w, r, sb, req, wantsStream(r, body.Stream), v1, func(o *execOutcome) map[string]any {
		data := o.common()
		data["language"] = req.lang
		data["code"] = req.code
		data["stdout"] = o.Text("stdout")
		data["stderr"] = o.Text("stderr")
		data["exit_code"] = o.exitCode()
		if v1 {
			data["outputs"] = outputsV1(o.Outputs)
			data["traceback"] = o.tracebackLines()
		} else {
			data["outputs"] = o.Outputs
		}
		return data
	})
}

func (s *Server) codeRequest(lang, code *string, timeout *float64, sessionID *string) (execRequest, error) {
	l, err := language("language", deref(lang))
	if err != nil {
		return execRequest{}, err
	}
	if err := required("code", code); err != nil {
		return execRequest{}, err
	}
	t, err := s.timeout("timeout", timeout)
	if err != nil {
		return execRequest{}, err
	}
	return execRequest{lang: l, code: *code, timeout: t, sessionID: deref(sessionID)}, nil
}

// GET /v1/code/info: CodeInfoResponse.
func (s *Server) codeInfo(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var langs []map[string]any
	for _, l := range []kernel.Language{kernel.Python, kernel.JavaScript} {
		rt := s.runtime.of(l)
		langs = append(langs, map[string]any{
			"language":        l,
			"description":     rt.description,
			"runtime_version": rt.Version,
			"default_timeout": int(s.cfg.DefaultTimeout / time.Second),
			"max_timeout":     int(s.cfg.MaxTimeout / time.Second),
			"details": map[string]any{
				"backend":              s.backendOf(r.Context(), l),
				"interpreter":          rt.Path,
				"available":            rt.Err == nil,
				"session_idle_seconds": int(s.cfg.Manager.Config().SessionIdle / time.Second),
				"max_sessions":         s.maxSessions(),
				"packages":             rt.Packages,
			},
		})
	}
	return ok(w, map[string]any{"languages": langs})
}

// backendOf names what runs a language on the code routes.
func (s *Server) backendOf(ctx context.Context, l kernel.Language) string {
	if l == kernel.Python {
		_, b := s.python(ctx)
		return b
	}
	return BackendNative
}

// GET /v2/code/sessions?language=: the sandbox's sessions.
func (s *Server) codeSessions(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var lang kernel.Language
	if v := r.URL.Query().Get("language"); v != "" {
		l, err := language("language", v)
		if err != nil {
			return err
		}
		lang = l
	}
	list := []sandbox.SessionInfo{}
	for _, sess := range sb.Sessions(lang) {
		list = append(list, sess.Info())
	}
	return ok(w, map[string]any{"sessions": list})
}

// POST /v2/code/sessions {language, session_id?}: starts a session's kernel.
func (s *Server) codeCreateSession(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body struct {
		Language  *string `json:"language"`
		SessionID *string `json:"session_id"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	lang, err := language("language", deref(body.Language))
	if err != nil {
		return err
	}
	info, created, err := s.startSession(r, sb, lang, deref(body.SessionID))
	if err != nil {
		return err
	}
	return ok(w, map[string]any{"session": info, "created": created})
}

// startSession opens a session and starts its kernel, so that errors show
// now and the first execution is fast.
func (s *Server) startSession(r *http.Request, sb *sandbox.Sandbox, lang kernel.Language, id string) (sandbox.SessionInfo, bool, error) {
	lang = s.resolveSession(r.Context(), sb, lang, id)
	if err := s.runtime.check(lang); err != nil {
		return sandbox.SessionInfo{}, false, err
	}
	sess, created, err := sb.OpenSession(lang, id, true)
	if err != nil {
		return sandbox.SessionInfo{}, false, err
	}
	if err := sess.Start(r.Context()); err != nil {
		if created {
			sb.EndSession(lang, sess.ID)
		}
		return sandbox.SessionInfo{}, false, err
	}
	return sess.Info(), created, nil
}

// GET /v2/code/sessions/{id}?language=
func (s *Server) codeGetSession(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	sess, err := s.findSession(r, sb)
	if err != nil {
		return err
	}
	return ok(w, sess.Info())
}

// DELETE /v2/code/sessions/{id}?language=
func (s *Server) codeDeleteSession(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	sess, err := s.findSession(r, sb)
	if err != nil {
		return err
	}
	if err := sb.EndSession(sess.Language, sess.ID); err != nil {
		return err
	}
	return ok(w, map[string]any{"session_id": sess.ID, "language": sess.Language, "deleted": true})
}

// findSession looks a session up by id, in the language the query names,
// or in Python first and then JavaScript.
func (s *Server) findSession(r *http.Request, sb *sandbox.Sandbox) (*sandbox.Session, error) {
	id := r.PathValue("session_id")
	langs := []kernel.Language{kernel.Python, kernel.JavaScript}
	if v := r.URL.Query().Get("language"); v != "" {
		l, err := language("language", v)
		if err != nil {
			return nil, err
		}
		langs = []kernel.Language{l}
	}
	// A Python session may run on any backend's kernel: the current
	// backend's first.
	if slices.Contains(langs, kernel.Python) {
		others := slices.DeleteFunc(langs, func(l kernel.Language) bool { return l == kernel.Python })
		langs = slices.Concat(s.pythonSearch(r.Context()), others)
	}
	var err error
	for _, l := range langs {
		var sess *sandbox.Session
		if sess, _, err = sb.OpenSession(l, id, false); err == nil {
			return sess, nil
		}
	}
	return nil, err
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
