package builtin

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	_ "image/gif"  // 3d/generations takes GIF, as Lemonade's does
	_ "image/jpeg" // and JPEG
	"math"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

// Grid sizes of builtin-3d: the height field has resolution/16 cells a side (32 at 512).
const (
	DefaultMeshResolution = 512
	// MeshHeight is the height of a white pixel; black is 0. The grid spans 1 unit on its longer side.
	MeshHeight = 0.25
)

// Generate3D reconstructs a mesh with builtin-3d: the image's luminance, sampled on a grid,
// becomes the height of each vertex (x and z span the image, y is up), each vertex carries
// the sampled colour, and two triangles close each cell. The answer is a glTF 2.0 binary.
func (e *Engine) Generate3D(ctx context.Context, req *inferencev1.Generate3DRequest) (*inferencev1.Generate3DResponse, error) {
	if req.GetModel() != Mesh {
		return nil, fmt.Errorf("%w: %q makes no meshes (use %s)", ErrWrongModel, req.GetModel(), Mesh)
	}
	res := int(req.GetResolution())
	if res == 0 {
		res = DefaultMeshResolution
	}
	if res != 512 && res != 1024 && res != 1536 {
		return nil, fieldErr("resolution", "resolution %d: use 512, 1024 or 1536", res)
	}
	img, err := decodeImage("image", req.GetImage())
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	glb, err := HeightFieldGLB(img, res/16)
	if err != nil {
		return nil, err
	}
	return &inferencev1.Generate3DResponse{Glb: glb, ContentType: "model/gltf-binary"}, nil
}

// decodeImage decodes a PNG, JPEG or GIF named field, its size checked from the header first.
func decodeImage(field string, b []byte) (image.Image, error) {
	if len(b) == 0 {
		return nil, fieldErr(field, "%s is required: a PNG, JPEG or GIF picture", field)
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return nil, fieldErr(field, "%s is not a PNG, JPEG or GIF picture: %v", field, err)
	}
	if cfg.Width > MaxEditSide || cfg.Height > MaxEditSide {
		return nil, fieldErr(field, "%s is %dx%d; each side may be at most %d pixels", field, cfg.Width, cfg.Height, MaxEditSide)
	}
	img, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, fieldErr(field, "%s could not be decoded: %v", field, err)
	}
	return img, nil
}

// HeightFieldGLB samples img on a grid of cells×cells (fewer where the image is smaller) and
// writes the height field as a GLB: POSITION (with min and max, as glTF requires), COLOR_0
// and uint32 indices in one buffer.
func HeightFieldGLB(img image.Image, cells int) ([]byte, error) {
	b := img.Bounds()
	cols, rows := min(cells, b.Dx()-1), min(cells, b.Dy()-1)
	if cols < 1 || rows < 1 {
		return nil, fieldErr("image", "image is %dx%d: give at least 2x2 pixels", b.Dx(), b.Dy())
	}
	long := float64(max(b.Dx(), b.Dy()))
	sx, sz := float64(b.Dx())/long, float64(b.Dy())/long
	nv := (cols + 1) * (rows + 1)
	pos := make([]float32, 0, 3*nv)
	col := make([]float32, 0, 3*nv)
	lo := [3]float32{math.MaxFloat32, math.MaxFloat32, math.MaxFloat32}
	hi := [3]float32{-math.MaxFloat32, -math.MaxFloat32, -math.MaxFloat32}
	for j := 0; j <= rows; j++ {
		for i := 0; i <= cols; i++ {
			px := b.Min.X + i*(b.Dx()-1)/cols
			py := b.Min.Y + j*(b.Dy()-1)/rows
			r, g, bl, _ := img.At(px, py).RGBA()
			fr, fg, fb := float64(r)/0xffff, float64(g)/0xffff, float64(bl)/0xffff
			lum := 0.2126*fr + 0.7152*fg + 0.0722*fb
			v := [3]float32{
				float32((float64(i)/float64(cols) - 0.5) * sx),
				float32(lum * MeshHeight),
				float32((float64(j)/float64(rows) - 0.5) * sz),
			}
			for k := range 3 {
				lo[k], hi[k] = min(lo[k], v[k]), max(hi[k], v[k])
			}
			pos = append(pos, v[:]...)
			col = append(col, float32(fr), float32(fg), float32(fb))
		}
	}
	idx := make([]uint32, 0, 6*cols*rows)
	for j := range rows {
		for i := range cols {
			a := uint32(j*(cols+1) + i)
			c := a + uint32(cols+1)
			// Counter-clockwise seen from above (+y), glTF's front face.
			idx = append(idx, a, c, a+1, a+1, c, c+1)
		}
	}
	var bin bytes.Buffer
	_ = binary.Write(&bin, binary.LittleEndian, pos)
	_ = binary.Write(&bin, binary.LittleEndian, col)
	_ = binary.Write(&bin, binary.LittleEndian, idx)
	posLen, colLen, idxLen := 4*len(pos), 4*len(col), 4*len(idx)
	doc := map[string]any{
		"asset":  map[string]any{"version": "2.0", "generator": "zest builtin-3d (height field test engine)"},
		"scene":  0,
		"scenes": []any{map[string]any{"nodes": []int{0}}},
		"nodes":  []any{map[string]any{"mesh": 0, "name": "heightfield"}},
		"meshes": []any{map[string]any{"primitives": []any{map[string]any{
			"attributes": map[string]int{"POSITION": 0, "COLOR_0": 1}, "indices": 2, "mode": 4,
		}}}},
		"buffers": []any{map[string]any{"byteLength": bin.Len()}},
		"bufferViews": []any{
			map[string]any{"buffer": 0, "byteOffset": 0, "byteLength": posLen, "target": 34962},
			map[string]any{"buffer": 0, "byteOffset": posLen, "byteLength": colLen, "target": 34962},
			map[string]any{"buffer": 0, "byteOffset": posLen + colLen, "byteLength": idxLen, "target": 34963},
		},
		"accessors": []any{
			map[string]any{"bufferView": 0, "componentType": 5126, "count": nv, "type": "VEC3", "min": lo[:], "max": hi[:]},
			map[string]any{"bufferView": 1, "componentType": 5126, "count": nv, "type": "VEC3"},
			map[string]any{"bufferView": 2, "componentType": 5125, "count": len(idx), "type": "SCALAR"},
		},
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	for len(js)%4 != 0 {
		js = append(js, ' ')
	}
	for bin.Len()%4 != 0 {
		bin.WriteByte(0)
	}
	var out bytes.Buffer
	total := 12 + 8 + len(js) + 8 + bin.Len()
	out.Grow(total)
	out.WriteString("glTF")
	_ = binary.Write(&out, binary.LittleEndian, [2]uint32{2, uint32(total)})
	_ = binary.Write(&out, binary.LittleEndian, [2]uint32{uint32(len(js)), 0x4E4F534A}) // JSON
	out.Write(js)
	_ = binary.Write(&out, binary.LittleEndian, [2]uint32{uint32(bin.Len()), 0x004E4942}) // BIN
	out.Write(bin.Bytes())
	return out.Bytes(), nil
}
