// Package llm shapes a cell's execution result for a language model's
// context window: text within a character budget (long text cut in the
// middle with a marker that says how to see the rest), pandas tables as
// compact Markdown, images downscaled and re-encoded as PNG, and a short
// plain-language summary.
//
// It owns presentation only. It neither runs code nor reads files; the
// caller passes the result and the list of files the code wrote.
package llm

import (
	"fmt"
	"strings"
	"time"

	"github.com/codecell/codecell/internal/kernel"
)

// Options bound a rendering. Zero fields take their defaults.
type Options struct {
	MaxChars      int // characters (Unicode code points) of Rendering.Text; 0 means 20_000
	MaxImageEdge  int // longest side of an image, px; 0 means 1024
	MaxImageBytes int // per image after re-encoding; 0 means 400_000
	// Decodes, if set, bounds the images being decoded and rescaled at
	// once, across every Render sharing it: one may hold 160 MB (40
	// megapixels). Its capacity is the bound.
	Decodes chan struct{}
}

// Budget is the number of characters of text opt allows.
func Budget(opt Options) int { return opt.withDefaults().MaxChars }

func (o Options) withDefaults() Options {
	if o.MaxChars <= 0 {
		o.MaxChars = 20_000
	}
	if o.MaxImageEdge <= 0 {
		o.MaxImageEdge = 1024
	}
	if o.MaxImageBytes <= 0 {
		o.MaxImageBytes = 400_000
	}
	return o
}

// File is a file the code wrote.
type File struct {
	Path     string
	Size     int64
	Modified time.Time // orders the listing, most recent first; zero keeps the caller's order
}

// Block is one piece of a rendering: text, or an image.
type Block struct {
	Kind          string // "text" or "image"
	Text          string // for text
	MIME          string // for images: always "image/png"
	Data          []byte // PNG bytes, for images
	Width, Height int    // of the image, px
}

// Rendering is a result shaped for a model.
type Rendering struct {
	Summary string  // one or two plain sentences a model can read directly
	Blocks  []Block // in output order: adjacent text merged, images in place
	IsError bool    // the code raised, timed out, or the kernel died
	Cut     bool    // some text was cut or left out to fit; markers say where
}

// Text returns the text blocks joined by newlines, each image as a
// placeholder such as "[image: 800×600 PNG]". It never exceeds
// Options.MaxChars characters; the Summary is not counted.
func (r Rendering) Text() string {
	var b strings.Builder
	for i, bl := range r.Blocks {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(bl.text())
	}
	return b.String()
}

func (bl Block) text() string {
	if bl.Kind == "image" {
		return imagePlaceholder(bl.Width, bl.Height)
	}
	return bl.Text
}

func imagePlaceholder(w, h int) string { return fmt.Sprintf("[image: %d×%d PNG]", w, h) }

// Render shapes res (and the files its code wrote) for a model.
func Render(res *kernel.Result, files []File, opt Options) Rendering {
	opt = opt.withDefaults()
	if res == nil {
		res = &kernel.Result{Status: kernel.StatusOK}
	}
	var f facts
	parts := outputParts(res.Outputs, opt, &f)
	if p, ok := filesPart(files); ok {
		parts = append(parts, p)
	}
	blocks, cut := fit(parts, opt.MaxChars)
	r := Rendering{
		Blocks:  blocks,
		IsError: res.Status == kernel.StatusError || res.Status == kernel.StatusTimeout || res.Died,
		Cut:     cut || f.cut,
	}
	r.Summary = summarize(res, &f, files, r.Cut, opt.MaxChars)
	return r
}
