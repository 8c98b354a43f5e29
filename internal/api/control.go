package api

import (
	"net/http"
	"unicode/utf8"

	"github.com/codecell/codecell/internal/sandbox"
)

// Control of a live session: interrupt, restart, complete and inspect,
// served under /v2/code/sessions/{session_id}/ (any language, as the other
// session routes find it) and /v1/jupyter/sessions/{session_id}/ (Python
// and the Jupyter kernels).

// sessionFinder finds the session a control route names.
type sessionFinder func(r *http.Request, sb *sandbox.Sandbox) (*sandbox.Session, error)

// POST .../interrupt: the running execution stops with KeyboardInterrupt
// (or Node's equivalent); the session keeps its state.
func (s *Server) interrupt(find sessionFinder) sandboxHandler {
	return func(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
		sess, err := find(r, sb)
		if err != nil {
			return err
		}
		info := sess.Info()
		if err := sess.Interrupt(); err != nil {
			return errorf(http.StatusConflict, "interrupting session %q: %v", sess.ID, err)
		}
		return ok(w, map[string]any{"session_id": sess.ID, "language": sess.Language, "interrupted": info.Busy})
	}
}

// POST .../restart: a fresh kernel, state cleared, files kept.
func (s *Server) restart(find sessionFinder) sandboxHandler {
	return func(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
		sess, err := find(r, sb)
		if err != nil {
			return err
		}
		if err := sess.Restart(r.Context()); err != nil {
			return err
		}
		return ok(w, sess.Info())
	}
}

// assistBody is the body of complete and inspect; cursor_pos counts code
// points and defaults to the end of the code, as in Jupyter.
type assistBody struct {
	Code        *string `json:"code"`
	CursorPos   *int    `json:"cursor_pos"`
	DetailLevel *int    `json:"detail_level"`
}

func (b *assistBody) check() (code string, pos int, err error) {
	if err := required("code", b.Code); err != nil {
		return "", 0, err
	}
	n := utf8.RuneCountInString(*b.Code)
	pos = n
	if b.CursorPos != nil {
		pos = *b.CursorPos
		if pos < 0 || pos > n {
			return "", 0, invalid("cursor_pos", "must be between 0 and the length of code in code points", "value_error")
		}
	}
	if d := deref(b.DetailLevel); d != 0 && d != 1 {
		return "", 0, invalid("detail_level", "must be 0 or 1", "value_error")
	}
	return *b.Code, pos, nil
}

// POST .../complete {code, cursor_pos}: Jupyter's complete_reply.
func (s *Server) complete(find sessionFinder) sandboxHandler {
	return assistHandler(find, func(r *http.Request, sess *sandbox.Session, code string, pos, _ int) (any, error) {
		return sess.Complete(r.Context(), code, pos)
	})
}

// POST .../inspect {code, cursor_pos, detail_level}: Jupyter's inspect_reply.
func (s *Server) inspect(find sessionFinder) sandboxHandler {
	return assistHandler(find, func(r *http.Request, sess *sandbox.Session, code string, pos, detail int) (any, error) {
		return sess.Inspect(r.Context(), code, pos, detail)
	})
}

// assistHandler decodes and checks an assistBody, finds the session and
// replies with what ask returns.
func assistHandler(find sessionFinder, ask func(r *http.Request, sess *sandbox.Session, code string, pos, detail int) (any, error)) sandboxHandler {
	return func(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
		var body assistBody
		if err := decode(r, &body); err != nil {
			return err
		}
		code, pos, err := body.check()
		if err != nil {
			return err
		}
		sess, err := find(r, sb)
		if err != nil {
			return err
		}
		reply, err := ask(r, sess, code, pos, deref(body.DetailLevel))
		if err != nil {
			return err
		}
		return ok(w, reply)
	}
}
