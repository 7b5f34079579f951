// Package mediatest decodes the media files Zest's tests receive — WAV and glTF binary — with
// strict parsers written apart from the engines that make them, so that a test checks the
// file a client gets, not the engine against itself. It is used by tests only.
package mediatest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// WAV is a decoded PCM WAV file.
type WAV struct {
	Channels, SampleRate, BitsPerSample int
	// Samples are the 16-bit samples, channels interleaved.
	Samples []int16
}

// Seconds is the clip's length.
func (w *WAV) Seconds() float64 {
	return float64(len(w.Samples)) / float64(w.Channels) / float64(w.SampleRate)
}

// ParseWAV decodes a RIFF/WAVE file of 16-bit PCM, refusing any size that disagrees with the
// bytes: the RIFF size must be the file's, every chunk must fit, fmt must precede data, and
// the byte rate and block align must follow from the format.
func ParseWAV(b []byte) (*WAV, error) {
	if len(b) < 12 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return nil, errors.New("not a RIFF/WAVE file")
	}
	if int(binary.LittleEndian.Uint32(b[4:])) != len(b)-8 {
		return nil, fmt.Errorf("RIFF size %d, but the file has %d bytes after it", binary.LittleEndian.Uint32(b[4:]), len(b)-8)
	}
	var w *WAV
	for p := 12; p < len(b); {
		if p+8 > len(b) {
			return nil, fmt.Errorf("a chunk header at %d runs past the end", p)
		}
		id, size := string(b[p:p+4]), int(binary.LittleEndian.Uint32(b[p+4:]))
		body := p + 8
		if body+size > len(b) {
			return nil, fmt.Errorf("chunk %q of %d bytes runs past the end", id, size)
		}
		switch id {
		case "fmt ":
			if size < 16 {
				return nil, fmt.Errorf("fmt chunk of %d bytes", size)
			}
			f := b[body:]
			if tag := binary.LittleEndian.Uint16(f); tag != 1 {
				return nil, fmt.Errorf("format tag %d, want 1 (PCM)", tag)
			}
			w = &WAV{Channels: int(binary.LittleEndian.Uint16(f[2:])), SampleRate: int(binary.LittleEndian.Uint32(f[4:])),
				BitsPerSample: int(binary.LittleEndian.Uint16(f[14:]))}
			if w.BitsPerSample != 16 || w.Channels < 1 || w.SampleRate < 1 {
				return nil, fmt.Errorf("%d channels, %d Hz, %d bits: want 16-bit PCM", w.Channels, w.SampleRate, w.BitsPerSample)
			}
			if align := int(binary.LittleEndian.Uint16(f[12:])); align != 2*w.Channels {
				return nil, fmt.Errorf("block align %d, want %d", align, 2*w.Channels)
			}
			if rate := int(binary.LittleEndian.Uint32(f[8:])); rate != 2*w.Channels*w.SampleRate {
				return nil, fmt.Errorf("byte rate %d, want %d", rate, 2*w.Channels*w.SampleRate)
			}
		case "data":
			if w == nil {
				return nil, errors.New("data chunk before fmt chunk")
			}
			if size%(2*w.Channels) != 0 {
				return nil, fmt.Errorf("data of %d bytes is not whole frames", size)
			}
			w.Samples = make([]int16, size/2)
			_ = binary.Read(bytes.NewReader(b[body:body+size]), binary.LittleEndian, w.Samples)
			return w, nil
		}
		p = body + size + size%2
	}
	return nil, errors.New("no data chunk")
}

// GLB is a decoded glTF 2.0 binary file.
type GLB struct {
	// JSON is the glTF document.
	JSON Document
	// BIN is the binary chunk.
	BIN []byte
}

// Document is the part of a glTF document the tests check.
type Document struct {
	Asset struct {
		Version string `json:"version"`
	} `json:"asset"`
	Scene  *int `json:"scene"`
	Scenes []struct {
		Nodes []int `json:"nodes"`
	} `json:"scenes"`
	Nodes []struct {
		Mesh *int `json:"mesh"`
	} `json:"nodes"`
	Meshes []struct {
		Primitives []struct {
			Attributes map[string]int `json:"attributes"`
			Indices    *int           `json:"indices"`
			Mode       *int           `json:"mode"`
		} `json:"primitives"`
	} `json:"meshes"`
	Buffers []struct {
		ByteLength int    `json:"byteLength"`
		URI        string `json:"uri"`
	} `json:"buffers"`
	BufferViews []struct {
		Buffer     int `json:"buffer"`
		ByteOffset int `json:"byteOffset"`
		ByteLength int `json:"byteLength"`
		ByteStride int `json:"byteStride"`
	} `json:"bufferViews"`
	Accessors []Accessor `json:"accessors"`
}

// Accessor is a glTF accessor.
type Accessor struct {
	BufferView    *int      `json:"bufferView"`
	ByteOffset    int       `json:"byteOffset"`
	ComponentType int       `json:"componentType"`
	Count         int       `json:"count"`
	Type          string    `json:"type"`
	Min           []float64 `json:"min"`
	Max           []float64 `json:"max"`
}

var components = map[string]int{"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT4": 16}
var componentBytes = map[int]int{5120: 1, 5121: 1, 5122: 2, 5123: 2, 5125: 4, 5126: 4}

// ParseGLB decodes a GLB file and checks it as the glTF 2.0 specification requires: the
// header (magic, version 2, total length), a JSON chunk then a BIN chunk, both 4-byte
// aligned; the JSON (unknown members allowed, trailing data refused); every index in range;
// every accessor inside its buffer view and every view inside the buffer; POSITION
// accessors with min and max that bound the data; indices below the vertex count.
func ParseGLB(b []byte) (*GLB, error) {
	if len(b) < 20 || string(b[0:4]) != "glTF" {
		return nil, errors.New("not a GLB file (magic glTF)")
	}
	if v := binary.LittleEndian.Uint32(b[4:]); v != 2 {
		return nil, fmt.Errorf("GLB version %d, want 2", v)
	}
	if n := int(binary.LittleEndian.Uint32(b[8:])); n != len(b) {
		return nil, fmt.Errorf("GLB length %d, file has %d bytes", n, len(b))
	}
	var chunks [][]byte
	var types []uint32
	for p := 12; p < len(b); {
		if p+8 > len(b) {
			return nil, errors.New("a chunk header runs past the end")
		}
		n, typ := int(binary.LittleEndian.Uint32(b[p:])), binary.LittleEndian.Uint32(b[p+4:])
		if n%4 != 0 || p+8+n > len(b) {
			return nil, fmt.Errorf("chunk of %d bytes at %d: not aligned or past the end", n, p)
		}
		chunks, types = append(chunks, b[p+8:p+8+n]), append(types, typ)
		p += 8 + n
	}
	if len(chunks) < 1 || types[0] != 0x4E4F534A {
		return nil, errors.New("the first chunk is not JSON")
	}
	out := &GLB{}
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimRight(chunks[0], " ")))
	if err := dec.Decode(&out.JSON); err != nil {
		return nil, fmt.Errorf("JSON chunk: %w", err)
	}
	if dec.More() {
		return nil, errors.New("JSON chunk: data after the document")
	}
	if len(chunks) > 1 {
		if types[1] != 0x004E4942 {
			return nil, errors.New("the second chunk is not BIN")
		}
		out.BIN = chunks[1]
	}
	err := out.check() // before out is read: Go leaves the order of a return's operands open
	return out, err
}

func (g *GLB) check() error {
	d := g.JSON
	if d.Asset.Version != "2.0" {
		return fmt.Errorf("asset.version %q, want 2.0", d.Asset.Version)
	}
	if d.Scene != nil && (*d.Scene < 0 || *d.Scene >= len(d.Scenes)) {
		return fmt.Errorf("scene %d out of range", *d.Scene)
	}
	for _, s := range d.Scenes {
		for _, n := range s.Nodes {
			if n < 0 || n >= len(d.Nodes) {
				return fmt.Errorf("scene node %d out of range", n)
			}
		}
	}
	for _, n := range d.Nodes {
		if n.Mesh != nil && (*n.Mesh < 0 || *n.Mesh >= len(d.Meshes)) {
			return fmt.Errorf("node mesh %d out of range", *n.Mesh)
		}
	}
	if len(d.Buffers) > 0 && d.Buffers[0].URI == "" && (d.Buffers[0].ByteLength > len(g.BIN) || len(g.BIN)-d.Buffers[0].ByteLength > 3) {
		return fmt.Errorf("buffer 0 byteLength %d, BIN chunk %d bytes", d.Buffers[0].ByteLength, len(g.BIN))
	}
	for i, v := range d.BufferViews {
		if v.Buffer < 0 || v.Buffer >= len(d.Buffers) || v.ByteOffset+v.ByteLength > d.Buffers[v.Buffer].ByteLength {
			return fmt.Errorf("bufferView %d outside its buffer", i)
		}
	}
	for i, a := range d.Accessors {
		nc, ok := components[a.Type]
		cb, ok2 := componentBytes[a.ComponentType]
		if !ok || !ok2 || a.Count < 1 || a.BufferView == nil || *a.BufferView >= len(d.BufferViews) {
			return fmt.Errorf("accessor %d: bad type, component type, count or bufferView", i)
		}
		if a.ByteOffset+a.Count*nc*cb > d.BufferViews[*a.BufferView].ByteLength {
			return fmt.Errorf("accessor %d runs past its bufferView", i)
		}
	}
	for _, m := range d.Meshes {
		if len(m.Primitives) == 0 {
			return errors.New("a mesh has no primitives")
		}
		for _, p := range m.Primitives {
			pi, ok := p.Attributes["POSITION"]
			if !ok || pi < 0 || pi >= len(d.Accessors) {
				return errors.New("a primitive has no POSITION accessor")
			}
			pos := d.Accessors[pi]
			if pos.Type != "VEC3" || pos.ComponentType != 5126 || len(pos.Min) != 3 || len(pos.Max) != 3 {
				return errors.New("POSITION must be float VEC3 with min and max")
			}
			vs, err := g.Floats(pi)
			if err != nil {
				return err
			}
			for k, v := range vs {
				if float64(v) < pos.Min[k%3]-1e-6 || float64(v) > pos.Max[k%3]+1e-6 {
					return fmt.Errorf("POSITION value %g outside min/max", v)
				}
			}
			for name, ai := range p.Attributes {
				if ai < 0 || ai >= len(d.Accessors) || d.Accessors[ai].Count != pos.Count {
					return fmt.Errorf("attribute %s: accessor out of range or count differs from POSITION", name)
				}
			}
			if p.Indices != nil {
				idx, err := g.Indices(*p.Indices)
				if err != nil {
					return err
				}
				if p.Mode == nil || *p.Mode == 4 {
					if len(idx)%3 != 0 {
						return errors.New("triangle indices not a multiple of 3")
					}
				}
				for _, x := range idx {
					if int(x) >= pos.Count {
						return fmt.Errorf("index %d past %d vertices", x, pos.Count)
					}
				}
			}
		}
	}
	return nil
}

func (g *GLB) data(i int) []byte {
	a := g.JSON.Accessors[i]
	v := g.JSON.BufferViews[*a.BufferView]
	return g.BIN[v.ByteOffset+a.ByteOffset:]
}

// Floats returns the float accessor i's values.
func (g *GLB) Floats(i int) ([]float32, error) {
	a := g.JSON.Accessors[i]
	if a.ComponentType != 5126 {
		return nil, fmt.Errorf("accessor %d is not float", i)
	}
	out := make([]float32, a.Count*components[a.Type])
	return out, binary.Read(bytes.NewReader(g.data(i)), binary.LittleEndian, out)
}

// Indices returns the unsigned integer accessor i's values.
func (g *GLB) Indices(i int) ([]uint32, error) {
	a := g.JSON.Accessors[i]
	out := make([]uint32, a.Count)
	r := bytes.NewReader(g.data(i))
	switch a.ComponentType {
	case 5121:
		v := make([]uint8, a.Count)
		_ = binary.Read(r, binary.LittleEndian, v)
		for k := range v {
			out[k] = uint32(v[k])
		}
	case 5123:
		v := make([]uint16, a.Count)
		_ = binary.Read(r, binary.LittleEndian, v)
		for k := range v {
			out[k] = uint32(v[k])
		}
	case 5125:
		_ = binary.Read(r, binary.LittleEndian, out)
	default:
		return nil, fmt.Errorf("accessor %d: indices must be unsigned integers", i)
	}
	return out, nil
}
