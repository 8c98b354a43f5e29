package llm

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/codecell/codecell/internal/kernel"
)

// facts is what the summary reports about the outputs.
type facts struct {
	stdoutLines, stderrLines int
	tables                   []shape // rows × data columns
	images                   []shape // as shown
	notes                    int     // images that could not be shown
	results, displays        int     // other rich outputs
	err                      *kernel.Output
	cut                      bool // a traceback was cut
}

type shape struct{ rows, cols int }

// Tracebacks longer than this many lines keep their first and last lines:
// the last frames and the message matter most.
const (
	traceMaxLines  = 60
	traceHeadLines = 10
	traceTailLines = 40
)

// outputParts turns outputs into parts in order, noting facts.
func outputParts(outs []kernel.Output, opt Options, f *facts) []part {
	var parts []part
	sawStderr := false
	for _, o := range outs {
		switch o.OutputType {
		case "stream":
			text := cleanStream(o.Text)
			if text == "" {
				continue
			}
			p := part{text: strings.TrimSuffix(text, "\n")}
			if o.Name == "stderr" {
				sawStderr = true
				f.stderrLines += countLines(text)
				p.label, p.what = "stderr:\n", "stderr"
			} else {
				f.stdoutLines += countLines(text)
				p.what = "stdout"
				if sawStderr {
					// Only needed once stderr has been shown above it.
					p.label = "stdout:\n"
				}
			}
			parts = append(parts, p)
		case "error":
			if f.err == nil {
				f.err = &o
			}
			text, cut := errorText(o)
			f.cut = f.cut || cut
			// Never left out: why the code failed is what a model needs most.
			parts = append(parts, part{text: text, what: "the error traceback", keep: true})
		case "execute_result", "display_data":
			if p, ok := richPart(o, opt, f); ok {
				parts = append(parts, p)
			}
		}
	}
	return parts
}

// cleanStream strips escapes and collapses carriage-return overwrites
// (progress bars) to what a terminal would finally show on each line.
func cleanStream(s string) string {
	s = kernel.StripANSI(s)
	if !strings.Contains(s, "\r") {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if !strings.Contains(l, "\r") {
			continue
		}
		var cur []rune
		for seg := range strings.SplitSeq(l, "\r") {
			r := []rune(seg)
			if len(r) >= len(cur) {
				cur = r
			} else {
				copy(cur, r) // a shorter rewrite leaves the rest of the line, as on a terminal
			}
		}
		lines[i] = string(cur)
	}
	return strings.Join(lines, "\n")
}

func countLines(s string) int {
	if s == "" {
		return 0
	}
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// errorText is the traceback, ANSI stripped, ending with "ename: evalue"
// and cut in the middle when long.
func errorText(o kernel.Output) (text string, cut bool) {
	head := o.Ename
	if o.Evalue != "" {
		head += ": " + o.Evalue
	}
	// Front ends show a traceback as its entries joined by newlines.
	lines := strings.Split(kernel.StripANSI(strings.Join(o.Traceback, "\n")), "\n")
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 || strings.TrimSpace(lines[len(lines)-1]) != strings.TrimSpace(kernel.StripANSI(head)) {
		lines = append(lines, kernel.StripANSI(head))
	}
	if len(lines) > traceMaxLines {
		n := len(lines) - traceHeadLines - traceTailLines
		marker := fmt.Sprintf("[… %s traceback lines cut from the middle; the first and the last frames are kept …]", comma(n))
		lines = slices.Concat(lines[:traceHeadLines], []string{marker}, lines[len(lines)-traceTailLines:])
		cut = true
	}
	return strings.Join(lines, "\n"), cut
}

// reprRE matches a bare Python repr such as "<IPython.core.display.HTML
// object>", which says nothing when a richer form is there.
var reprRE = regexp.MustCompile(`^<[\w.]+ object(?: at 0x[0-9a-fA-F]+)?>$`)

// richPart renders an execute_result or display_data: an image if there
// is one, else the most readable text form.
func richPart(o kernel.Output, opt Options, f *facts) (part, bool) {
	for _, mt := range []string{"image/png", "image/jpeg"} {
		if v, ok := o.Data[mt]; ok {
			b, err := renderImage(dataString(v), opt)
			if err != nil {
				f.notes++
				return part{text: fmt.Sprintf("[%s image could not be shown: %v]", mt, err), fixed: true}, true
			}
			f.images = append(f.images, shape{b.Width, b.Height})
			return part{text: imagePlaceholder(b.Width, b.Height), fixed: true, image: &b}, true
		}
	}
	if v, ok := o.Data["image/svg+xml"]; ok {
		f.notes++
		return part{text: fmt.Sprintf("[SVG image, %s bytes]", comma(len(dataString(v)))), fixed: true}, true
	}
	text, what, tables := richText(o.Data)
	f.tables = append(f.tables, tables...)
	if len(tables) == 0 {
		if o.OutputType == "execute_result" {
			f.results++
		} else {
			f.displays++
		}
	}
	text = strings.TrimSuffix(kernel.StripANSI(text), "\n")
	if text == "" {
		return part{}, false
	}
	return part{text: text, what: what}, true
}

// richText picks the most readable text form: Markdown, then a table
// from HTML, then plain text (unless a bare repr stands in for HTML),
// then the text of the HTML, LaTeX, JSON.
func richText(data map[string]any) (text, what string, tables []shape) {
	if v, ok := data["text/markdown"]; ok {
		return dataString(v), "the Markdown output", nil
	}
	h, hasHTML := data["text/html"]
	html := dataString(h)
	if hasHTML && strings.Contains(strings.ToLower(html), "<table") {
		if t, shapes := htmlText(html); len(shapes) > 0 {
			return t, "the table", shapes
		}
	}
	p, hasPlain := data["text/plain"]
	plain := dataString(p)
	if hasPlain && !(hasHTML && reprRE.MatchString(strings.TrimSpace(plain))) {
		return plain, "the output", nil
	}
	if hasHTML {
		t, _ := htmlText(html)
		return t, "the HTML output", nil
	}
	if v, ok := data["text/latex"]; ok {
		return dataString(v), "the LaTeX output", nil
	}
	if v, ok := data["application/json"]; ok {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprintf("[JSON output could not be shown: %v]", err), "the output", nil
		}
		return string(b), "the JSON output", nil
	}
	if hasPlain {
		return plain, "the output", nil
	}
	if len(data) == 0 {
		return "", "", nil
	}
	types := make([]string, 0, len(data))
	for k := range data {
		types = append(types, k)
	}
	slices.Sort(types)
	return fmt.Sprintf("[output of type %s, not shown]", strings.Join(types, ", ")), "the output", nil
}

// dataString reads a MIME bundle value: a string, or a list of strings
// as nbformat stores multi-line text.
func dataString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []string:
		return strings.Join(v, "")
	case []any:
		var b strings.Builder
		for _, x := range v {
			if s, ok := x.(string); ok {
				b.WriteString(s)
			}
		}
		return b.String()
	}
	return ""
}
