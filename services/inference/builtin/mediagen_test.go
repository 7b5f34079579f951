package builtin

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"math"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/mediatest"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

// dominantHz estimates a tone's pitch by counting zero crossings.
func dominantHz(s []int16, rate int) float64 {
	n := 0
	for i := 1; i < len(s); i++ {
		if (s[i-1] < 0) != (s[i] < 0) {
			n++
		}
	}
	return float64(n) / 2 / (float64(len(s)) / float64(rate))
}

func TestSpeechTonesFollowTheText(t *testing.T) {
	e := New(time.Now())
	resp, err := e.Speech(context.Background(), &inferencev1.SpeechRequest{Model: TTS, Input: "Hi there"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetContentType() != "audio/wav" {
		t.Fatalf("content type %q", resp.GetContentType())
	}
	w, err := mediatest.ParseWAV(resp.GetAudio())
	if err != nil {
		t.Fatal(err)
	}
	per := int(ToneSeconds * SampleRate)
	if w.SampleRate != SampleRate || w.Channels != 1 || len(w.Samples) != 8*per {
		t.Fatalf("wav %d Hz %d ch %d samples, want %d", w.SampleRate, w.Channels, len(w.Samples), 8*per)
	}
	for i, r := range "Hi there" {
		tone := w.Samples[i*per : (i+1)*per]
		got := dominantHz(tone, w.SampleRate)
		if r == ' ' {
			for _, s := range tone {
				if s != 0 {
					t.Fatalf("space %d is not silent", i)
				}
			}
			continue
		}
		if want := ToneHz(r); math.Abs(got-want) > 25 {
			t.Errorf("char %q: %g Hz, want about %g", r, got, want)
		}
	}
	again, _ := e.Speech(context.Background(), &inferencev1.SpeechRequest{Model: TTS, Input: "Hi there"})
	if !bytes.Equal(again.GetAudio(), resp.GetAudio()) {
		t.Error("equal texts gave different WAVs")
	}
	fast, _ := e.Speech(context.Background(), &inferencev1.SpeechRequest{Model: TTS, Input: "Hi there", Speed: 2})
	if wf, _ := mediatest.ParseWAV(fast.GetAudio()); len(wf.Samples) != len(w.Samples)/2 {
		t.Errorf("speed 2: %d samples, want %d", len(wf.Samples), len(w.Samples)/2)
	}
	var pieces [][]byte
	_ = e.StreamSpeech(context.Background(), &inferencev1.SpeechRequest{Model: TTS, Input: "Hi there"}, func(c *inferencev1.StreamSpeechResponse) error {
		pieces = append(pieces, c.GetAudio())
		return nil
	})
	if len(pieces) != 1+8 || len(pieces[0]) != 44 || !bytes.Equal(bytes.Join(pieces, nil), resp.GetAudio()) {
		t.Errorf("stream: %d pieces, header %d bytes", len(pieces), len(pieces[0]))
	}
	pcm, _ := e.Speech(context.Background(), &inferencev1.SpeechRequest{Model: TTS, Input: "Hi there", ResponseFormat: "pcm"})
	if pcm.GetContentType() != "audio/pcm" || len(pcm.GetAudio()) != 2*len(w.Samples) {
		t.Errorf("pcm: %q %d bytes", pcm.GetContentType(), len(pcm.GetAudio()))
	}
}

func wantField(t *testing.T, err error, field string) {
	t.Helper()
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != field || !errors.Is(err, ErrBadRequest) {
		t.Fatalf("err %v, want a FieldError naming %s", err, field)
	}
}

func TestMediaRefusesBadInputNamingTheField(t *testing.T) {
	e := New(time.Now())
	ctx := context.Background()
	_, err := e.Speech(ctx, &inferencev1.SpeechRequest{Model: TTS})
	wantField(t, err, "input")
	_, err = e.Speech(ctx, &inferencev1.SpeechRequest{Model: TTS, Input: string(make([]byte, MaxSpeechChars+1))})
	wantField(t, err, "input")
	_, err = e.Speech(ctx, &inferencev1.SpeechRequest{Model: TTS, Input: "x", ResponseFormat: "mp3"})
	wantField(t, err, "response_format")
	_, err = e.Speech(ctx, &inferencev1.SpeechRequest{Model: TTS, Input: "x", Speed: 5})
	wantField(t, err, "speed")
	_, err = e.GenerateAudio(ctx, &inferencev1.GenerateAudioRequest{Model: Audio})
	wantField(t, err, "prompt")
	_, err = e.GenerateAudio(ctx, &inferencev1.GenerateAudioRequest{Model: Audio, Prompt: "x", DurationSeconds: MaxAudioSeconds + 1})
	wantField(t, err, "duration")
	_, err = e.EditImage(ctx, &inferencev1.EditImageRequest{Model: Image, Prompt: "x", Image: []byte("not a png")})
	wantField(t, err, "image")
	_, err = e.EditImage(ctx, &inferencev1.EditImageRequest{Model: Image, Prompt: "x", Image: pngOf(t, 4, 4), Mask: pngOf(t, 5, 4)})
	wantField(t, err, "mask")
	_, err = e.EditImage(ctx, &inferencev1.EditImageRequest{Model: Image, Image: pngOf(t, 4, 4)})
	wantField(t, err, "prompt")
	_, err = e.Generate3D(ctx, &inferencev1.Generate3DRequest{Model: Mesh, Image: []byte{0x89, 'P', 'N', 'G'}})
	wantField(t, err, "image")
	_, err = e.Generate3D(ctx, &inferencev1.Generate3DRequest{Model: Mesh, Image: pngOf(t, 4, 4), Resolution: 100})
	wantField(t, err, "resolution")
	// A header claiming a huge image is refused before any pixel is decoded.
	huge := pngOf(t, 4, 4)
	huge[16], huge[17] = 0, 1 // width 65536+4
	_, err = e.EditImage(ctx, &inferencev1.EditImageRequest{Model: Image, Prompt: "x", Image: huge})
	wantField(t, err, "image")
	big := image.NewGray(image.Rect(0, 0, 1024, 1024))
	var bb bytes.Buffer
	_ = png.Encode(&bb, big)
	_, err = e.EditImage(ctx, &inferencev1.EditImageRequest{Model: Image, Prompt: "x", Image: bb.Bytes(), N: 5})
	wantField(t, err, "n")
	if _, err = e.Speech(ctx, &inferencev1.SpeechRequest{Model: LLM, Input: "x"}); !errors.Is(err, ErrWrongModel) {
		t.Errorf("wrong model: %v", err)
	}
}

func TestGenerateAudioIsAWAVOfTheDuration(t *testing.T) {
	e := New(time.Now())
	resp, err := e.GenerateAudio(context.Background(), &inferencev1.GenerateAudioRequest{Model: Audio, Prompt: "rain on a tin roof", DurationSeconds: 2.25})
	if err != nil {
		t.Fatal(err)
	}
	w, err := mediatest.ParseWAV(resp.GetAudio())
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(w.Seconds()-2.25) > 1e-9 {
		t.Fatalf("%g s, want 2.25", w.Seconds())
	}
	loud := 0
	for _, s := range w.Samples {
		if s > 1000 || s < -1000 {
			loud++
		}
	}
	if loud < len(w.Samples)/4 {
		t.Errorf("only %d of %d samples are audible", loud, len(w.Samples))
	}
	other, _ := e.GenerateAudio(context.Background(), &inferencev1.GenerateAudioRequest{Model: Audio, Prompt: "birdsong", DurationSeconds: 2.25})
	if bytes.Equal(other.GetAudio(), resp.GetAudio()) {
		t.Error("different prompts gave the same clip")
	}
}

func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetNRGBA(x, y, color.NRGBA{uint8(x * 40), uint8(y * 40), 100, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestEditImageHonoursTheMask(t *testing.T) {
	src := pngOf(t, 6, 4)
	// Left half transparent (edit), right half opaque (keep).
	mask := image.NewNRGBA(image.Rect(0, 0, 6, 4))
	for y := range 4 {
		for x := 3; x < 6; x++ {
			mask.SetNRGBA(x, y, color.NRGBA{0, 0, 0, 255})
		}
	}
	var mb bytes.Buffer
	_ = png.Encode(&mb, mask)
	e := New(time.Now())
	resp, err := e.EditImage(context.Background(), &inferencev1.EditImageRequest{Model: Image, Prompt: "night", Image: src, Mask: mb.Bytes(), N: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetImages()) != 2 {
		t.Fatalf("%d images", len(resp.GetImages()))
	}
	in, _ := png.Decode(bytes.NewReader(src))
	for i, b := range resp.GetImages() {
		out, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if out.Bounds() != in.Bounds() {
			t.Fatalf("size %v, want %v", out.Bounds(), in.Bounds())
		}
		tint := EditTint("night", int64(i))
		for y := range 4 {
			for x := range 6 {
				c := color.NRGBAModel.Convert(in.At(x, y)).(color.NRGBA)
				want := c
				if x < 3 {
					want = EditPixel(c, tint)
				}
				if got := color.NRGBAModel.Convert(out.At(x, y)).(color.NRGBA); got != want {
					t.Fatalf("image %d pixel %d,%d: %v, want %v", i, x, y, got, want)
				}
			}
		}
	}
	if bytes.Equal(resp.GetImages()[0], resp.GetImages()[1]) {
		t.Error("n=2 gave equal images")
	}
}

func TestGenerate3DIsAValidGLBHeightField(t *testing.T) {
	// A left-dark, right-bright image: heights rise with x.
	img := image.NewGray(image.Rect(0, 0, 64, 48))
	for y := range 48 {
		for x := range 64 {
			img.SetGray(x, y, color.Gray{uint8(x * 4)})
		}
	}
	var buf bytes.Buffer
	_ = png.Encode(&buf, img)
	e := New(time.Now())
	resp, err := e.Generate3D(context.Background(), &inferencev1.Generate3DRequest{Model: Mesh, Image: buf.Bytes()})
	if err != nil {
		t.Fatal(err)
	}
	g, err := mediatest.ParseGLB(resp.GetGlb())
	if err != nil {
		t.Fatal(err)
	}
	pos := g.JSON.Accessors[g.JSON.Meshes[0].Primitives[0].Attributes["POSITION"]]
	if pos.Count != 33*33 {
		t.Errorf("%d vertices, want 33x33", pos.Count)
	}
	vs, _ := g.Floats(0)
	first, last := vs[1], vs[3*32+1] // y of the row's first and last vertex
	if !(last > first) || pos.Max[1] > MeshHeight || pos.Min[1] < 0 {
		t.Errorf("heights %g..%g, min/max %v %v", first, last, pos.Min, pos.Max)
	}
	if math.Abs(pos.Max[0]-pos.Min[0]-1) > 1e-6 || math.Abs(pos.Max[2]-pos.Min[2]-0.75) > 1e-6 {
		t.Errorf("extent x %g z %g, want 1 and 0.75", pos.Max[0]-pos.Min[0], pos.Max[2]-pos.Min[2])
	}
	if resp.GetContentType() != "model/gltf-binary" {
		t.Errorf("content type %q", resp.GetContentType())
	}
}

func TestMediaModelsCarryLemonadeLabels(t *testing.T) {
	want := map[string]string{TTS: "tts", Audio: "audio-generation", Mesh: "3d"}
	for _, m := range New(time.Now()).Models() {
		if l, ok := want[m.GetId()]; ok {
			if !contains(m.GetLabels(), l) {
				t.Errorf("%s labels %v lack %s", m.GetId(), m.GetLabels(), l)
			}
			delete(want, m.GetId())
		}
	}
	if len(want) > 0 {
		t.Errorf("missing models %v", want)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
