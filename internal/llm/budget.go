package llm

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// part is one piece of the rendering's text, before fitting the budget.
type part struct {
	label string // shown before the text and never cut, e.g. "stderr:\n"
	text  string
	what  string // names the text in a cut marker, e.g. "stdout"
	fixed bool   // text is never cut (placeholders, notes)
	keep  bool   // never left out (an error, the files list)
	image *Block // the image that text is the placeholder of
}

func (p part) chars() int { return utf8.RuneCountInString(p.label) + utf8.RuneCountInString(p.text) }

// minKept is the least text worth keeping around a cut marker; a part
// given less than that is left out with others instead.
const minKept = 400

// fit renders parts within max characters, newlines between parts
// included. Over budget, every part too long for an even share is cut in
// the middle to that share; if shares would be too small to be useful,
// whole parts are left out from the middle first. It reports whether
// anything was cut.
func fit(parts []part, max int) ([]Block, bool) {
	if total(parts) <= max {
		return blocks(parts), false
	}
	var drop []int // indices of the parts that may be left out
	for i, p := range parts {
		if !p.keep {
			drop = append(drop, i)
		}
	}
	// The fewest parts to leave out; more left out leaves more room for the rest.
	try := func(k int) ([]part, bool) { return allot(leaveOut(parts, drop, k), max) }
	if k := sort.Search(len(drop)+1, func(k int) bool { _, ok := try(k); return ok }); k <= len(drop) {
		out, _ := try(k)
		return blocks(out), true
	}
	return hardCut(parts, max), true
}

func total(parts []part) int {
	n := max(len(parts)-1, 0)
	for _, p := range parts {
		n += p.chars()
	}
	return n
}

// leaveOut replaces k of the droppable parts, from the middle, by one note.
func leaveOut(parts []part, drop []int, k int) []part {
	if k == 0 {
		return parts
	}
	lo := (len(drop) - k) / 2 // the tail (often the error) keeps the extra one
	gone := make([]bool, len(parts))
	var chars, images int
	for _, i := range drop[lo : lo+k] {
		gone[i] = true
		if parts[i].image != nil {
			images++
		} else {
			chars += parts[i].chars()
		}
	}
	what := fmt.Sprintf("%s characters of text", comma(chars))
	if images > 0 {
		what += fmt.Sprintf(" and %s", plural(images, "image", "images"))
	}
	note := part{fixed: true, text: fmt.Sprintf(
		"[… %s left out from the middle to fit the budget (%s). To see them, write the output to a file (e.g. /tmp/out.txt) and read that file in slices.]",
		plural(k, "output", "outputs"), what)}
	out := make([]part, 0, len(parts)-k+1)
	for i, p := range parts {
		switch {
		case i == drop[lo]:
			out = append(out, note)
		case gone[i]:
		default:
			out = append(out, p)
		}
	}
	return out
}

// allot cuts the cuttable parts to an even share of what the fixed text
// leaves, or fails if a cut part's share is too small to be useful.
func allot(parts []part, max int) ([]part, bool) {
	avail := max - (len(parts) - 1)
	var lens []int
	for _, p := range parts {
		avail -= utf8.RuneCountInString(p.label)
		if p.fixed {
			avail -= utf8.RuneCountInString(p.text)
		} else {
			lens = append(lens, utf8.RuneCountInString(p.text))
		}
	}
	if avail < 0 {
		return nil, false
	}
	// Water-filling: short parts stay whole, long ones share the rest evenly.
	sorted := slices.Sorted(slices.Values(lens))
	share, left := avail, avail
	for i, n := range sorted {
		share = left / (len(sorted) - i)
		if n > share {
			break
		}
		left -= n
	}
	out := slices.Clone(parts)
	for i, p := range out {
		n := utf8.RuneCountInString(p.text)
		if p.fixed || n <= share {
			continue
		}
		if share < markerLen(n, p.what)+2+minKept {
			return nil, false
		}
		out[i].text = cutMiddle(p.text, share, p.what)
	}
	return out, true
}

func marker(n int, what string) string {
	return fmt.Sprintf("[… %s characters cut from the middle of %s. To see all of it, write it to a file (e.g. print to /tmp/out.txt) and read that file in slices.]", comma(n), what)
}

// markerLen bounds the length of a marker for up to n characters cut.
func markerLen(n int, what string) int { return utf8.RuneCountInString(marker(n, what)) }

// cutMiddle returns s in at most max characters: its head, a marker line,
// and its tail (the larger share: results and errors come last). Cuts
// fall on line breaks when one is near, never inside a UTF-8 sequence.
func cutMiddle(s string, max int, what string) string {
	n := utf8.RuneCountInString(s)
	if n <= max {
		return s
	}
	room := max - markerLen(n, what) - 2
	hn := room * 2 / 5
	head, tail := runeHead(s, hn), runeTail(s, room-hn)
	if i := strings.LastIndexByte(head, '\n'); i >= 0 && i >= len(head)*4/5 {
		head = head[:i]
	}
	if i := strings.IndexByte(tail, '\n'); i >= 0 && i < len(tail)/5 {
		tail = tail[i+1:]
	}
	cut := n - utf8.RuneCountInString(head) - utf8.RuneCountInString(tail)
	return head + "\n" + marker(cut, what) + "\n" + tail
}

// hardCut is the last resort for a budget too small for the parts' own
// markers: the whole text, cut in the middle with a short marker.
func hardCut(parts []part, max int) []Block {
	var texts []string
	for _, p := range parts {
		texts = append(texts, p.label+p.text)
	}
	s := strings.Join(texts, "\n")
	n := utf8.RuneCountInString(s)
	short := fmt.Sprintf("[… %s characters cut …]", comma(n))
	var out string
	if room := max - utf8.RuneCountInString(short) - 2; room > 0 {
		hn := room * 2 / 5
		head, tail := runeHead(s, hn), runeTail(s, room-hn)
		out = head + "\n" + fmt.Sprintf("[… %s characters cut …]", comma(n-hn-(room-hn))) + "\n" + tail
	} else {
		out = runeHead(s, max)
	}
	return []Block{{Kind: "text", Text: out}}
}

// blocks merges adjacent text parts into one block each.
func blocks(parts []part) []Block {
	var out []Block
	for _, p := range parts {
		if p.image != nil {
			out = append(out, *p.image)
			continue
		}
		if n := len(out); n > 0 && out[n-1].Kind == "text" {
			out[n-1].Text += "\n" + p.label + p.text
			continue
		}
		out = append(out, Block{Kind: "text", Text: p.label + p.text})
	}
	return out
}

// runeHead is the first n characters of s.
func runeHead(s string, n int) string {
	if n <= 0 {
		return ""
	}
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// runeTail is the last n characters of s.
func runeTail(s string, n int) string {
	if n <= 0 {
		return ""
	}
	i := len(s)
	for ; n > 0 && i > 0; n-- {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return s[i:]
}
