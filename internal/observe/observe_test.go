package observe

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/codecell/codecell/internal/audit"
	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/metrics"
)

func TestLabels(t *testing.T) {
	for _, tt := range []struct {
		lang              kernel.Language
		language, backend string
	}{
		{kernel.Python, "python", BackendNative},
		{kernel.JavaScript, "javascript", BackendNative},
		{kernel.Jupyter("ir"), "ir", BackendKernel},
		{kernel.Remote("python3"), "python3", BackendRemote},
	} {
		if got := LanguageLabel(tt.lang); got != tt.language {
			t.Errorf("LanguageLabel(%q) = %q, want %q", tt.lang, got, tt.language)
		}
		if got := BackendLabel(tt.lang); got != tt.backend {
			t.Errorf("BackendLabel(%q) = %q, want %q", tt.lang, got, tt.backend)
		}
	}
}

// TestRecord: an execution is counted by language, backend and status, a
// kernel death by its reason, a session's queue wait observed; its audit
// line has what the operator needs, at most 50 files, and never the code
// unless asked. A nil Recorder records nothing.
func TestRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	log, err := audit.Open(audit.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	m := metrics.New(metrics.Sources{})
	r := &Recorder{Metrics: m, Audit: log}

	ok := &kernel.Result{Status: kernel.StatusOK, Usage: kernel.Usage{CPUTime: 1500 * time.Millisecond, PeakMemoryBytes: 7 << 20},
		Outputs: []kernel.Output{{OutputType: "stream", Name: "stdout", Text: "hello\n"}}}
	// A death is counted by why the kernel died, not by the cell's first
	// error; an error the cell raised is no death, whatever its name.
	died := &kernel.Result{Status: kernel.StatusError, Died: true, Outputs: []kernel.Output{
		{OutputType: "error", Ename: "ZeroDivisionError"}, {OutputType: "error", Ename: kernel.EnameOutOfMemory, Evalue: "killed"}}}
	raised := &kernel.Result{Status: kernel.StatusError,
		Outputs: []kernel.Output{{OutputType: "error", Ename: kernel.EnameTimeout}, {OutputType: "error", Ename: kernel.EnameKernelDied}}}
	var many []string
	for i := range 60 {
		many = append(many, fmt.Sprintf("/tmp/f%d", i))
	}
	start := time.Now().Add(-time.Second)
	r.Record(Execution{Start: start, KeyID: "key1", Sandbox: "sb", Session: "s", Language: kernel.Python,
		QueueWait: 20 * time.Millisecond, Result: ok, Code: "print('hello')", Files: many})
	r.Record(Execution{Start: start, Sandbox: "sb", Language: kernel.Jupyter("ir"), Result: died, Code: "x"})
	r.Record(Execution{Start: start, Sandbox: "sb", Language: kernel.JavaScript, Err: errors.New("no such session"), Code: "y"})
	r.Record(Execution{Start: start, Sandbox: "sb", Language: kernel.Python, Result: raised, Code: "raise TimeoutError"})
	(*Recorder)(nil).Record(Execution{Start: start, Language: kernel.Python, Result: ok})

	for _, tt := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"python", BackendNative, "ok"}, 1},
		{[]string{"ir", BackendKernel, "error"}, 1},
		{[]string{"javascript", BackendNative, "failed"}, 1},
	} {
		if got := testutil.ToFloat64(m.Executions.WithLabelValues(tt.labels...)); got != tt.want {
			t.Errorf("executions %v = %v, want %v", tt.labels, got, tt.want)
		}
	}
	for why, want := range map[string]float64{"out_of_memory": 1, "timeout": 0, "died": 0} {
		if got := testutil.ToFloat64(m.KernelDeaths.WithLabelValues(why)); got != want {
			t.Errorf("%s deaths = %v, want %v", why, got, want)
		}
	}
	// Only the session's execution waited in a queue.
	var qw dto.Metric
	if err := m.QueueWaitSeconds.(prometheus.Metric).Write(&qw); err != nil {
		t.Fatal(err)
	}
	if n, sum := qw.GetHistogram().GetSampleCount(), qw.GetHistogram().GetSampleSum(); n != 1 || sum != 0.02 {
		t.Errorf("queue waits observed: %d, summing %v s; want one of 0.02 s", n, sum)
	}

	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d audit lines, want 4:\n%s", len(lines), b)
	}
	var e audit.Entry
	if err := json.Unmarshal([]byte(lines[0]), &e); err != nil {
		t.Fatal(err)
	}
	if e.KeyID != "key1" || e.Sandbox != "sb" || e.Session != "s" || e.Language != "python" || e.Status != "ok" ||
		e.CPUMS != 1500 || e.PeakMemoryBytes != 7<<20 || e.BytesOut == 0 || len(e.FilesWritten) != 50 ||
		e.DurationMS < 1000 || e.Code != "" || len(e.CodeSHA256) != 64 {
		t.Errorf("audit entry of a session cell: %+v", e)
	}
	if err := json.Unmarshal([]byte(lines[2]), &e); err != nil {
		t.Fatal(err)
	}
	if e.Status != "failed" || e.Error != "no such session" {
		t.Errorf("audit entry of a failed execution: %+v", e)
	}
}
