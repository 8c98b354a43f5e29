package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codecell/codecell/client"
)

// TestFaults: faults of a kernel, of clients and of their input, against
// the real server, each with nothing lost and a clear status. One server
// takes them in turn; after all of them it still serves, a file written
// before the first is intact, and SIGTERM leaves nothing behind.
func TestFaults(t *testing.T) {
	requireJail(t)
	bin := buildBinary(t)
	dataDir := newDataDir(t)
	parent := cgroupParent(t, "faulttest")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// A short body timeout, so that slow bodies are cut off quickly.
	srv, url, exited := serveAt(t, bin, dataDir, parent, "--body-timeout", "5s")
	stopped := false
	defer func() {
		if !stopped { // a failed check: still unmount what the server holds
			stopServer(t, srv, exited)
		}
	}()
	c := newClient(t, url)
	f := &faultServer{url: url, c: c, parent: parent, uids: map[int]bool{},
		staging: filepath.Join(dataDir, "sandboxes", "default", "fs", "staging")}

	// Written before any fault; every fault must leave it as it is.
	keep := bytes.Repeat([]byte("kept\x00\xff\n"), 40000)
	if _, err := c.WriteFile(ctx, "/home/user/keep/data.bin", bytes.NewReader(keep)); err != nil {
		t.Fatal(err)
	}

	t.Run("kernel SIGKILLed mid-cell", func(t *testing.T) { f.kernelKilled(ctx, t) })
	t.Run("client leaves mid-cell", func(t *testing.T) { f.clientLeavesCell(ctx, t) })
	t.Run("client leaves mid-upload", func(t *testing.T) { f.clientLeavesUpload(ctx, t) })
	t.Run("slow clients", func(t *testing.T) { f.slowClients(ctx, t) })
	t.Run("bad input", func(t *testing.T) { f.badInput(ctx, t) })

	// After every fault: the server serves, and the file is intact.
	if res, err := c.Execute(ctx, client.ExecuteRequest{Language: client.Python, Code: "6 * 7"}); err != nil || res.Text() != "42" {
		t.Errorf("one-shot run after the faults: %+v %v", res, err)
	}
	f.checkKept(ctx, t, "/home/user/keep/data.bin", keep)

	for uid := range sandboxUIDs(parent) {
		f.uids[uid] = true
	}
	stopped = true
	stopServer(t, srv, exited)
	checkUnmounted(t, dataDir, "after SIGTERM")
	if len(f.uids) == 0 {
		t.Error("never saw a process of the sandbox's uid: the leak check below checks nothing")
	}
	for uid := range f.uids {
		if pids := processesOf(uid); len(pids) > 0 {
			t.Errorf("processes of sandbox uid %d left after SIGTERM: %v", uid, pids)
		}
	}
}

// faultServer is the server TestFaults runs, with what its cases share.
type faultServer struct {
	url    string
	c      *client.Client
	parent string
	uids   map[int]bool // sandbox uids seen, checked for leftovers at the end
	// staging is where the default sandbox's uploads are written, on its
	// disk but out of its code's sight, until they are renamed into place.
	staging string
}

// rawReply is an HTTP reply as sent, for what the client package would hide.
type rawReply struct {
	status int
	body   []byte
	env    struct {
		Success bool            `json:"success"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
		Detail  json.RawMessage `json:"detail"`
	}
}

func (r rawReply) String() string {
	b := r.body
	if len(b) > 600 {
		b = append(b[:300:300], append([]byte(" ... "), b[len(b)-300:]...)...)
	}
	return fmt.Sprintf("%d %s", r.status, b)
}

// do sends one request with the API key and reads the whole reply; a
// request that fails has status 0 and the error as its body. It may be
// called from any goroutine.
func (f *faultServer) do(ctx context.Context, method, path, ctype string, body []byte) rawReply {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.url+path, rd)
	if err != nil {
		return rawReply{body: []byte(err.Error())}
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Authorization", "Bearer "+cliTestKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return rawReply{body: []byte(err.Error())}
	}
	defer resp.Body.Close()
	r := rawReply{status: resp.StatusCode}
	if r.body, err = io.ReadAll(resp.Body); err != nil {
		return rawReply{body: []byte(fmt.Sprintf("%d, then reading the reply: %v", resp.StatusCode, err))}
	}
	json.Unmarshal(r.body, &r.env)
	return r
}

func (f *faultServer) checkKept(ctx context.Context, t *testing.T, path string, want []byte) {
	t.Helper()
	r, err := f.c.ReadFile(ctx, path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer r.Close()
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s: %d bytes (want %d the same as written), %v", path, len(got), len(want), err)
	}
}

// kernelKilled: a session's kernel killed by SIGKILL in the middle of a
// cell. The cell's request gets a 200 saying the kernel died (with what it
// printed before), the session runs its next cell in a fresh kernel, the
// sandbox's other session keeps its state, one-shot runs work and the
// files the dead kernel wrote stay.
func (f *faultServer) kernelKilled(ctx context.Context, t *testing.T) {
	c := f.c
	for _, cell := range []struct{ session, code string }{{"victim", "x = 41"}, {"bystander", "y = 7"}} {
		if res, err := c.Execute(ctx, client.ExecuteRequest{Language: client.Python, Code: cell.code, SessionID: cell.session}); err != nil || res.Err() != nil {
			t.Fatalf("%s: %+v %v", cell.session, res, err)
		}
	}

	// The cell holds a file of a unique name open: the one process with
	// it among its descriptors is the kernel running this cell, not the
	// sandbox's zygote, nor the bystander's kernel.
	name := fmt.Sprintf("fault-kernel-%d", time.Now().UnixNano())
	code := fmt.Sprintf("import time\nheld = open('/tmp/%s', 'w')\nprint('marker', flush=True)\ntime.sleep(60)", name)
	body, _ := json.Marshal(map[string]any{"language": "python", "code": code, "session_id": "victim", "timeout": 120})
	replied := make(chan rawReply, 1)
	go func() { replied <- f.do(ctx, "POST", "/v2/code/execute", "application/json", body) }()

	var victim int
	for deadline := time.Now().Add(30 * time.Second); victim == 0; time.Sleep(20 * time.Millisecond) {
		holders := f.holders(name)
		if len(holders) > 1 {
			t.Fatalf("%d processes hold %s open, want the kernel alone: %v", len(holders), name, holders)
		}
		if len(holders) == 1 {
			victim = holders[0]
		}
		if time.Now().After(deadline) {
			t.Fatal("no process of the sandbox holds the cell's file 30s after the cell was sent")
		}
	}
	if cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", victim)); strings.Contains(string(cg), "/zygote") {
		t.Fatalf("the process holding the cell's file, %d, is in the zygote's cgroup:\n%s", victim, cg)
	}
	// The sandbox's zygote (Python kernels are forked from it) must
	// outlive the kernel; sampled now, while both run.
	var zygote []int
	for uid := range f.uids {
		for _, pid := range processesOf(uid) {
			if cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); strings.Contains(string(cg), "/"+f.parent+"/default/zygote\n") {
				zygote = append(zygote, pid)
			}
		}
	}
	killed := time.Now()
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	var r rawReply
	select {
	case r = <-replied:
	case <-time.After(30 * time.Second):
		t.Fatal("no reply 30s after the kernel was killed")
	}
	t.Logf("kernel %d killed; reply after %v: %s", victim, time.Since(killed).Round(time.Millisecond), r)
	var res client.Result
	json.Unmarshal(r.env.Data, &res)
	if r.status != http.StatusOK || r.env.Success || r.env.Message != "KernelDied: the kernel died" {
		t.Errorf("the killed cell's reply: %s\nwant 200 with success false and message %q", r, "KernelDied: the kernel died")
	}
	var errOut *client.Output
	for i, o := range res.Outputs {
		if o.OutputType == "error" {
			errOut = &res.Outputs[i]
		}
	}
	if res.Status != client.StatusError || res.Stdout != "marker\n" || errOut == nil || errOut.Ename != "KernelDied" ||
		!res.SessionRestarted || !strings.Contains(res.Message, "the kernel died (KernelDied)") || res.SessionID != "victim" {
		t.Errorf("the killed cell's result: %+v\nwant status error, stdout %q kept, an error output KernelDied, session_restarted and a message why",
			res, "marker\n")
	}

	// The session goes on in a fresh kernel: x is gone.
	res2, err := c.Execute(ctx, client.ExecuteRequest{Language: client.Python, Code: "x", SessionID: "victim"})
	if err != nil {
		t.Fatalf("the session's next cell: %v", err)
	}
	if ce, ok := res2.Err().(*client.CodeError); !ok || ce.Ename != "NameError" || res2.SessionRestarted {
		t.Errorf("the session's next cell: %+v (error %v), want a NameError from a fresh kernel", res2, res2.Err())
	}
	// The sandbox's other session lost nothing.
	if res, err := c.Execute(ctx, client.ExecuteRequest{Language: client.Python, Code: "y * 6", SessionID: "bystander"}); err != nil || res.Text() != "42" {
		t.Errorf("the other session after the kill: %+v %v, want its y", res, err)
	}
	if res, err := c.Execute(ctx, client.ExecuteRequest{Language: client.Python, Code: "print('one-shot')"}); err != nil || res.Stdout != "one-shot\n" {
		t.Errorf("one-shot run after the kill: %+v %v", res, err)
	}
	for _, pid := range zygote {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("process %d of the sandbox's zygote is gone after its kernel was killed: %v", pid, err)
		}
	}
	t.Logf("the zygote's %d processes live on", len(zygote))
	// What the dead kernel wrote stays.
	if _, err := c.Stat(ctx, "/tmp/"+name); err != nil {
		t.Errorf("the file the killed kernel created: %v", err)
	}
	for uid := range sandboxUIDs(f.parent) {
		f.uids[uid] = true
	}
}

// holders returns the processes of this server's sandboxes that hold a
// file named name open.
func (f *faultServer) holders(name string) []int {
	var pids []int
	for uid := range sandboxUIDs(f.parent) {
		f.uids[uid] = true
		for _, pid := range processesOf(uid) {
			fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
			for _, fd := range fds {
				if link, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); strings.HasSuffix(link, "/"+name) {
					pids = append(pids, pid)
					break
				}
			}
		}
	}
	return pids
}

// clientLeavesCell: a client that goes away in the middle of a session's
// cell. What happens to the cell depends on how it asked (see run in
// internal/api/stream.go): leaving a JSON reply interrupts the cell, as ^C
// would (the session keeps its state); leaving a stream does not stop the
// cell, which runs to its end. Either way the server stays healthy and the
// session runs its next cell, after the first one ended.
func (f *faultServer) clientLeavesCell(ctx context.Context, t *testing.T) {
	c := f.c
	for i, tc := range []struct {
		name     string
		stream   bool
		wantNext string // what the next cell prints: z, then the file's content or False
	}{
		{"json reply: cell interrupted", false, "0 False\n"},
		{"streamed reply: cell completes", true, "1 done\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			session := fmt.Sprintf("leaver%d", i)
			file := fmt.Sprintf("/tmp/after-leaving-%d", i)
			if res, err := c.Execute(ctx, client.ExecuteRequest{Language: client.Python, Code: "z = 0", SessionID: session}); err != nil || res.Err() != nil {
				t.Fatalf("setting z: %+v %v", res, err)
			}
			req := client.ExecuteRequest{Language: client.Python, SessionID: session, Timeout: time.Minute,
				Code: fmt.Sprintf("import time\nprint('started', flush=True)\ntime.sleep(3)\nopen(%q, 'w').write('done')\nz = 1", file)}
			reqCtx, leave := context.WithCancel(ctx)
			defer leave()
			started := make(chan struct{}, 1)
			errc := make(chan error, 1)
			sent := time.Now()
			go func() {
				var err error
				if tc.stream {
					_, err = c.ExecuteStream(reqCtx, req, func(o client.Output) {
						if o.Text == "started\n" {
							started <- struct{}{}
						}
					})
				} else {
					_, err = c.Execute(reqCtx, req)
				}
				errc <- err
			}()
			if tc.stream {
				select {
				case <-started:
				case err := <-errc:
					t.Fatalf("the stream ended before the cell printed: %v", err)
				case <-time.After(30 * time.Second):
					t.Fatal("the cell printed nothing within 30s")
				}
			} else {
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					if s, err := c.GetSession(ctx, session, client.Python); err == nil && s.Busy {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the session never became busy")
					}
				}
			}
			if d := time.Since(sent); d < 500*time.Millisecond {
				time.Sleep(500*time.Millisecond - d)
			}
			leave()
			select {
			case err := <-errc:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("the request that left: %v, want context.Canceled", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the client's request did not end when its context was cancelled")
			}
			left := time.Now()

			if _, err := c.Health(ctx); err != nil {
				t.Errorf("health after the client left: %v", err)
			}
			// Queued behind the first cell: it sees what that cell left.
			res, err := c.Execute(ctx, client.ExecuteRequest{Language: client.Python, SessionID: session,
				Code: fmt.Sprintf("import os\nprint(z, open(%[1]q).read() if os.path.exists(%[1]q) else False)", file)})
			if err != nil || res.Err() != nil || res.Stdout != tc.wantNext {
				t.Errorf("the session's next cell: %+v %v, want stdout %q", res, err, tc.wantNext)
			}
			t.Logf("next cell answered %v after the client left", time.Since(left).Round(time.Millisecond))
			if s, err := c.GetSession(ctx, session, client.Python); err != nil || s.Busy || !s.Alive {
				t.Errorf("the session afterwards: %+v %v, want alive and idle", s, err)
			}
		})
	}
}

// clientLeavesUpload: a client that goes away in the middle of a streamed
// upload leaves nothing: not the target, not the staged part of the file
// (on the sandbox's disk, out of its code's sight), and no temporary file
// in the sandbox's home or /tmp.
func (f *faultServer) clientLeavesUpload(ctx context.Context, t *testing.T) {
	for _, tc := range []struct {
		name      string
		pathFirst bool // the usual order; else the target is known only at the end
	}{
		{"path before file", true},
		{"file before path", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := "/home/user/uploads/partial-" + strings.ReplaceAll(tc.name, " ", "-") + ".bin"
			pr, pw := io.Pipe()
			mw := multipart.NewWriter(pw)
			upCtx, abort := context.WithCancel(ctx)
			defer abort()
			req, err := http.NewRequestWithContext(upCtx, "POST", f.url+"/v1/file/upload", pr)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", mw.FormDataContentType())
			req.Header.Set("Authorization", "Bearer "+cliTestKey)
			done := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					err = fmt.Errorf("the server replied %d to an upload not yet sent: %s", resp.StatusCode, b)
				}
				done <- err
			}()
			if tc.pathFirst {
				if err := mw.WriteField("path", target); err != nil {
					t.Fatal(err)
				}
			}
			part, err := mw.CreateFormFile("file", "partial.bin")
			if err != nil {
				t.Fatal(err)
			}
			const sent = 1 << 20 // of more to come
			if _, err := part.Write(bytes.Repeat([]byte("partial\n"), sent/8)); err != nil {
				t.Fatal(err)
			}
			// The server is writing it: its staged file grows.
			for deadline := time.Now().Add(20 * time.Second); f.staged() < sent/2; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the upload's staged file holds %d bytes 20s after %d were sent", f.staged(), sent)
				}
			}
			if fi, err := f.c.Stat(ctx, target); client.StatusCode(err) != http.StatusNotFound {
				t.Errorf("%s while the upload lasts: %+v %v, want 404", target, fi, err)
			}
			// Which of the two ends the request first is up to the transport.
			left := errors.New("the client left")
			abort()
			pw.CloseWithError(left)
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) && !errors.Is(err, left) {
					t.Errorf("the aborted upload: %v, want it cancelled", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the aborted upload did not end")
			}

			// The server notices the connection's end at its next read.
			start := time.Now()
			for deadline := start.Add(10 * time.Second); f.staged() >= 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					ents, _ := os.ReadDir(f.staging)
					t.Fatalf("the staged part of the upload is still there 10s after the client left: %v", ents)
				}
			}
			t.Logf("staged part removed %v after the client left", time.Since(start).Round(time.Millisecond))
			if left := f.leftovers(ctx, t); len(left) > 0 {
				t.Errorf("temporary files left after the client left: %v", left)
			}
			if fi, err := f.c.Stat(ctx, target); client.StatusCode(err) != http.StatusNotFound {
				t.Errorf("%s after the aborted upload: %+v %v, want 404", target, fi, err)
			}
		})
	}
}

// staged returns the size of the largest file in the staging directory, or
// -1 if there is none.
func (f *faultServer) staged() int64 {
	size := int64(-1)
	ents, _ := os.ReadDir(f.staging)
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			size = max(size, fi.Size())
		}
	}
	return size
}

// leftovers lists the temporary files of writes and uploads that the
// sandbox's code could see, in its home and /tmp (the zygote's own
// directory aside).
func (f *faultServer) leftovers(ctx context.Context, t *testing.T) []string {
	t.Helper()
	var found []string
	for _, dir := range []string{"/home/user", "/tmp"} {
		r := f.do(ctx, "GET", "/v2/fs/list?recursive=true&path="+dir, "", nil)
		var l struct {
			Files []client.FileInfo `json:"files"`
		}
		if r.status != http.StatusOK || json.Unmarshal(r.env.Data, &l) != nil {
			t.Fatalf("listing %s: %s", dir, r)
		}
		for _, fi := range l.Files {
			if strings.HasPrefix(fi.Name, ".codecell-") && !strings.HasPrefix(fi.Name, ".codecell-zygote-") {
				found = append(found, fi.Path)
			}
		}
	}
	return found
}

// slowClients: connections that send their header or body a byte a second
// hold up no one else, and the server ends them: an incomplete header at
// ReadHeaderTimeout (10s), with no reply; an incomplete JSON body at
// --body-timeout (5s here), with a 408 that names no address.
func (f *faultServer) slowClients(ctx context.Context, t *testing.T) {
	host := strings.TrimPrefix(f.url, "http://")
	type slow struct {
		kind   string
		opened time.Time // when the server had all it gets at once
		conn   net.Conn
		got    []byte
		closed time.Time // when a read failed: the server closed it
	}
	var (
		mu    sync.Mutex
		conns []*slow
		wg    sync.WaitGroup
	)
	stop := make(chan struct{})
	defer func() {
		close(stop)
		for _, s := range conns {
			s.conn.Close()
		}
		wg.Wait()
	}()
	open := func(kind, first, trickle string) {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns), err)
		}
		s := &slow{kind: kind, conn: conn}
		conns = append(conns, s)
		if _, err := io.WriteString(conn, first); err != nil {
			t.Fatal(err)
		}
		s.opened = time.Now()
		wg.Add(2)
		go func() { // a byte a second, until the server is gone
			defer wg.Done()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if _, err := conn.Write([]byte{trickle[i%len(trickle)]}); err != nil {
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			b, _ := io.ReadAll(conn) // until the server closes it (or the test does)
			mu.Lock()
			s.got, s.closed = b, time.Now()
			mu.Unlock()
		}()
	}
	const headerConns = 100
	for i := range headerConns {
		if i%2 == 0 { // the request line itself, a byte a second
			open("header", "", "POST /v2/code/execute HTTP/1.1\r\nHost: x\r\n")
		} else { // a header that never ends
			open("header", "POST /v2/code/execute HTTP/1.1\r\nHost: x\r\n", fmt.Sprintf("X-Slow-%d: ", i)+strings.Repeat("a", 100))
		}
	}
	for i, path := range []string{"/v2/code/execute", "/v2/code/execute", "/v2/fs/write"} {
		body := `{"language": "python", "code": "print(1)", "path": "/tmp/slow", "content": "x"}`
		open("body", fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
			path, cliTestKey, len(body)+i), body)
	}

	// While they are held, others are served, again and again.
	rounds := 0
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(2 * time.Second) {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		if _, err := f.c.Health(rctx); err != nil {
			t.Errorf("health while slow clients are held: %v", err)
		}
		if res, err := f.c.Execute(rctx, client.ExecuteRequest{Language: client.Python, Code: "6 * 7"}); err != nil || res.Text() != "42" {
			t.Errorf("one-shot run while slow clients are held: %+v %v", res, err)
		}
		cancel()
		rounds++
		mu.Lock()
		pending := 0
		for _, s := range conns {
			if s.closed.IsZero() {
				pending++
			}
		}
		mu.Unlock()
		if pending == 0 || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("%d rounds of health and execute served while slow clients were held", rounds)

	mu.Lock()
	defer mu.Unlock()
	longest := map[string]time.Duration{}
	replies := map[string]int{} // to incomplete headers: status line, or "" for none
	for i, s := range conns {
		if s.closed.IsZero() {
			t.Errorf("%s connection %d: still open after %v", s.kind, i, time.Since(s.opened).Round(time.Second))
			continue
		}
		held := s.closed.Sub(s.opened)
		longest[s.kind] = max(longest[s.kind], held)
		switch s.kind {
		case "header":
			// Go's server closes a connection whose header timed out
			// without a reply, or with a 400 if the line cut short by the
			// timeout is malformed ("POST /v2/c").
			if held > 30*time.Second || (len(s.got) > 0 && !bytes.HasPrefix(s.got, []byte("HTTP/1.1 400")) && !bytes.HasPrefix(s.got, []byte("HTTP/1.1 408"))) {
				t.Errorf("header connection %d: closed after %v with %q, want closed within 30s with nothing, a 400 or a 408", i, held, s.got)
			}
			replies[string(bytes.SplitN(s.got, []byte("\r\n"), 2)[0])]++
		case "body":
			resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(s.got)), nil)
			var msg string
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				var env struct{ Message string }
				json.Unmarshal(b, &env)
				msg = env.Message
			}
			if held > 30*time.Second || err != nil || resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(msg, "body timeout") ||
				strings.Contains(msg, "127.0.0.1") {
				t.Errorf("body connection %d: closed after %v with %q, want a 408 naming the body timeout within 30s", i, held, s.got)
			} else if i == headerConns {
				t.Logf("slow body: %d %q", resp.StatusCode, msg)
			}
		}
	}
	t.Logf("held at most: header %v, body %v; replies to incomplete headers: %v", longest["header"].Round(10*time.Millisecond),
		longest["body"].Round(10*time.Millisecond), replies)
}

// badInput: malformed, mistyped, oversized and invalid requests each get a
// 4xx that names the problem (a 422 also names the field, as FastAPI
// does), with nothing of the sandbox lost.
func (f *faultServer) badInput(ctx context.Context, t *testing.T) {
	const maxBody = 16 << 20 // serve's --max-body default
	// Valid JSON, only too large: the size alone must be refused.
	huge := []byte(`{"language": "python", "code": "1", "pad": "` + strings.Repeat("a", maxBody) + `"}`)
	var upload bytes.Buffer
	mw := multipart.NewWriter(&upload)
	mw.WriteField("path", "/tmp/bad-\xff.txt")
	w, _ := mw.CreateFormFile("file", "f.txt")
	io.WriteString(w, "content")
	mw.Close()
	const js = "application/json"
	for _, tc := range []struct {
		name, method, path, ctype string
		body                      []byte
		status                    int
		field                     string // for a 422: the field its detail names
		message                   string // in the reply's message
		data                      string // in the reply's data, as sent
	}{
		{"truncated JSON", "POST", "/v2/code/execute", js, []byte(`{"code":`), 422, "body",
			"body: the body is not valid JSON: unexpected end of JSON input", ""},
		{"code a number", "POST", "/v2/code/execute", js, []byte(`{"language": "python", "code": 5}`), 422, "code",
			"code: expected a string, got a JSON number", ""},
		{"timeout a string", "POST", "/v2/code/execute", js, []byte(`{"language": "python", "code": "1", "timeout": "x"}`), 422, "timeout",
			"timeout: expected a number, got a JSON string", ""},
		{"language a number", "POST", "/v2/code/execute", js, []byte(`{"language": 7, "code": "1"}`), 422, "language",
			"language: expected a string, got a JSON number", ""},
		{"unknown language", "POST", "/v2/code/execute", js, []byte(`{"language": "ruby", "code": "1"}`), 422, "language",
			`language: unsupported language "ruby": use 'python' or 'javascript'`, ""},
		{"no language", "POST", "/v2/code/execute", js, []byte(`{"code": "1"}`), 422, "language", "language: field required", ""},
		{"negative timeout", "POST", "/v2/code/execute", js, []byte(`{"language": "python", "code": "1", "timeout": -1}`), 422, "timeout",
			"timeout: must be more than 0", ""},
		{"empty body", "POST", "/v2/code/execute", js, nil, 422, "body", "body: a JSON body is required", ""},
		{"blank body", "POST", "/v2/code/execute", js, []byte(" \n"), 422, "body", "body: a JSON body is required", ""},
		{"array body", "POST", "/v2/code/execute", js, []byte(`[1, 2]`), 422, "body", "body: expected an object, got a JSON array", ""},
		{"body over --max-body", "POST", "/v2/code/execute", js, huge, 413, "", fmt.Sprintf("request body larger than %d bytes", maxBody), ""},
		// Only the upload routes take large bodies, whatever the
		// Content-Type says.
		{"body over --max-body, typed multipart", "POST", "/v2/code/execute", "multipart/form-data; boundary=x", huge, 413, "",
			fmt.Sprintf("request body larger than %d bytes", maxBody), ""},
		// The Content-Type of a JSON body is not checked.
		{"JSON sent as text/plain", "POST", "/v2/code/execute", "text/plain", []byte(`{"language": "python", "code": "print(6 * 7)"}`), 200, "",
			"ok", `"stdout":"42\n"`},
		// JSON decoding replaces invalid UTF-8 in strings with U+FFFD: the
		// code runs, and the file is written, as replaced; the replies say so.
		{"invalid UTF-8 in code", "POST", "/v2/code/execute", js, []byte("{\"language\": \"python\", \"code\": \"print('\xff')\"}"), 200, "",
			"ok", "\"stdout\":\"\ufffd\\n\""},
		{"invalid UTF-8 in a JSON path", "POST", "/v2/fs/write", js, []byte("{\"path\": \"/tmp/bad-\xff.txt\", \"content\": \"x\"}"), 200, "",
			"ok", "\"path\":\"/tmp/bad-\ufffd.txt\""},
		{"invalid UTF-8 in a query path", "GET", "/v2/fs/stat?path=/tmp/a%FFb", "", nil, 400, "", "stat /tmp/a\ufffdb: invalid path", ""},
		{"invalid UTF-8 in an upload path", "POST", "/v1/file/upload", mw.FormDataContentType(), upload.Bytes(), 400, "",
			"upload /tmp/bad-\ufffd.txt: invalid path", ""},
		{"NUL in a query path", "GET", "/v2/fs/stat?path=/tmp/a%00b", "", nil, 400, "", "stat /tmp/a\x00b: invalid path", ""},
		{"NUL in a JSON path", "POST", "/v2/fs/write", js, []byte(`{"path": "/home/user/keep/a\u0000b", "content": "x"}`), 400, "",
			"write /home/user/keep/a\x00b: invalid path", ""},
		{"path outside the sandbox", "GET", "/v2/fs/stat?path=/etc/passwd", "", nil, 400, "", "stat /etc/passwd: path is outside /home/user and /tmp", ""},
		{"upload not multipart", "POST", "/v1/file/upload", js, []byte(`{"file": "x"}`), 422, "file",
			"file: expected a multipart/form-data body", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do(ctx, tc.method, tc.path, tc.ctype, tc.body)
			t.Logf("%d %s", r.status, strconv.Quote(r.env.Message))
			if r.status != tc.status {
				t.Fatalf("%s %s: %s\nwant status %d", tc.method, tc.path, r, tc.status)
			}
			if !strings.Contains(r.env.Message, tc.message) {
				t.Errorf("%s %s: message %q lacks %q", tc.method, tc.path, r.env.Message, tc.message)
			}
			if !bytes.Contains(r.env.Data, []byte(tc.data)) {
				t.Errorf("%s %s: data %s lacks %s", tc.method, tc.path, r.env.Data, tc.data)
			}
			if tc.status == 422 {
				// FastAPI's shape: [{loc: ["body", field], msg, type}].
				var detail []struct {
					Loc []string `json:"loc"`
				}
				if err := json.Unmarshal(r.env.Detail, &detail); err != nil || len(detail) != 1 || !slices.Equal(detail[0].Loc, []string{"body", tc.field}) {
					t.Errorf("%s %s: detail %s, want one error at [body %s]", tc.method, tc.path, r.env.Detail, tc.field)
				}
			}
		})
	}

	// The refused requests wrote nothing, and what was there is.
	if l, err := f.c.ListFiles(ctx, "/home/user/keep"); err != nil || len(l.Files) != 1 || l.Files[0].Name != "data.bin" {
		t.Errorf("/home/user/keep after the bad requests: %+v %v, want data.bin alone", l, err)
	}
	if _, err := f.c.Health(ctx); err != nil {
		t.Errorf("health after the bad requests: %v", err)
	}
	if res, err := f.c.Execute(ctx, client.ExecuteRequest{Language: client.Python, Code: "print('still here')"}); err != nil || res.Stdout != "still here\n" {
		t.Errorf("a run after the bad requests: %+v %v", res, err)
	}
}
