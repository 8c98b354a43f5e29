package llm

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/codecell/codecell/internal/kernel"
)

func TestBudgetLongStdout(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, "line %06d of a long computation\n", i)
	}
	out := b.String()
	r := Render(okResult(stdout(out)), nil, Options{})
	text := r.Text()
	if n := utf8.RuneCountInString(text); n > 20_000 || n < 19_000 {
		t.Errorf("%d characters, want just under 20,000", n)
	}
	if !strings.HasPrefix(text, "line 000000 of a long computation\n") {
		t.Errorf("head lost: %q", text[:80])
	}
	if last := out[strings.LastIndex(out[:len(out)-1], "\n")+1 : len(out)-1]; !strings.HasSuffix(text, "\n"+last) {
		t.Errorf("tail lost: %q, want %q", text[len(text)-80:], last)
	}
	marker := regexpMarker.FindString(text)
	if marker == "" {
		t.Fatalf("no cut marker in the text")
	}
	// The cut falls between whole lines.
	if !strings.Contains(text, " computation\n"+marker+"\nline ") {
		t.Errorf("marker %q not between whole lines", marker)
	}
	if !r.Cut || !strings.Contains(r.Summary, "Some output was cut to fit 20,000 characters") || !strings.Contains(r.Summary, "1 line") {
		t.Errorf("Cut %v, summary %q", r.Cut, r.Summary)
	}
}

func TestBudgetMultibyte(t *testing.T) {
	// 3-byte characters only, so any byte-based cut would split one.
	s := strings.Repeat("€", 5000) + strings.Repeat("漢", 5000)
	for _, max := range []int{1, 2, 10, 37, 100, 399, 400, 401, 1000, 1001, 4999, 9999, 10_000} {
		r := Render(okResult(stdout(s)), nil, Options{MaxChars: max})
		text := r.Text()
		if !utf8.ValidString(text) {
			t.Fatalf("max %d: invalid UTF-8", max)
		}
		if n := utf8.RuneCountInString(text); n > max {
			t.Errorf("max %d: %d characters", max, n)
		}
		if max < 10_000 != r.Cut {
			t.Errorf("max %d: Cut %v", max, r.Cut)
		}
		if max >= 1000 && max < 10_000 && (!strings.HasPrefix(text, "€€€") || !strings.HasSuffix(text, "漢漢漢") || !strings.Contains(text, "characters cut from the middle of stdout. To see all of it, write it to a file")) {
			t.Errorf("max %d: head, tail or marker missing: %q…%q", max, runeHead(text, 20), runeTail(text, 200))
		}
	}
	if r := Render(okResult(stdout(s)), nil, Options{MaxChars: 1000}); !strings.Contains(r.Text(), "[… 9,") {
		t.Errorf("marker does not count the characters cut: %q", r.Text())
	}
}

func TestBudgetManyOutputs(t *testing.T) {
	png1x1 := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	if _, err := base64.StdEncoding.DecodeString(png1x1); err != nil {
		t.Fatal(err)
	}
	var outs []kernel.Output
	for i := range 400 {
		switch i % 4 {
		case 0:
			outs = append(outs, stdout(fmt.Sprintf("step %d: %s\n", i, strings.Repeat("é", 900))))
		case 1:
			outs = append(outs, stderr(fmt.Sprintf("warning %d\n", i)))
		case 2:
			outs = append(outs, display(map[string]any{"text/plain": strings.Repeat("ß", 3000)}))
		case 3:
			outs = append(outs, display(map[string]any{"image/png": png1x1}))
		}
	}
	outs = append(outs, errOut("ValueError", "the last thing", []string{"Traceback:", "ValueError: the last thing"}))
	var files []File
	for i := range 30 {
		files = append(files, File{Path: fmt.Sprintf("/tmp/f%d", i), Size: 10})
	}
	res := &kernel.Result{Status: kernel.StatusError, ExecutionCount: 3, Outputs: outs}
	for _, max := range []int{1, 50, 300, 1000, 5000, 20_000, 100_000} {
		r := Render(res, files, Options{MaxChars: max})
		text := r.Text()
		if n := utf8.RuneCountInString(text); n > max {
			t.Errorf("max %d: %d characters", max, n)
		}
		if !utf8.ValidString(text) || !r.Cut {
			t.Errorf("max %d: valid UTF-8 %v, Cut %v", max, utf8.ValidString(text), r.Cut)
		}
		if max < 5000 {
			continue
		}
		// Big enough budgets keep the start, the error and the files, and
		// say what was left out.
		for _, s := range []string{"step 0: éé", "\nValueError: the last thing\nFiles written (most recent first):\n- /tmp/f0 (10 bytes)", "- and 10 more", "left out from the middle to fit the budget"} {
			if !strings.Contains(text, s) {
				t.Errorf("max %d: text lacks %q", max, s)
			}
		}
		images := 0
		for _, b := range r.Blocks {
			if b.Kind == "image" {
				images++
			}
		}
		if want := strings.Count(text, "[image: 1×1 PNG]"); images != want || images == 0 {
			t.Errorf("max %d: %d image blocks, %d placeholders", max, images, want)
		}
	}
}

func TestBudgetExactFit(t *testing.T) {
	s := strings.Repeat("x", 99) + "\n"
	r := Render(okResult(stdout(s), stderr("e")), nil, Options{MaxChars: 99 + 1 + 8 + 1})
	if r.Cut || r.Text() != strings.Repeat("x", 99)+"\nstderr:\ne" {
		t.Errorf("Cut %v, text %q", r.Cut, r.Text())
	}
	r = Render(okResult(stdout(s), stderr("e")), nil, Options{MaxChars: 99 + 1 + 8})
	if !r.Cut || utf8.RuneCountInString(r.Text()) > 108 {
		t.Errorf("one over: Cut %v, %d characters", r.Cut, utf8.RuneCountInString(r.Text()))
	}
}

func TestCutMiddle(t *testing.T) {
	s := strings.Repeat("a", 1000) + strings.Repeat("z", 1000)
	for _, max := range []int{500, 1000, 1999} {
		got := cutMiddle(s, max, "stdout")
		if n := utf8.RuneCountInString(got); n > max {
			t.Errorf("max %d: %d characters", max, n)
		}
		m := regexpMarker.FindString(got)
		head, tail, _ := strings.Cut(got, "\n"+m+"\n")
		want := fmt.Sprintf("[… %s characters cut from the middle of stdout.", comma(2000-len(head)-len(tail)))
		if !strings.HasPrefix(m, want) || len(tail) <= len(head) {
			t.Errorf("max %d: marker %q, want %q; head %d, tail %d", max, m, want, len(head), len(tail))
		}
	}
	if got := cutMiddle("short", 5, "x"); got != "short" {
		t.Errorf("fitting text changed: %q", got)
	}
}

var regexpMarker = regexp.MustCompile(`\[… [\d,]+ characters cut from the middle of [^\]]*\]`)
