// Package observe records what each execution leaves for the operator: its
// Prometheus metrics and its audit log line. The HTTP API and the MCP server
// both record through it, so an execution counts the same whichever way it
// came.
package observe

import (
	"encoding/json"
	"log/slog"
	"time"

	"github.com/codecell/codecell/internal/audit"
	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/metrics"
)

// Backends label where code ran.
const (
	BackendNative = "native" // codecell's own driver in a jail
	BackendKernel = "kernel" // a Jupyter kernel in a jail
	BackendRemote = "remote" // a kernel of a remote Jupyter server
)

// Recorder records executions. Nil fields record nothing.
type Recorder struct {
	Metrics *metrics.Metrics
	Audit   *audit.Log
	Logger  *slog.Logger // for failures to write the audit log
}

// Execution is one execution as the operator sees it.
type Execution struct {
	Start     time.Time
	KeyID     string // audit.KeyID of the caller's API key
	Sandbox   string
	Session   string // "" for a one-shot run
	Language  kernel.Language
	QueueWait time.Duration // behind earlier cells of the session
	// Result is nil when the execution failed before it ran (Err says why).
	Result *kernel.Result
	Err    error
	Code   string
	Files  []string // what it wrote, when that was looked at
}

// Record records e, which ended now.
func (r *Recorder) Record(e Execution) {
	if r == nil {
		return
	}
	d := time.Since(e.Start)
	status := "failed"
	if e.Result != nil {
		status = e.Result.Status
	}
	if m := r.Metrics; m != nil {
		m.Executions.WithLabelValues(LanguageLabel(e.Language), BackendLabel(e.Language), status).Inc()
		m.ExecutionSeconds.WithLabelValues(LanguageLabel(e.Language)).Observe(d.Seconds())
		if e.Session != "" {
			m.QueueWaitSeconds.Observe(e.QueueWait.Seconds())
		}
		if d := e.Result.Death(); d != nil {
			switch d.Ename {
			case kernel.EnameOutOfMemory:
				m.KernelDeaths.WithLabelValues("out_of_memory").Inc()
			case kernel.EnameTimeout:
				m.KernelDeaths.WithLabelValues("timeout").Inc()
			default:
				m.KernelDeaths.WithLabelValues("died").Inc()
			}
		}
	}
	if r.Audit == nil {
		return
	}
	a := audit.Entry{Time: e.Start, KeyID: e.KeyID, Sandbox: e.Sandbox, Session: e.Session, Language: string(e.Language),
		Status: status, DurationMS: d.Milliseconds()}
	if e.Err != nil {
		a.Error = e.Err.Error()
	}
	if res := e.Result; res != nil {
		a.CPUMS, a.PeakMemoryBytes = res.Usage.CPUTime.Milliseconds(), res.Usage.PeakMemoryBytes
		if b, err := json.Marshal(res.Outputs); err == nil {
			a.BytesOut = int64(len(b))
		}
	}
	a.FilesWritten = e.Files[:min(len(e.Files), 50)]
	if err := r.Audit.Record(a, e.Code); err != nil && r.Logger != nil {
		r.Logger.Error("audit log", "err", err)
	}
}

// LanguageLabel keeps the metric labels few: Jupyter kernels by kernelspec.
func LanguageLabel(l kernel.Language) string {
	if name, _, ok := l.Kernelspec(); ok {
		return name
	}
	return string(l)
}

// BackendLabel is where code of language l runs.
func BackendLabel(l kernel.Language) string {
	switch _, remote, ok := l.Kernelspec(); {
	case remote:
		return BackendRemote
	case ok:
		return BackendKernel
	}
	return BackendNative
}
