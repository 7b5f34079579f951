package builtin

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"image"
	"image/color"
	"image/png"
	"math"
	"time"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

// Image size limits of builtin-image.
const (
	MinImageSide     = 16
	MaxImageSide     = 1024
	DefaultImageSide = 512
	MaxImages        = 10
)

// GenerateImage renders PNGs with builtin-image: a pattern of bands and discs whose colours
// and geometry are derived from the prompt (and seed), so equal requests give equal images.
func (e *Engine) GenerateImage(ctx context.Context, req *inferencev1.GenerateImageRequest) (*inferencev1.GenerateImageResponse, error) {
	if req.GetModel() != Image {
		return nil, fmt.Errorf("%w: %q draws no images (use %s)", ErrWrongModel, req.GetModel(), Image)
	}
	if req.GetPrompt() == "" {
		return nil, fmt.Errorf("%w: prompt is required", ErrBadRequest)
	}
	w, h := int(req.GetWidth()), int(req.GetHeight())
	if w == 0 && h == 0 {
		w, h = DefaultImageSide, DefaultImageSide
	}
	if w < MinImageSide || h < MinImageSide || w > MaxImageSide || h > MaxImageSide {
		return nil, fmt.Errorf("%w: size %dx%d: each side must be %d to %d pixels", ErrBadRequest, w, h, MinImageSide, MaxImageSide)
	}
	n := int(req.GetN())
	if n == 0 {
		n = 1
	}
	if n < 1 || n > MaxImages {
		return nil, fmt.Errorf("%w: n %d: ask for 1 to %d images", ErrBadRequest, n, MaxImages)
	}
	out := &inferencev1.GenerateImageResponse{Created: time.Now().Unix()}
	for i := range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := render(req.GetPrompt(), req.GetNegativePrompt(), req.GetSeed()+int64(i), w, h)
		if err != nil {
			return nil, err
		}
		out.Images = append(out.Images, b)
	}
	return out, nil
}

func render(prompt, negative string, seed int64, w, h int) ([]byte, error) {
	hs := fnv.New64a()
	fmt.Fprintf(hs, "%s\x00%s\x00%d", prompt, negative, seed)
	x := hs.Sum64()
	next := func() uint64 { // xorshift64*
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		return x * 2685821657736338717
	}
	palette := make([]color.RGBA, 4)
	for i := range palette {
		v := next()
		palette[i] = color.RGBA{uint8(v), uint8(v >> 8), uint8(v >> 16), 255}
	}
	angle := float64(next()%360) * math.Pi / 180
	bands := 3 + int(next()%9)
	type disc struct{ cx, cy, r float64 }
	discs := make([]disc, 2+int(next()%5))
	for i := range discs {
		discs[i] = disc{float64(next() % uint64(w)), float64(next() % uint64(h)), float64(8 + next()%uint64(max(w, h)/4))}
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	ca, sa := math.Cos(angle), math.Sin(angle)
	diag := math.Hypot(float64(w), float64(h))
	for y := range h {
		for px := range w {
			t := (float64(px)*ca + float64(y)*sa) / diag
			c := palette[int(math.Abs(t)*float64(bands))%2]
			for i, d := range discs {
				if math.Hypot(float64(px)-d.cx, float64(y)-d.cy) < d.r {
					c = palette[2+i%2]
				}
			}
			img.SetRGBA(px, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
