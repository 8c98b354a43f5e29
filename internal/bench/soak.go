package bench

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/codecell/codecell/internal/sandbox"
)

// SoakConfig sizes a soak run.
type SoakConfig struct {
	Sandbox  sandbox.Config
	Clients  int           // 0 means 50
	Duration time.Duration // 0 means 2 minutes
}

// SoakResult is what a soak run saw.
type SoakResult struct {
	Requests    int            `json:"requests"`
	ByStatus    map[int]int    `json:"by_status"` // HTTP status → count
	Errors      []string       `json:"errors,omitempty"`
	ByOp        map[string]int `json:"by_op"`
	P50MS       float64        `json:"p50_ms"`
	P99MS       float64        `json:"p99_ms"`
	HeapIdleMB  float64        `json:"heap_idle_mb"`
	HeapAfterMB float64        `json:"heap_after_mb"`
	Leaks       []string       `json:"leaks"` // processes, cgroups, mounts, files left over; heap over its bound
}

// Soak runs Clients concurrent clients for Duration against a server on
// loopback, each doing a mix of one-shot and session cells in Python and
// JavaScript and file uploads and downloads, with checked results. After
// the server has shut down it looks for what was left behind: processes of
// sandbox uids, cgroups, mounts and files under the data directory.
func Soak(ctx context.Context, cfg SoakConfig) (*SoakResult, error) {
	clients := cmp.Or(cfg.Clients, 50)
	dur := cmp.Or(cfg.Duration, 2*time.Minute)
	sc := cfg.Sandbox
	// Every client keeps a Python and a JavaScript session in the default
	// sandbox: its limits must hold them all.
	sc.MaxSessions = max(sc.MaxSessions, clients*2+10)
	sc.Limits.MemoryBytes = max(sc.Limits.MemoryBytes, int64(clients)*120<<20)
	sc.Limits.Pids = max(sc.Limits.Pids, int64(clients)*24+200)
	srv, err := startServer(sc)
	if err != nil {
		return nil, err
	}
	dataDir := srv.dir
	parent := srv.mgr.Config().Sandbox.CgroupParent
	uids := map[int]bool{}
	for _, sb := range srv.mgr.List() {
		uids[sb.UID()] = true
	}
	srv.waitWarm(ctx)
	runtime.GC()
	res := &SoakResult{ByStatus: map[int]int{}, ByOp: map[string]int{}, HeapIdleMB: heapMB()}

	var mu sync.Mutex
	var lat []float64
	record := func(op string, status int, d time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		res.Requests++
		res.ByOp[op]++
		res.ByStatus[status]++
		lat = append(lat, float64(d.Microseconds())/1000)
		if err != nil && len(res.Errors) < 20 {
			res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", op, err))
		}
	}
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := "soak-" + strconv.Itoa(c)
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				op, status, d, err := soakStep(srv, session, c, i)
				record(op, status, d, err)
			}
		}()
	}
	wg.Wait()
	for _, sb := range srv.mgr.List() {
		uids[sb.UID()] = true
	}
	slices.Sort(lat)
	res.P50MS, res.P99MS = percentile(lat, 0.5), percentile(lat, 0.99)
	// Sessions end, pools stay: compare the heap after a collection.
	for c := range clients {
		deleteSession(srv, "soak-"+strconv.Itoa(c), "python")
		deleteSession(srv, "soak-"+strconv.Itoa(c), "javascript")
	}
	time.Sleep(time.Second)
	runtime.GC()
	res.HeapAfterMB = heapMB()
	if res.HeapAfterMB > res.HeapIdleMB+heapBoundMB {
		res.Leaks = append(res.Leaks, fmt.Sprintf("server heap %.1f MB once the clients are done, more than %d MB over its idle %.1f MB",
			res.HeapAfterMB, heapBoundMB, res.HeapIdleMB))
	}
	// Uploads' temporary files end with the sandboxes: looked for now.
	for _, sb := range srv.mgr.List() {
		if n, err := sb.Files().Staged(); n > 0 || err != nil {
			res.Leaks = append(res.Leaks, fmt.Sprintf("%d staged files in sandbox %s (%v)", n, sb.ID(), err))
		}
	}
	srv.close()
	res.Leaks = append(res.Leaks, leftovers(dataDir, parent, uids)...)
	return res, nil
}

// heapBoundMB is how far over its idle level the server's heap may stay
// after a soak: caches and metric series, not a leak per request (50
// clients for two minutes make about 4,400 requests).
const heapBoundMB = 8

func heapMB() float64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapInuse) / (1 << 20)
}

// soakStep does one client operation, chosen by turn, and checks it: a
// 200 with the expected result, or a 429 (capacity reached), which is the
// only error allowed.
func soakStep(s *server, session string, client, i int) (op string, status int, d time.Duration, err error) {
	start := time.Now()
	defer func() { d = time.Since(start) }()
	switch i % 6 {
	case 0:
		op = "python one-shot"
		status, err = s.call("", "python", "print(6 * 7)", "", "42")
	case 1:
		op = "python session"
		status, err = s.call("", "python", fmt.Sprintf("n = globals().get('n', 0) + 1\nprint('client %d', n)", client), session, fmt.Sprintf("client %d", client))
	case 2:
		op = "javascript one-shot"
		status, err = s.call("", "javascript", "console.log(6 * 7)", "", "42")
	case 3:
		op = "javascript session"
		status, err = s.call("", "javascript", "globalThis.n = (globalThis.n || 0) + 1; console.log('js', n)", session, "js ")
	case 4:
		op = "upload"
		status, err = s.upload(fmt.Sprintf("/tmp/soak-%d.bin", client), 256<<10)
	case 5:
		op = "download"
		status, err = s.download(fmt.Sprintf("/tmp/soak-%d.bin", client), 256<<10)
	}
	if status == http.StatusTooManyRequests {
		err = nil // capacity, as configured
	}
	return op, status, d, err
}

// upload writes size random bytes to path; download (after an upload of
// the same path by the same client) checks their size.
func (s *server) upload(path string, size int) (int, error) {
	data := make([]byte, size)
	rand.Read(data)
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	w.WriteField("path", path)
	fw, _ := w.CreateFormFile("file", filepath.Base(path))
	fw.Write(data)
	w.Close()
	resp, err := http.Post(s.url+"/v2/fs/upload", w.FormDataContentType(), &body)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("status %d: %.200s", resp.StatusCode, raw)
	}
	return resp.StatusCode, nil
}

func (s *server) download(path string, size int) (int, error) {
	resp, err := http.Get(s.url + "/v2/fs/download?path=" + path)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, _ := io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("status %d", resp.StatusCode)
	}
	if n != int64(size) {
		return resp.StatusCode, fmt.Errorf("downloaded %d bytes, want %d", n, size)
	}
	return resp.StatusCode, nil
}

// leftovers lists what a shut-down server left: processes of its sandbox
// uids, cgroups under its parent, mounts and files under its data dir.
func leftovers(dataDir, parent string, uids map[int]bool) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/status")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(strings.TrimPrefix(line, "Uid:")); strings.HasPrefix(line, "Uid:") && len(f) > 0 {
				if uid, _ := strconv.Atoi(f[0]); uids[uid] {
					out = append(out, "process "+filepath.Base(filepath.Dir(p))+" of sandbox uid "+f[0])
				}
			}
		}
	}
	for _, ctl := range []string{"", "unified", "memory", "pids", "cpu", "freezer"} {
		dir := filepath.Join("/sys/fs/cgroup", ctl, parent)
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.IsDir() {
				out = append(out, "cgroup "+filepath.Join(dir, e.Name()))
			}
		}
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dataDir) {
				out = append(out, "mount "+f[4])
			}
		}
	}
	if _, err := os.Stat(dataDir); err == nil {
		out = append(out, "data directory "+dataDir)
	}
	return out
}
