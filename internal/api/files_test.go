package api_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// salesCSV is the seed's dataset.
const salesCSV = "month,revenue,cost\n2026-01,120,80\n2026-02,135,82\n2026-03,150,90\n" +
	"2026-04,142,95\n2026-05,168,99\n2026-06,180,104\n"

const (
	describeCode = `
import pandas as pd
df = pd.read_csv("/tmp/analysis/sales.csv")
df["margin"] = df.revenue - df.cost
print(df.margin.describe())
`
	plotCode = `
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
df.plot(x="month", y=["revenue", "cost"], kind="bar", figsize=(6, 3))
plt.tight_layout()
plt.savefig("/tmp/analysis/plot.png", dpi=120)
`
)

// rawReply is a response that need not be JSON.
type rawReply struct {
	status int
	header http.Header
	body   []byte
}

// get sends a request with extra headers and a client timeout, returning
// the raw reply.
func (ts *testServer) get(t testing.TB, path string, hdr ...string) rawReply {
	t.Helper()
	req, err := http.NewRequest("GET", ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if ts.key != "" {
		req.Header.Set("Authorization", "Bearer "+ts.key)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", path, err)
	}
	return rawReply{resp.StatusCode, resp.Header, b}
}

// part is one part of a multipart upload: a form field, or a file if
// filename is set.
type part struct {
	name, filename string
	r              io.Reader
}

func field(name, value string) part { return part{name: name, r: strings.NewReader(value)} }
func file(filename string, r io.Reader) part {
	return part{name: "file", filename: filename, r: r}
}

// upload streams a multipart/form-data body to path.
func (ts *testServer) upload(t testing.TB, path string, parts ...part) reply {
	t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		for _, p := range parts {
			var w io.Writer
			var err error
			if p.filename != "" {
				w, err = mw.CreateFormFile(p.name, p.filename)
			} else {
				w, err = mw.CreateFormField(p.name)
			}
			if err == nil {
				_, err = io.Copy(w, p.r)
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(mw.Close())
	}()
	req, err := http.NewRequest("POST", ts.URL+path, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("upload %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, raw: raw}
	json.Unmarshal(raw, &r.body)
	return r
}

// rawUpload sends a multipart upload of size zero bytes over a bare
// connection, reading the reply while the body is still being sent: a
// server that refuses the upload part way replies and closes, and an
// ordinary client may only see the broken pipe.
func (ts *testServer) rawUpload(t testing.TB, path, target string, size int64) (int, string) {
	t.Helper()
	const boundary = "codecell-test-boundary"
	head := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"path\"\r\n\r\n" + target + "\r\n" +
		"--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"huge.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n"
	tail := "\r\n--" + boundary + "--\r\n"
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Minute))
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: codecell\r\nContent-Type: multipart/form-data; boundary=%s\r\nContent-Length: %d\r\n\r\n",
		path, boundary, int64(len(head))+size+int64(len(tail)))
	go func() {
		io.WriteString(conn, head)
		io.CopyN(conn, zeros{}, size)
		io.WriteString(conn, tail)
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("upload of %d bytes: no reply: %v", size, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// py runs Python code once in the default sandbox and fails on an error.
func (ts *testServer) py(t testing.TB, code string) map[string]any {
	t.Helper()
	d := ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "code": code}).data()
	if d["status"] != "ok" {
		t.Fatalf("%s: %v", code, d)
	}
	return d
}

// checkPNG decodes a download as a PNG with a non-zero size.
func checkPNG(t *testing.T, b []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the download is not a PNG (%d bytes): %v", len(b), err)
	}
	if r := img.Bounds(); r.Dx() == 0 || r.Dy() == 0 {
		t.Errorf("empty image: %v", r)
	}
}

// The seed's analysis, through v2: write the CSV, compute and plot in a
// named session, list the directory and download the chart.
func TestFilesSeedFlowV2(t *testing.T) {
	ts := newServer(t, serverOpts{})
	w := ts.must(t, 200, "POST", "/v2/fs/write", map[string]any{"path": "/tmp/analysis/sales.csv", "content": salesCSV}).data()
	if w["path"] != "/tmp/analysis/sales.csv" || w["bytes_written"] != float64(len(salesCSV)) {
		t.Errorf("write: %v", w)
	}
	const session = "analysis"
	first := ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "session_id": session, "code": describeCode}).data()
	out := str(first["stdout"])
	if !strings.Contains(out, "mean     57.500000") || !strings.Contains(out, "std      13.546217") {
		t.Fatalf("describe(): %v", first)
	}
	if o := first["outputs"].([]any)[0].(map[string]any); !strings.HasPrefix(str(o["text"]), "count     6.000000") {
		t.Errorf("first output: %v", o)
	}
	plot := ts.must(t, 200, "POST", "/v2/code/execute", map[string]any{"language": "python", "session_id": session, "code": plotCode}).data()
	if plot["status"] != "ok" {
		t.Fatalf("plot: %v", plot)
	}

	list := ts.must(t, 200, "GET", "/v2/fs/list?path=/tmp/analysis", nil).data()
	sizes := map[string]float64{}
	for _, f := range list["files"].([]any) {
		e := f.(map[string]any)
		sizes[str(e["name"])] = e["size"].(float64)
		for _, k := range []string{"name", "path", "size", "is_dir", "type", "modified"} {
			if _, ok := e[k]; !ok {
				t.Errorf("list entry lacks %s: %v", k, e)
			}
		}
		if e["path"] != "/tmp/analysis/"+str(e["name"]) || e["is_dir"] != false || e["type"] != "file" {
			t.Errorf("list entry: %v", e)
		}
	}
	if len(sizes) != 2 || sizes["sales.csv"] != float64(len(salesCSV)) || sizes["plot.png"] < 1000 {
		t.Fatalf("list: %v", list)
	}

	dl := ts.get(t, "/v2/fs/download?path=/tmp/analysis/plot.png")
	if dl.status != 200 {
		t.Fatalf("download: %d %s", dl.status, dl.body)
	}
	checkPNG(t, dl.body)
	if float64(len(dl.body)) != sizes["plot.png"] {
		t.Errorf("downloaded %d bytes, listed %v", len(dl.body), sizes["plot.png"])
	}
	if cd := dl.header.Get("Content-Disposition"); cd != `attachment; filename="plot.png"` {
		t.Errorf("Content-Disposition = %q", cd)
	}
	etag := dl.header.Get("ETag")
	if !strings.HasPrefix(etag, `"`) || dl.header.Get("Content-Type") != "image/png" || dl.header.Get("Last-Modified") == "" {
		t.Errorf("headers: %v", dl.header)
	}
	part := ts.get(t, "/v2/fs/download?path=/tmp/analysis/plot.png", "Range", "bytes=0-7")
	if part.status != 206 || !bytes.Equal(part.body, dl.body[:8]) || string(part.body[1:4]) != "PNG" ||
		part.header.Get("Content-Range") != fmt.Sprintf("bytes 0-7/%d", len(dl.body)) {
		t.Errorf("range: %d %q %v", part.status, part.body, part.header)
	}
	tailPart := ts.get(t, "/v2/fs/download?path=/tmp/analysis/plot.png", "Range", "bytes=-12")
	if tailPart.status != 206 || !bytes.Equal(tailPart.body, dl.body[len(dl.body)-12:]) {
		t.Errorf("suffix range: %d %q", tailPart.status, tailPart.body)
	}
	if r := ts.get(t, "/v2/fs/download?path=/tmp/analysis/plot.png", "If-None-Match", etag); r.status != 304 || len(r.body) != 0 {
		t.Errorf("If-None-Match: %d, %d bytes", r.status, len(r.body))
	}
	if r := ts.get(t, "/v2/fs/download?path=/tmp/analysis/plot.png", "If-None-Match", `"other"`); r.status != 200 {
		t.Errorf("If-None-Match with another tag: %d", r.status)
	}
	ts.must(t, 200, "DELETE", "/v2/code/sessions/"+session, nil)
	ts.must(t, 404, "GET", "/v2/code/sessions/"+session, nil)
}

// The same analysis through the v1 routes the SDK calls.
func TestFilesSeedFlowV1(t *testing.T) {
	ts := newServer(t, serverOpts{})
	w := ts.must(t, 200, "POST", "/v1/file/write", map[string]any{"file": "/tmp/analysis/sales.csv", "content": salesCSV}).data()
	if w["file"] != "/tmp/analysis/sales.csv" || w["bytes_written"] != float64(len(salesCSV)) {
		t.Errorf("write: %v", w)
	}
	id := str(ts.must(t, 200, "POST", "/v1/jupyter/sessions/create", nil).data()["session_id"])
	first := ts.must(t, 200, "POST", "/v1/jupyter/execute", map[string]any{"session_id": id, "code": describeCode}).data()
	text := str(first["outputs"].([]any)[0].(map[string]any)["text"])
	if !strings.Contains(text, "mean     57.500000") || !strings.Contains(text, "std      13.546217") {
		t.Fatalf("describe(): %v", first)
	}
	if d := ts.must(t, 200, "POST", "/v1/jupyter/execute", map[string]any{"session_id": id, "code": plotCode}).data(); d["status"] != "ok" {
		t.Fatalf("plot: %v", d)
	}
	list := ts.must(t, 200, "POST", "/v1/file/list", map[string]any{"path": "/tmp/analysis"}).data()
	var names []string
	size := 0.0
	for _, f := range list["files"].([]any) {
		e := f.(map[string]any)
		names = append(names, str(e["name"]))
		if e["name"] == "plot.png" {
			size = e["size"].(float64)
		}
		if e["is_directory"] != false || e["modified_time"] == nil || e["permissions"] != "644" {
			t.Errorf("FileInfo: %v", e)
		}
	}
	if !slices.Equal(names, []string{"plot.png", "sales.csv"}) || list["total_count"] != 2.0 || list["file_count"] != 2.0 {
		t.Fatalf("list: %v", list)
	}
	dl := ts.get(t, "/v1/file/download?path=/tmp/analysis/plot.png")
	if dl.status != 200 || float64(len(dl.body)) != size || dl.header.Get("Content-Disposition") != `attachment; filename="plot.png"` {
		t.Fatalf("download: %d, %d bytes, %v", dl.status, len(dl.body), dl.header)
	}
	checkPNG(t, dl.body)
	ts.must(t, 200, "DELETE", "/v1/jupyter/sessions/"+id, nil)
}

// Every file route, v1 and v2, with the statuses of bad requests.
func TestFileRoutes(t *testing.T) {
	ts := newServer(t, serverOpts{})
	ctx := context.Background()
	sb, err := ts.mgr.Default(ctx)
	if err != nil {
		t.Fatal(err)
	}
	post := func(path string, body any) map[string]any {
		t.Helper()
		return ts.must(t, 200, "POST", path, body).data()
	}
	read := func(p string) string {
		t.Helper()
		return str(post("/v1/file/read", map[string]any{"file": p})["content"])
	}

	t.Run("v1 write and read", func(t *testing.T) {
		post("/v1/file/write", map[string]any{"file": "notes/a.txt", "content": "one\ntwo\nthree\nfour\n"})
		if d := post("/v1/file/read", map[string]any{"file": "~/notes/a.txt", "start_line": 1, "end_line": 3}); d["content"] != "two\nthree\n" || d["file"] != "/home/user/notes/a.txt" {
			t.Errorf("lines 1-3: %v", d)
		}
		if d := post("/v1/file/read", map[string]any{"file": "/home/user/notes/a.txt", "start_line": 2, "end_line": 2}); d["content"] != "" {
			t.Errorf("empty range: %v", d)
		}
		post("/v1/file/write", map[string]any{"file": "/home/user/notes/a.txt", "content": "five", "append": true, "leading_newline": false, "trailing_newline": true})
		post("/v1/file/write", map[string]any{"file": "/home/user/notes/b.txt", "content": "b", "leading_newline": true})
		if got := read("/home/user/notes/a.txt") + read("/home/user/notes/b.txt"); got != "one\ntwo\nthree\nfour\nfive\n\nb" {
			t.Errorf("append and newlines: %q", got)
		}
	})

	t.Run("base64", func(t *testing.T) {
		bin := make([]byte, 256)
		for i := range bin {
			bin[i] = byte(i)
		}
		d := post("/v1/file/write", map[string]any{"file": "/tmp/bin/all.bin", "content": base64.StdEncoding.EncodeToString(bin), "encoding": "base64"})
		if d["bytes_written"] != 256.0 {
			t.Errorf("base64 write: %v", d)
		}
		r := ts.must(t, 200, "GET", "/v2/fs/read?path=/tmp/bin/all.bin&encoding=base64", nil).data()
		if got, _ := base64.StdEncoding.DecodeString(str(r["content"])); !bytes.Equal(got, bin) || r["encoding"] != "base64" {
			t.Errorf("base64 read: %v", r)
		}
		if dl := ts.get(t, "/v1/file/download?path=/tmp/bin/all.bin"); dl.status != 200 || !bytes.Equal(dl.body, bin) ||
			dl.header.Get("Content-Type") != "application/octet-stream" || dl.header.Get("Content-Length") != "256" {
			t.Errorf("download: %d %v", dl.status, dl.header)
		}
		// v2 write takes base64 too, URL-safe and unpadded included.
		post("/v2/fs/write", map[string]any{"path": "/tmp/bin/raw.bin", "content": base64.RawURLEncoding.EncodeToString(bin[250:]), "encoding": "base64"})
		if dl := ts.get(t, "/v2/fs/download?path=/tmp/bin/raw.bin"); !bytes.Equal(dl.body, bin[250:]) {
			t.Errorf("unpadded url-safe base64: %v", dl.body)
		}
		r2 := ts.do(t, "POST", "/v1/file/write", map[string]any{"file": "/tmp/bin/x", "content": "not base64!", "encoding": "base64"})
		if r2.status != 422 || !strings.Contains(string(r2.raw), `"content"`) {
			t.Errorf("bad base64: %d %s", r2.status, r2.raw)
		}
		ts.must(t, 422, "POST", "/v1/file/write", map[string]any{"file": "/tmp/bin/x", "content": "", "encoding": "utf-16"})
		ts.must(t, 404, "GET", "/v2/fs/stat?path=/tmp/bin/x", nil)
	})

	t.Run("replace and search", func(t *testing.T) {
		post("/v1/file/write", map[string]any{"file": "/tmp/r.txt", "content": "a cat\na dog\nthe cat\n"})
		if d := post("/v1/file/replace", map[string]any{"file": "/tmp/r.txt", "old_str": "cat", "new_str": "bird"}); d["replaced_count"] != 2.0 || d["file"] != "/tmp/r.txt" {
			t.Errorf("replace: %v", d)
		}
		if d := post("/v1/file/replace", map[string]any{"file": "/tmp/r.txt", "old_str": "cow", "new_str": "x"}); d["replaced_count"] != 0.0 {
			t.Errorf("replace without a match: %v", d)
		}
		d := post("/v1/file/search", map[string]any{"file": "/tmp/r.txt", "regex": "b.rd"})
		if fmt.Sprint(d["matches"]) != "[a bird the bird]" || fmt.Sprint(d["line_numbers"]) != "[0 2]" {
			t.Errorf("search: %v", d)
		}
		ts.must(t, 400, "POST", "/v1/file/search", map[string]any{"file": "/tmp/r.txt", "regex": "("})
		ts.must(t, 422, "POST", "/v1/file/replace", map[string]any{"file": "/tmp/r.txt", "old_str": "", "new_str": "x"})
	})

	t.Run("find grep glob list", func(t *testing.T) {
		for p, c := range map[string]string{
			"/home/user/proj/main.py":       "import os\nprint('hello')\n",
			"/home/user/proj/lib/util.py":   "def hello():\n    return 'Hello'\n",
			"/home/user/proj/lib/data.json": "{\"hello\": 1}\n",
			"/home/user/proj/.hidden.py":    "hello = 1\n",
			"/home/user/proj/big.txt":       strings.Repeat("x", 3000) + "\n",
		} {
			post("/v2/fs/write", map[string]any{"path": p, "content": c})
		}
		if d := post("/v1/file/find", map[string]any{"path": "/home/user/proj", "glob": "*.py"}); fmt.Sprint(d["files"]) != "[/home/user/proj/.hidden.py /home/user/proj/lib/util.py /home/user/proj/main.py]" {
			t.Errorf("find: %v", d)
		}
		d := post("/v1/file/grep", map[string]any{"path": "/home/user/proj", "pattern": "hello", "include": []string{"*.py"}, "case_insensitive": true, "context_after": 1})
		if d["match_count"] != 3.0 || d["files_matched"] != 2.0 {
			t.Errorf("grep: %v", d)
		}
		m := d["matches"].([]any)[0].(map[string]any)
		if m["file"] != "/home/user/proj/lib/util.py" || m["line_number"] != 1.0 || fmt.Sprint(m["context_after"]) != "[    return 'Hello']" {
			t.Errorf("grep match: %v", m)
		}
		if d := post("/v1/file/grep", map[string]any{"path": "/home/user/proj", "pattern": "hello", "type": "json", "max_file_size": "1K"}); d["match_count"] != 1.0 {
			t.Errorf("grep by type: %v", d)
		}
		if d := post("/v1/file/grep", map[string]any{"path": "/home/user/proj", "pattern": "hello", "recursive": false, "include_hidden": true}); d["match_count"] != 2.0 {
			t.Errorf("grep, not recursive, hidden: %v", d)
		}
		ts.must(t, 422, "POST", "/v1/file/grep", map[string]any{"path": "/home/user/proj", "pattern": "x", "max_file_size": "lots"})
		ts.must(t, 422, "POST", "/v1/file/grep", map[string]any{"path": "/home/user/proj", "pattern": "x", "context_before": 21})
		ts.must(t, 422, "POST", "/v1/file/grep", map[string]any{"path": "/home/user/proj", "pattern": "x", "type": "cobol"})

		g := post("/v1/file/glob", map[string]any{"path": "/home/user/proj", "pattern": "**/*.py", "sort_by": "size", "sort_desc": true})
		var got []string
		for _, f := range g["files"].([]any) {
			got = append(got, str(f.(map[string]any)["name"]))
		}
		if !slices.Equal(got, []string{"util.py", "main.py"}) || g["total_count"] != 2.0 {
			t.Errorf("glob: %v", g)
		}
		g = post("/v1/file/glob", map[string]any{"path": "/home/user/proj", "pattern": "*", "files_only": false, "include_metadata": false})
		if fmt.Sprint(g["files"]) != "[map[is_directory:false name:big.txt path:/home/user/proj/big.txt] map[is_directory:true name:lib path:/home/user/proj/lib] map[is_directory:false name:main.py path:/home/user/proj/main.py]]" {
			t.Errorf("glob with directories, without metadata: %v", g)
		}

		l := post("/v1/file/list", map[string]any{"path": "/home/user/proj", "recursive": true, "file_types": []string{".py"}, "show_hidden": false})
		if l["file_count"] != 2.0 || l["directory_count"] != 1.0 {
			t.Errorf("list .py: %v", l)
		}
		l = post("/v1/file/list", map[string]any{"path": "/home/user/proj", "sort_by": "size", "sort_desc": true})
		if first := l["files"].([]any)[0].(map[string]any); first["name"] != "big.txt" || l["total_count"] != 4.0 {
			t.Errorf("list by size: %v", l)
		}
		ts.must(t, 422, "POST", "/v1/file/list", map[string]any{"path": "/home/user/proj", "sort_by": "colour"})

		v := ts.must(t, 200, "GET", "/v2/fs/list?path=~/proj&recursive=true&show_hidden=false", nil).data()
		if v["total_count"] != 5.0 || v["truncated"] != false {
			t.Errorf("v2 list: %v", v)
		}
		s := ts.must(t, 200, "GET", "/v2/fs/search?path=/home/user&pattern=*.json", nil).data()
		if fmt.Sprint(s["files"]) != "[/home/user/proj/lib/data.json]" {
			t.Errorf("v2 search: %v", s)
		}
		gr := post("/v2/fs/grep", map[string]any{"path": "/home/user/proj", "pattern": "HELLO", "include": "*.json", "case_insensitive": true, "max_results": 5})
		if gr["match_count"] != 1.0 {
			t.Errorf("v2 grep: %v", gr)
		}
	})

	t.Run("upload", func(t *testing.T) {
		big := make([]byte, 5<<20+123)
		rand.Read(big)
		u := ts.upload(t, "/v1/file/upload", field("path", "/tmp/up/big.bin"), file("ignored.bin", bytes.NewReader(big)))
		if u.status != 200 || u.data()["file_path"] != "/tmp/up/big.bin" || u.data()["file_size"] != float64(len(big)) || u.data()["success"] != true {
			t.Fatalf("upload: %d %s", u.status, u.raw)
		}
		if dl := ts.get(t, "/v1/file/download?path=/tmp/up/big.bin"); !bytes.Equal(dl.body, big) {
			t.Errorf("downloaded %d bytes, not what was uploaded", len(dl.body))
		}
		fi, err := os.Lstat(filepath.Join(sb.Tmp(), "up", "big.bin"))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != sb.UID() || int(st.Gid) != sb.UID() {
			t.Errorf("uploaded file owned by %d:%d, want the sandbox's %d", st.Uid, st.Gid, sb.UID())
		}
		if st, _ := os.Lstat(filepath.Join(sb.Tmp(), "up")); int(st.Sys().(*syscall.Stat_t).Uid) != sb.UID() {
			t.Errorf("created directory not owned by the sandbox")
		}
		// Code in the sandbox sees it.
		if d := ts.py(t, "import hashlib; print(hashlib.sha256(open('/tmp/up/big.bin','rb').read()).hexdigest())"); len(str(d["stdout"])) != 65 {
			t.Errorf("code: %v", d)
		}

		// The upload is streamed: the file grows on the sandbox's disk while
		// the client is still sending, staged out of user code's sight.
		pr, pw := io.Pipe()
		done := make(chan reply, 1)
		go func() {
			defer close(done)
			done <- ts.upload(t, "/v2/fs/upload", field("path", "/tmp/stream/s.bin"), file("s.bin", pr))
		}()
		pw.Write(make([]byte, 6<<20))
		var grown int64
		for deadline := time.Now().Add(10 * time.Second); grown < 4<<20 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			entries, _ := os.ReadDir(filepath.Join(filepath.Dir(sb.Tmp()), "staging"))
			for _, e := range entries {
				if fi, err := e.Info(); err == nil {
					grown = max(grown, fi.Size())
				}
			}
		}
		if entries, _ := os.ReadDir(filepath.Join(sb.Tmp(), "stream")); len(entries) != 0 {
			t.Errorf("user code sees %v while the upload lasts", entries)
		}
		pw.Write(make([]byte, 1<<20))
		pw.Close()
		if r, ok := <-done; !ok || r.status != 200 || r.data()["size"] != float64(7<<20) {
			t.Errorf("streamed upload: %v", r)
		}
		if grown < 4<<20 {
			t.Errorf("the upload was not written while it was received (%d bytes on disk)", grown)
		}

		// A directory target (ending in '/', or existing) takes the file's name;
		// the file may come before the path.
		u = ts.upload(t, "/v2/fs/upload", file("report.csv", strings.NewReader("a,b\n")), field("path", "/home/user/updir/"))
		if u.status != 200 || u.data()["path"] != "/home/user/updir/report.csv" || u.data()["size"] != 4.0 {
			t.Fatalf("upload, file first, into a new directory: %d %s", u.status, u.raw)
		}
		u = ts.upload(t, "/v2/fs/upload", field("path", "/home/user/updir"), file("second.txt", strings.NewReader("2")))
		if u.status != 200 || u.data()["file_path"] != "/home/user/updir/second.txt" {
			t.Errorf("upload into an existing directory: %d %s", u.status, u.raw)
		}
		u = ts.upload(t, "/v1/file/upload", file("default.txt", strings.NewReader("d")))
		if u.status != 200 || u.data()["file_path"] != "/home/user/default.txt" {
			t.Errorf("upload without a path: %d %s", u.status, u.raw)
		}
		if l := ts.must(t, 200, "GET", "/v2/fs/list?path=/tmp&show_hidden=true", nil).data(); strings.Contains(fmt.Sprint(l), "codecell-upload") {
			t.Errorf("a temporary upload file is left: %v", l)
		}
		if r := ts.upload(t, "/v1/file/upload", field("path", "/tmp/nofile")); r.status != 422 {
			t.Errorf("upload without a file: %d %s", r.status, r.raw)
		}
		if r := ts.do(t, "POST", "/v1/file/upload", map[string]any{"path": "/tmp/x"}); r.status != 422 {
			t.Errorf("upload of JSON: %d %s", r.status, r.raw)
		}
	})

	t.Run("download change_policy", func(t *testing.T) {
		if dl := ts.get(t, "/v1/file/download?path=/tmp/up/big.bin&change_policy=abort"); dl.status != 200 || dl.header.Get("Content-Length") != fmt.Sprint(5<<20+123) || len(dl.body) != 5<<20+123 {
			t.Errorf("abort policy, unchanged file: %d, %d bytes", dl.status, len(dl.body))
		}
		// A file that changes while it is sent is cut short.
		ts.upload(t, "/v2/fs/upload", field("path", "/tmp/grow.bin"), file("grow.bin", io.LimitReader(zeros{}, 24<<20)))
		resp, err := http.Get(ts.URL + "/v2/fs/download?path=/tmp/grow.bin&change_policy=abort")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.ReadFull(resp.Body, make([]byte, 1<<20)); err != nil {
			t.Fatal(err)
		}
		post("/v2/fs/write", map[string]any{"path": "/tmp/grow.bin", "content": "more", "append": true})
		n, err := io.Copy(io.Discard, resp.Body)
		if err == nil || n+1<<20 >= 24<<20 {
			t.Errorf("a file changed during the download was sent whole: %d bytes, %v", n+1<<20, err)
		}
		post("/v2/fs/delete", map[string]any{"path": "/tmp/grow.bin"})
	})

	t.Run("str_replace_editor", func(t *testing.T) {
		ed := func(body map[string]any) map[string]any {
			t.Helper()
			return post("/v1/file/str_replace_editor", body)
		}
		const p = "/home/user/ed/app.py"
		d := ed(map[string]any{"command": "create", "path": p, "file_text": "def f():\n    return 1\n\nprint(f())\n"})
		if d["prev_exist"] != false || !strings.Contains(str(d["output"]), "created") {
			t.Errorf("create: %v", d)
		}
		d = ed(map[string]any{"command": "view", "path": p, "view_range": []int{2, -1}})
		if !strings.Contains(str(d["output"]), "     2\t    return 1\n     3\t\n     4\tprint(f())\n") {
			t.Errorf("view: %q", d["output"])
		}
		d = ed(map[string]any{"command": "str_replace", "path": p, "old_str": "return 1", "new_str": "return 2"})
		if d["prev_exist"] != true || !strings.Contains(str(d["new_content"]), "return 2") {
			t.Errorf("str_replace: %v", d)
		}
		ed(map[string]any{"command": "insert", "path": p, "insert_line": 0, "new_str": "import os"})
		if got := read(p); got != "import os\ndef f():\n    return 2\n\nprint(f())\n" {
			t.Errorf("after insert: %q", got)
		}
		ed(map[string]any{"command": "undo_edit", "path": p})
		ed(map[string]any{"command": "undo_edit", "path": p})
		if got := read(p); got != "def f():\n    return 1\n\nprint(f())\n" {
			t.Errorf("after two undos: %q", got)
		}
		if d := ed(map[string]any{"command": "view", "path": "/home/user/ed"}); !strings.Contains(str(d["output"]), p) {
			t.Errorf("view of a directory: %v", d)
		}
		ts.must(t, 400, "POST", "/v1/file/str_replace_editor", map[string]any{"command": "str_replace", "path": p, "old_str": "nowhere", "new_str": ""})
		ts.must(t, 409, "POST", "/v1/file/str_replace_editor", map[string]any{"command": "create", "path": p, "file_text": "again"})
		ts.must(t, 422, "POST", "/v1/file/str_replace_editor", map[string]any{"command": "delete", "path": p})
		ts.must(t, 422, "POST", "/v1/file/str_replace_editor", map[string]any{"path": p})
		ts.must(t, 422, "POST", "/v1/file/str_replace_editor", map[string]any{"command": "view", "path": p, "page_range": []int{1, 2}})
		ed(map[string]any{"command": "undo_edit", "path": p}) // undoes the create: the file is gone
		ts.must(t, 404, "GET", "/v2/fs/stat?path="+p, nil)

		// v2 edit: a replacement, or any command.
		post("/v2/fs/write", map[string]any{"path": "/tmp/e.txt", "content": "x=1\ny=1\n"})
		ts.must(t, 400, "POST", "/v2/fs/edit", map[string]any{"path": "/tmp/e.txt", "old_str": "1", "new_str": "2"})
		post("/v2/fs/edit", map[string]any{"path": "/tmp/e.txt", "old_str": "1", "new_str": "2", "replace_all": true})
		if d := post("/v2/fs/edit", map[string]any{"path": "/tmp/e.txt", "command": "view"}); !strings.Contains(str(d["output"]), "     2\ty=2") {
			t.Errorf("v2 edit then view: %v", d)
		}
		ts.must(t, 422, "POST", "/v2/fs/edit", map[string]any{"path": "/tmp/e.txt", "new_str": "2"})
	})

	t.Run("v2 read stat write mkdir move copy delete", func(t *testing.T) {
		post("/v2/fs/write", map[string]any{"path": "/tmp/v2/l.txt", "content": "0\n1\n2\n3\n"})
		post("/v2/fs/write", map[string]any{"path": "/tmp/v2/l.txt", "content": "4\n", "append": true})
		if d := ts.must(t, 200, "GET", "/v2/fs/read?path=/tmp/v2/l.txt&start_line=1&limit=2", nil).data(); d["content"] != "1\n2\n" || d["path"] != "/tmp/v2/l.txt" {
			t.Errorf("read lines: %v", d)
		}
		if d := ts.must(t, 200, "GET", "/v2/fs/read?path=/tmp/v2/l.txt", nil).data(); d["content"] != "0\n1\n2\n3\n4\n" {
			t.Errorf("read: %v", d)
		}
		st := ts.must(t, 200, "GET", "/v2/fs/stat?path=/tmp/v2/l.txt", nil).data()
		if st["size"] != 10.0 || st["is_dir"] != false || st["type"] != "file" || st["name"] != "l.txt" || st["modified"] == nil {
			t.Errorf("stat: %v", st)
		}
		if d := post("/v2/fs/mkdir", map[string]any{"path": "/tmp/v2/a/b/c"}); d["path"] != "/tmp/v2/a/b/c" || d["is_dir"] != true {
			t.Errorf("mkdir: %v", d)
		}
		post("/v2/fs/mkdir", map[string]any{"path": "/tmp/v2/a/b/c"}) // parents: an existing directory is fine
		ts.must(t, 409, "POST", "/v2/fs/mkdir", map[string]any{"path": "/tmp/v2/a", "parents": false})
		ts.must(t, 404, "POST", "/v2/fs/mkdir", map[string]any{"path": "/tmp/v2/x/y", "parents": false})
		if d := ts.must(t, 200, "GET", "/v2/fs/stat?path=/tmp/v2/a/b", nil).data(); d["is_dir"] != true || d["type"] != "directory" {
			t.Errorf("stat of a directory: %v", d)
		}

		post("/v2/fs/write", map[string]any{"path": "/tmp/v2/a/b/c/f.txt", "content": "f"})
		post("/v2/fs/move", map[string]any{"src": "/tmp/v2/l.txt", "dst": "/home/user/moved.txt"})
		ts.must(t, 404, "GET", "/v2/fs/stat?path=/tmp/v2/l.txt", nil)
		if read("/home/user/moved.txt") != "0\n1\n2\n3\n4\n" {
			t.Error("move between /tmp and home")
		}
		post("/v2/fs/write", map[string]any{"path": "/tmp/v2/other.txt", "content": "other"})
		ts.must(t, 409, "POST", "/v2/fs/move", map[string]any{"source": "/tmp/v2/other.txt", "destination": "/home/user/moved.txt"})
		post("/v2/fs/move", map[string]any{"source": "/tmp/v2/other.txt", "destination": "/home/user/moved.txt", "overwrite": true})
		if read("/home/user/moved.txt") != "other" {
			t.Error("move with overwrite")
		}
		ts.must(t, 404, "POST", "/v2/fs/move", map[string]any{"source": "/tmp/v2/nope", "destination": "/tmp/v2/nope2"})
		ts.must(t, 422, "POST", "/v2/fs/move", map[string]any{"source": "/tmp/v2/other.txt"})

		ts.must(t, 400, "POST", "/v2/fs/copy", map[string]any{"source": "/tmp/v2/a", "destination": "/tmp/v2/a2"})
		post("/v2/fs/copy", map[string]any{"source": "/tmp/v2/a", "destination": "/tmp/v2/a2", "recursive": true})
		post("/v2/fs/copy", map[string]any{"src": "/home/user/moved.txt", "dst": "/tmp/v2/copied.txt"})
		if read("/tmp/v2/a2/b/c/f.txt") != "f" || read("/tmp/v2/copied.txt") != "other" {
			t.Error("copy")
		}
		ts.must(t, 409, "POST", "/v2/fs/copy", map[string]any{"source": "/home/user/moved.txt", "destination": "/tmp/v2/copied.txt"})
		ts.must(t, 400, "POST", "/v2/fs/copy", map[string]any{"source": "/tmp/v2/a", "destination": "/tmp/v2/a/inside", "recursive": true})

		ts.must(t, 400, "POST", "/v2/fs/delete", map[string]any{"path": "/tmp/v2/a"})
		post("/v2/fs/delete", map[string]any{"path": "/tmp/v2/a", "recursive": true})
		post("/v2/fs/delete", map[string]any{"path": "/tmp/v2/copied.txt"})
		ts.must(t, 404, "GET", "/v2/fs/stat?path=/tmp/v2/a", nil)
		ts.must(t, 404, "POST", "/v2/fs/delete", map[string]any{"path": "/tmp/v2/a"})
		if _, err := os.Lstat(filepath.Join(sb.Tmp(), "v2", "a")); !os.IsNotExist(err) {
			t.Errorf("deleted directory still on the host: %v", err)
		}
		// The sandbox-scoped form of a route serves the same files.
		if d := ts.must(t, 200, "GET", "/sandboxes/default/v2/fs/stat?path=/home/user/moved.txt", nil).data(); d["size"] != 5.0 {
			t.Errorf("scoped stat: %v", d)
		}
	})

	t.Run("bad requests", func(t *testing.T) {
		for _, tt := range []struct {
			method, path string
			body         any
			status       int
			loc          string
		}{
			{"POST", "/v1/file/read", map[string]any{}, 422, "file"},
			{"POST", "/v1/file/read", map[string]any{"file": ""}, 422, "file"},
			{"POST", "/v1/file/read", map[string]any{"file": 7}, 422, "file"},
			{"POST", "/v1/file/read", map[string]any{"file": "/tmp/x", "start_line": "1"}, 422, "start_line"},
			{"POST", "/v1/file/read", map[string]any{"file": "/tmp/x", "start_line": -1}, 422, "start_line"},
			{"POST", "/v1/file/write", map[string]any{"file": "/tmp/x"}, 422, "content"},
			{"POST", "/v1/file/find", map[string]any{"path": "/tmp"}, 422, "glob"},
			{"POST", "/v1/file/grep", map[string]any{"path": "/tmp", "pattern": 1}, 422, "pattern"},
			{"POST", "/v1/file/grep", map[string]any{"path": "/tmp", "pattern": "x", "include": 3}, 422, "include"},
			{"POST", "/v1/file/glob", map[string]any{"pattern": "*"}, 422, "path"},
			{"POST", "/v1/file/list", map[string]any{"recursive": true}, 422, "path"},
			{"POST", "/v2/fs/write", map[string]any{"content": "x"}, 422, "path"},
			{"POST", "/v2/fs/delete", "not json", 422, "body"},
			{"GET", "/v2/fs/read", nil, 422, "path"},
			{"GET", "/v2/fs/read?path=/tmp/x&limit=ten", nil, 422, "limit"},
			{"GET", "/v2/fs/list?path=/tmp&recursive=maybe", nil, 422, "recursive"},
			{"GET", "/v1/file/download", nil, 422, "path"},
			{"GET", "/v2/fs/download?path=/tmp/x&change_policy=never", nil, 422, "change_policy"},
			{"GET", "/v2/fs/search?path=/tmp", nil, 422, "pattern"},
			{"POST", "/v1/file/read", map[string]any{"file": "/tmp/missing.txt"}, 404, ""},
			{"GET", "/v2/fs/read?path=/home/user/missing.txt", nil, 404, ""},
			{"GET", "/v1/file/download?path=/tmp/missing.bin", nil, 404, ""},
			{"GET", "/v2/fs/list?path=/tmp/missing", nil, 404, ""},
			{"POST", "/v1/file/read", map[string]any{"file": "/etc/hostname"}, 400, ""},
			{"GET", "/v2/fs/download?path=/var/log/syslog", nil, 400, ""},
			{"GET", "/v2/fs/download?path=/tmp", nil, 400, ""},
			{"GET", "/v2/fs/read?path=/sandboxes", nil, 400, ""},
			{"GET", "/sandboxes/nope/v2/fs/read?path=/tmp/x", nil, 404, ""},
		} {
			r := ts.do(t, tt.method, tt.path, tt.body)
			if r.status != tt.status {
				t.Errorf("%s %s %v: %d, want %d: %s", tt.method, tt.path, tt.body, r.status, tt.status, r.raw)
				continue
			}
			if r.body["success"] != false || r.body["message"] == "" {
				t.Errorf("%s %s: not an error envelope: %s", tt.method, tt.path, r.raw)
			}
			if tt.loc == "" {
				continue
			}
			detail, _ := r.body["detail"].([]any)
			if len(detail) == 0 || !slices.Contains(detail[0].(map[string]any)["loc"].([]any), any(tt.loc)) {
				t.Errorf("%s %s: detail %v does not locate %q", tt.method, tt.path, r.body["detail"], tt.loc)
			}
		}
	})

	t.Run("over the disk quota", func(t *testing.T) {
		// 80 MiB into a 64 MiB sandbox disk: the file size limit or the
		// quota stops it part way, and nothing of it is left.
		status, body := ts.rawUpload(t, "/v2/fs/upload", "/tmp/huge.bin", 80<<20)
		t.Logf("80 MiB upload: %d %s", status, body)
		if status != 413 && status != 507 {
			t.Fatalf("80 MiB upload: %d %s", status, body)
		}
		ts.must(t, 404, "GET", "/v2/fs/stat?path=/tmp/huge.bin", nil)
		if l := ts.must(t, 200, "GET", "/v2/fs/list?path=/tmp", nil).data(); strings.Contains(fmt.Sprint(l), ".tmp") {
			t.Errorf("a temporary file is left: %v", l)
		}
		// The server and the disk still serve.
		if read("/home/user/moved.txt") != "other" {
			t.Error("read after the failed upload")
		}
		big := bytes.Repeat([]byte("z"), 8<<20)
		if u := ts.upload(t, "/v1/file/upload", field("path", "/tmp/after.bin"), file("after.bin", bytes.NewReader(big))); u.status != 200 {
			t.Errorf("upload after the failed one: %d %s", u.status, u.raw)
		}
		// The same through a JSON write larger than the body limit.
		r := ts.do(t, "POST", "/v2/fs/write", map[string]any{"path": "/tmp/j.txt", "content": strings.Repeat("j", 17<<20)})
		if r.status != 413 {
			t.Errorf("JSON write over the body limit: %d", r.status)
		}
	})
}

// A literal "%2e%2e%2f" in a name is a name: the query is decoded once.
func TestFilesQueryDecodedOnce(t *testing.T) {
	ts := newServer(t, serverOpts{})
	ts.must(t, 200, "POST", "/v2/fs/write", map[string]any{"path": "/home/user/%2e%2e%2fx", "content": "literal"})
	if r := ts.get(t, "/v2/fs/download?path="+url.QueryEscape("/home/user/%2e%2e%2fx")); r.status != 200 || string(r.body) != "literal" {
		t.Errorf("download of the literal name: %d %q", r.status, r.body)
	}
	if d := ts.must(t, 200, "GET", "/v2/fs/read?path=/home/user/%252e%252e%252fx", nil).data(); d["content"] != "literal" || d["path"] != "/home/user/%2e%2e%2fx" {
		t.Errorf("read of the literal name: %v", d)
	}
	// Non-ASCII and quote characters in a download's name are encoded.
	ts.must(t, 200, "POST", "/v2/fs/write", map[string]any{"path": "/tmp/résumé \"1\".txt", "content": "r"})
	r := ts.get(t, "/v2/fs/download?path="+url.QueryEscape("/tmp/résumé \"1\".txt"))
	if cd := r.header.Get("Content-Disposition"); r.status != 200 || cd != `attachment; filename*=utf-8''r%C3%A9sum%C3%A9%20%221%22.txt` {
		t.Errorf("Content-Disposition = %q (%d)", cd, r.status)
	}
}

// Paths and symlinks that try to leave the sandbox, through every kind of
// route: each is refused and no reply carries a host secret or path.
func TestFilesTraversal(t *testing.T) {
	ts := newServer(t, serverOpts{})
	ctx := context.Background()
	sb, err := ts.mgr.Default(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Host files the sandbox must never reach, named by absolute paths.
	host := t.TempDir()
	canary := "CANARY-" + rand.Text()
	canaryFile := filepath.Join(host, "secret.txt")
	victim := filepath.Join(host, "victim.txt")
	for f, c := range map[string]string{canaryFile: canary + "\n", victim: "VICTIM-" + canary + "\n"} {
		if err := os.WriteFile(f, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(host, 0o755)
	// Symlinks and a FIFO made by code in the sandbox.
	ts.py(t, fmt.Sprintf(`
import os
for target, link in [
    ("/etc/shadow", "/home/user/s"),
    ("/proc/self/environ", "/home/user/env"),
    ("/", "/home/user/root"),
    (%[1]q, "/home/user/c"),
    (%[2]q, "/home/user/hostdir"),
    (%[3]q, "/home/user/w"),
    ("../../../../../../../../../../.." + %[1]q, "/home/user/rel"),
    ("/home/user", "/tmp/home"),
    ("/tmp/fifo", "/home/user/fifo-link"),
]:
    os.symlink(target, link)
os.mkfifo("/tmp/fifo")
open("/tmp/plain.txt", "w").write("plain")
`, canaryFile, host, victim))

	secrets := []string{canary, "root:x:0:0", "root:*:", "root:!", "PATH=", host, ts.dir, sb.Home(), sb.Tmp()}
	q := url.QueryEscape
	tests := []struct {
		name         string
		method, path string
		body         any
		status       int
	}{
		{"dot-dot relative", "POST", "/v1/file/read", map[string]any{"file": "../../etc/passwd"}, 400},
		{"dot-dot from home", "POST", "/v1/file/read", map[string]any{"file": "/home/user/../../etc/passwd"}, 400},
		{"tilde dot-dot", "GET", "/v2/fs/read?path=" + q("~/../../etc/passwd"), nil, 400},
		{"absolute /etc/shadow", "POST", "/v1/file/read", map[string]any{"file": "/etc/shadow"}, 400},
		{"/proc/self/environ", "GET", "/v2/fs/read?path=/proc/self/environ", nil, 400},
		{"/proc/self/environ download", "GET", "/v1/file/download?path=/proc/self/environ", nil, 400},
		{"url-encoded dot-dot", "GET", "/v2/fs/download?path=%2e%2e%2f%2e%2e%2fetc%2fpasswd", nil, 400},
		{"url-encoded dot-dot from /tmp", "GET", "/v2/fs/read?path=%2ftmp%2f%2e%2e%2fetc%2fshadow", nil, 400},
		{"double-encoded is a name", "GET", "/v2/fs/download?path=%252e%252e%252f%252e%252e%252fetc%252fpasswd", nil, 404},
		{"NUL in a query", "GET", "/v2/fs/download?path=/tmp/plain.txt%00/etc/passwd", nil, 400},
		{"NUL in JSON", "POST", "/v1/file/read", map[string]any{"file": "/tmp/plain.txt\u0000../../etc/passwd"}, 400},
		{"NUL in a write", "POST", "/v2/fs/write", map[string]any{"path": "/tmp/x\u0000y", "content": "x"}, 400},
		{"symlink to /etc/shadow, read", "POST", "/v1/file/read", map[string]any{"file": "/home/user/s"}, 400},
		{"symlink to /etc/shadow, download", "GET", "/v2/fs/download?path=/home/user/s", nil, 400},
		{"symlink to /etc/shadow, base64", "GET", "/v2/fs/read?path=/home/user/s&encoding=base64", nil, 400},
		{"symlink to /etc/shadow, search", "POST", "/v1/file/search", map[string]any{"file": "/home/user/s", "regex": "root"}, 400},
		{"symlink to environ", "GET", "/v1/file/download?path=/home/user/env", nil, 400},
		{"symlink to a host canary", "GET", "/v2/fs/download?path=/home/user/c", nil, 400},
		{"relative symlink out", "GET", "/v2/fs/download?path=/home/user/rel", nil, 400},
		{"copy of a symlink out", "POST", "/v2/fs/copy", map[string]any{"source": "/home/user/c", "destination": "/tmp/c2"}, 400},
		{"editor view of a symlink out", "POST", "/v1/file/str_replace_editor", map[string]any{"command": "view", "path": "/home/user/c"}, 400},
		{"dir symlink to /, list", "GET", "/v2/fs/list?path=/home/user/root", nil, 400},
		{"dir symlink to /, read", "GET", "/v2/fs/read?path=/home/user/root/etc/passwd", nil, 400},
		{"dir symlink to /, download", "GET", "/v2/fs/download?path=/home/user/root/etc/shadow", nil, 400},
		{"dir symlink to /, grep", "POST", "/v2/fs/grep", map[string]any{"path": "/home/user/root/etc", "pattern": "root"}, 400},
		{"dir symlink to /, find", "POST", "/v1/file/find", map[string]any{"path": "/home/user/root", "glob": "shadow"}, 400},
		{"dir symlink to /, glob", "POST", "/v1/file/glob", map[string]any{"path": "/home/user/root/etc", "pattern": "*"}, 400},
		{"symlink from /tmp to home", "GET", "/v2/fs/read?path=/tmp/home/.bashrc", nil, 400},
		{"FIFO, download", "GET", "/v2/fs/download?path=/tmp/fifo", nil, 400},
		{"FIFO, read", "POST", "/v1/file/read", map[string]any{"file": "/tmp/fifo"}, 400},
		{"FIFO through a symlink", "GET", "/v2/fs/read?path=/home/user/fifo-link&encoding=base64", nil, 400},
		{"FIFO, copy", "POST", "/v2/fs/copy", map[string]any{"source": "/tmp/fifo", "destination": "/tmp/fifo2"}, 400},
		{"append through a symlink", "POST", "/v1/file/write", map[string]any{"file": "/home/user/w", "content": "PWNED", "append": true}, 400},
		{"write into a dir symlinked out", "POST", "/v2/fs/write", map[string]any{"path": "/home/user/hostdir/new.txt", "content": "PWNED"}, 400},
		{"replace through a symlink", "POST", "/v1/file/replace", map[string]any{"file": "/home/user/w", "old_str": "VICTIM", "new_str": "PWNED"}, 400},
		{"editor edit through a symlink", "POST", "/v1/file/str_replace_editor", map[string]any{"command": "str_replace", "path": "/home/user/w", "old_str": "VICTIM", "new_str": "PWNED"}, 400},
		{"mkdir in a dir symlinked out", "POST", "/v2/fs/mkdir", map[string]any{"path": "/home/user/hostdir/sub"}, 400},
		{"move out", "POST", "/v2/fs/move", map[string]any{"source": "/tmp/plain.txt", "destination": "/etc/cron.d/x"}, 400},
		{"move through a dir symlink", "POST", "/v2/fs/move", map[string]any{"source": "/tmp/plain.txt", "destination": "/home/user/hostdir/moved"}, 400},
		{"move in from outside", "POST", "/v2/fs/move", map[string]any{"source": "/etc/passwd", "destination": "/tmp/passwd"}, 400},
		{"copy out", "POST", "/v2/fs/copy", map[string]any{"source": "/tmp/plain.txt", "destination": "../../x"}, 400},
		{"copy in from outside", "POST", "/v2/fs/copy", map[string]any{"source": "/etc/passwd", "destination": "/tmp/passwd"}, 400},
		{"delete /home/user", "POST", "/v2/fs/delete", map[string]any{"path": "/home/user", "recursive": true}, 400},
		{"delete /tmp", "POST", "/v2/fs/delete", map[string]any{"path": "/tmp/", "recursive": true}, 400},
		{"delete /", "POST", "/v2/fs/delete", map[string]any{"path": "/", "recursive": true}, 400},
		{"delete through a dir symlink", "POST", "/v2/fs/delete", map[string]any{"path": "/home/user/hostdir/secret.txt"}, 400},
		{"list /", "GET", "/v2/fs/list?path=/", nil, 400},
		{"v1 list /", "POST", "/v1/file/list", map[string]any{"path": "/", "recursive": true}, 400},
		{"list /home", "GET", "/v2/fs/list?path=/home/user/..", nil, 400},
		{"glob an absolute pattern", "POST", "/v1/file/glob", map[string]any{"path": "/home/user", "pattern": "/etc/*"}, 400},
		{"grep /", "POST", "/v1/file/grep", map[string]any{"path": "/", "pattern": "root"}, 400},
		{"stat outside", "GET", "/v2/fs/stat?path=/etc/shadow", nil, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			var status int
			var raw []byte
			if tt.method == "GET" {
				r := ts.get(t, tt.path) // 10 s client timeout: a FIFO must not block
				status, raw = r.status, r.body
			} else {
				r := ts.do(t, tt.method, tt.path, tt.body)
				status, raw = r.status, r.raw
			}
			if status != tt.status {
				t.Errorf("status %d, want %d: %s", status, tt.status, raw)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %v", d)
			}
			for _, s := range secrets {
				if bytes.Contains(raw, []byte(s)) {
					t.Errorf("the reply carries %q: %s", s, raw)
				}
			}
		})
	}

	// Uploads to paths out of the sandbox.
	for _, target := range []string{"../../x", "/etc/x", "/home/user/hostdir/up.txt", "/home/user/root/tmp/up.txt"} {
		r := ts.upload(t, "/v2/fs/upload", field("path", target), file("up.txt", strings.NewReader("PWNED")))
		if r.status != 400 {
			t.Errorf("upload to %s: %d %s", target, r.status, r.raw)
		}
	}
	// A write at a symlink replaces the link; the host file is untouched.
	ts.must(t, 200, "POST", "/v2/fs/write", map[string]any{"path": "/home/user/w", "content": "PWNED"})
	if st := ts.must(t, 200, "GET", "/v2/fs/stat?path=/home/user/w", nil).data(); st["type"] != "file" {
		t.Errorf("write at a symlink: %v", st)
	}
	// Listing and grepping the home show the links but never follow them.
	l := ts.must(t, 200, "GET", "/v2/fs/list?path=/home/user&recursive=true", nil)
	g := ts.must(t, 200, "POST", "/v1/file/grep", map[string]any{"path": "/home/user", "pattern": "CANARY-|root:x:0|PATH[=]", "include_hidden": true})
	if g.data()["match_count"] != 0.0 {
		t.Errorf("grep over home followed a link: %s", g.raw)
	}
	f := ts.must(t, 200, "POST", "/v1/file/find", map[string]any{"path": "/home/user", "glob": "shadow"})
	for _, raw := range [][]byte{l.raw, g.raw, f.raw} {
		for _, s := range []string{canary, "root:x:0:0", "PATH=", ts.dir} {
			if bytes.Contains(raw, []byte(s)) {
				t.Errorf("a walk of home carries %q: %s", s, raw)
			}
		}
	}
	if len(f.data()["files"].([]any)) != 0 {
		t.Errorf("find descended into a link: %s", f.raw)
	}

	// Nothing on the host changed.
	if b, _ := os.ReadFile(victim); string(b) != "VICTIM-"+canary+"\n" {
		t.Errorf("the host victim file changed: %q", b)
	}
	if b, _ := os.ReadFile(canaryFile); string(b) != canary+"\n" {
		t.Errorf("the host canary changed: %q", b)
	}
	if entries, _ := os.ReadDir(host); len(entries) != 2 {
		t.Errorf("files appeared in the host directory: %v", entries)
	}
	for _, p := range []string{"/etc/cron.d/x", "/x", "/etc/x"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created on the host", p)
		}
	}
	// And the sandbox still has what it had.
	if d := ts.must(t, 200, "GET", "/v2/fs/read?path=/tmp/plain.txt", nil).data(); d["content"] != "plain" {
		t.Errorf("plain.txt: %v", d)
	}
}

// Two sandboxes do not see each other's files.
func TestFilesIsolation(t *testing.T) {
	ts := newServer(t, serverOpts{})
	ts.must(t, 201, "POST", "/v2/sandboxes", map[string]any{"id": "other"})
	ts.must(t, 200, "POST", "/sandboxes/other/v2/fs/write", map[string]any{"path": "/tmp/secret.txt", "content": "other's"})
	ts.must(t, 200, "POST", "/v2/fs/write", map[string]any{"path": "/home/user/mine.txt", "content": "default's"})
	ts.must(t, 404, "GET", "/v2/fs/read?path=/tmp/secret.txt", nil)
	ts.must(t, 404, "GET", "/v2/fs/download?path=/tmp/secret.txt", nil)
	ts.must(t, 404, "GET", "/sandboxes/default/v2/fs/read?path=/tmp/secret.txt", nil)
	ts.must(t, 404, "GET", "/sandboxes/other/v2/fs/read?path=/home/user/mine.txt", nil)
	ts.must(t, 404, "POST", "/sandboxes/other/v1/file/read", map[string]any{"file": "/home/user/mine.txt"})
	if d := ts.must(t, 200, "GET", "/sandboxes/other/v2/fs/read?path=/tmp/secret.txt", nil).data(); d["content"] != "other's" {
		t.Errorf("other's file: %v", d)
	}
	if l := ts.must(t, 200, "GET", "/v2/fs/list?path=/tmp", nil); strings.Contains(string(l.raw), "secret.txt") {
		t.Errorf("the default sandbox lists other's file: %s", l.raw)
	}
	// Code in one sandbox does not see the other's files either.
	d := ts.must(t, 200, "POST", "/sandboxes/other/v2/code/execute", map[string]any{"language": "python",
		"code": "import os; print(os.path.exists('/home/user/mine.txt'), open('/tmp/secret.txt').read())"}).data()
	if d["stdout"] != "False other's\n" {
		t.Errorf("code in other: %v", d)
	}
	ts.must(t, 200, "DELETE", "/v2/sandboxes/other", nil)
	ts.must(t, 404, "GET", "/sandboxes/other/v2/fs/read?path=/tmp/secret.txt", nil)
}
