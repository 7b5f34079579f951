package builtin

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image/png"
	"math"
	"strings"
	"testing"
	"time"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

func TestGenerateImageIsARealDeterministicPNG(t *testing.T) {
	e := New(time.Now())
	req := &inferencev1.GenerateImageRequest{Model: Image, Prompt: "a lemon on a desk", N: 2, Width: 64, Height: 48}
	a, err := e.GenerateImage(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.GetImages()) != 2 || bytes.Equal(a.GetImages()[0], a.GetImages()[1]) {
		t.Fatal("want two different images")
	}
	img, err := png.Decode(bytes.NewReader(a.GetImages()[0]))
	if err != nil || img.Bounds().Dx() != 64 || img.Bounds().Dy() != 48 {
		t.Fatalf("decode: %v %v", err, img.Bounds())
	}
	b, _ := e.GenerateImage(t.Context(), req)
	if !bytes.Equal(a.GetImages()[0], b.GetImages()[0]) {
		t.Fatal("same request, different image")
	}
	c, _ := e.GenerateImage(t.Context(), &inferencev1.GenerateImageRequest{Model: Image, Prompt: "a lime", Width: 64, Height: 48})
	if bytes.Equal(a.GetImages()[0], c.GetImages()[0]) {
		t.Fatal("different prompts, same image")
	}
	for _, bad := range []*inferencev1.GenerateImageRequest{
		{Model: Image, Prompt: "x", Width: 4096, Height: 4096},
		{Model: Image, Prompt: "x", N: 11},
		{Model: Image},
	} {
		if _, err := e.GenerateImage(t.Context(), bad); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// wav builds a 16-bit mono PCM WAV: silence, a tone, silence, a tone.
func wav(rate int) []byte {
	var pcm []int16
	add := func(sec float64, amp float64) {
		for i := 0; i < int(sec*float64(rate)); i++ {
			pcm = append(pcm, int16(amp*32767*math.Sin(2*math.Pi*440*float64(i)/float64(rate))))
		}
	}
	add(0.3, 0)
	add(0.5, 0.5)
	add(0.3, 0)
	add(0.4, 0.5)
	var b bytes.Buffer
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(36+2*len(pcm)))
	b.WriteString("WAVEfmt ")
	for _, v := range []any{uint32(16), uint16(1), uint16(1), uint32(rate), uint32(rate * 2), uint16(2), uint16(16)} {
		binary.Write(&b, binary.LittleEndian, v)
	}
	b.WriteString("data")
	binary.Write(&b, binary.LittleEndian, uint32(2*len(pcm)))
	binary.Write(&b, binary.LittleEndian, pcm)
	return b.Bytes()
}

func TestTranscribeReadsWAV(t *testing.T) {
	e := New(time.Now())
	r, err := e.Transcribe(t.Context(), &inferencev1.TranscribeRequest{Model: Transcribe, Audio: wav(16000), Filename: "a.wav"})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r.GetDurationSeconds()-1.5) > 0.01 || !strings.Contains(r.GetText(), "16000 Hz mono 16-bit PCM") ||
		!strings.Contains(r.GetText(), "2 stretch(es) of sound") || !strings.Contains(r.GetText(), "does not recognise speech") {
		t.Fatalf("got %q (%.3f s)", r.GetText(), r.GetDurationSeconds())
	}
	_, err = e.Transcribe(t.Context(), &inferencev1.TranscribeRequest{Model: Transcribe, Audio: []byte("ID3\x03mp3 data"), Filename: "song.mp3"})
	if !errors.Is(err, ErrUnsupportedAudio) || !strings.Contains(err.Error(), "song.mp3") || !strings.Contains(err.Error(), "RIFF/WAVE PCM only") {
		t.Fatalf("mp3: %v", err)
	}
}
