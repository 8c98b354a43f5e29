package llm

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"strings"
	"testing"
	"time"
)

func TestImageDownscale(t *testing.T) {
	f := fixtures(t)
	raw, err := base64.StdEncoding.DecodeString(f.PNG)
	if err != nil {
		t.Fatal(err)
	}
	src, err := png.DecodeConfig(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if src.Width != 2000 || src.Height != 1600 {
		t.Fatalf("matplotlib made a %d×%d PNG, want 2000×1600", src.Width, src.Height)
	}
	// Base64 as Jupyter may wrap it, with newlines.
	wrapped := strings.Join(chunks(f.PNG, 76), "\n")
	tests := []struct {
		name string
		opt  Options
	}{
		{"defaults", Options{}},
		{"small edge", Options{MaxImageEdge: 300}},
		{"tight bytes force more scaling", Options{MaxImageBytes: 40_000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Render(okResult(display(map[string]any{"image/png": wrapped, "text/plain": "<Figure size 1000x800 with 1 Axes>"})), nil, tt.opt)
			if len(r.Blocks) != 1 || r.Blocks[0].Kind != "image" {
				t.Fatalf("blocks %s, want one image", describe(r.Blocks))
			}
			b := r.Blocks[0]
			opt := tt.opt.withDefaults()
			if len(b.Data) > opt.MaxImageBytes {
				t.Errorf("%d bytes, over %d", len(b.Data), opt.MaxImageBytes)
			}
			m, err := png.Decode(bytes.NewReader(b.Data))
			if err != nil {
				t.Fatalf("result is not a PNG: %v", err)
			}
			w, h := m.Bounds().Dx(), m.Bounds().Dy()
			if w != b.Width || h != b.Height || b.MIME != "image/png" {
				t.Errorf("block says %d×%d %s, PNG is %d×%d", b.Width, b.Height, b.MIME, w, h)
			}
			if max(w, h) > opt.MaxImageEdge {
				t.Errorf("%d×%d exceeds edge %d", w, h, opt.MaxImageEdge)
			}
			if wantH := float64(w) * 1600 / 2000; math.Abs(float64(h)-wantH) > 1 {
				t.Errorf("%d×%d: aspect not kept (height should be %.1f)", w, h, wantH)
			}
			size := strings.Replace(r.Text(), "[image: ", "", 1)
			size = strings.TrimSuffix(size, " PNG]")
			if !strings.Contains(r.Summary, "1 image ("+size+")") {
				t.Errorf("summary %q lacks the image and its size %s", r.Summary, size)
			}
		})
	}
}

func TestImageKinds(t *testing.T) {
	small := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for i := range small.Pix {
		small.Pix[i] = byte(i)
	}
	var pngBuf, jpgBuf bytes.Buffer
	if err := png.Encode(&pngBuf, small); err != nil {
		t.Fatal(err)
	}
	if err := jpeg.Encode(&jpgBuf, solid(1600, 900), nil); err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString
	tests := []struct {
		name     string
		data     map[string]any
		text     string // of the rendering
		w, h     int    // of the image block, if one is wanted
		summary  string
		sameData []byte // the block keeps these bytes
	}{
		{"small PNG kept as is", map[string]any{"image/png": b64(pngBuf.Bytes())}, "[image: 40×30 PNG]", 40, 30, "1 image (40×30)", pngBuf.Bytes()},
		{"JPEG becomes a scaled PNG", map[string]any{"image/jpeg": b64(jpgBuf.Bytes())}, "[image: 1024×576 PNG]", 1024, 576, "1 image (1024×576)", nil},
		{"undecodable PNG", map[string]any{"image/png": b64([]byte("\x89PNG\r\n\x1a\nnot really")), "text/plain": "<Figure>"},
			"[image/png image could not be shown: 18 bytes: ", 0, 0, "1 image not shown", nil},
		{"bad base64", map[string]any{"image/png": "%%%"}, "[image/png image could not be shown: bad base64", 0, 0, "1 image not shown", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Render(okResult(display(tt.data)), nil, Options{})
			if !strings.HasPrefix(r.Text(), tt.text) {
				t.Errorf("text %q, want prefix %q", r.Text(), tt.text)
			}
			if !strings.Contains(r.Summary, tt.summary) {
				t.Errorf("summary %q lacks %q", r.Summary, tt.summary)
			}
			if tt.w == 0 {
				if len(r.Blocks) != 1 || r.Blocks[0].Kind != "text" {
					t.Errorf("blocks %s, want one text note", describe(r.Blocks))
				}
				return
			}
			if len(r.Blocks) != 1 || r.Blocks[0].Width != tt.w || r.Blocks[0].Height != tt.h {
				t.Fatalf("blocks %s, want one %d×%d image", describe(r.Blocks), tt.w, tt.h)
			}
			if tt.sameData != nil && !bytes.Equal(r.Blocks[0].Data, tt.sameData) {
				t.Errorf("a PNG within the limits was re-encoded")
			}
		})
	}
}

func TestImageTooLargeToDecode(t *testing.T) {
	// A PNG header declaring a 100000×100000 canvas: refused before decoding.
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 1, 1))); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	copy(b[16:24], []byte{0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0})         // IHDR width, height
	binary.BigEndian.PutUint32(b[29:33], crc32.ChecksumIEEE(b[12:29])) // and its CRC, so only the size is wrong
	_, err := renderImage(base64.StdEncoding.EncodeToString(b), Options{}.withDefaults())
	if err == nil || !strings.Contains(err.Error(), "100000×100000 pixels is too large to decode") {
		t.Fatalf("a 100000×100000 image: %v", err)
	}
}

func solid(w, h int) image.Image {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.Set(x, y, color.RGBA{uint8(x / 8), uint8(y / 8), 128, 255})
		}
	}
	return m
}

func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		out, s = append(out, s[:n]), s[n:]
	}
	return append(out, s)
}

// describe lists blocks without their image bytes.
func describe(bs []Block) string {
	var out []string
	for _, b := range bs {
		if b.Kind == "image" {
			out = append(out, fmt.Sprintf("image %d×%d, %d bytes", b.Width, b.Height, len(b.Data)))
		} else {
			out = append(out, fmt.Sprintf("text %q", b.Text))
		}
	}
	return "[" + strings.Join(out, "; ") + "]"
}

// TestImageDecodesBounded: an image that must be decoded waits for a slot
// of Options.Decodes; one that already fits does not decode and does not
// wait.
func TestImageDecodesBounded(t *testing.T) {
	var big, small bytes.Buffer
	png.Encode(&big, image.NewGray(image.Rect(0, 0, 2000, 100)))
	png.Encode(&small, image.NewGray(image.Rect(0, 0, 10, 10)))
	opt := Options{Decodes: make(chan struct{}, 1)}
	opt.Decodes <- struct{}{} // every slot taken
	if _, err := Image(small.Bytes(), opt); err != nil {
		t.Fatalf("an image that fits: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Image(big.Bytes(), opt)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("an image was decoded while every slot was taken (err %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	<-opt.Decodes
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(opt.Decodes) != 0 {
		t.Error("the slot was not given back")
	}
}
