package llm

import (
	"runtime"
	"strings"
	"testing"
)

func TestTables(t *testing.T) {
	f := fixtures(t)
	tests := []struct {
		name     string
		html     string
		header   string   // the Markdown header row, exactly
		contains []string // lines or fragments the text must have
		absent   []string
		rows     int    // body rows shown, the omitted row included
		summary  string // the table's size as the summary gives it
	}{{
		name:     "small",
		html:     f.Small,
		header:   "| id | city | temp | note |",
		contains: []string{"| --- | --- | --- | --- |", "| a | Oslo | 3.50 | cold \\| wet |", "| c | Pune | 31.00 | hot |"},
		absent:   []string{"omitted", "<"},
		rows:     3,
		summary:  "a 3×3 table",
	}, {
		name:     "long",
		html:     f.Long,
		header:   "|  | x | y | label |",
		contains: []string{"| … 980 rows omitted … | … | … | … |", "| 0 | 0 |", "| 999 | 999 |", "row9 |", "row990 |"},
		absent:   []string{"row10 |", "row989 |"},
		rows:     tableHeadRows + 1 + tableTailRows,
		summary:  "a 1000×3 table",
	}, {
		name:     "wide",
		html:     f.Wide,
		header:   "|  | c0 | c1 | c2 | c3 | c4 | c5 | c6 | c7 | … | c36 | c37 | c38 | c39 |",
		contains: []string{"| 4 | 160 | 161 | 162 | 163 | 164 | 165 | 166 | 167 | … | 196 | 197 | 198 | 199 |"},
		absent:   []string{"c8 ", "c35", "omitted"},
		rows:     5,
		summary:  "a 5×40 table",
	}, {
		name:     "describe",
		html:     f.Describe,
		header:   "|  | x | y |",
		contains: []string{"| count | 1000.000000 | 1000.000000 |", "| mean | 499.500000 |", "| 25% |", "| max | 999.000000 |"},
		rows:     8,
		summary:  "a 8×2 table",
	}, {
		name:     "pandas-truncated repr keeps the true size",
		html:     f.LongRepr,
		header:   "|  | x | y | label |",
		contains: []string{"| ... | ... | ... | ... |", "1000 rows × 3 columns"},
		absent:   []string{"vertical-align", "<style"},
		rows:     11,
		summary:  "a 1000×3 table",
	}, {
		name:    "MultiIndex columns",
		html:    f.Multi,
		header:  "|  | A / x | A / y |",
		rows:    3,
		summary: "a 3×2 table",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Render(okResult(result(map[string]any{"text/html": tt.html, "text/plain": f.PlainSmall})), nil, Options{})
			text := r.Text()
			lines := strings.Split(text, "\n")
			if lines[0] != tt.header {
				t.Errorf("header row\n got %q\nwant %q", lines[0], tt.header)
			}
			for _, s := range tt.contains {
				if !strings.Contains(text, s) {
					t.Errorf("text lacks %q:\n%s", s, text)
				}
			}
			for _, s := range tt.absent {
				if strings.Contains(text, s) {
					t.Errorf("text has %q:\n%s", s, text)
				}
			}
			rows := 0
			for _, l := range lines[2:] {
				if strings.HasPrefix(l, "|") {
					rows++
				}
			}
			if rows != tt.rows {
				t.Errorf("%d body rows, want %d:\n%s", rows, tt.rows, text)
			}
			if !strings.Contains(r.Summary, tt.summary) {
				t.Errorf("summary %q lacks %q", r.Summary, tt.summary)
			}
			if r.Cut || r.IsError {
				t.Errorf("Cut %v, IsError %v; want neither", r.Cut, r.IsError)
			}
		})
	}
}

func TestRichPreference(t *testing.T) {
	tests := []struct {
		name string
		data map[string]any
		want string
	}{
		{"markdown first", map[string]any{"text/markdown": "**bold**", "text/html": "<b>bold</b>", "text/plain": "bold"}, "**bold**"},
		{"plain over tableless HTML", map[string]any{"text/html": "<b>x</b>", "text/plain": "x plain"}, "x plain"},
		{"HTML text over a bare repr", map[string]any{
			"text/html":  "<div><style>p{}</style><h2>Title</h2><p>Some <i>styled</i>\n  text.</p><ul><li>one</li><li>two</li></ul></div>",
			"text/plain": "<IPython.core.display.HTML object>"}, "Title\nSome styled text.\none\ntwo"},
		{"nbformat line lists", map[string]any{"text/plain": []any{"line 1\n", "line 2\n"}}, "line 1\nline 2"},
		{"ANSI in plain text", map[string]any{"text/plain": "\x1b[31mred\x1b[0m"}, "red"},
		{"JSON", map[string]any{"application/json": map[string]any{"a": 1}}, `{"a":1}`},
		{"unknown type", map[string]any{"application/x-thing": "…"}, "[output of type application/x-thing, not shown]"},
		{"SVG", map[string]any{"image/svg+xml": "<svg>" + strings.Repeat(" ", 1995) + "</svg>", "text/plain": "<Figure>"}, "[SVG image, 2,006 bytes]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Render(okResult(display(tt.data)), nil, Options{})
			if got := r.Text(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTableSpans(t *testing.T) {
	// A MultiIndex on rows: pandas spans the outer level down its rows.
	h := `<table class="dataframe"><thead><tr><th></th><th></th><th>v</th></tr></thead><tbody>
<tr><th rowspan="2">a</th><th>x</th><td>1</td></tr><tr><th>y</th><td>2</td></tr>
<tr><th>b</th><th>x</th><td>3</td></tr></tbody></table>`
	r := Render(okResult(result(map[string]any{"text/html": h})), nil, Options{})
	want := "|  |  | v |\n| --- | --- | --- |\n| a | x | 1 |\n| a | y | 2 |\n| b | x | 3 |"
	if got := r.Text(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains(r.Summary, "a 3×1 table") {
		t.Errorf("summary %q", r.Summary)
	}
}

// Spans cannot make a few kilobytes of HTML cost gigabytes: 5 cells of
// 1000×1000 over 1000 rows would cover 5 million places, 50 times over.
func TestTableSpansBounded(t *testing.T) {
	block := "<tr>" + strings.Repeat(`<td colspan="1000" rowspan="1000">x</td>`, 5) + "</tr>" + strings.Repeat("<tr></tr>", 999)
	h := "<table>" + strings.Repeat(block, 50) + "</table>"
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := Render(okResult(result(map[string]any{"text/html": h})), nil, Options{})
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
		t.Errorf("rendering %d bytes of HTML allocated %d MB", len(h), alloc>>20)
	}
	if !strings.Contains(r.Summary, "a 50000×5000 table") || !strings.Contains(r.Text(), "| x | x |") {
		t.Errorf("summary %q, text %.300q", r.Summary, r.Text())
	}
}
