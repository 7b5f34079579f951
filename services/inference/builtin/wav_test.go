package builtin

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

func le(vs ...any) []byte {
	var b bytes.Buffer
	for _, v := range vs {
		_ = binary.Write(&b, binary.LittleEndian, v)
	}
	return b.Bytes()
}

// chunk is a RIFF chunk with its true size, padded to an even length.
func chunk(id string, body []byte) []byte { return sizedChunk(id, uint32(len(body)), body) }

// sizedChunk is a chunk whose header declares size, whatever body holds.
func sizedChunk(id string, size uint32, body []byte) []byte {
	out := append([]byte(id), le(size)...)
	out = append(out, body...)
	if len(body)%2 == 1 {
		out = append(out, 0)
	}
	return out
}

// riff wraps chunks in a RIFF/WAVE header with the true size.
func riff(chunks ...[]byte) []byte {
	body := bytes.Join(chunks, nil)
	return sizedRIFF(uint32(4+len(body)), body)
}

func sizedRIFF(size uint32, body []byte) []byte {
	return append(append(append([]byte("RIFF"), le(size)...), "WAVE"...), body...)
}

// fmtBody is a 16-byte fmt chunk; the byte rate is rate × blk, as it should be.
func fmtBody(tag, channels uint16, rate uint32, blk, bits uint16) []byte {
	return le(tag, channels, rate, rate*uint32(blk), blk, bits)
}

// extensible is a 40-byte WAVE_FORMAT_EXTENSIBLE fmt chunk with sub-format tag sub.
func extensible(channels uint16, rate uint32, bits, valid, sub uint16) []byte {
	blk := channels * bits / 8
	b := append(fmtBody(0xFFFE, channels, rate, blk, bits), le(uint16(22), valid, uint32(3), sub)...)
	return append(b, subtypeTail...)
}

// craftedWAV is the 64-byte file that crashed the inference node: its fmt chunk says 2
// channels of 32 bits in 1-byte frames, so the decoder cut 4-byte samples at 1-byte steps
// past the end of the 20-byte data chunk.
func craftedWAV() []byte {
	return riff(chunk("fmt ", le(uint16(1), uint16(2), uint32(8000), uint32(64000), uint16(1), uint16(32))), chunk("data", make([]byte, 20)))
}

func TestCraftedWAVIsRefusedNotACrash(t *testing.T) {
	b := craftedWAV()
	if len(b) != 64 {
		t.Fatalf("crafted file has %d bytes, want 64", len(b))
	}
	_, err := parseWAV(b)
	if !errors.Is(err, ErrMalformedAudio) || err.Error() != "WAV block_align 1 does not match 2 channels × 32 bits" {
		t.Fatalf("parseWAV: %v", err)
	}
	e := New(time.Now())
	_, err = e.Transcribe(t.Context(), &inferencev1.TranscribeRequest{Model: Transcribe, Audio: b})
	if !errors.Is(err, ErrMalformedAudio) || err.Error() != "audio: WAV block_align 1 does not match 2 channels × 32 bits" {
		t.Fatalf("Transcribe: %v", err)
	}
	_, err = e.Transcribe(t.Context(), &inferencev1.TranscribeRequest{Model: Transcribe, Audio: b, Filename: "crafted.wav"})
	if err == nil || err.Error() != "audio: crafted.wav: WAV block_align 1 does not match 2 channels × 32 bits" {
		t.Fatalf("Transcribe with a file name: %v", err)
	}
}

func TestParseWAVRefusesEveryLie(t *testing.T) {
	pcm16 := chunk("fmt ", fmtBody(1, 1, 8000, 2, 16))
	data := chunk("data", make([]byte, 40))
	for _, c := range []struct {
		name string
		in   []byte
		kind error
		want string
	}{
		{"empty", nil, ErrUnsupportedAudio, "not a WAV file"},
		{"mp3", []byte("ID3\x03\x00\x00\x00\x00\x00\x00\x00\x00"), ErrUnsupportedAudio, `not a WAV file (starts with "ID3\x03")`},
		{"header only", riff(), ErrMalformedAudio, "WAV has no fmt chunk"},
		{"no data chunk", riff(pcm16), ErrMalformedAudio, "WAV has no data chunk"},
		{"RIFF size past the end", sizedRIFF(1000, bytes.Join([][]byte{pcm16, data}, nil)), ErrMalformedAudio, "WAV RIFF header declares 1008 bytes but the file has"},
		{"RIFF size too small", sizedRIFF(2, bytes.Join([][]byte{pcm16, data}, nil)), ErrMalformedAudio, "WAV RIFF size 2 cannot hold the WAVE form"},
		{"RIFF size inside a chunk", sizedRIFF(4+8+10, bytes.Join([][]byte{pcm16, data}, nil)), ErrMalformedAudio, `WAV "fmt " chunk declares 16 bytes but only 10 follow`},
		{"zero channels", riff(chunk("fmt ", fmtBody(1, 0, 8000, 2, 16)), data), ErrMalformedAudio, "WAV fmt chunk declares 0 channels"},
		{"zero rate", riff(chunk("fmt ", fmtBody(1, 1, 0, 2, 16)), data), ErrMalformedAudio, "sample rate of 0 Hz"},
		{"data size past the end", riff(pcm16, sizedChunk("data", 1000, make([]byte, 20))), ErrMalformedAudio, `WAV "data" chunk declares 1000 bytes but only 20 follow`},
		{"huge data size", riff(pcm16, sizedChunk("data", 0xFFFFFFF0, make([]byte, 20))), ErrMalformedAudio, `WAV "data" chunk declares 4294967280 bytes`},
		{"huge size of another chunk", riff(pcm16, sizedChunk("LIST", 0xFFFFFFFF, make([]byte, 20))), ErrMalformedAudio, `WAV "LIST" chunk declares 4294967295 bytes`},
		{"fmt size past the end", riff(sizedChunk("fmt ", 64, fmtBody(1, 1, 8000, 2, 16))), ErrMalformedAudio, `WAV "fmt " chunk declares 64 bytes but only 16 follow`},
		{"fmt chunk too short", riff(chunk("fmt ", fmtBody(1, 1, 8000, 2, 16)[:14]), data), ErrMalformedAudio, "WAV fmt chunk has 14 bytes; it needs at least 16"},
		{"data before fmt", riff(data, pcm16), ErrMalformedAudio, "WAV data chunk comes before the fmt chunk"},
		{"two fmt chunks", riff(pcm16, pcm16, data), ErrMalformedAudio, "WAV has two fmt chunks"},
		{"two data chunks", riff(pcm16, data, data), ErrMalformedAudio, "WAV has two data chunks"},
		{"block_align too small", riff(chunk("fmt ", fmtBody(1, 2, 8000, 1, 32)), data), ErrMalformedAudio, "WAV block_align 1 does not match 2 channels × 32 bits"},
		{"block_align too large", riff(chunk("fmt ", fmtBody(1, 1, 8000, 4, 16)), data), ErrMalformedAudio, "WAV block_align 4 does not match 1 channels × 16 bits"},
		{"block_align zero", riff(chunk("fmt ", fmtBody(1, 1, 8000, 0, 16)), data), ErrMalformedAudio, "WAV block_align 0 does not match"},
		{"byte rate", riff(chunk("fmt ", le(uint16(1), uint16(1), uint32(8000), uint32(8000), uint16(2), uint16(16))), data), ErrMalformedAudio, "WAV byte rate 8000 does not match 8000 Hz × 2-byte frames"},
		{"partial frame", riff(pcm16, chunk("data", make([]byte, 21))), ErrMalformedAudio, "WAV data chunk of 21 bytes is not a whole number of 2-byte frames"},
		{"stray bytes", riff(pcm16, data, []byte("xyz")), ErrMalformedAudio, "WAV has 3 stray byte(s) after its last chunk"},
		{"extensible too short", riff(chunk("fmt ", fmtBody(0xFFFE, 1, 8000, 2, 16)), data), ErrMalformedAudio, "WAV extensible fmt chunk has 16 bytes; it needs 40"},
		{"extensible extension too short", riff(chunk("fmt ", append(extensible(1, 8000, 16, 16, 1)[:16], append(le(uint16(2)), extensible(1, 8000, 16, 16, 1)[18:]...)...)), data), ErrMalformedAudio, "declares a 2-byte extension; it needs 22"},
		{"extensible valid bits", riff(chunk("fmt ", extensible(1, 8000, 16, 24, 1)), data), ErrMalformedAudio, "declares 24 valid bits in 16-bit samples"},
		{"extensible foreign sub-format", riff(chunk("fmt ", append(extensible(1, 8000, 16, 16, 1)[:26], make([]byte, 14)...)), data), ErrUnsupportedAudio, "sub-format"},
		{"extensible block_align", riff(chunk("fmt ", func() []byte { b := extensible(2, 8000, 32, 32, 3); b[12] = 1; return b }()), data), ErrMalformedAudio, "WAV block_align 1 does not match 2 channels × 32 bits"},
		{"A-law", riff(chunk("fmt ", fmtBody(6, 1, 8000, 1, 8)), data), ErrUnsupportedAudio, "format 6 with 8 bits per sample is not PCM"},
		{"12-bit PCM", riff(chunk("fmt ", fmtBody(1, 1, 8000, 2, 12)), data), ErrUnsupportedAudio, "format 1 with 12 bits"},
		{"64-bit float", riff(chunk("fmt ", fmtBody(3, 1, 8000, 8, 64)), data), ErrUnsupportedAudio, "format 3 with 64 bits"},
		{"NaN sample", riff(chunk("fmt ", fmtBody(3, 1, 8000, 4, 32)), chunk("data", le(float32(0.5), float32(math.NaN())))), ErrMalformedAudio, "WAV float sample of frame 1 is not a finite number"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := parseWAV(c.in)
			if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %+v, %v; want %v containing %q", w, err, c.kind, c.want)
			}
		})
	}
}

func TestParseWAVReadsEveryFormatItClaims(t *testing.T) {
	sine := func(n int, amp float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = amp * math.Sin(2*math.Pi*440*float64(i)/8000)
		}
		return out
	}(8000, 0.5) // one second at 8 kHz, -9 dBFS RMS
	pcm := func(bits int, channels int) []byte {
		var b []byte
		for _, v := range sine {
			for range channels {
				switch bits {
				case 8:
					b = append(b, byte(int(v*127)+128))
				case 16:
					b = append(b, le(int16(v*32767))...)
				case 24:
					x := int32(v * 8388607)
					b = append(b, byte(x), byte(x>>8), byte(x>>16))
				case 32:
					b = append(b, le(int32(v*2147483647))...)
				}
			}
		}
		return b
	}
	var float []byte
	for _, v := range sine {
		float = append(float, le(float32(v))...)
	}
	for _, c := range []struct {
		name     string
		in       []byte
		channels int
		format   string
	}{
		{"8-bit", riff(chunk("fmt ", fmtBody(1, 1, 8000, 1, 8)), chunk("data", pcm(8, 1))), 1, "8-bit PCM"},
		{"16-bit stereo", riff(chunk("fmt ", fmtBody(1, 2, 8000, 4, 16)), chunk("data", pcm(16, 2))), 2, "16-bit PCM"},
		{"24-bit", riff(chunk("fmt ", fmtBody(1, 1, 8000, 3, 24)), chunk("data", pcm(24, 1))), 1, "24-bit PCM"},
		{"32-bit", riff(chunk("fmt ", fmtBody(1, 1, 8000, 4, 32)), chunk("data", pcm(32, 1))), 1, "32-bit PCM"},
		{"float", riff(chunk("fmt ", fmtBody(3, 1, 8000, 4, 32)), chunk("data", float)), 1, "32-bit float"},
		{"extensible PCM, 6 channels", riff(chunk("fmt ", extensible(6, 8000, 16, 16, 1)), chunk("data", pcm(16, 6))), 6, "16-bit PCM"},
		{"extensible float", riff(chunk("fmt ", extensible(1, 8000, 32, 32, 3)), chunk("data", float)), 1, "32-bit float"},
		{"18-byte fmt, odd LIST chunk", riff(chunk("fmt ", append(fmtBody(1, 1, 8000, 2, 16), 0, 0)), chunk("LIST", []byte("abc")), chunk("data", pcm(16, 1))), 1, "16-bit PCM"},
		{"streaming sizes", sizedRIFF(unknownSize, append(chunk("fmt ", fmtBody(1, 1, 8000, 2, 16)), sizedChunk("data", unknownSize, pcm(16, 1))...)), 1, "16-bit PCM"},
		{"a tag after the RIFF chunk", append(riff(chunk("fmt ", fmtBody(1, 1, 8000, 2, 16)), chunk("data", pcm(16, 1))), []byte("TAG appended by a tagger")...), 1, "16-bit PCM"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := parseWAV(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if w.frames != 8000 || w.rate != 8000 || w.channels != c.channels || w.format != c.format || w.segments != 1 {
				t.Fatalf("got %+v", w)
			}
			if db := 20 * math.Log10(w.rms); math.Abs(db-(-9.03)) > 0.3 {
				t.Fatalf("level %.2f dBFS, want -9.03", db)
			}
		})
	}
}

// FuzzParseWAV: whatever the bytes, parseWAV returns (never panics, never reads outside its
// input); a refusal is one of the two audio errors with a readable message, and an accepted
// file describes itself consistently.
func FuzzParseWAV(f *testing.F) {
	pcm16 := chunk("fmt ", fmtBody(1, 1, 8000, 2, 16))
	f.Add(craftedWAV())
	f.Add(wav(8000)[:2000])
	f.Add(riff(pcm16, chunk("data", make([]byte, 40))))
	f.Add(riff(chunk("fmt ", fmtBody(1, 0, 8000, 2, 16)), chunk("data", make([]byte, 40))))
	f.Add(riff(pcm16, sizedChunk("data", 0xFFFFFFF0, make([]byte, 20))))
	f.Add(riff(chunk("data", make([]byte, 4)), pcm16))
	f.Add(riff(chunk("fmt ", fmtBody(1, 1, 8000, 2, 16)[:14]), chunk("data", make([]byte, 4))))
	f.Add(riff(chunk("fmt ", extensible(2, 8000, 24, 24, 1)), chunk("data", make([]byte, 12))))
	f.Add(riff(chunk("fmt ", fmtBody(3, 1, 8000, 4, 32)), chunk("data", le(float32(1), float32(math.Inf(1))))))
	f.Add(sizedRIFF(unknownSize, append(pcm16, sizedChunk("data", unknownSize, make([]byte, 7))...)))
	f.Add(riff(pcm16, chunk("LIST", []byte("odd")), chunk("data", make([]byte, 6)), []byte{1, 2}))
	oddLast := append(bytes.Clone(pcm16), "LIST\x03\x00\x00\x00odd"...) // no pad byte
	f.Add(sizedRIFF(uint32(4+len(oddLast)+1), oddLast))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := parseWAV(b)
		if err != nil {
			if !errors.Is(err, ErrMalformedAudio) && !errors.Is(err, ErrUnsupportedAudio) {
				t.Fatalf("error of no audio kind: %v", err)
			}
			if msg := err.Error(); msg == "" || !utf8.ValidString(msg) {
				t.Fatalf("unreadable message %q", msg)
			}
			return
		}
		bytesPerFrame := map[string]int{"8-bit PCM": 1, "16-bit PCM": 2, "24-bit PCM": 3, "32-bit PCM": 4, "32-bit float": 4}[w.format]
		switch {
		case bytesPerFrame == 0:
			t.Fatalf("format %q", w.format)
		case w.channels < 1 || w.rate < 1 || w.frames < 0:
			t.Fatalf("accepted %+v", w)
		case w.frames*w.channels*bytesPerFrame > len(b):
			t.Fatalf("%d frames of %d channels do not fit in %d bytes", w.frames, w.channels, len(b))
		case w.segments > w.frames:
			t.Fatalf("%d stretches in %d frames", w.segments, w.frames)
		case math.IsNaN(w.rms) || math.IsInf(w.rms, 0) || w.rms < 0:
			t.Fatalf("level %v", w.rms)
		}
	})
}

// TestParseWAVMissingLastPad: a last chunk of odd size may lack its pad byte, whether the
// RIFF size leaves the pad out or counts it (both are common writer behaviour); a RIFF size
// one past the end with no pad missing is still a truncated file.
func TestParseWAVMissingLastPad(t *testing.T) {
	fmt8 := chunk("fmt ", fmtBody(1, 1, 8000, 1, 8))
	odd := append(append(bytes.Clone(fmt8), "data"...), le(uint32(3), []byte{128, 255, 0})...) // no pad byte
	for name, size := range map[string]uint32{"RIFF size without the pad": uint32(4 + len(odd)), "RIFF size with the pad": uint32(4 + len(odd) + 1)} {
		t.Run(name, func(t *testing.T) {
			w, err := parseWAV(sizedRIFF(size, odd))
			if err != nil || w.frames != 3 || w.format != "8-bit PCM" {
				t.Fatalf("got %+v, %v", w, err)
			}
		})
	}
	even := append(bytes.Clone(fmt8), chunk("data", make([]byte, 4))...)
	_, err := parseWAV(sizedRIFF(uint32(4+len(even)+1), even))
	if !errors.Is(err, ErrMalformedAudio) || !strings.Contains(err.Error(), "it is truncated") {
		t.Fatalf("RIFF size one past an even last chunk: %v", err)
	}
}
