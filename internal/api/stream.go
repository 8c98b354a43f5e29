package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

// wantsStream reports whether the client asked for Server-Sent Events:
// with Accept: text/event-stream, or "stream": true in the body.
func wantsStream(r *http.Request, field *bool) bool {
	if field != nil {
		return *field
	}
	for _, a := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(a, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
				return true
			}
		}
	}
	return false
}

// keepAlive is how often a silent stream gets a comment line, so that
// proxies between the client and a long cell do not close it.
const keepAlive = 15 * time.Second

// writeTimeout bounds one write of events to a client.
const writeTimeout = 30 * time.Second

// run executes req and replies: one JSON envelope, or, when streaming, an
// "output" event per output as the kernel produces it (shaped like the
// route's outputs: the nine v1 keys if v1) and then a "done" event with the
// envelope the non-streaming reply would have had. Errors found before
// anything was streamed keep their HTTP status; later ones end the stream
// with an "error" event. A client that goes away mid-stream does not stop
// the execution once it has begun: it completes or times out as configured.
func (s *Server) run(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox, req execRequest, stream, v1 bool, data func(*execOutcome) map[string]any) error {
	if req.llm {
		plain := data
		data = func(o *execOutcome) map[string]any { return s.llmData(o, plain(o)) }
	}
	if !stream {
		o, err := s.execute(r.Context(), sb, req)
		if err != nil {
			return err
		}
		return replyExec(w, o, data(o))
	}
	ev := newEvents(w)
	defer ev.close()
	req.onOutput = func(o kernel.Output) {
		if v1 {
			ev.send("output", o.V1())
		} else {
			ev.send("output", o)
		}
	}
	// A client that leaves while the cell waits for its session cancels
	// it; once it runs, the cell completes.
	req.detached = true
	o, err := s.execute(r.Context(), sb, req)
	if err != nil {
		if ev.abandon() {
			return err // nothing was written: the error keeps its status
		}
		he := asHTTPError(err)
		ev.send("error", map[string]any{"status": he.status, "message": he.message})
		return nil
	}
	ev.send("done", execEnvelope(o, data(o)))
	return nil
}

// events writes Server-Sent Events from a goroutine of its own, so that a
// slow client never holds up the kernel (what waits is bounded by the
// cell's output limit). The response starts with the first event or
// keep-alive; nothing is written before, so that early errors keep their
// status.
type events struct {
	w  http.ResponseWriter
	rc *http.ResponseController

	mu      sync.Mutex
	queue   [][]byte
	begun   bool
	closed  bool
	wake    chan struct{}
	stopped chan struct{}
}

func newEvents(w http.ResponseWriter) *events {
	e := &events{w: w, rc: http.NewResponseController(w), wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	go e.loop()
	return e
}

// send queues one event; v is written as JSON.
func (e *events) send(name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	e.push([]byte("event: " + name + "\ndata: " + string(b) + "\n\n"))
}

func (e *events) push(b []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	e.queue = append(e.queue, b)
	e.begun = true
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// abandon stops the stream if nothing has been written yet, and reports
// whether it did.
func (e *events) abandon() bool {
	e.mu.Lock()
	if e.begun {
		e.mu.Unlock()
		return false
	}
	e.closeLocked()
	e.mu.Unlock()
	<-e.stopped
	return true
}

// close writes what is queued and stops; it is safe to call twice.
func (e *events) close() {
	e.mu.Lock()
	e.closeLocked()
	e.mu.Unlock()
	<-e.stopped
}

func (e *events) closeLocked() {
	if !e.closed {
		e.closed = true
		close(e.wake)
	}
}

func (e *events) loop() {
	defer close(e.stopped)
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	headers := false
	gone := false
	write := func(chunks [][]byte) {
		if gone || len(chunks) == 0 {
			return
		}
		if !headers {
			headers = true
			h := e.w.Header()
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
			e.w.WriteHeader(http.StatusOK)
		}
		// A client that stops reading is dropped, not waited for.
		e.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		for _, c := range chunks {
			if _, err := e.w.Write(c); err != nil {
				gone = true // the client left; the execution goes on
				return
			}
		}
		if e.rc.Flush() != nil {
			gone = true
		}
	}
	for {
		select {
		case _, ok := <-e.wake:
			e.mu.Lock()
			chunks := e.queue
			e.queue = nil
			e.mu.Unlock()
			write(chunks)
			if !ok {
				return
			}
		case <-tick.C:
			e.mu.Lock()
			live := !e.closed
			e.begun = e.begun || live
			e.mu.Unlock()
			if live {
				write([][]byte{[]byte(": keep-alive\n\n")})
			}
		}
	}
}
