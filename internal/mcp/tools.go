package mcp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell/codecell/internal/files"
	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/llm"
	"github.com/codecell/codecell/internal/observe"
	"github.com/codecell/codecell/internal/sandbox"
)

// Tool inputs. Descriptions are written for a model choosing a tool.

type executeIn struct {
	Language  string  `json:"language" jsonschema:"python or javascript"`
	Code      string  `json:"code" jsonschema:"the code to run; the value of the last expression is shown (DataFrames as tables, matplotlib figures as images)"`
	SessionID string  `json:"session_id,omitempty" jsonschema:"keep variables between calls by passing the same id (any name; created on first use); omit for a fresh interpreter that is discarded afterwards"`
	Timeout   float64 `json:"timeout,omitempty" jsonschema:"seconds before the code is interrupted (default 30)"`
}

type pathIn struct {
	Path string `json:"path,omitempty" jsonschema:"a directory under /home/user or /tmp (default /home/user)"`
}

type readIn struct {
	Path   string `json:"path" jsonschema:"the file, under /home/user or /tmp"`
	Offset int64  `json:"offset,omitempty" jsonschema:"byte offset to start at, to read a large file in slices"`
	Length int64  `json:"length,omitempty" jsonschema:"bytes to read (default: as much as fits in the reply)"`
}

type writeIn struct {
	Path     string `json:"path" jsonschema:"the file to create or replace, under /home/user or /tmp; parent directories are created"`
	Content  string `json:"content" jsonschema:"the file's content"`
	Encoding string `json:"encoding,omitempty" jsonschema:"text (default) or base64 for binary content"`
}

type uploadIn struct {
	LocalPath string `json:"local_path" jsonschema:"a file on the machine running codecell (the user's machine)"`
	Path      string `json:"path,omitempty" jsonschema:"where to put it in the sandbox (default /home/user/<its name>)"`
}

type sessionIn struct {
	Language  string `json:"language" jsonschema:"python or javascript"`
	SessionID string `json:"session_id,omitempty" jsonschema:"the session's id (made up if omitted when creating)"`
}

type noIn struct{}

func (s *server) tools(srv *gomcp.Server) {
	gomcp.AddTool(srv, &gomcp.Tool{Name: "execute_code", Description: "Run Python or JavaScript in the sandbox and get what it printed, the value of its last expression, tables, charts (as images), errors with their traceback, and the files it wrote.",
		Annotations: &gomcp.ToolAnnotations{OpenWorldHint: ptr(false)}}, s.execute)
	gomcp.AddTool(srv, &gomcp.Tool{Name: "list_files", Description: "List a directory of the sandbox (name, size, modification time).",
		Annotations: &gomcp.ToolAnnotations{ReadOnlyHint: true}}, s.listFiles)
	gomcp.AddTool(srv, &gomcp.Tool{Name: "read_file", Description: "Read a file of the sandbox: text as text (large files in slices with offset and length), PNG and JPEG images as images.",
		Annotations: &gomcp.ToolAnnotations{ReadOnlyHint: true}}, s.readFile)
	gomcp.AddTool(srv, &gomcp.Tool{Name: "write_file", Description: "Create or replace a file in the sandbox, from text or base64.",
		Annotations: &gomcp.ToolAnnotations{DestructiveHint: ptr(true)}}, s.writeFile)
	if s.cfg.LocalFiles {
		gomcp.AddTool(srv, &gomcp.Tool{Name: "upload", Description: "Copy a file from the user's machine into the sandbox, e.g. a CSV to analyse."}, s.upload)
	}
	gomcp.AddTool(srv, &gomcp.Tool{Name: "create_session", Description: "Start a session (a kernel that keeps variables between execute_code calls) and return its id."}, s.createSession)
	gomcp.AddTool(srv, &gomcp.Tool{Name: "end_session", Description: "End a session and free its memory; its variables are lost, files stay.",
		Annotations: &gomcp.ToolAnnotations{DestructiveHint: ptr(true)}}, s.endSession)
	gomcp.AddTool(srv, &gomcp.Tool{Name: "list_sessions", Description: "List the live sessions.",
		Annotations: &gomcp.ToolAnnotations{ReadOnlyHint: true}}, s.listSessions)
	gomcp.AddTool(srv, &gomcp.Tool{Name: "sandbox_info", Description: "What the sandbox offers: languages and versions, preinstalled Python packages, limits, and where files live.",
		Annotations: &gomcp.ToolAnnotations{ReadOnlyHint: true}}, s.info)
}

func ptr[T any](v T) *T { return &v }

// text is a tool result of one text block.
func text(format string, args ...any) *gomcp.CallToolResult {
	return &gomcp.CallToolResult{Content: []gomcp.Content{&gomcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// failure is a tool result that tells the model what went wrong: tool
// errors are results with isError, so the model can read and act on them.
func failure(err error) (*gomcp.CallToolResult, any, error) {
	r := text("Error: %v", err)
	r.IsError = true
	return r, nil, nil
}

func (s *server) sandbox(ctx context.Context) (*sandbox.Sandbox, error) {
	return s.cfg.Manager.Default(ctx)
}

func (s *server) execute(ctx context.Context, _ *gomcp.CallToolRequest, in executeIn) (*gomcp.CallToolResult, any, error) {
	lang, err := kernel.ParseLanguage(in.Language)
	if err != nil {
		return failure(err)
	}
	sb, err := s.sandbox(ctx)
	if err != nil {
		return failure(err)
	}
	req := kernel.Request{Code: in.Code, Timeout: time.Duration(in.Timeout * float64(time.Second))}
	e := observe.Execution{Start: time.Now(), KeyID: s.cfg.KeyID, Sandbox: sb.ID(), Session: in.SessionID, Language: lang, Code: in.Code}
	defer func() { s.cfg.Recorder.Record(e) }()
	if in.SessionID == "" {
		e.Result, e.Err = sb.RunRequest(ctx, lang, req)
	} else {
		var sess *sandbox.Session
		if sess, _, e.Err = sb.OpenSession(lang, in.SessionID, true); e.Err == nil {
			var sr *sandbox.Result
			if sr, e.Err = sess.Execute(ctx, req); e.Err == nil {
				e.Result, e.QueueWait = sr.Result, sr.QueueWait
			}
		}
	}
	if e.Err != nil {
		return failure(e.Err)
	}
	var written []llm.File
	if changed, _, err := sb.Files().Changed(ctx, e.Start, 0); err == nil {
		for _, f := range changed {
			written = append(written, llm.File{Path: f.Path, Size: f.Size, Modified: f.ModTime})
			e.Files = append(e.Files, f.Path)
		}
	}
	return s.render(llm.Render(e.Result, written, s.cfg.Render)), nil, nil
}

// render turns a rendering into MCP content: the summary first, then the
// outputs in order, images as image content.
func (s *server) render(r llm.Rendering) *gomcp.CallToolResult {
	out := &gomcp.CallToolResult{IsError: r.IsError, Content: []gomcp.Content{&gomcp.TextContent{Text: r.Summary}}}
	for _, b := range r.Blocks {
		switch b.Kind {
		case "image":
			out.Content = append(out.Content, &gomcp.ImageContent{Data: b.Data, MIMEType: b.MIME})
		default:
			out.Content = append(out.Content, &gomcp.TextContent{Text: b.Text})
		}
	}
	return out
}

func (s *server) listFiles(ctx context.Context, _ *gomcp.CallToolRequest, in pathIn) (*gomcp.CallToolResult, any, error) {
	sb, err := s.sandbox(ctx)
	if err != nil {
		return failure(err)
	}
	res, err := sb.Files().List(ctx, cmp.Or(in.Path, "/home/user"), files.ListOptions{MaxEntries: 1000})
	if err != nil {
		return failure(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s, %s\n", res.Path, count(res.FileCount, "file"), count(res.DirectoryCount, "directory"))
	for _, f := range res.Files {
		name := f.Name
		if f.IsDir {
			name += "/"
		}
		fmt.Fprintf(&b, "%-40s %10s  %s\n", name, llm.Size(f.Size), f.ModTime.UTC().Format(time.DateTime))
	}
	if res.Truncated {
		b.WriteString("(more entries not listed)\n")
	}
	return text("%s", b.String()), nil, nil
}

func count(n int, noun string) string {
	switch {
	case n == 1:
		return "1 " + noun
	case strings.HasSuffix(noun, "y"):
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func (s *server) readFile(ctx context.Context, _ *gomcp.CallToolRequest, in readIn) (*gomcp.CallToolResult, any, error) {
	sb, err := s.sandbox(ctx)
	if err != nil {
		return failure(err)
	}
	budget := int64(llm.Budget(s.cfg.Render))
	switch ext := strings.ToLower(path.Ext(in.Path)); {
	case (ext == ".png" || ext == ".jpg" || ext == ".jpeg") && in.Offset == 0:
		b, err := sb.Files().ReadBytes(ctx, in.Path, 64<<20)
		if err != nil {
			return failure(err)
		}
		img, err := llm.Image(b, s.cfg.Render)
		if err != nil {
			return failure(fmt.Errorf("%s: %w", in.Path, err))
		}
		return &gomcp.CallToolResult{Content: []gomcp.Content{
			&gomcp.TextContent{Text: fmt.Sprintf("%s: %s image, shown at %d×%d", in.Path, llm.Size(int64(len(b))), img.Width, img.Height)},
			&gomcp.ImageContent{Data: img.Data, MIMEType: img.MIME},
		}}, nil, nil
	}
	length := in.Length
	if length <= 0 || length > budget {
		length = budget
	}
	f, fi, err := sb.Files().Open(in.Path)
	if err != nil {
		return failure(err)
	}
	defer f.Close()
	size := fi.Size()
	buf := make([]byte, length)
	n, err := f.ReadAt(buf, in.Offset)
	if err != nil && n == 0 && in.Offset < size {
		return failure(err)
	}
	buf = buf[:n]
	if !utf8.Valid(buf) && bytes.IndexByte(buf, 0) >= 0 {
		return text("%s is binary (%s); read it from code, or write_file can replace it", in.Path, llm.Size(size)), nil, nil
	}
	head := ""
	if end := in.Offset + int64(n); in.Offset > 0 || end < size {
		head = fmt.Sprintf("[bytes %d-%d of %d; read the rest with offset=%d]\n", in.Offset, end, size, end)
	}
	return text("%s%s", head, strings.ToValidUTF8(string(buf), "\uFFFD")), nil, nil
}

func (s *server) writeFile(ctx context.Context, _ *gomcp.CallToolRequest, in writeIn) (*gomcp.CallToolResult, any, error) {
	content := []byte(in.Content)
	switch in.Encoding {
	case "", "text":
	case "base64":
		var err error
		if content, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
			return failure(fmt.Errorf("content is not valid base64: %w", err))
		}
	default:
		return failure(fmt.Errorf("unknown encoding %q: use text or base64", in.Encoding))
	}
	sb, err := s.sandbox(ctx)
	if err != nil {
		return failure(err)
	}
	res, err := sb.Files().Write(ctx, in.Path, bytes.NewReader(content), files.WriteOptions{MkdirAll: true})
	if err != nil {
		return failure(err)
	}
	return text("wrote %s (%s)", res.File, llm.Size(int64(len(content)))), nil, nil
}

func (s *server) upload(ctx context.Context, _ *gomcp.CallToolRequest, in uploadIn) (*gomcp.CallToolResult, any, error) {
	f, err := os.Open(in.LocalPath)
	if err != nil {
		return failure(err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return failure(fmt.Errorf("%s is not a regular file", in.LocalPath))
	}
	dest := cmp.Or(in.Path, "/home/user/"+path.Base(in.LocalPath))
	sb, err := s.sandbox(ctx)
	if err != nil {
		return failure(err)
	}
	res, err := sb.Files().Upload(ctx, dest, f)
	if err != nil {
		return failure(err)
	}
	return text("uploaded %s to %s (%s)", in.LocalPath, res.FilePath, llm.Size(res.FileSize)), nil, nil
}

func (s *server) createSession(ctx context.Context, _ *gomcp.CallToolRequest, in sessionIn) (*gomcp.CallToolResult, any, error) {
	lang, err := kernel.ParseLanguage(in.Language)
	if err != nil {
		return failure(err)
	}
	sb, err := s.sandbox(ctx)
	if err != nil {
		return failure(err)
	}
	sess, created, err := sb.OpenSession(lang, in.SessionID, true)
	if err != nil {
		return failure(err)
	}
	if err := sess.Start(ctx); err != nil {
		if created {
			sb.EndSession(lang, sess.ID)
		}
		return failure(err)
	}
	if !created {
		return text("%s session %q already exists; its variables are kept", lang, sess.ID), nil, nil
	}
	return text("started %s session %q: pass session_id=%q to execute_code to keep variables between calls", lang, sess.ID, sess.ID), nil, nil
}

func (s *server) endSession(ctx context.Context, _ *gomcp.CallToolRequest, in sessionIn) (*gomcp.CallToolResult, any, error) {
	lang, err := kernel.ParseLanguage(in.Language)
	if err != nil {
		return failure(err)
	}
	if in.SessionID == "" {
		return failure(errors.New("session_id is required"))
	}
	sb, err := s.sandbox(ctx)
	if err != nil {
		return failure(err)
	}
	if err := sb.EndSession(lang, in.SessionID); err != nil {
		return failure(err)
	}
	return text("ended %s session %q", lang, in.SessionID), nil, nil
}

func (s *server) listSessions(ctx context.Context, _ *gomcp.CallToolRequest, _ noIn) (*gomcp.CallToolResult, any, error) {
	sb, err := s.sandbox(ctx)
	if err != nil {
		return failure(err)
	}
	list := sb.Sessions("")
	if len(list) == 0 {
		return text("no sessions"), nil, nil
	}
	var b strings.Builder
	for _, sess := range list {
		i := sess.Info()
		state := "idle"
		if i.Busy {
			state = "running"
		}
		fmt.Fprintf(&b, "%s %q: %d executions, %s, last used %s ago\n", i.Language, i.ID, i.Executions, state, time.Since(i.LastUsed).Round(time.Second))
	}
	return text("%s", b.String()), nil, nil
}

func (s *server) info(ctx context.Context, _ *gomcp.CallToolRequest, _ noIn) (*gomcp.CallToolResult, any, error) {
	sb, err := s.sandbox(ctx)
	if err != nil {
		return failure(err)
	}
	l := sb.Limits()
	var b strings.Builder
	if rt := s.cfg.Runtimes; rt != nil {
		fmt.Fprintf(&b, "Languages: Python %s (IPython; pandas, numpy, matplotlib preinstalled), JavaScript on Node.js %s.\n", rt.Python.Version, rt.Node.Version)
		var pkgs []string
		for name, v := range rt.Python.Packages {
			pkgs = append(pkgs, name+" "+v)
		}
		if len(pkgs) > 0 {
			slices.Sort(pkgs)
			fmt.Fprintf(&b, "Python packages: %s.\n", strings.Join(pkgs, ", "))
		}
	} else {
		b.WriteString("Languages: python, javascript.\n")
	}
	used, total, _ := sb.DiskUsage()
	fmt.Fprintf(&b, "Files: /home/user (the working directory) and /tmp; %s of %s used. No network access; no package installation from the internet.\n", llm.Size(used), llm.Size(total))
	fmt.Fprintf(&b, "Limits: memory %s for everything running, %d processes, %.1f CPU, default timeout %v, output %s per execution (more is cut).\n",
		llm.Size(l.MemoryBytes), l.Pids, l.CPUs, l.DefaultTimeout, llm.Size(l.OutputBytes))
	return text("%s", b.String()), nil, nil
}
