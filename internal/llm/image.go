package llm

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // decoder
	"image/png"
	"math"
	"strings"

	"golang.org/x/image/draw"
)

// maxDecodePixels refuses images that would take too much memory to
// decode (a small PNG can declare a huge canvas).
const maxDecodePixels = 40 << 20

// renderImage decodes a base64 PNG or JPEG and returns it as a PNG no
// longer than opt.MaxImageEdge on its longest side and no bigger than
// opt.MaxImageBytes, scaling further down as needed.
func renderImage(b64 string, opt Options) (Block, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.Map(dropSpace, b64))
	if err != nil {
		return Block{}, fmt.Errorf("bad base64: %w", err)
	}
	return shapeImage(raw, opt)
}

// Image shapes PNG or JPEG bytes as Render shapes an output's image: a PNG
// within the options' edge and size limits.
func Image(raw []byte, opt Options) (Block, error) { return shapeImage(raw, opt.withDefaults()) }

func shapeImage(raw []byte, opt Options) (Block, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(raw))
	if err != nil {
		return Block{}, fmt.Errorf("%d bytes: %w", len(raw), err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > maxDecodePixels {
		return Block{}, fmt.Errorf("%d×%d pixels is too large to decode", cfg.Width, cfg.Height)
	}
	if format == "png" && max(cfg.Width, cfg.Height) <= opt.MaxImageEdge && len(raw) <= opt.MaxImageBytes {
		return pngBlock(raw, cfg.Width, cfg.Height), nil // already fits: keep it exactly
	}
	if opt.Decodes != nil {
		opt.Decodes <- struct{}{}
		defer func() { <-opt.Decodes }()
	}
	src, _, err := image.Decode(bytes.NewReader(raw))
	if err != nil {
		return Block{}, fmt.Errorf("%d bytes: %w", len(raw), err)
	}
	w, h := src.Bounds().Dx(), src.Bounds().Dy()
	scale := min(1, float64(opt.MaxImageEdge)/float64(max(w, h)))
	// Each round rescales from the source, so quality does not degrade.
	for range 8 {
		nw, nh := max(1, int(math.Round(float64(w)*scale))), max(1, int(math.Round(float64(h)*scale)))
		data, err := scalePNG(src, nw, nh)
		if err != nil {
			return Block{}, err
		}
		if len(data) <= opt.MaxImageBytes {
			return pngBlock(data, nw, nh), nil
		}
		if max(nw, nh) <= 16 {
			break
		}
		// PNG size grows about with the pixel count; aim a little under.
		scale *= math.Min(0.9, 0.95*math.Sqrt(float64(opt.MaxImageBytes)/float64(len(data))))
	}
	return Block{}, errors.New("it does not fit the image size limit even scaled down")
}

func pngBlock(data []byte, w, h int) Block {
	return Block{Kind: "image", MIME: "image/png", Data: data, Width: w, Height: h}
}

func scalePNG(src image.Image, w, h int) ([]byte, error) {
	var dst draw.Image
	if opaque(src) {
		// Opaque images encode as RGB, a quarter smaller than RGBA.
		dst = image.NewRGBA(image.Rect(0, 0, w, h))
	} else {
		dst = image.NewNRGBA(image.Rect(0, 0, w, h))
	}
	if w == src.Bounds().Dx() && h == src.Bounds().Dy() {
		draw.Draw(dst, dst.Bounds(), src, src.Bounds().Min, draw.Src)
	} else {
		draw.CatmullRom.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Src, nil)
	}
	var buf bytes.Buffer
	// BestCompression saves about 2% here at several times the time.
	enc := png.Encoder{CompressionLevel: png.DefaultCompression}
	if err := enc.Encode(&buf, dst); err != nil {
		return nil, fmt.Errorf("encoding PNG: %w", err)
	}
	return buf.Bytes(), nil
}

func opaque(m image.Image) bool {
	if o, ok := m.(interface{ Opaque() bool }); ok {
		return o.Opaque()
	}
	return false
}

func dropSpace(r rune) rune {
	if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
		return -1
	}
	return r
}
