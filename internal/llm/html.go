package llm

import (
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// htmlText renders HTML as plain text with each table as Markdown, and
// returns the shape of each table (rows × data columns).
func htmlText(s string) (string, []shape) {
	doc, err := html.Parse(strings.NewReader(s))
	if err != nil {
		// Only a failing reader makes Parse fail; a string reader does not.
		return s, nil
	}
	w := htmlWriter{cells: maxGridCells}
	w.walk(doc)
	return tidyLines(w.b.String()), w.tables
}

type htmlWriter struct {
	b       strings.Builder
	pre     int  // depth inside <pre>
	midLine bool // text has been written on the current line
	tables  []shape
	cells   int // grid cells the tables may still lay out (see expand)
}

// dimsRE matches the footer pandas writes under a truncated DataFrame.
var dimsRE = regexp.MustCompile(`^(\d+) rows × (\d+) columns$`)

func (w *htmlWriter) walk(n *html.Node) {
	switch n.Type {
	case html.TextNode:
		w.text(n.Data)
		return
	case html.ElementNode:
		switch n.DataAtom {
		case atom.Script, atom.Style, atom.Head, atom.Template, atom.Noscript:
			return
		case atom.Br:
			w.newline()
			return
		case atom.Table:
			md, sh := tableMarkdown(n, &w.cells)
			w.newline()
			w.b.WriteString("\n" + md + "\n\n")
			w.tables = append(w.tables, sh)
			return
		case atom.P:
			// pandas states the true size under a frame it truncated itself.
			if m := dimsRE.FindStringSubmatch(nodeText(n)); m != nil && len(w.tables) > 0 {
				r, _ := strconv.Atoi(m[1])
				c, _ := strconv.Atoi(m[2])
				w.tables[len(w.tables)-1] = shape{r, c}
			}
		case atom.Pre:
			w.pre++
			defer func() { w.pre-- }()
		}
	}
	block := n.Type == html.ElementNode && isBlock(n.DataAtom)
	if block {
		w.newline()
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.walk(c)
	}
	if block {
		w.newline()
	}
}

func (w *htmlWriter) text(s string) {
	if w.pre > 0 {
		w.b.WriteString(s)
		w.midLine = !strings.HasSuffix(s, "\n")
		return
	}
	s = collapseSpace(s)
	if !w.midLine {
		s = strings.TrimLeft(s, " ")
	}
	if s != "" {
		w.b.WriteString(s)
		w.midLine = true
	}
}

func (w *htmlWriter) newline() {
	if w.midLine {
		w.b.WriteByte('\n')
		w.midLine = false
	}
}

func isBlock(a atom.Atom) bool {
	switch a {
	case atom.P, atom.Div, atom.Section, atom.Article, atom.Header, atom.Footer, atom.Ul, atom.Ol, atom.Li,
		atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6, atom.Pre, atom.Blockquote, atom.Dl, atom.Dt, atom.Dd,
		atom.Hr, atom.Details, atom.Summary, atom.Figure, atom.Figcaption, atom.Caption:
		return true
	}
	return false
}

// collapseSpace turns each run of whitespace into one space.
func collapseSpace(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\u00a0' {
			space = true
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	if space {
		b.WriteByte(' ')
	}
	return b.String()
}

// tidyLines trims trailing space and keeps at most one blank line in a row.
func tidyLines(s string) string {
	var out []string
	blank := true // drops leading blank lines
	for l := range strings.SplitSeq(s, "\n") {
		l = strings.TrimRight(l, " \t")
		if l == "" {
			if !blank {
				out = append(out, "")
			}
			blank = true
			continue
		}
		blank = false
		out = append(out, l)
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return strings.Join(out, "\n")
}

// nodeText is the text content of n, whitespace collapsed and trimmed.
func nodeText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		switch {
		case n.Type == html.TextNode:
			b.WriteString(n.Data)
		case n.Type != html.ElementNode:
		case n.DataAtom == atom.Script || n.DataAtom == atom.Style:
			return
		case n.DataAtom == atom.Br || isBlock(n.DataAtom):
			b.WriteByte(' ')
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.TrimSpace(collapseSpace(b.String()))
}
