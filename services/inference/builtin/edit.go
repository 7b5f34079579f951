package builtin

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"time"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

// MaxEditSide caps each side of an image builtin-image edits or builtin-3d reads: the header
// is checked before the pixels are decoded, so a small file cannot claim a huge image.
const MaxEditSide = 4096

// MaxEditPixels caps n × width × height of one edit (4 Mpx: ten 640×640 images, or one
// 2048×2048), so that the PNGs fit the 40 MiB gRPC message whatever their content.
const MaxEditPixels = 4 << 20

// EditImage edits PNGs with builtin-image: every pixel the mask allows (a fully transparent
// mask pixel, as OpenAI defines masks; no mask: every pixel) is inverted and mixed one part in
// four with a tint derived from the prompt, seed and image index; other pixels and alpha are
// kept. The output has the input's size.
func (e *Engine) EditImage(ctx context.Context, req *inferencev1.EditImageRequest) (*inferencev1.EditImageResponse, error) {
	if req.GetModel() != Image {
		return nil, fmt.Errorf("%w: %q edits no images (use %s)", ErrWrongModel, req.GetModel(), Image)
	}
	if req.GetPrompt() == "" {
		return nil, fieldErr("prompt", "prompt is required: the edit to make")
	}
	src, err := decodePNG("image", req.GetImage())
	if err != nil {
		return nil, err
	}
	b := src.Bounds()
	if (req.GetWidth() != 0 || req.GetHeight() != 0) && (int(req.GetWidth()) != b.Dx() || int(req.GetHeight()) != b.Dy()) {
		return nil, fieldErr("size", "%s keeps the image's size %dx%d: omit size or give %dx%d", Image, b.Dx(), b.Dy(), b.Dx(), b.Dy())
	}
	var mask image.Image
	if len(req.GetMask()) > 0 {
		if mask, err = decodePNG("mask", req.GetMask()); err != nil {
			return nil, err
		}
		if mb := mask.Bounds(); mb.Dx() != b.Dx() || mb.Dy() != b.Dy() {
			return nil, fieldErr("mask", "mask is %dx%d but image is %dx%d: they must be the same size", mb.Dx(), mb.Dy(), b.Dx(), b.Dy())
		}
	}
	n := int(req.GetN())
	if n == 0 {
		n = 1
	}
	if n < 1 || n > MaxImages {
		return nil, fieldErr("n", "n %d: ask for 1 to %d images", n, MaxImages)
	}
	// The answer travels in one gRPC message: the pixels of all n images are bounded.
	if px := n * b.Dx() * b.Dy(); px > MaxEditPixels {
		return nil, fieldErr("n", "n %d images of %dx%d are %d pixels; the limit is %d: ask for fewer", n, b.Dx(), b.Dy(), px, MaxEditPixels)
	}
	base := image.NewNRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(base, base.Bounds(), src, b.Min, draw.Src)
	out := &inferencev1.EditImageResponse{Created: time.Now().Unix()}
	for i := range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		tint := EditTint(req.GetPrompt(), req.GetSeed()+int64(i))
		img := image.NewNRGBA(base.Bounds())
		copy(img.Pix, base.Pix)
		for y := range b.Dy() {
			for x := range b.Dx() {
				if mask != nil {
					if _, _, _, a := mask.At(mask.Bounds().Min.X+x, mask.Bounds().Min.Y+y).RGBA(); a != 0 {
						continue
					}
				}
				img.SetNRGBA(x, y, EditPixel(img.NRGBAAt(x, y), tint))
			}
		}
		var buf bytes.Buffer
		if err := png.Encode(&buf, img); err != nil {
			return nil, err
		}
		out.Images = append(out.Images, buf.Bytes())
	}
	return out, nil
}

// EditTint is the tint builtin-image mixes into edited pixels.
func EditTint(prompt string, seed int64) color.NRGBA {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s\x00%d", prompt, seed)
	v := h.Sum32()
	return color.NRGBA{uint8(v), uint8(v >> 8), uint8(v >> 16), 255}
}

// EditPixel is what builtin-image makes of one editable pixel: its inverse, mixed one part in
// four with tint; alpha is kept.
func EditPixel(c, tint color.NRGBA) color.NRGBA {
	mix := func(v, t uint8) uint8 { return uint8((3*int(255-v) + int(t)) / 4) }
	return color.NRGBA{mix(c.R, tint.R), mix(c.G, tint.G), mix(c.B, tint.B), c.A}
}

// decodePNG decodes a PNG named field, checking its size from the header before the pixels.
func decodePNG(field string, b []byte) (image.Image, error) {
	if len(b) == 0 {
		return nil, fieldErr(field, "%s is required: a PNG file", field)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return nil, fieldErr(field, "%s is not a PNG file: %v", field, err)
	}
	if cfg.Width > MaxEditSide || cfg.Height > MaxEditSide {
		return nil, fieldErr(field, "%s is %dx%d; each side may be at most %d pixels", field, cfg.Width, cfg.Height, MaxEditSide)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, fieldErr(field, "%s is not a valid PNG file: %v", field, err)
	}
	return img, nil
}
