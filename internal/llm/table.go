package llm

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Limits of a Markdown table. Longer tables keep their first and last
// rows, wider ones their first and last columns; the index always stays.
const (
	tableHeadRows = 10
	tableTailRows = 10
	tableHeadCols = 8
	tableTailCols = 4
	cellMaxChars  = 40
	maxGridCols   = 5000    // bounds what hostile colspans can cost in a row
	maxGridCells  = 1 << 18 // and what spans can cost in all (see expand)
)

type cell struct {
	text             string
	th               bool
	colspan, rowspan int
}

// tableMarkdown renders an HTML table (such as pandas writes) as Markdown
// and returns its shape in rows × data columns, the index not counted.
// It lays out at most *cells grid cells and takes them from *cells.
func tableMarkdown(t *html.Node, cells *int) (string, shape) {
	var head, body [][]cell
	var visit func(n *html.Node, inHead bool)
	visit = func(n *html.Node, inHead bool) {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.ElementNode {
				continue
			}
			switch c.DataAtom {
			case atom.Thead:
				visit(c, true)
			case atom.Tbody, atom.Tfoot:
				visit(c, false)
			case atom.Tr:
				if r := rowCells(c); inHead {
					head = append(head, r)
				} else {
					body = append(body, r)
				}
			}
		}
	}
	visit(t, false)
	// Without a <thead>, leading rows of header cells are the header.
	for len(head) == 0 && len(body) > 0 && allTH(body[0]) {
		head, body = body[:1], body[1:]
	}
	hg, bg := expand(head, cells), expand(body, cells)

	width := 0
	for _, r := range slices.Concat(hg, bg) {
		width = max(width, len(r))
	}
	index := 0 // leading header cells of body rows: the index columns
	if len(body) > 0 {
		for _, c := range body[0] {
			if !c.th {
				break
			}
			index += c.colspan
		}
	}
	index = min(index, width)
	sh := shape{rows: len(bg), cols: width - index}

	header := make([]string, width)
	for j := range header {
		var names []string
		for _, r := range hg {
			if j < len(r) && r[j] != "" && (len(names) == 0 || names[len(names)-1] != r[j]) {
				names = append(names, r[j])
			}
		}
		header[j] = strings.Join(names, " / ")
	}

	// Columns to show, -1 standing for the elided ones.
	cols := make([]int, 0, width)
	for j := range width {
		d := j - index
		switch {
		case d < 0 || sh.cols <= tableHeadCols+tableTailCols+1 || d < tableHeadCols || d >= sh.cols-tableTailCols:
			cols = append(cols, j)
		case d == tableHeadCols:
			cols = append(cols, -1)
		}
	}
	var b strings.Builder
	writeRow := func(r []string, elided string) {
		b.WriteString("|")
		for _, j := range cols {
			v := elided
			if j >= 0 {
				v = ""
				if j < len(r) {
					v = r[j]
				}
			}
			b.WriteString(" " + mdCell(v) + " |")
		}
		b.WriteString("\n")
	}
	writeRow(header, "…")
	b.WriteString("|" + strings.Repeat(" --- |", len(cols)) + "\n")
	for i, r := range bg {
		if len(bg) > tableHeadRows+tableTailRows+1 && i >= tableHeadRows && i < len(bg)-tableTailRows {
			if i == tableHeadRows {
				omitted := make([]string, width)
				for j := range omitted {
					omitted[j] = "…"
				}
				omitted[0] = fmt.Sprintf("… %s rows omitted …", comma(len(bg)-tableHeadRows-tableTailRows))
				writeRow(omitted, "…")
			}
			continue
		}
		writeRow(r, "…")
	}
	return strings.TrimSuffix(b.String(), "\n"), sh
}

func rowCells(tr *html.Node) []cell {
	var r []cell
	for c := tr.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode || (c.DataAtom != atom.Td && c.DataAtom != atom.Th) {
			continue
		}
		r = append(r, cell{text: nodeText(c), th: c.DataAtom == atom.Th,
			colspan: span(c, "colspan"), rowspan: span(c, "rowspan")})
	}
	return r
}

func allTH(r []cell) bool {
	for _, c := range r {
		if !c.th {
			return false
		}
	}
	return len(r) > 0
}

// span reads a colspan or rowspan, bounded so a hostile table cannot make
// the grid huge.
func span(n *html.Node, key string) int {
	for _, a := range n.Attr {
		if a.Key == key {
			if v, err := strconv.Atoi(strings.TrimSpace(a.Val)); err == nil && v > 1 {
				return min(v, 1000)
			}
		}
	}
	return 1
}

// expand lays rows out on a grid, repeating a spanning cell's text in each
// place it covers: a MultiIndex level then reads as it would in a CSV.
// Spans can make a grid far larger than its HTML (a few kilobytes of
// rowspans and colspans cover millions of places), so once the *budget of
// cells is spent, rows keep just their own cells, one place each.
func expand(rows [][]cell, budget *int) [][]string {
	type carry struct {
		text string
		left int
	}
	var down []carry // by column: text still spanning down from above
	grid := make([][]string, 0, len(rows))
	for _, r := range rows {
		if *budget <= 0 {
			out := make([]string, len(r))
			for j, c := range r {
				out[j] = c.text
			}
			grid = append(grid, out)
			continue
		}
		var out []string
		fill := func() {
			for len(out) < len(down) && down[len(out)].left > 0 {
				down[len(out)].left--
				out = append(out, down[len(out)].text)
			}
		}
		fill()
		for _, c := range r {
			for range c.colspan {
				j := len(out)
				if j >= maxGridCols {
					break
				}
				for len(down) <= j {
					down = append(down, carry{})
				}
				down[j] = carry{c.text, c.rowspan - 1}
				out = append(out, c.text)
			}
			fill()
		}
		for j := len(out); j < len(down); j++ { // spans below a short row
			if down[j].left > 0 {
				for len(out) < j {
					out = append(out, "")
				}
				down[j].left--
				out = append(out, down[j].text)
			}
		}
		*budget -= len(out)
		grid = append(grid, out)
	}
	return grid
}

// mdCell trims a cell and escapes what would break a Markdown row.
func mdCell(s string) string {
	if utf8.RuneCountInString(s) > cellMaxChars {
		s = runeHead(s, cellMaxChars-1) + "…"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}
