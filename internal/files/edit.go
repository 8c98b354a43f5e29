package files

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	// maxEditBytes bounds the files Replace and Edit load into memory.
	maxEditBytes = DefaultMaxReadBytes
	// The undo history of Edit keeps at most this many versions and bytes
	// in all; the oldest go first.
	maxUndoEntries = 100
	maxUndoBytes   = 32 << 20
	snippetLines   = 4 // of context around an edit in Edit's output
)

// ReplaceResult is the result of Replace (FileReplaceResult).
type ReplaceResult struct {
	File          string `json:"file"`
	ReplacedCount int    `json:"replaced_count"`
}

// Replace replaces the first occurrence of old in the file p by new, or
// every occurrence with all, and writes the file back atomically. No
// occurrence is ErrNoMatch. A symlink at p is refused (ErrNotRegular) rather
// than replaced by a file.
func (f *FS) Replace(ctx context.Context, p, old, new string, all bool) (*ReplaceResult, error) {
	l, err := f.resolve("replace", p)
	if err != nil {
		return nil, err
	}
	if old == "" {
		return nil, f.fail("replace", l, fmt.Errorf("%w: empty old_str", ErrInvalidArgument))
	}
	root, err := l.root()
	if err != nil {
		return nil, f.fail("replace", l, err)
	}
	defer root.Close()
	content, err := readForEdit(root, l)
	if err != nil {
		return nil, f.fail("replace", l, err)
	}
	n := strings.Count(content, old)
	if n == 0 {
		return nil, f.fail("replace", l, ErrNoMatch)
	}
	if !all {
		n = 1
	}
	if _, err := f.writeAtomic(ctx, root, l, strings.NewReader(strings.Replace(content, old, new, n)), 0, false); err != nil {
		return nil, f.fail("replace", l, err)
	}
	return &ReplaceResult{File: l.path, ReplacedCount: n}, nil
}

// readForEdit reads the regular file l, not following a symlink at l.
func readForEdit(root *os.Root, l loc) (string, error) {
	dir, base, err := l.openParent(root)
	if err != nil {
		return "", err
	}
	defer dir.Close()
	file, err := openAt(dir, base, unix.O_RDONLY, 0, l.path)
	if err != nil {
		return "", err
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, maxEditBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxEditBytes {
		return "", ErrTooLarge
	}
	return string(b), nil
}

// EditRequest is a str_replace_editor command (StrReplaceEditorRequest;
// the PDF, spreadsheet and slide options are not supported).
type EditRequest struct {
	Command     string  `json:"command"` // view, create, str_replace, insert or undo_edit
	Path        string  `json:"path"`
	FileText    *string `json:"file_text,omitempty"`   // create
	OldStr      *string `json:"old_str,omitempty"`     // str_replace
	NewStr      *string `json:"new_str,omitempty"`     // str_replace, insert
	InsertLine  *int    `json:"insert_line,omitempty"` // insert: after this line; 0 inserts at the top
	ViewRange   []int   `json:"view_range,omitempty"`  // view: [first, last], 1-based; last -1 is the end
	ReplaceMode string  `json:"replace_mode,omitempty"`
	// ReplaceMode is "" (old_str must be unique), "ALL", "FIRST" or "LAST".
}

// EditResult is the result of Edit (StrReplaceEditorResult).
type EditResult struct {
	Output     string  `json:"output"`
	Path       string  `json:"path"`
	PrevExist  bool    `json:"prev_exist"`
	OldContent *string `json:"old_content,omitempty"`
	NewContent *string `json:"new_content,omitempty"`
}

type undoEntry struct {
	path    string
	content string
	existed bool // false: undo removes the file
}

// Edit runs one str_replace_editor command. Changes are written atomically
// and recorded in a bounded in-memory history for undo_edit. Edits refuse a
// symlink at the path (ErrNotRegular); view follows it. Mistakes in the
// request (a missing parameter, an old_str that is not unique, a bad line
// number) are ErrInvalidArgument, an old_str that does not occur ErrNoMatch,
// each with a message meant for the model that sent it.
func (f *FS) Edit(ctx context.Context, req EditRequest) (*EditResult, error) {
	op := req.Command
	l, err := f.resolve(op, req.Path)
	if err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) error {
		return f.fail(op, l, fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...))
	}
	if req.Command == "view" {
		return f.view(ctx, l, req.ViewRange)
	}
	root, err := l.root()
	if err != nil {
		return nil, f.fail(op, l, err)
	}
	defer root.Close()
	res := &EditResult{Path: l.path}
	write := func(old, new string, existed bool) error {
		if _, err := f.writeAtomic(ctx, root, l, strings.NewReader(new), 0, !existed); err != nil {
			return f.fail(op, l, err)
		}
		f.pushUndo(undoEntry{path: l.path, content: old, existed: existed})
		res.PrevExist = existed
		if existed {
			res.OldContent = &old
		}
		res.NewContent = &new
		return nil
	}

	switch req.Command {
	case "create":
		if req.FileText == nil {
			return nil, bad("parameter file_text is required for command create")
		}
		if err := f.mkdirAll(root, parentRel(l.rel)); err != nil {
			return nil, f.fail(op, l, err)
		}
		if err := write("", *req.FileText, false); err != nil {
			return nil, err
		}
		res.Output = "File created successfully at: " + l.path
		return res, nil

	case "str_replace":
		if req.OldStr == nil || *req.OldStr == "" {
			return nil, bad("parameter old_str is required for command str_replace")
		}
		old, newStr := *req.OldStr, ""
		if req.NewStr != nil {
			newStr = *req.NewStr
		}
		content, err := readForEdit(root, l)
		if err != nil {
			return nil, f.fail(op, l, err)
		}
		var at int
		switch n := strings.Count(content, old); {
		case n == 0:
			return nil, f.fail(op, l, fmt.Errorf("%w: old_str did not appear verbatim in %s", ErrNoMatch, l.path))
		case req.ReplaceMode == "" && n > 1:
			return nil, bad("old_str occurs %d times, in lines %v; make it unique or set replace_mode", n, occurrenceLines(content, old))
		case req.ReplaceMode == "" || req.ReplaceMode == "FIRST":
			at = strings.Index(content, old)
		case req.ReplaceMode == "LAST":
			at = strings.LastIndex(content, old)
		case req.ReplaceMode == "ALL":
			at = strings.Index(content, old)
		default:
			return nil, bad("replace_mode must be ALL, FIRST or LAST")
		}
		var updated string
		if req.ReplaceMode == "ALL" {
			updated = strings.ReplaceAll(content, old, newStr)
		} else {
			updated = content[:at] + newStr + content[at+len(old):]
		}
		if err := write(content, updated, true); err != nil {
			return nil, err
		}
		first := strings.Count(content[:at], "\n")
		res.Output = fmt.Sprintf("The file %s has been edited. %s\nReview the changes and make sure they are as expected. Edit the file again if necessary.",
			l.path, snippet(l.path, updated, first, first+strings.Count(newStr, "\n")))
		return res, nil

	case "insert":
		if req.InsertLine == nil || req.NewStr == nil {
			return nil, bad("parameters insert_line and new_str are required for command insert")
		}
		content, err := readForEdit(root, l)
		if err != nil {
			return nil, f.fail(op, l, err)
		}
		lines := strings.SplitAfter(content, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		at := *req.InsertLine
		if at < 0 || at > len(lines) {
			return nil, bad("insert_line %d is not within [0, %d]", at, len(lines))
		}
		text := *req.NewStr
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		before := strings.Join(lines[:at], "")
		if before != "" && !strings.HasSuffix(before, "\n") {
			before += "\n" // inserting after a last line without a newline
		}
		updated := before + text + strings.Join(lines[at:], "")
		if err := write(content, updated, true); err != nil {
			return nil, err
		}
		res.Output = fmt.Sprintf("The file %s has been edited. %s\nReview the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary.",
			l.path, snippet(l.path, updated, at, at+strings.Count(text, "\n")-1))
		return res, nil

	case "undo_edit":
		e, ok := f.popUndo(l.path)
		if !ok {
			return nil, bad("no edit history found for %s", l.path)
		}
		current, err := readForEdit(root, l)
		if err != nil {
			return nil, f.fail(op, l, err)
		}
		res.PrevExist = true
		res.OldContent = &current
		if !e.existed {
			dir, base, err := l.openParent(root)
			if err != nil {
				return nil, f.fail(op, l, err)
			}
			defer dir.Close()
			if err := unix.Unlinkat(int(dir.Fd()), base, 0); err != nil {
				return nil, f.fail(op, l, err)
			}
			res.Output = fmt.Sprintf("Last edit to %s undone successfully: the file it created was removed.", l.path)
			return res, nil
		}
		if _, err := f.writeAtomic(ctx, root, l, strings.NewReader(e.content), 0, false); err != nil {
			return nil, f.fail(op, l, err)
		}
		res.NewContent = &e.content
		res.Output = fmt.Sprintf("Last edit to %s undone successfully. %s", l.path, catN(l.path, e.content, 1))
		return res, nil
	}
	return nil, bad("unknown command %q; allowed: view, create, str_replace, insert, undo_edit", req.Command)
}

// view shows a file with line numbers, or a directory two levels deep.
func (f *FS) view(ctx context.Context, l loc, viewRange []int) (*EditResult, error) {
	res := &EditResult{Path: l.path, PrevExist: true}
	r, err := l.root()
	if err != nil {
		return nil, f.fail("view", l, err)
	}
	fi, err := r.Stat(l.rel)
	r.Close()
	if err != nil {
		return nil, f.fail("view", l, err)
	}
	if fi.IsDir() {
		if len(viewRange) > 0 {
			return nil, f.fail("view", l, fmt.Errorf("%w: view_range is not allowed for a directory", ErrInvalidArgument))
		}
		list, err := f.List(ctx, l.path, ListOptions{Recursive: true, MaxDepth: 2, MaxEntries: 10_000})
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		fmt.Fprintf(&b, "Here's the files and directories up to 2 levels deep in %s, excluding hidden items:\n%s\n", l.path, l.path)
		for _, e := range list.Files {
			b.WriteString(e.Path + "\n")
		}
		res.Output = b.String()
		return res, nil
	}
	rr, err := f.Read(ctx, l.path, ReadOptions{})
	if err != nil {
		return nil, err
	}
	content, first := rr.Content, 1
	if len(viewRange) > 0 {
		lines := strings.SplitAfter(content, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		if len(viewRange) != 2 {
			return nil, f.fail("view", l, fmt.Errorf("%w: view_range must be [first, last]", ErrInvalidArgument))
		}
		first, last := viewRange[0], viewRange[1]
		if last == -1 {
			last = len(lines)
		}
		if first < 1 || first > len(lines) || last < first || last > len(lines) {
			return nil, f.fail("view", l, fmt.Errorf("%w: view_range %v is not within the file's %d lines", ErrInvalidArgument, viewRange, len(lines)))
		}
		content = strings.Join(lines[first-1:last], "")
		res.Output = catN(l.path, content, first)
		return res, nil
	}
	res.Output = catN(l.path, content, first)
	return res, nil
}

// catN formats content like cat -n, numbering from first.
func catN(name, content string, first int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Here's the result of running `cat -n` on %s:\n", name)
	for i, line := range strings.Split(strings.TrimSuffix(content, "\n"), "\n") {
		fmt.Fprintf(&b, "%6d\t%s\n", first+i, line)
	}
	return b.String()
}

// snippet shows lines first..last (0-based) of content with some context.
func snippet(name, content string, first, last int) string {
	lines := strings.Split(strings.TrimSuffix(content, "\n"), "\n")
	start := max(0, first-snippetLines)
	end := min(len(lines), last+snippetLines+1)
	return catN("a snippet of "+name, strings.Join(lines[start:end], "\n"), start+1)
}

func occurrenceLines(content, s string) []int {
	var lines []int
	for off := 0; ; {
		i := strings.Index(content[off:], s)
		if i < 0 {
			return lines
		}
		lines = append(lines, strings.Count(content[:off+i], "\n")+1)
		off += i + len(s)
	}
}

func (f *FS) pushUndo(e undoEntry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(e.content) > maxUndoBytes/4 {
		// Too big to keep: forget the path's older versions too, so undo
		// cannot restore one of them in its place.
		f.undo = dropPath(f.undo, e.path, &f.undoBytes)
		return
	}
	f.undo = append(f.undo, e)
	f.undoBytes += len(e.content)
	for len(f.undo) > maxUndoEntries || f.undoBytes > maxUndoBytes {
		f.undoBytes -= len(f.undo[0].content)
		f.undo = f.undo[1:]
	}
}

func (f *FS) popUndo(p string) (undoEntry, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.undo) - 1; i >= 0; i-- {
		if e := f.undo[i]; e.path == p {
			f.undo = append(f.undo[:i], f.undo[i+1:]...)
			f.undoBytes -= len(e.content)
			return e, true
		}
	}
	return undoEntry{}, false
}

func dropPath(h []undoEntry, p string, n *int) []undoEntry {
	out := h[:0]
	for _, e := range h {
		if e.path == p {
			*n -= len(e.content)
			continue
		}
		out = append(out, e)
	}
	return out
}
