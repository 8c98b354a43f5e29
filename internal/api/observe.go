package api

import (
	"time"

	"github.com/codecell/codecell/internal/observe"
	"github.com/codecell/codecell/internal/sandbox"
)

// observe records an execution in the metrics and the audit log: o is nil
// when it failed before producing a result (err says why).
func (s *Server) observe(sb *sandbox.Sandbox, req execRequest, o *execOutcome, err error, start time.Time, queueWait time.Duration) {
	e := observe.Execution{Start: start, KeyID: s.keyID, Sandbox: sb.ID(), Language: req.lang,
		QueueWait: queueWait, Err: err, Code: req.code}
	if o != nil {
		e.Result = o.Result
		if o.sessionID != nil {
			e.Session = *o.sessionID
		}
		for _, f := range o.written {
			e.Files = append(e.Files, f.Path)
		}
	}
	s.recorder.Record(e)
}
