package files

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/codecell/codecell/internal/jail"
)

const (
	maxLineBytes          = 4096     // of one line (or context line) in results
	maxPatternBytes       = 64 << 10 // of a regular expression or glob
	maxSearchMatches      = 10_000   // lines returned by Search
	defaultGrepMaxResults = 500
	defaultGrepFileBytes  = 1 << 20 // files larger than this are skipped by Grep
	maxGrepFileBytes      = 16 << 20
	defaultGlobMaxResults = 5000
)

// ListOptions control List (FileListRequest).
type ListOptions struct {
	Recursive  bool
	MaxDepth   int // with Recursive, levels to list; 0 means no limit (but 64)
	ShowHidden bool
	// Extensions keeps only non-directories with one of these extensions
	// (".py" or "py", case-insensitive); none keeps everything.
	Extensions []string
	MaxEntries int // entries visited; 0 means 100000
}

// ListResult is the result of List (FileListResult).
type ListResult struct {
	Path           string     `json:"path"`
	Files          []FileInfo `json:"files"`
	TotalCount     int        `json:"total_count"`
	DirectoryCount int        `json:"directory_count"`
	FileCount      int        `json:"file_count"`
	Truncated      bool       `json:"truncated"`
}

// List lists the directory p (following symlinks to reach it, inside its
// directory) in lexical, depth-first order. Symlinks in it are listed, with
// their targets, and never followed.
func (f *FS) List(ctx context.Context, p string, opts ListOptions) (*ListResult, error) {
	l, err := f.resolve("list", p)
	if err != nil {
		return nil, err
	}
	depth := 1
	if opts.Recursive {
		depth = opts.MaxDepth
	}
	limit := opts.MaxEntries
	if limit <= 0 {
		limit = defaultMaxEntries
	}
	exts := make(map[string]bool)
	for _, x := range opts.Extensions {
		exts["."+strings.ToLower(strings.TrimPrefix(x, "."))] = true
	}
	res := &ListResult{Path: l.path, Files: []FileInfo{}}
	res.Truncated, err = f.walk(ctx, l, depth, limit, func(e *entry) error {
		if !opts.ShowHidden && strings.HasPrefix(e.name, ".") {
			return fs.SkipDir
		}
		info := newFileInfo(e.loc.path, e.info)
		switch {
		case info.IsDir:
			res.DirectoryCount++
		case len(exts) > 0 && !exts[strings.ToLower(path.Ext(e.name))]:
			return nil
		default:
			res.FileCount++
		}
		if info.Type == "symlink" {
			info.LinkTarget = e.readlink()
		}
		res.Files = append(res.Files, info)
		return nil
	})
	if err != nil {
		return nil, f.fail("list", l, err)
	}
	res.TotalCount = len(res.Files)
	return res, nil
}

// FindResult is the result of Find (FileFindResult).
type FindResult struct {
	Path      string   `json:"path"`
	Files     []string `json:"files"`
	Truncated bool     `json:"truncated,omitempty"`
}

// Find returns the paths under the directory p whose name matches glob (like
// find -name; a glob with a "/" is matched against the path relative to p,
// and "**" matches any number of directories), hidden ones included.
func (f *FS) Find(ctx context.Context, p, glob string) (*FindResult, error) {
	l, err := f.resolve("find", p)
	if err != nil {
		return nil, err
	}
	m, err := newMatcher(glob)
	if err != nil {
		return nil, f.fail("find", l, err)
	}
	res := &FindResult{Path: l.path, Files: []string{}}
	res.Truncated, err = f.walk(ctx, l, 0, defaultMaxEntries, func(e *entry) error {
		if m.match(e.rel, e.name) {
			res.Files = append(res.Files, e.loc.path)
		}
		return nil
	})
	if err != nil {
		return nil, f.fail("find", l, err)
	}
	return res, nil
}

// GlobOptions control Glob (FileGlobRequest).
type GlobOptions struct {
	// Pattern is relative to Path unless it starts with "/" or "~"; "**"
	// matches any number of directories, "*", "?" and "[...]" as in
	// path.Match.
	Pattern       string
	Path          string   // base directory; "" means /home/user
	Exclude       []string // globs of names (or relative paths) to skip
	IncludeHidden bool
	IncludeDirs   bool // return directories too, not only files
	MaxResults    int  // 0 means 5000
}

// GlobResult is the result of Glob (FileGlobResult).
type GlobResult struct {
	Path       string     `json:"path"`
	Pattern    string     `json:"pattern"`
	Files      []FileInfo `json:"files"`
	TotalCount int        `json:"total_count"`
	Truncated  bool       `json:"truncated"`
}

// Glob returns the files matching opts.Pattern, in lexical order. It walks
// from the longest directory prefix of the pattern without wildcards.
func (f *FS) Glob(ctx context.Context, opts GlobOptions) (*GlobResult, error) {
	base := opts.Path
	if base == "" {
		base = "~"
	}
	bl, err := f.resolve("glob", base)
	if err != nil {
		return nil, err
	}
	pat := opts.Pattern
	if pat == "" || len(pat) > maxPatternBytes || strings.IndexByte(pat, 0) >= 0 {
		return nil, f.fail("glob", bl, ErrInvalidArgument)
	}
	switch {
	case pat == "~":
		pat = jail.HomeDir
	case strings.HasPrefix(pat, "~/"):
		pat = jail.HomeDir + pat[1:]
	case !strings.HasPrefix(pat, "/"):
		pat = bl.path + "/" + pat
	}
	// Split into a static directory and the wildcard part.
	segs := strings.Split(path.Clean(pat)[1:], "/")
	k := 0
	for k < len(segs) && !strings.ContainsAny(segs[k], `*?[\`) {
		k++
	}
	static := "/" + strings.Join(segs[:k], "/")
	sl, err := f.resolve("glob", static)
	if err != nil {
		return nil, err
	}
	res := &GlobResult{Path: bl.path, Pattern: opts.Pattern, Files: []FileInfo{}}
	if k == len(segs) { // no wildcard: the path itself
		if fi, err := f.Stat(sl.path); err == nil && (opts.IncludeDirs || !fi.IsDir) {
			res.Files = append(res.Files, *fi)
			res.TotalCount = 1
		}
		return res, nil
	}
	m, err := newMatcher(strings.Join(segs[k:], "/") + "/") // "/": match whole relative paths
	if err != nil {
		return nil, f.fail("glob", bl, err)
	}
	var excl []*matcher
	for _, x := range opts.Exclude {
		xm, err := newMatcher(x)
		if err != nil {
			return nil, f.fail("glob", bl, err)
		}
		excl = append(excl, xm)
	}
	depth := 0
	if !m.deep {
		depth = len(m.segs)
	}
	limit := opts.MaxResults
	if limit <= 0 {
		limit = defaultGlobMaxResults
	}
	walkTruncated, err := f.walk(ctx, sl, depth, defaultMaxEntries, func(e *entry) error {
		if !opts.IncludeHidden && strings.HasPrefix(e.name, ".") {
			return fs.SkipDir
		}
		for _, x := range excl {
			if x.match(e.rel, e.name) {
				return fs.SkipDir
			}
		}
		if !m.match(e.rel, e.name) || (e.info.IsDir() && !opts.IncludeDirs) {
			return nil
		}
		if res.TotalCount++; len(res.Files) < limit {
			res.Files = append(res.Files, newFileInfo(e.loc.path, e.info))
		}
		return nil
	})
	if err != nil {
		return nil, f.fail("glob", sl, err)
	}
	res.Truncated = walkTruncated || res.TotalCount > len(res.Files)
	return res, nil
}

// matcher matches glob patterns against names or slash-separated paths.
type matcher struct {
	segs []string // nil: match the name only
	name string
	deep bool // segs contain "**"
}

func newMatcher(glob string) (*matcher, error) {
	if glob == "" || len(glob) > maxPatternBytes {
		return nil, ErrInvalidArgument
	}
	m := &matcher{name: glob}
	if strings.Contains(glob, "/") {
		m.segs = strings.FieldsFunc(glob, func(r rune) bool { return r == '/' })
		if len(m.segs) == 0 {
			return nil, ErrInvalidArgument
		}
	}
	if _, err := path.Match(glob, ""); err != nil {
		return nil, fmt.Errorf("%w: bad pattern %q", ErrInvalidArgument, glob)
	}
	m.deep = slices.Contains(m.segs, "**")
	return m, nil
}

func (m *matcher) match(rel, name string) bool {
	if m.segs == nil {
		ok, _ := path.Match(m.name, name)
		return ok
	}
	return matchSegments(m.segs, strings.Split(rel, "/"))
}

// matchSegments reports whether the path segments name match the pattern
// segments pat, where "**" matches zero or more segments. It is dynamic
// programming, so no pattern can make it exponential.
func matchSegments(pat, name []string) bool {
	next := make([]bool, len(name)+1) // next[j]: pat[i+1:] matches name[j:]
	next[len(name)] = true
	cur := make([]bool, len(name)+1)
	for i := len(pat) - 1; i >= 0; i-- {
		for j := len(name); j >= 0; j-- {
			switch {
			case pat[i] == "**":
				cur[j] = next[j] || (j < len(name) && cur[j+1])
			case j < len(name):
				ok, _ := path.Match(pat[i], name[j])
				cur[j] = ok && next[j+1]
			default:
				cur[j] = false
			}
		}
		next, cur = cur, next
	}
	return next[0]
}

// GrepOptions control Grep (FileGrepRequest).
type GrepOptions struct {
	Pattern         string // regular expression (RE2 syntax)
	FixedStrings    bool   // Pattern is a literal string
	CaseInsensitive bool
	Include         []string // globs of file names to search ("*.py"); none means all
	Exclude         []string // globs of file or directory names to skip ("node_modules")
	IncludeHidden   bool
	ContextBefore   int   // lines before each match, at most 20
	ContextAfter    int   // lines after each match, at most 20
	MaxResults      int   // 0 means 500
	Offset          int   // matches to skip, for pagination
	MaxFileSize     int64 // larger files are skipped; 0 means 1 MiB; at most 16 MiB
	MaxDepth        int   // 0 means no limit; 1 searches only the directory's own files
}

// GrepMatch is one matching line (GrepMatch).
type GrepMatch struct {
	File          string   `json:"file"`
	LineNumber    int      `json:"line_number"` // 1-based
	LineContent   string   `json:"line_content"`
	ContextBefore []string `json:"context_before,omitempty"`
	ContextAfter  []string `json:"context_after,omitempty"`
}

// GrepResult is the result of Grep (FileGrepResult).
type GrepResult struct {
	Path          string      `json:"path"`
	Pattern       string      `json:"pattern"`
	Matches       []GrepMatch `json:"matches"`
	MatchCount    int         `json:"match_count"`
	FilesSearched int         `json:"files_searched"`
	FilesMatched  int         `json:"files_matched"`
	Truncated     bool        `json:"truncated"`
}

// Grep searches the file p, or the files under the directory p, for lines
// matching opts.Pattern. Binary files (a NUL byte in the first 8 KiB), files
// larger than opts.MaxFileSize, hidden files (unless opts.IncludeHidden) and
// anything but regular files are skipped; symlinks are not followed. Lines in
// the result are cut to 4 KiB.
func (f *FS) Grep(ctx context.Context, p string, opts GrepOptions) (*GrepResult, error) {
	l, err := f.resolve("grep", p)
	if err != nil {
		return nil, err
	}
	re, err := compile(opts.Pattern, opts.FixedStrings, opts.CaseInsensitive)
	if err != nil {
		return nil, f.fail("grep", l, err)
	}
	if opts.ContextBefore < 0 || opts.ContextBefore > 20 || opts.ContextAfter < 0 || opts.ContextAfter > 20 || opts.Offset < 0 || opts.MaxFileSize < 0 {
		return nil, f.fail("grep", l, ErrInvalidArgument)
	}
	if opts.MaxResults <= 0 {
		opts.MaxResults = defaultGrepMaxResults
	}
	if opts.MaxFileSize == 0 {
		opts.MaxFileSize = defaultGrepFileBytes
	}
	opts.MaxFileSize = min(opts.MaxFileSize, maxGrepFileBytes)
	var incl, excl []*matcher
	for _, x := range opts.Include {
		m, err := newMatcher(x)
		if err != nil {
			return nil, f.fail("grep", l, err)
		}
		incl = append(incl, m)
	}
	for _, x := range opts.Exclude {
		m, err := newMatcher(x)
		if err != nil {
			return nil, f.fail("grep", l, err)
		}
		excl = append(excl, m)
	}
	g := &grep{re: re, opts: &opts, res: &GrepResult{Path: l.path, Pattern: opts.Pattern, Matches: []GrepMatch{}}}

	if f.isRegular(l) {
		file, err := f.openRegular(l)
		if err != nil {
			return nil, f.fail("grep", l, err)
		}
		defer file.Close()
		if err := g.file(ctx, file, l.path); err != nil && err != errStop {
			return nil, f.fail("grep", l, err)
		}
		g.res.MatchCount = len(g.res.Matches)
		return g.res, nil
	}
	walkTruncated, err := f.walk(ctx, l, opts.MaxDepth, defaultMaxEntries, func(e *entry) error {
		if !opts.IncludeHidden && strings.HasPrefix(e.name, ".") {
			return fs.SkipDir
		}
		for _, x := range excl {
			if x.match(e.rel, e.name) {
				return fs.SkipDir
			}
		}
		if !e.info.Mode().IsRegular() || e.info.Size() > opts.MaxFileSize {
			return nil
		}
		if len(incl) > 0 && !matchAny(incl, e.rel, e.name) {
			return nil
		}
		file, err := e.open()
		if err != nil {
			return nil // changed since listed
		}
		defer file.Close()
		return g.file(ctx, file, e.loc.path)
	})
	if err != nil {
		return nil, f.fail("grep", l, err)
	}
	g.res.Truncated = g.res.Truncated || walkTruncated
	g.res.MatchCount = len(g.res.Matches)
	return g.res, nil
}

func matchAny(ms []*matcher, rel, name string) bool {
	for _, m := range ms {
		if m.match(rel, name) {
			return true
		}
	}
	return false
}

func compile(pattern string, fixed, fold bool) (*regexp.Regexp, error) {
	if pattern == "" || len(pattern) > maxPatternBytes {
		return nil, fmt.Errorf("%w: empty or too long pattern", ErrInvalidArgument)
	}
	if fixed {
		pattern = regexp.QuoteMeta(pattern)
	}
	if fold {
		pattern = "(?i)" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	return re, nil
}

type grep struct {
	re      *regexp.Regexp
	opts    *GrepOptions
	res     *GrepResult
	skipped int // matches skipped for opts.Offset
}

// file searches one opened regular file, returning errStop when enough
// matches were found.
func (g *grep) file(ctx context.Context, file io.Reader, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := io.ReadAll(io.LimitReader(file, g.opts.MaxFileSize+1))
	if err != nil || int64(len(b)) > g.opts.MaxFileSize || bytes.IndexByte(b[:min(len(b), 8192)], 0) >= 0 {
		return nil // unreadable, grown or binary: skipped
	}
	g.res.FilesSearched++
	if len(b) == 0 {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	matched := false
	for i, line := range lines {
		if !g.re.MatchString(line) {
			continue
		}
		if !matched {
			matched = true
			g.res.FilesMatched++
		}
		if g.skipped < g.opts.Offset {
			g.skipped++
			continue
		}
		if len(g.res.Matches) == g.opts.MaxResults {
			g.res.Truncated = true
			return errStop
		}
		m := GrepMatch{File: name, LineNumber: i + 1, LineContent: clip(line)}
		for _, c := range lines[max(0, i-g.opts.ContextBefore):i] {
			m.ContextBefore = append(m.ContextBefore, clip(c))
		}
		for _, c := range lines[i+1 : min(len(lines), i+1+g.opts.ContextAfter)] {
			m.ContextAfter = append(m.ContextAfter, clip(c))
		}
		g.res.Matches = append(g.res.Matches, m)
	}
	return nil
}

// clip cuts s to maxLineBytes on a rune boundary.
func clip(s string) string {
	if len(s) <= maxLineBytes {
		return s
	}
	n := maxLineBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// SearchResult is the result of Search (FileSearchResult).
type SearchResult struct {
	File        string   `json:"file"`
	Matches     []string `json:"matches"`
	LineNumbers []int    `json:"line_numbers"` // 0-based, like ReadOptions.StartLine
	Truncated   bool     `json:"truncated,omitempty"`
}

// Search returns the lines of the file p that match the regular expression
// pattern (RE2 syntax, which runs in linear time). The file is streamed;
// lines are matched on their first 1 MiB and returned cut to 4 KiB; at most
// 10000 lines are returned.
func (f *FS) Search(ctx context.Context, p, pattern string) (*SearchResult, error) {
	l, err := f.resolve("search", p)
	if err != nil {
		return nil, err
	}
	re, err := compile(pattern, false, false)
	if err != nil {
		return nil, f.fail("search", l, err)
	}
	file, err := f.openRegular(l)
	if err != nil {
		return nil, f.fail("search", l, err)
	}
	defer file.Close()
	res := &SearchResult{File: l.path, Matches: []string{}, LineNumbers: []int{}}
	br := bufio.NewReaderSize(file, 64<<10)
	var line []byte
	for n := 0; ; {
		if err := ctx.Err(); err != nil {
			return nil, f.fail("search", l, err)
		}
		chunk, err := br.ReadSlice('\n')
		if room := 1<<20 - len(line); room > 0 {
			line = append(line, chunk[:min(room, len(chunk))]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil && err != io.EOF {
			return nil, f.fail("search", l, err)
		}
		if len(line) > 0 || err == nil {
			text := strings.TrimSuffix(string(line), "\n")
			if re.MatchString(text) {
				if len(res.Matches) == maxSearchMatches {
					res.Truncated = true
					break
				}
				res.Matches = append(res.Matches, clip(text))
				res.LineNumbers = append(res.LineNumbers, n)
			}
		}
		if err == io.EOF {
			break
		}
		n++
		line = line[:0]
	}
	return res, nil
}

// isRegular reports whether l is a regular file, following symlinks inside
// its directory.
func (f *FS) isRegular(l loc) bool {
	r, err := l.root()
	if err != nil {
		return false
	}
	defer r.Close()
	fi, err := r.Stat(l.rel)
	return err == nil && fi.Mode().IsRegular()
}

// Changed lists the regular files under home and /tmp modified at or after
// since, newest first, visiting at most maxEntries entries in all (0 means
// 10,000): what code wrote during an execution. Hidden directories are
// skipped (caches such as ~/.cache and ~/.ipython are not results). The
// walk goes in name order, so a listing cut at the limit may miss newer files.
func (f *FS) Changed(ctx context.Context, since time.Time, maxEntries int) (changed []FileInfo, truncated bool, err error) {
	if maxEntries <= 0 {
		maxEntries = 10_000
	}
	// File times come from the kernel's coarse clock, up to a tick behind.
	since = since.Add(-10 * time.Millisecond)
	left := maxEntries // for both trees together
	for _, dir := range []string{jail.HomeDir, jail.TmpDir} {
		if left <= 0 {
			return sortChanged(changed), true, nil
		}
		l, err := f.resolve("changed", dir)
		if err != nil {
			return nil, false, err
		}
		cut, err := f.walk(ctx, l, 0, left, func(e *entry) error {
			left--
			if strings.HasPrefix(e.name, ".") && e.info.IsDir() {
				return fs.SkipDir
			}
			if e.info.Mode().IsRegular() && !e.info.ModTime().Before(since) {
				changed = append(changed, newFileInfo(e.loc.path, e.info))
			}
			return nil
		})
		if err != nil {
			return nil, false, f.fail("changed", l, err)
		}
		truncated = truncated || cut
	}
	return sortChanged(changed), truncated, nil
}

// sortChanged puts the newest files first.
func sortChanged(changed []FileInfo) []FileInfo {
	slices.SortFunc(changed, func(a, b FileInfo) int { return b.ModTime.Compare(a.ModTime) })
	return changed
}
