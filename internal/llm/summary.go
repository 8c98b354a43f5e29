package llm

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/codecell/codecell/internal/kernel"
)

const (
	maxListedFiles  = 20 // in the files block
	maxSummaryFiles = 3  // named in the summary
	maxPathChars    = 200
)

// summarize says in a sentence or two how the cell went and what came out.
func summarize(res *kernel.Result, f *facts, files []File, cut bool, maxChars int) string {
	var b strings.Builder
	b.WriteString(statusClause(res, f.err))
	if out := f.outputs(); out != "" {
		b.WriteString("; output: " + out)
	} else {
		b.WriteString("; no output")
	}
	if len(files) > 0 {
		fs := sortedFiles(files)
		var names []string
		for _, fl := range fs[:min(len(fs), maxSummaryFiles)] {
			names = append(names, safePath(fl.Path))
		}
		if n := len(fs) - maxSummaryFiles; n > 0 {
			names = append(names, fmt.Sprintf("and %d more", n))
		}
		fmt.Fprintf(&b, "; wrote %s: %s", plural(len(files), "file", "files"), strings.Join(names, ", "))
	}
	b.WriteString(".")
	var notes []string
	if res.Died {
		notes = append(notes, "The next execution starts a fresh kernel, so variables and imports must be set up again.")
	}
	if res.Truncated {
		notes = append(notes, "The server dropped output beyond its per-cell limit.")
	}
	if cut {
		notes = append(notes, fmt.Sprintf("Some output was cut to fit %s characters; markers in the text say where and how to see all of it.", comma(maxChars)))
	}
	if len(notes) > 0 {
		b.WriteString(" " + strings.Join(notes, " "))
	}
	return b.String()
}

func statusClause(res *kernel.Result, e *kernel.Output) string {
	count := ""
	if res.ExecutionCount > 0 {
		count = fmt.Sprintf(" (execution %d)", res.ExecutionCount)
	}
	if d := res.Death(); d != nil {
		e = d // not an error the cell raised before
	}
	ename, evalue := "", ""
	if e != nil {
		ename, evalue = e.Ename, firstLine(e.Evalue, 120)
	}
	switch {
	case res.Status == kernel.StatusTimeout && res.Died:
		return "Timed out and did not stop when interrupted, so the kernel was killed and its state is lost"
	case res.Status == kernel.StatusTimeout:
		return "Timed out" + count + ": the code did not finish within its time limit and was interrupted; the kernel and its variables are kept"
	case res.Died && ename == kernel.EnameOutOfMemory:
		return "Ran out of memory, so the kernel was killed and its state is lost"
	case res.Died:
		why := ""
		if evalue != "" {
			why = " (" + evalue + ")"
		}
		return "The kernel died" + why + ", so its state is lost"
	case res.Status == kernel.StatusError && ename != "":
		if evalue != "" {
			ename += ": " + evalue
		}
		return "Raised " + ename + count
	case res.Status == kernel.StatusError:
		return "Failed" + count
	}
	return "Ran successfully" + count
}

// outputs lists what came out, e.g. "3 lines of stdout, a 150×4 table".
func (f *facts) outputs() string {
	var out []string
	if f.stdoutLines > 0 {
		out = append(out, plural(f.stdoutLines, "line", "lines")+" of stdout")
	}
	if f.stderrLines > 0 {
		out = append(out, plural(f.stderrLines, "line", "lines")+" of stderr")
	}
	switch len(f.tables) {
	case 0:
	case 1:
		out = append(out, fmt.Sprintf("a %d×%d table", f.tables[0].rows, f.tables[0].cols))
	default:
		out = append(out, fmt.Sprintf("%d tables (%s)", len(f.tables), shapes(f.tables)))
	}
	if len(f.images) > 0 {
		out = append(out, fmt.Sprintf("%s (%s)", plural(len(f.images), "image", "images"), shapes(f.images)))
	}
	if f.notes > 0 {
		out = append(out, plural(f.notes, "image", "images")+" not shown")
	}
	if f.results > 0 {
		out = append(out, "a result value")
	}
	if f.displays > 0 {
		out = append(out, plural(f.displays, "displayed output", "displayed outputs"))
	}
	if f.err != nil {
		out = append(out, "a traceback")
	}
	return strings.Join(out, ", ")
}

func shapes(s []shape) string {
	var out []string
	for _, sh := range s[:min(len(s), 3)] {
		out = append(out, fmt.Sprintf("%d×%d", sh.rows, sh.cols))
	}
	if len(s) > 3 {
		out = append(out, "…")
	}
	return strings.Join(out, ", ")
}

// filesPart lists the files written, most recent first.
func filesPart(files []File) (part, bool) {
	if len(files) == 0 {
		return part{}, false
	}
	fs := sortedFiles(files)
	var b strings.Builder
	b.WriteString("Files written (most recent first):")
	for _, f := range fs[:min(len(fs), maxListedFiles)] {
		fmt.Fprintf(&b, "\n- %s (%s)", safePath(f.Path), humanSize(f.Size))
	}
	if n := len(fs) - maxListedFiles; n > 0 {
		fmt.Fprintf(&b, "\n- and %d more", n)
	}
	return part{text: b.String(), what: "the files list", keep: true}, true
}

func sortedFiles(files []File) []File {
	fs := slices.Clone(files)
	slices.SortStableFunc(fs, func(a, b File) int { return b.Modified.Compare(a.Modified) })
	return fs
}

// safePath quotes a path with control characters, so a file name cannot
// forge lines of the listing, and shortens very long ones in the middle.
func safePath(p string) string {
	if strings.ContainsFunc(p, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) || !utf8.ValidString(p) {
		p = strconv.Quote(p)
	}
	if utf8.RuneCountInString(p) > maxPathChars {
		p = runeHead(p, maxPathChars/2-1) + "…" + runeTail(p, maxPathChars/2)
	}
	return p
}

// Size formats a byte count the way renderings do ("19.8 KiB").
func Size(n int64) string { return humanSize(n) }

func humanSize(n int64) string {
	if n < 1024 {
		return plural(int(n), "byte", "bytes")
	}
	v, units := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if v < 1024 {
			break
		}
		v, units = v/1024, u
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + units
}

func firstLine(s string, max int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(kernel.StripANSI(s)), "\n")
	if utf8.RuneCountInString(s) > max {
		s = runeHead(s, max-1) + "…"
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return comma(n) + " " + many
}

// comma formats n with thousands separators: 48,213.
func comma(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + comma(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
