package api

import (
	"encoding/json"
	"time"

	"github.com/codecell/codecell/internal/audit"
	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

// observe records an execution in the metrics and the audit log: o is nil
// when it failed before producing a result (err says why).
func (s *Server) observe(sb *sandbox.Sandbox, req execRequest, o *execOutcome, err error, start time.Time, queueWait time.Duration) {
	d := time.Since(start)
	status := "failed"
	if o != nil {
		status = o.Status
	}
	if m := s.cfg.Metrics; m != nil {
		m.Executions.WithLabelValues(languageLabel(req.lang), backendLabel(req.lang), status).Inc()
		m.ExecutionSeconds.WithLabelValues(languageLabel(req.lang)).Observe(d.Seconds())
		if req.sessionID != "" || req.stateful {
			m.QueueWaitSeconds.Observe(queueWait.Seconds())
		}
		if e := o.errorOutput(); e != nil {
			switch e.Ename {
			case kernel.EnameOutOfMemory:
				m.KernelDeaths.WithLabelValues("out_of_memory").Inc()
			case kernel.EnameTimeout:
				m.KernelDeaths.WithLabelValues("timeout").Inc()
			case kernel.EnameKernelDied:
				m.KernelDeaths.WithLabelValues("died").Inc()
			}
		}
	}
	if s.cfg.Audit == nil {
		return
	}
	e := audit.Entry{Time: start, KeyID: audit.KeyID(s.cfg.APIKey), Sandbox: sb.ID(), Language: string(req.lang),
		Status: status, DurationMS: d.Milliseconds()}
	if err != nil {
		e.Error = err.Error()
	}
	if o != nil {
		if o.sessionID != nil {
			e.Session = *o.sessionID
		}
		e.CPUMS, e.PeakMemoryBytes = o.Usage.CPUTime.Milliseconds(), o.Usage.PeakMemoryBytes
		if b, err := json.Marshal(o.Outputs); err == nil {
			e.BytesOut = int64(len(b))
		}
		for i, f := range o.written {
			if i == 50 {
				break
			}
			e.FilesWritten = append(e.FilesWritten, f.Path)
		}
	}
	if err := s.cfg.Audit.Record(e, req.code); err != nil {
		s.log.Error("audit log", "err", err)
	}
}

// errorOutput is the first error output of an outcome, or nil.
func (o *execOutcome) errorOutput() *kernel.Output {
	if o == nil {
		return nil
	}
	return o.Error()
}

// languageLabel keeps the metric labels few: Jupyter kernels by kernelspec.
func languageLabel(l kernel.Language) string {
	if name, _, ok := l.Kernelspec(); ok {
		return name
	}
	return string(l)
}

func backendLabel(l kernel.Language) string {
	switch _, remote, ok := l.Kernelspec(); {
	case remote:
		return backendRemote
	case ok:
		return BackendKernel
	}
	return BackendNative
}
