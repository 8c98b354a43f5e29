package api

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/codecell/codecell/internal/files"
	"github.com/codecell/codecell/internal/sandbox"
)

// The file plane: v1 (/v1/file/..., the AIO FileXxxRequest and FileXxxResult
// shapes) and v2 (/v2/fs/..., the guide's REST-like routes). The handlers
// only translate HTTP to calls of the sandbox's files.FS, which confines
// every path to /home/user and /tmp and owns all the checks; its errors
// become statuses in statusOf.

// fileTable lists the file plane's routes (v1 /v1/file/..., v2 /v2/fs/...).
func (s *Server) fileTable() []route {
	pathDoc := "absolute under /home/user or /tmp, relative to /home/user, or ~/..."
	fileT := strT("file path: " + pathDoc)
	listT := func(doc string) schema {
		return schema{"type": "array", "items": schema{"type": "string"}, "description": doc}
	}
	strOrListT := func(doc string) schema {
		return schema{"anyOf": []any{schema{"type": "string"}, schema{"type": "array", "items": schema{"type": "string"}}}, "description": doc}
	}
	encT := schema{"type": "string", "enum": []string{"utf-8", "base64", "raw"}, "description": "utf-8 (default) for text, base64 for binary data"}
	uploadBody := obj("file*", schema{"type": "string", "format": "binary", "description": "the content, streamed to disk"},
		"path", strT("target file, or a directory (existing, or ending in '/') to put the file in under its own name; default /home/user/<name>"))
	pathQ := func(doc string) param { return param{"path", "string", doc, true} }
	grep := obj("path*", strT("file or directory"), "pattern*", strT("regular expression (RE2), or a literal with fixed_strings"),
		"include", strOrListT("globs of file names to search, e.g. [\"*.py\"]"), "exclude", strOrListT("globs of names to skip, e.g. [\"node_modules\"]"),
		"case_insensitive", boolT(""), "fixed_strings", boolT("pattern is a literal string"),
		"context_before", intT("0-20 lines"), "context_after", intT("0-20 lines"), "max_results", intT("1-10000; default 500"),
		"offset", intT("matches to skip, for pagination"), "max_file_size", schema{"anyOf": []any{schema{"type": "string"}, schema{"type": "integer"}},
			"description": "skip larger files: bytes or 500K, 1M (default), at most 16M"},
		"type", strT("ripgrep type alias: py, js, ts, go, rust, c, cpp, java, md, json, yaml, html, css, sh, txt, ..."),
		"recursive", boolT("default true; false searches only the directory's own files"),
		"include_hidden", boolT("search hidden files and directories too"))
	editor := obj("command*", schema{"type": "string", "enum": []string{"view", "create", "str_replace", "insert", "undo_edit"}},
		"path*", fileT, "file_text", strT("create: the content"), "old_str", strT("str_replace: the text to replace"),
		"new_str", strT("str_replace: the replacement; insert: the text to insert"),
		"insert_line", intT("insert: after this line (0: at the top)"), "view_range", schema{"type": "array", "items": schema{"type": "integer"},
			"description": "view: [first, last], 1-based; last -1 is the end"},
		"replace_mode", schema{"type": "string", "enum": []string{"ALL", "FIRST", "LAST"}, "description": "str_replace: default requires a unique old_str"})

	return []route{
		{pattern: "POST /v1/file/read", summary: "Read lines of a text file (FileReadRequest → FileReadResult)", sb: s.fileReadV1,
			body: obj("file*", fileT, "start_line", intT("first line, 0-based"), "end_line", intT("line after the last, 0-based"),
				"sudo", boolT("ignored: the file plane is the sandbox's home and /tmp"))},
		{pattern: "POST /v1/file/write", summary: "Write a text or base64 file, creating parent directories (FileWriteRequest → FileWriteResult)", sb: s.fileWriteV1,
			body: obj("file*", fileT, "content*", strT("text, or base64 with encoding base64"), "encoding", encT,
				"append", boolT("append instead of replacing"), "leading_newline", boolT("text only"), "trailing_newline", boolT("text only"),
				"sudo", boolT("ignored"))},
		{pattern: "POST /v1/file/replace", summary: "Replace every occurrence of a string in a file (FileReplaceRequest → FileReplaceResult)", sb: s.fileReplaceV1,
			body: obj("file*", fileT, "old_str*", strT("non-empty"), "new_str*", strT(""), "sudo", boolT("ignored"))},
		{pattern: "POST /v1/file/search", summary: "Lines of a file matching a regular expression (FileSearchRequest → FileSearchResult)", sb: s.fileSearchV1,
			body: obj("file*", fileT, "regex*", strT("RE2 syntax"), "sudo", boolT("ignored"))},
		{pattern: "POST /v1/file/find", summary: "Paths under a directory whose name matches a glob (FileFindRequest → FileFindResult)", sb: s.fileFindV1,
			body: obj("path*", strT("directory"), "glob*", strT("name glob, e.g. *.py; with '/' matched against the relative path, ** for any directories"))},
		{pattern: "POST /v1/file/grep", summary: "Search the files under a directory for a regular expression (FileGrepRequest → FileGrepResult)", sb: s.fileGrep,
			body: grep},
		{pattern: "POST /v1/file/glob", summary: "Files matching a glob pattern (FileGlobRequest → FileGlobResult)", sb: s.fileGlobV1,
			body: obj("path*", strT("base directory"), "pattern*", strT("**, *, ? and [...]"), "exclude", listT("globs to skip"),
				"include_hidden", boolT(""), "files_only", boolT("default true"), "include_metadata", boolT("size and modified_time; default true"),
				"max_results", intT("1-50000; default 5000"), "sort_by", schema{"type": "string", "enum": []string{"path", "name", "size", "modified"}},
				"sort_desc", boolT(""))},
		{pattern: "POST /v1/file/list", summary: "List a directory (FileListRequest → FileListResult)", sb: s.fileListV1,
			body: obj("path*", strT("directory"), "recursive", boolT(""), "show_hidden", boolT("default true"),
				"file_types", listT("keep files with these extensions, e.g. [\".py\"]"), "max_depth", intT("with recursive"),
				"include_size", boolT("ignored: always included"), "include_permissions", boolT("ignored: always included"),
				"sort_by", schema{"type": "string", "enum": []string{"name", "size", "modified", "type"}}, "sort_desc", boolT(""))},
		{pattern: "POST /v1/file/upload", summary: "Upload a file, streamed (multipart/form-data: file, path) → FileUploadResult", sb: s.fileUploadV1,
			body: uploadBody},
		{pattern: "GET /v1/file/download", summary: "Download a file: raw bytes, Range, ETag and Last-Modified; attachment", sb: s.fileDownload,
			raw: "application/octet-stream", query: []param{pathQ("file"),
				{"change_policy", "string", "ignore (default), or abort: the download stops if the file changes while it is sent", false}}},
		{pattern: "POST /v1/file/str_replace_editor", summary: "View, create and edit files (StrReplaceEditorRequest → StrReplaceEditorResult)", sb: s.fileEditorV1,
			body: editor},

		{pattern: "GET /v2/fs/read", summary: "Read a file: lines of text, or the whole file in base64", sb: s.fsRead,
			query: []param{pathQ("file"), {"start_line", "integer", "first line, 0-based", false}, {"limit", "integer", "number of lines", false},
				{"end_line", "integer", "line after the last, 0-based (instead of limit)", false},
				{"encoding", "string", "utf-8 (default) or base64 (whole file, at most 16 MiB)", false}}},
		{pattern: "GET /v2/fs/list", summary: "List a directory: files [{name, path, size, is_dir, type, modified, ...}]", sb: s.fsList,
			query: []param{pathQ("directory"), {"recursive", "boolean", "", false}, {"max_depth", "integer", "with recursive", false},
				{"show_hidden", "boolean", "default true", false}}},
		{pattern: "GET /v2/fs/stat", summary: "Describe a file; a symlink is not followed", sb: s.fsStat, query: []param{pathQ("")}},
		{pattern: "GET /v2/fs/download", summary: "Download a file: raw bytes, Range, ETag and Last-Modified; attachment", sb: s.fileDownload,
			raw: "application/octet-stream", query: []param{pathQ("file"), {"change_policy", "string", "ignore (default) or abort", false}}},
		{pattern: "GET /v2/fs/search", summary: "Find paths under a directory whose name matches a glob", sb: s.fsSearch,
			query: []param{pathQ("directory"), {"pattern", "string", "name glob, e.g. *.csv; ** for any directories", true}}},
		{pattern: "POST /v2/fs/write", summary: "Write a file, creating parent directories", sb: s.fsWrite,
			body: obj("path*", fileT, "content*", strT(""), "encoding", encT, "append", boolT(""))},
		{pattern: "POST /v2/fs/upload", summary: "Upload a file, streamed (multipart/form-data: file, path)", sb: s.fsUpload, body: uploadBody},
		{pattern: "POST /v2/fs/mkdir", summary: "Create a directory; replies with its entry", sb: s.fsMkdir,
			body: obj("path*", strT(""), "parents", boolT("create missing parents; an existing directory is no error (default true)"))},
		{pattern: "POST /v2/fs/delete", summary: "Delete a file, symlink or directory", sb: s.fsDelete,
			body: obj("path*", strT(""), "recursive", boolT("delete a non-empty directory"))},
		{pattern: "POST /v2/fs/move", summary: "Move or rename (also accepts src and dst)", sb: s.fsMove,
			body: obj("source*", strT(""), "destination*", strT("the new path"), "overwrite", boolT("replace an existing destination"))},
		{pattern: "POST /v2/fs/copy", summary: "Copy a file or directory (also accepts src and dst)", sb: s.fsCopy,
			body: obj("source*", strT(""), "destination*", strT("the new path"), "recursive", boolT("copy a directory"),
				"overwrite", boolT("replace existing files"))},
		{pattern: "POST /v2/fs/grep", summary: "Search files for a regular expression (FileGrepResult)", sb: s.fileGrep, body: grep},
		{pattern: "POST /v2/fs/edit", summary: "Replace a string in a file; with command, any str_replace_editor command", sb: s.fsEdit,
			body: obj("path*", fileT, "old_str", strT("required without command"), "new_str", strT(""),
				"replace_all", boolT("replace every occurrence; else old_str must be unique"),
				"command", schema{"type": "string", "enum": []string{"view", "create", "str_replace", "insert", "undo_edit"}},
				"file_text", strT(""), "insert_line", intT(""), "view_range", schema{"type": "array", "items": schema{"type": "integer"}})},
	}
}

// ---- v1 ----

// POST /v1/file/read: FileReadRequest → FileReadResult.
func (s *Server) fileReadV1(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body struct {
		File      *string `json:"file"`
		Path      *string `json:"path"` // alias
		StartLine *int    `json:"start_line"`
		EndLine   *int    `json:"end_line"`
		Sudo      *bool   `json:"sudo"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	p, err := pathField("file", body.File, body.Path)
	if err != nil {
		return err
	}
	opts, empty, err := lineRange(invalid, deref(body.StartLine), nil, body.EndLine)
	if err != nil {
		return err
	}
	res, err := sb.Files().Read(r.Context(), p, opts)
	if err != nil {
		return err
	}
	if empty {
		res.Content = ""
	}
	return ok(w, res)
}

// lineRange turns a start line and a limit or an end line into ReadOptions.
// empty reports a range of no lines (Read's Limit 0 means "to the end").
func lineRange(bad func(field, msg, typ string) error, start int, limit, end *int) (files.ReadOptions, bool, error) {
	o := files.ReadOptions{StartLine: start}
	if start < 0 {
		return o, false, bad("start_line", "must be 0 or more", "value_error.number.not_ge")
	}
	switch {
	case limit != nil && *limit < 0:
		return o, false, bad("limit", "must be 0 or more", "value_error.number.not_ge")
	case limit != nil:
		o.Limit = *limit
		if *limit == 0 {
			o.Limit = 1
			return o, true, nil
		}
	case end != nil && *end < start:
		return o, false, bad("end_line", "must not be less than start_line", "value_error")
	case end != nil:
		o.Limit = *end - start
		if o.Limit == 0 {
			o.Limit = 1
			return o, true, nil
		}
	}
	return o, false, nil
}

// POST /v1/file/write: FileWriteRequest → FileWriteResult.
func (s *Server) fileWriteV1(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body struct {
		File            *string `json:"file"`
		Path            *string `json:"path"` // alias
		Content         *string `json:"content"`
		Encoding        *string `json:"encoding"`
		Append          *bool   `json:"append"`
		LeadingNewline  *bool   `json:"leading_newline"`
		TrailingNewline *bool   `json:"trailing_newline"`
		Sudo            *bool   `json:"sudo"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	p, err := pathField("file", body.File, body.Path)
	if err != nil {
		return err
	}
	b, err := decodeContent(body.Content, deref(body.Encoding), deref(body.LeadingNewline), deref(body.TrailingNewline))
	if err != nil {
		return err
	}
	res, err := sb.Files().Write(r.Context(), p, bytes.NewReader(b), files.WriteOptions{Append: deref(body.Append), MkdirAll: true})
	if err != nil {
		return err
	}
	return ok(w, res)
}

// decodeContent decodes the content of a write request.
func decodeContent(c *string, encoding string, leading, trailing bool) ([]byte, error) {
	if err := required("content", c); err != nil {
		return nil, err
	}
	switch strings.ToLower(encoding) {
	case "", "utf-8", "utf8", "text", "raw":
		s := *c
		if leading {
			s = "\n" + s
		}
		if trailing {
			s += "\n"
		}
		return []byte(s), nil
	case "base64":
		b, err := decodeBase64(*c)
		if err != nil {
			return nil, invalid("content", "not valid base64: "+err.Error(), "value_error")
		}
		return b, nil
	}
	return nil, invalid("encoding", fmt.Sprintf("unsupported encoding %q: use utf-8 or base64", encoding), "enum")
}

// decodeBase64 accepts standard or URL-safe base64, padded or not, wrapped
// in lines or not.
func decodeBase64(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, s)
	var first error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		b, err := enc.DecodeString(s)
		if err == nil {
			return b, nil
		}
		first = cmp.Or(first, err)
	}
	return nil, first
}

// POST /v1/file/replace: FileReplaceRequest → FileReplaceResult. Every
// occurrence is replaced; none leaves the file alone with replaced_count 0.
func (s *Server) fileReplaceV1(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body struct {
		File   *string `json:"file"`
		Path   *string `json:"path"` // alias
		OldStr *string `json:"old_str"`
		NewStr *string `json:"new_str"`
		Sudo   *bool   `json:"sudo"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	p, err := pathField("file", body.File, body.Path)
	if err != nil {
		return err
	}
	if err := nonEmpty("old_str", body.OldStr); err != nil {
		return err
	}
	if err := required("new_str", body.NewStr); err != nil {
		return err
	}
	res, err := sb.Files().Replace(r.Context(), p, *body.OldStr, *body.NewStr, true)
	if errors.Is(err, files.ErrNoMatch) {
		writeJSON(w, http.StatusOK, envelope{Success: true, Message: "old_str does not occur in the file: nothing replaced",
			Data: files.ReplaceResult{File: files.CodePath(p), ReplacedCount: 0}})
		return nil
	}
	if err != nil {
		return err
	}
	return ok(w, res)
}

// POST /v1/file/search: FileSearchRequest → FileSearchResult.
func (s *Server) fileSearchV1(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body struct {
		File  *string `json:"file"`
		Path  *string `json:"path"` // alias
		Regex *string `json:"regex"`
		Sudo  *bool   `json:"sudo"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	p, err := pathField("file", body.File, body.Path)
	if err != nil {
		return err
	}
	if err := nonEmpty("regex", body.Regex); err != nil {
		return err
	}
	res, err := sb.Files().Search(r.Context(), p, *body.Regex)
	if err != nil {
		return err
	}
	return ok(w, res)
}

// POST /v1/file/find: FileFindRequest → FileFindResult.
func (s *Server) fileFindV1(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body struct {
		Path *string `json:"path"`
		Glob *string `json:"glob"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	p, err := pathField("path", body.Path)
	if err != nil {
		return err
	}
	if err := nonEmpty("glob", body.Glob); err != nil {
		return err
	}
	res, err := sb.Files().Find(r.Context(), p, *body.Glob)
	if err != nil {
		return err
	}
	return ok(w, res)
}

// POST /v1/file/grep and /v2/fs/grep: FileGrepRequest → FileGrepResult.
func (s *Server) fileGrep(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body struct {
		Path            *string    `json:"path"`
		Pattern         *string    `json:"pattern"`
		Include         stringList `json:"include"`
		Exclude         stringList `json:"exclude"`
		CaseInsensitive *bool      `json:"case_insensitive"`
		FixedStrings    *bool      `json:"fixed_strings"`
		ContextBefore   *int       `json:"context_before"`
		ContextAfter    *int       `json:"context_after"`
		MaxResults      *int       `json:"max_results"`
		MaxFileSize     *byteSize  `json:"max_file_size"`
		Multiline       *bool      `json:"multiline"`
		Offset          *int       `json:"offset"`
		Type            *string    `json:"type"`
		Recursive       *bool      `json:"recursive"`
		IncludeHidden   *bool      `json:"include_hidden"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	p, err := pathField("path", body.Path)
	if err != nil {
		return err
	}
	if err := nonEmpty("pattern", body.Pattern); err != nil {
		return err
	}
	opts := files.GrepOptions{
		Pattern:         *body.Pattern,
		FixedStrings:    deref(body.FixedStrings),
		CaseInsensitive: deref(body.CaseInsensitive),
		Include:         body.Include,
		Exclude:         body.Exclude,
		IncludeHidden:   deref(body.IncludeHidden),
		ContextBefore:   deref(body.ContextBefore),
		ContextAfter:    deref(body.ContextAfter),
		MaxResults:      deref(body.MaxResults),
		Offset:          deref(body.Offset),
		MaxFileSize:     int64(deref(body.MaxFileSize)),
	}
	for _, c := range []struct {
		field    string
		v        *int
		min, max int
	}{
		{"context_before", body.ContextBefore, 0, 20}, {"context_after", body.ContextAfter, 0, 20},
		{"max_results", body.MaxResults, 1, 10000}, {"offset", body.Offset, 0, 1 << 30},
	} {
		if c.v != nil && (*c.v < c.min || *c.v > c.max) {
			return invalid(c.field, fmt.Sprintf("must be within [%d, %d]", c.min, c.max), "value_error.number")
		}
	}
	if body.MaxFileSize != nil && *body.MaxFileSize <= 0 {
		return invalid("max_file_size", "must be positive", "value_error")
	}
	if deref(body.Multiline) {
		return invalid("multiline", "multiline matching is not supported: patterns match within one line", "value_error")
	}
	if t := deref(body.Type); t != "" {
		globs, found := rgTypes[strings.ToLower(t)]
		switch {
		case !found:
			return invalid("type", fmt.Sprintf("unknown file type %q", t), "value_error")
		case len(opts.Include) > 0:
			return invalid("type", "give include or type, not both", "value_error")
		}
		opts.Include = globs
	}
	if body.Recursive != nil && !*body.Recursive {
		opts.MaxDepth = 1
	}
	res, err := sb.Files().Grep(r.Context(), p, opts)
	if err != nil {
		return err
	}
	return ok(w, res)
}

// rgTypes are the common ripgrep --type aliases.
var rgTypes = map[string][]string{
	"py": {"*.py", "*.pyi"}, "python": {"*.py", "*.pyi"},
	"js": {"*.js", "*.mjs", "*.cjs", "*.jsx"}, "ts": {"*.ts", "*.tsx", "*.mts", "*.cts"},
	"go": {"*.go"}, "rust": {"*.rs"}, "c": {"*.c", "*.h"}, "cpp": {"*.cpp", "*.cc", "*.cxx", "*.hpp", "*.hh", "*.h"},
	"java": {"*.java"}, "md": {"*.md", "*.markdown"}, "markdown": {"*.md", "*.markdown"},
	"json": {"*.json"}, "yaml": {"*.yaml", "*.yml"}, "toml": {"*.toml"}, "html": {"*.html", "*.htm"},
	"css": {"*.css", "*.scss"}, "sh": {"*.sh", "*.bash"}, "txt": {"*.txt"}, "csv": {"*.csv"},
	"sql": {"*.sql"}, "xml": {"*.xml"}, "rb": {"*.rb"}, "ruby": {"*.rb"}, "php": {"*.php"},
}

// POST /v1/file/glob: FileGlobRequest → FileGlobResult.
func (s *Server) fileGlobV1(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body struct {
		Path            *string    `json:"path"`
		Pattern         *string    `json:"pattern"`
		Exclude         stringList `json:"exclude"`
		IncludeHidden   *bool      `json:"include_hidden"`
		FilesOnly       *bool      `json:"files_only"`
		IncludeMetadata *bool      `json:"include_metadata"`
		MaxResults      *int       `json:"max_results"`
		SortBy          *string    `json:"sort_by"`
		SortDesc        *bool      `json:"sort_desc"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	p, err := pathField("path", body.Path)
	if err != nil {
		return err
	}
	if err := nonEmpty("pattern", body.Pattern); err != nil {
		return err
	}
	if m := body.MaxResults; m != nil && (*m < 1 || *m > 50000) {
		return invalid("max_results", "must be within [1, 50000]", "value_error.number")
	}
	by := cmp.Or(deref(body.SortBy), "path")
	if !slices.Contains([]string{"path", "name", "size", "modified"}, by) {
		return invalid("sort_by", "must be path, name, size or modified", "enum")
	}
	filesOnly := body.FilesOnly == nil || *body.FilesOnly
	res, err := sb.Files().Glob(r.Context(), files.GlobOptions{Pattern: *body.Pattern, Path: p, Exclude: body.Exclude,
		IncludeHidden: deref(body.IncludeHidden), IncludeDirs: !filesOnly, MaxResults: deref(body.MaxResults)})
	if err != nil {
		return err
	}
	sortInfos(res.Files, by, deref(body.SortDesc))
	if body.IncludeMetadata == nil || *body.IncludeMetadata {
		return ok(w, res)
	}
	bare := make([]map[string]any, len(res.Files))
	for i, f := range res.Files {
		bare[i] = map[string]any{"path": f.Path, "name": f.Name, "is_directory": f.IsDir}
	}
	return ok(w, map[string]any{"path": res.Path, "pattern": res.Pattern, "files": bare, "total_count": res.TotalCount, "truncated": res.Truncated})
}

// POST /v1/file/list: FileListRequest → FileListResult.
func (s *Server) fileListV1(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body struct {
		Path               *string    `json:"path"`
		Recursive          *bool      `json:"recursive"`
		ShowHidden         *bool      `json:"show_hidden"`
		FileTypes          stringList `json:"file_types"`
		MaxDepth           *int       `json:"max_depth"`
		IncludeSize        *bool      `json:"include_size"`
		IncludePermissions *bool      `json:"include_permissions"`
		SortBy             *string    `json:"sort_by"`
		SortDesc           *bool      `json:"sort_desc"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	p, err := pathField("path", body.Path)
	if err != nil {
		return err
	}
	if d := body.MaxDepth; d != nil && *d < 0 {
		return invalid("max_depth", "must be 0 or more", "value_error.number.not_ge")
	}
	by := cmp.Or(deref(body.SortBy), "name")
	if !slices.Contains([]string{"name", "size", "modified", "type"}, by) {
		return invalid("sort_by", "must be name, size, modified or type", "enum")
	}
	res, err := sb.Files().List(r.Context(), p, files.ListOptions{Recursive: deref(body.Recursive), MaxDepth: deref(body.MaxDepth),
		ShowHidden: body.ShowHidden == nil || *body.ShowHidden, Extensions: body.FileTypes})
	if err != nil {
		return err
	}
	sortInfos(res.Files, by, deref(body.SortDesc))
	return ok(w, res)
}

// sortInfos sorts by path, name, size, modified or type (directories first),
// ties broken by path.
func sortInfos(list []files.FileInfo, by string, desc bool) {
	slices.SortStableFunc(list, func(a, b files.FileInfo) int {
		var c int
		switch by {
		case "name":
			c = strings.Compare(a.Name, b.Name)
		case "size":
			c = cmp.Compare(a.Size, b.Size)
		case "modified":
			c = a.ModTime.Compare(b.ModTime)
		case "type":
			c = cmp.Compare(typeRank(a), typeRank(b))
			if c == 0 {
				c = strings.Compare(a.Name, b.Name)
			}
		}
		if c == 0 {
			c = strings.Compare(a.Path, b.Path)
		}
		if desc {
			c = -c
		}
		return c
	})
}

func typeRank(f files.FileInfo) int {
	switch f.Type {
	case "directory":
		return 0
	case "file":
		return 1
	case "symlink":
		return 2
	}
	return 3
}

// POST /v1/file/str_replace_editor: StrReplaceEditorRequest →
// StrReplaceEditorResult. PDF, spreadsheet and slide views are not supported.
func (s *Server) fileEditorV1(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body editorBody
	if err := decode(r, &body); err != nil {
		return err
	}
	if err := required("command", body.Command); err != nil {
		return err
	}
	return s.edit(w, r, sb, body)
}

type editorBody struct {
	Command        *string         `json:"command"`
	Path           *string         `json:"path"`
	FileText       *string         `json:"file_text"`
	OldStr         *string         `json:"old_str"`
	NewStr         *string         `json:"new_str"`
	InsertLine     *int            `json:"insert_line"`
	ViewRange      []int           `json:"view_range"`
	ReplaceMode    *string         `json:"replace_mode"`
	PageRange      json.RawMessage `json:"page_range"`
	SheetName      json.RawMessage `json:"sheet_name"`
	RowRange       json.RawMessage `json:"row_range"`
	SlideRange     json.RawMessage `json:"slide_range"`
	EnableMetadata *bool           `json:"enable_metadata"`
	ReplaceAll     *bool           `json:"replace_all"` // v2 edit
}

func (s *Server) edit(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox, body editorBody) error {
	p, err := pathField("path", body.Path)
	if err != nil {
		return err
	}
	cmd := *body.Command
	if !slices.Contains([]string{"view", "create", "str_replace", "insert", "undo_edit"}, cmd) {
		return invalid("command", fmt.Sprintf("unknown command %q: use view, create, str_replace, insert or undo_edit", cmd), "enum")
	}
	for _, f := range []struct {
		name string
		v    json.RawMessage
	}{{"page_range", body.PageRange}, {"sheet_name", body.SheetName}, {"row_range", body.RowRange}, {"slide_range", body.SlideRange}} {
		if len(f.v) > 0 && string(f.v) != "null" {
			return invalid(f.name, "not supported: codecell views text files only", "value_error")
		}
	}
	if deref(body.EnableMetadata) {
		return invalid("enable_metadata", "not supported: codecell views text files only", "value_error")
	}
	mode := deref(body.ReplaceMode)
	if mode != "" && mode != "ALL" && mode != "FIRST" && mode != "LAST" {
		return invalid("replace_mode", "must be ALL, FIRST or LAST", "enum")
	}
	if deref(body.ReplaceAll) {
		mode = "ALL"
	}
	res, err := sb.Files().Edit(r.Context(), files.EditRequest{Command: cmd, Path: p, FileText: body.FileText, OldStr: body.OldStr,
		NewStr: body.NewStr, InsertLine: body.InsertLine, ViewRange: body.ViewRange, ReplaceMode: mode})
	if err != nil {
		return err
	}
	return ok(w, res)
}

// POST /v1/file/upload: multipart file and path → FileUploadResult.
func (s *Server) fileUploadV1(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	res, err := upload(r, sb.Files())
	if err != nil {
		return err
	}
	return ok(w, res)
}

// upload streams the "file" part of a multipart body to the sandbox, never
// holding it in memory. The target comes from the "path" part: a file, or a
// directory (existing, or ending in '/') to put the file in under its own
// name. Clients send form fields before files, so the target is usually
// known when the file arrives; if it is not, the file is staged out of user
// code's sight and renamed once the body is read.
func upload(r *http.Request, fsys *files.FS) (*files.UploadResult, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, invalid("file", "expected a multipart/form-data body with a file part: "+err.Error(), "missing")
	}
	ctx := r.Context()
	var (
		target   string
		res      *files.UploadResult
		staged   *files.Staged // the file, before its target was known
		filename string
	)
	defer func() {
		if staged != nil {
			staged.Discard()
		}
	}()
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, invalid("body", "malformed multipart body: "+err.Error(), "value_error")
		}
		switch part.FormName() {
		case "path":
			b, err := io.ReadAll(io.LimitReader(part, 64<<10))
			if err != nil {
				return nil, err
			}
			target = strings.TrimSpace(string(b))
		case "file":
			if res != nil || staged != nil {
				return nil, invalid("file", "one file per request", "value_error")
			}
			filename = part.FileName()
			if target == "" {
				if staged, err = fsys.Stage(ctx, part); err != nil {
					return nil, err
				}
				break
			}
			dst, err := uploadTarget(fsys, target, filename)
			if err != nil {
				return nil, err
			}
			if res, err = fsys.Upload(ctx, dst, part); err != nil {
				return nil, err
			}
		default: // unknown fields are ignored, as FastAPI does
			if _, err := io.Copy(io.Discard, io.LimitReader(part, 1<<20)); err != nil {
				return nil, err
			}
		}
		part.Close()
	}
	if staged != nil {
		dst, err := uploadTarget(fsys, target, filename)
		if err != nil {
			return nil, err
		}
		return staged.Commit(dst)
	}
	if res == nil {
		return nil, invalid("file", "field required", "missing")
	}
	return res, nil
}

// uploadTarget is the file an upload named name goes to, given the path
// field: the default directory is /home/user.
func uploadTarget(fsys *files.FS, target, name string) (string, error) {
	dir, isDir := target, false
	switch {
	case target == "":
		dir, isDir = "~", true
	case strings.HasSuffix(target, "/"):
		dir, isDir = strings.TrimRight(target, "/"), true
	default:
		fi, err := fsys.Stat(target)
		isDir = err == nil && fi.IsDir
	}
	if !isDir {
		return target, nil
	}
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return "", invalid("file", "the file part has no usable filename: give path a file name", "value_error")
	}
	return dir + "/" + name, nil
}

// GET /v1/file/download and /v2/fs/download?path=: the file's bytes, with
// Range, If-None-Match (ETag) and If-Modified-Since, as an attachment.
func (s *Server) fileDownload(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	q := r.URL.Query()
	p, err := queryPath(q, "path")
	if err != nil {
		return err
	}
	policy := q.Get("change_policy")
	if policy != "" && policy != "ignore" && policy != "abort" {
		return invalidQuery("change_policy", "must be ignore or abort", "enum")
	}
	f, fi, err := sb.Files().Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	name := fi.Name()
	h := w.Header()
	h.Set("ETag", fmt.Sprintf(`"%x-%x"`, fi.Size(), fi.ModTime().UnixNano()))
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	h.Set("Content-Type", ctype)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Disposition", attachment(name))
	var content io.ReadSeeker = f
	if policy == "abort" {
		content = &changeGuard{f: f, size: fi.Size(), mod: fi.ModTime()}
	}
	http.ServeContent(w, r, name, fi.ModTime(), content)
	return nil
}

// attachment is a Content-Disposition naming the file: quoted as is when it
// is plain ASCII, RFC 2231-encoded otherwise.
func attachment(name string) string {
	plain := name != ""
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		return `attachment; filename="` + name + `"`
	}
	if v := mime.FormatMediaType("attachment", map[string]string{"filename": name}); v != "" {
		return v
	}
	return "attachment"
}

// changeGuard stops a download (change_policy=abort) when the file changes
// while it is sent: the client sees a short body.
type changeGuard struct {
	f    *os.File
	size int64
	mod  time.Time
}

var errChanged = errors.New("file changed during download")

func (g *changeGuard) Read(p []byte) (int, error) {
	fi, err := g.f.Stat()
	if err != nil {
		return 0, err
	}
	if fi.Size() != g.size || !fi.ModTime().Equal(g.mod) {
		return 0, errChanged
	}
	return g.f.Read(p)
}

func (g *changeGuard) Seek(off int64, whence int) (int64, error) { return g.f.Seek(off, whence) }

// ---- v2 ----

// fsEntry is a file as v2 lists it: FileInfo with the v2 names too.
type fsEntry struct {
	files.FileInfo
	IsDirV2  bool      `json:"is_dir"`
	Modified time.Time `json:"modified"`
}

func entry(fi files.FileInfo) fsEntry {
	return fsEntry{FileInfo: fi, IsDirV2: fi.IsDir, Modified: fi.ModTime}
}

// GET /v2/fs/read?path=&start_line=&limit=&encoding=
func (s *Server) fsRead(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	q := r.URL.Query()
	p, err := queryPath(q, "path")
	if err != nil {
		return err
	}
	var start, limit, end *int
	for _, v := range []struct {
		name string
		dst  **int
	}{{"start_line", &start}, {"limit", &limit}, {"end_line", &end}} {
		if *v.dst, err = queryInt(q, v.name); err != nil {
			return err
		}
	}
	switch enc := q.Get("encoding"); enc {
	case "base64":
		if start != nil || limit != nil || end != nil {
			return invalidQuery("encoding", "base64 reads the whole file: no start_line, limit or end_line", "value_error")
		}
		b, err := sb.Files().ReadBytes(r.Context(), p, 0)
		if err != nil {
			return err
		}
		return ok(w, map[string]any{"path": files.CodePath(p), "content": base64.StdEncoding.EncodeToString(b), "encoding": "base64", "size": len(b)})
	case "", "utf-8", "utf8", "text":
	default:
		return invalidQuery("encoding", fmt.Sprintf("unsupported encoding %q: use utf-8 or base64", enc), "enum")
	}
	if limit != nil && end != nil {
		return invalidQuery("limit", "give limit or end_line, not both", "value_error")
	}
	opts, empty, err := lineRange(invalidQuery, deref(start), limit, end)
	if err != nil {
		return err
	}
	res, err := sb.Files().Read(r.Context(), p, opts)
	if err != nil {
		return err
	}
	if empty {
		res.Content = ""
	}
	return ok(w, map[string]any{"path": res.File, "content": res.Content, "encoding": "utf-8", "truncated": res.Truncated})
}

// GET /v2/fs/list?path=&recursive=&max_depth=&show_hidden=
func (s *Server) fsList(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	q := r.URL.Query()
	p, err := queryPath(q, "path")
	if err != nil {
		return err
	}
	recursive, err := queryBool(q, "recursive", false)
	if err != nil {
		return err
	}
	hidden, err := queryBool(q, "show_hidden", true)
	if err != nil {
		return err
	}
	depth, err := queryInt(q, "max_depth")
	if err != nil {
		return err
	}
	if depth != nil && *depth < 0 {
		return invalidQuery("max_depth", "must be 0 or more", "value_error.number.not_ge")
	}
	res, err := sb.Files().List(r.Context(), p, files.ListOptions{Recursive: recursive, MaxDepth: deref(depth), ShowHidden: hidden})
	if err != nil {
		return err
	}
	list := make([]fsEntry, len(res.Files))
	for i, f := range res.Files {
		list[i] = entry(f)
	}
	return ok(w, map[string]any{"path": res.Path, "files": list, "total_count": res.TotalCount,
		"directory_count": res.DirectoryCount, "file_count": res.FileCount, "truncated": res.Truncated})
}

// GET /v2/fs/stat?path=
func (s *Server) fsStat(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	p, err := queryPath(r.URL.Query(), "path")
	if err != nil {
		return err
	}
	fi, err := sb.Files().Stat(p)
	if err != nil {
		return err
	}
	return ok(w, entry(*fi))
}

// GET /v2/fs/search?path=&pattern=: paths whose name matches a glob.
func (s *Server) fsSearch(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	q := r.URL.Query()
	p, err := queryPath(q, "path")
	if err != nil {
		return err
	}
	pattern := cmp.Or(q.Get("pattern"), q.Get("glob"))
	if pattern == "" {
		return invalidQuery("pattern", "field required", "missing")
	}
	res, err := sb.Files().Find(r.Context(), p, pattern)
	if err != nil {
		return err
	}
	return ok(w, map[string]any{"path": res.Path, "pattern": pattern, "files": res.Files, "total_count": len(res.Files), "truncated": res.Truncated})
}

// POST /v2/fs/write {path, content, encoding?, append?}
func (s *Server) fsWrite(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body struct {
		Path     *string `json:"path"`
		File     *string `json:"file"` // alias
		Content  *string `json:"content"`
		Encoding *string `json:"encoding"`
		Append   *bool   `json:"append"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	p, err := pathField("path", body.Path, body.File)
	if err != nil {
		return err
	}
	b, err := decodeContent(body.Content, deref(body.Encoding), false, false)
	if err != nil {
		return err
	}
	res, err := sb.Files().Write(r.Context(), p, bytes.NewReader(b), files.WriteOptions{Append: deref(body.Append), MkdirAll: true})
	if err != nil {
		return err
	}
	return ok(w, map[string]any{"path": res.File, "bytes_written": res.BytesWritten})
}

// POST /v2/fs/upload: multipart file and path.
func (s *Server) fsUpload(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	res, err := upload(r, sb.Files())
	if err != nil {
		return err
	}
	return ok(w, map[string]any{"path": res.FilePath, "size": res.FileSize, "file_path": res.FilePath, "file_size": res.FileSize, "success": true})
}

// POST /v2/fs/mkdir {path, parents?}
func (s *Server) fsMkdir(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body struct {
		Path    *string `json:"path"`
		Parents *bool   `json:"parents"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	p, err := pathField("path", body.Path)
	if err != nil {
		return err
	}
	if err := sb.Files().Mkdir(p, body.Parents == nil || *body.Parents); err != nil {
		return err
	}
	fi, err := sb.Files().Stat(p)
	if err != nil {
		return err
	}
	return ok(w, entry(*fi))
}

// POST /v2/fs/delete {path, recursive?}
func (s *Server) fsDelete(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body struct {
		Path      *string `json:"path"`
		Recursive *bool   `json:"recursive"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	p, err := pathField("path", body.Path)
	if err != nil {
		return err
	}
	if err := sb.Files().Delete(p, deref(body.Recursive)); err != nil {
		return err
	}
	return ok(w, map[string]any{"path": files.CodePath(p), "deleted": true})
}

type moveBody struct {
	Source      *string `json:"source"`
	Src         *string `json:"src"`
	Destination *string `json:"destination"`
	Dst         *string `json:"dst"`
	Overwrite   *bool   `json:"overwrite"`
	Recursive   *bool   `json:"recursive"`
}

func (b *moveBody) paths() (src, dst string, err error) {
	if src, err = pathField("source", b.Source, b.Src); err != nil {
		return "", "", err
	}
	if dst, err = pathField("destination", b.Destination, b.Dst); err != nil {
		return "", "", err
	}
	return src, dst, nil
}

// POST /v2/fs/move {source, destination, overwrite?}
func (s *Server) fsMove(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body moveBody
	if err := decode(r, &body); err != nil {
		return err
	}
	src, dst, err := body.paths()
	if err != nil {
		return err
	}
	if err := sb.Files().Move(r.Context(), src, dst, deref(body.Overwrite)); err != nil {
		return err
	}
	return ok(w, map[string]any{"source": files.CodePath(src), "destination": files.CodePath(dst)})
}

// POST /v2/fs/copy {source, destination, recursive?, overwrite?}
func (s *Server) fsCopy(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body moveBody
	if err := decode(r, &body); err != nil {
		return err
	}
	src, dst, err := body.paths()
	if err != nil {
		return err
	}
	err = sb.Files().Copy(r.Context(), src, dst, files.CopyOptions{Recursive: deref(body.Recursive), Overwrite: deref(body.Overwrite)})
	if err != nil {
		return err
	}
	return ok(w, map[string]any{"source": files.CodePath(src), "destination": files.CodePath(dst)})
}

// POST /v2/fs/edit {path, old_str, new_str, replace_all?}, or with command
// any str_replace_editor command.
func (s *Server) fsEdit(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) error {
	var body editorBody
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.Command == nil {
		if err := nonEmpty("old_str", body.OldStr); err != nil {
			return err
		}
		cmd := "str_replace"
		body.Command = &cmd
	}
	return s.edit(w, r, sb, body)
}

// ---- request helpers ----

// pathField returns the first of a field and its aliases that is set; it
// must not be empty.
func pathField(field string, vs ...*string) (string, error) {
	for _, v := range vs {
		if v != nil {
			if *v == "" {
				return "", invalid(field, "must not be empty", "value_error")
			}
			return *v, nil
		}
	}
	return "", invalid(field, "field required", "missing")
}

func nonEmpty(field string, v *string) error {
	if err := required(field, v); err != nil {
		return err
	}
	if *v == "" {
		return invalid(field, "must not be empty", "value_error")
	}
	return nil
}

// invalidQuery is a 422 for one query parameter.
func invalidQuery(field, msg, typ string) error {
	return &httpError{status: http.StatusUnprocessableEntity, message: field + ": " + msg,
		detail: []fieldError{{Loc: []any{"query", field}, Msg: msg, Type: typ}}}
}

// queryPath returns a required, non-empty query parameter. The query is
// decoded once, by net/url: "%252e" arrives as the name "%2e".
func queryPath(q url.Values, name string) (string, error) {
	v, found := q[name]
	if !found || len(v) == 0 || v[0] == "" {
		return "", invalidQuery(name, "field required", "missing")
	}
	return v[0], nil
}

func queryInt(q url.Values, name string) (*int, error) {
	v := q.Get(name)
	if v == "" {
		return nil, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return nil, invalidQuery(name, "value is not a valid integer", "type_error.integer")
	}
	return &n, nil
}

// queryBool parses a boolean the way FastAPI does.
func queryBool(q url.Values, name string, def bool) (bool, error) {
	switch strings.ToLower(q.Get(name)) {
	case "":
		return def, nil
	case "1", "true", "t", "yes", "y", "on":
		return true, nil
	case "0", "false", "f", "no", "n", "off":
		return false, nil
	}
	return false, invalidQuery(name, "value could not be parsed to a boolean", "type_error.bool")
}

// stringList is a list of strings that may also be sent as one string.
type stringList []string

func (l *stringList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*l = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*l = nil
		if s != "" {
			*l = stringList{s}
		}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return &json.UnmarshalTypeError{Value: jsonKind(b), Type: reflect.TypeFor[[]string]()}
	}
	*l = list
	return nil
}

// byteSize is a size in bytes, sent as a number or as "500K", "1M", "2G".
type byteSize int64

func (n *byteSize) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var i int64
	if err := json.Unmarshal(b, &i); err == nil {
		*n = byteSize(i)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return &json.UnmarshalTypeError{Value: jsonKind(b), Type: reflect.TypeFor[string]()}
	}
	v, err := parseSize(s)
	if err != nil {
		return &json.UnmarshalTypeError{Value: "string " + strconv.Quote(s), Type: reflect.TypeFor[byteSize]()}
	}
	*n = byteSize(v)
	return nil
}

func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(strings.ToUpper(s))
	s = strings.TrimSuffix(strings.TrimSuffix(s, "B"), "I")
	mult := int64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		}
		if mult > 1 {
			s = s[:len(s)-1]
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1<<40 {
		return 0, errors.New("bad size")
	}
	return int64(f * float64(mult)), nil
}

func jsonKind(b []byte) string {
	switch t := bytes.TrimSpace(b); {
	case len(t) == 0:
		return "value"
	case t[0] == '{':
		return "object"
	case t[0] == '[':
		return "array"
	case t[0] == '"':
		return "string"
	case t[0] == 't' || t[0] == 'f':
		return "bool"
	}
	return "number"
}
