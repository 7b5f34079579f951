package builtin

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

// Transcribe describes WAV audio with builtin-transcribe: it decodes RIFF/WAVE PCM (8, 16,
// 24, 32-bit integer or 32-bit float) and reports its length, format, level and the stretches
// of sound it finds. It does not recognise speech, and says so in its text.
func (e *Engine) Transcribe(_ context.Context, req *inferencev1.TranscribeRequest) (*inferencev1.TranscribeResponse, error) {
	if req.GetModel() != Transcribe {
		return nil, fmt.Errorf("%w: %q transcribes nothing (use %s)", ErrWrongModel, req.GetModel(), Transcribe)
	}
	w, err := parseWAV(req.GetAudio())
	if err != nil {
		prefix := "audio: "
		if name := req.GetFilename(); name != "" {
			prefix += strings.ToValidUTF8(name, "?") + ": "
		}
		if errors.Is(err, ErrUnsupportedAudio) {
			return nil, fmt.Errorf("%s%w; builtin-transcribe reads RIFF/WAVE PCM only (convert with e.g. `ffmpeg -i in.mp3 out.wav`)", prefix, err)
		}
		return nil, fmt.Errorf("%s%w", prefix, err)
	}
	dur := float64(w.frames) / float64(w.rate)
	db := -math.Inf(1)
	if w.rms > 0 {
		db = 20 * math.Log10(w.rms)
	}
	chans := map[int]string{1: "mono", 2: "stereo"}[w.channels]
	if chans == "" {
		chans = fmt.Sprintf("%d-channel", w.channels)
	}
	text := fmt.Sprintf("[builtin-transcribe] %.2f s of %d Hz %s %s audio; RMS level %.1f dBFS; %d stretch(es) of sound. "+
		"This built-in engine describes audio and does not recognise speech.", dur, w.rate, chans, w.format, db, w.segments)
	lang := req.GetLanguage()
	if lang == "" || req.GetTranslate() { // its description is English: a translation already
		lang = "en"
	}
	return &inferencev1.TranscribeResponse{Text: text, Language: lang, DurationSeconds: dur}, nil
}

type wavInfo struct {
	channels, rate, frames, segments int
	format                           string
	rms                              float64
}

// unknownSize is the size a streaming writer (ffmpeg into a pipe) leaves in the RIFF header
// and the data chunk: the chunk runs to the end of the file.
const unknownSize = 0xFFFFFFFF

// subtypeTail is the GUID of KSDATAFORMAT_SUBTYPE_PCM and _IEEE_FLOAT after its first two
// bytes (the format tag): {xxxx0000-0000-0010-8000-00aa00389b71}.
var subtypeTail = []byte{0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71}

func malformed(format string, a ...any) error {
	return &audioError{kind: ErrMalformedAudio, msg: fmt.Sprintf(format, a...)}
}

func unsupported(format string, a ...any) error {
	return &audioError{kind: ErrUnsupportedAudio, msg: fmt.Sprintf(format, a...)}
}

// wavFormat is a checked fmt chunk: channels ≥ 1, rate ≥ 1, a sample format the engine
// decodes, and blockAlign = channels × bits/8.
type wavFormat struct {
	channels, bits, blockAlign, rate int
	name                             string               // "16-bit PCM", "32-bit float"
	sample                           func([]byte) float64 // one sample (bits/8 bytes), full scale 1
}

// parseFmt checks a fmt chunk. Every field that sizes what is read later is checked here, so
// that the data chunk can be cut into frames without looking back.
func parseFmt(body []byte) (wavFormat, error) {
	if len(body) < 16 {
		return wavFormat{}, malformed("WAV fmt chunk has %d bytes; it needs at least 16", len(body))
	}
	u16 := func(i int) int { return int(binary.LittleEndian.Uint16(body[i:])) }
	u32 := func(i int) uint64 { return uint64(binary.LittleEndian.Uint32(body[i:])) }
	f := wavFormat{channels: u16(2), blockAlign: u16(12), bits: u16(14)}
	tag, rate, byteRate := u16(0), u32(4), u32(8)
	if tag == 0xFFFE { // WAVE_FORMAT_EXTENSIBLE: the real tag leads the sub-format GUID
		if len(body) < 40 {
			return f, malformed("WAV extensible fmt chunk has %d bytes; it needs 40", len(body))
		}
		if ext := u16(16); ext < 22 {
			return f, malformed("WAV extensible fmt chunk declares a %d-byte extension; it needs 22", ext)
		}
		if valid := u16(18); valid > f.bits {
			return f, malformed("WAV extensible fmt chunk declares %d valid bits in %d-bit samples", valid, f.bits)
		}
		if !bytes.Equal(body[26:40], subtypeTail) {
			return f, unsupported("WAV extensible sub-format %x is neither PCM nor IEEE float", body[24:40])
		}
		tag = u16(24)
	}
	switch {
	case f.channels == 0:
		return f, malformed("WAV fmt chunk declares 0 channels")
	case rate == 0:
		return f, malformed("WAV fmt chunk declares a sample rate of 0 Hz")
	}
	f.rate = int(rate)
	switch {
	case tag == 1 && f.bits == 8:
		f.sample = func(s []byte) float64 { return (float64(s[0]) - 128) / 128 }
	case tag == 1 && f.bits == 16:
		f.sample = func(s []byte) float64 { return float64(int16(binary.LittleEndian.Uint16(s))) / 32768 }
	case tag == 1 && f.bits == 24:
		f.sample = func(s []byte) float64 {
			return float64(int32(uint32(s[0])<<8|uint32(s[1])<<16|uint32(s[2])<<24)>>8) / 8388608
		}
	case tag == 1 && f.bits == 32:
		f.sample = func(s []byte) float64 { return float64(int32(binary.LittleEndian.Uint32(s))) / 2147483648 }
	case tag == 3 && f.bits == 32:
		f.sample = func(s []byte) float64 { return float64(math.Float32frombits(binary.LittleEndian.Uint32(s))) }
	default:
		return f, unsupported("format %d with %d bits per sample is not PCM this engine decodes", tag, f.bits)
	}
	f.name = fmt.Sprintf("%d-bit PCM", f.bits)
	if tag == 3 {
		f.name = "32-bit float"
	}
	if f.blockAlign != f.channels*f.bits/8 {
		return f, malformed("WAV block_align %d does not match %d channels × %d bits", f.blockAlign, f.channels, f.bits)
	}
	if byteRate != rate*uint64(f.blockAlign) {
		return f, malformed("WAV byte rate %d does not match %d Hz × %d-byte frames", byteRate, rate, f.blockAlign)
	}
	return f, nil
}

// parseWAV decodes a RIFF/WAVE file. Every way its header can contradict itself or the bytes
// that follow is an error naming the field (ErrMalformedAudio); a format the engine does not
// decode is ErrUnsupportedAudio. It never reads outside b.
func parseWAV(b []byte) (wavInfo, error) {
	var w wavInfo
	if len(b) < 12 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		head := b
		if len(head) > 4 {
			head = head[:4]
		}
		return w, unsupported("not a WAV file (starts with %q)", head)
	}
	end := len(b) // bytes after the RIFF chunk (an appended tag) are not part of it
	riff := binary.LittleEndian.Uint32(b[4:8])
	truncated := func() error {
		return malformed("WAV RIFF header declares %d bytes but the file has %d: it is truncated", uint64(riff)+8, len(b))
	}
	padCounted := false // the RIFF size counts a last pad byte the file lacks (checked below)
	switch {
	case riff == unknownSize:
	case riff < 4:
		return w, malformed("WAV RIFF size %d cannot hold the WAVE form", riff)
	case uint64(riff)+8 == uint64(len(b))+1:
		padCounted = true
	case uint64(riff)+8 > uint64(len(b)):
		return w, truncated()
	default:
		end = 8 + int(riff)
	}
	var (
		f        wavFormat
		haveFmt  bool
		data     []byte
		haveData bool
	)
	p := 12
	for p < end {
		if end-p < 8 {
			return w, malformed("WAV has %d stray byte(s) after its last chunk", end-p)
		}
		id, size := string(b[p:p+4]), uint64(binary.LittleEndian.Uint32(b[p+4:p+8]))
		p += 8
		if size > uint64(end-p) {
			if id != "data" || size != unknownSize {
				return w, malformed("WAV %q chunk declares %d bytes but only %d follow: the file is truncated or the size is wrong", id, size, end-p)
			}
			size = uint64(end - p)
		}
		body := b[p : p+int(size)]
		switch id {
		case "fmt ":
			if haveFmt {
				return w, malformed("WAV has two fmt chunks")
			}
			var err error
			if f, err = parseFmt(body); err != nil {
				return w, err
			}
			haveFmt = true
		case "data":
			switch {
			case haveData:
				return w, malformed("WAV has two data chunks")
			case !haveFmt:
				return w, malformed("WAV data chunk comes before the fmt chunk")
			case len(body)%f.blockAlign != 0:
				return w, malformed("WAV data chunk of %d bytes is not a whole number of %d-byte frames", len(body), f.blockAlign)
			}
			data, haveData = body, true
		}
		p += int(size) + int(size&1) // chunks are padded to an even size
	}
	// The last chunk's pad byte may be missing (p is then end+1), whether the RIFF size leaves
	// it out or counts it; a RIFF size one past the end for any other reason is a truncation.
	if padCounted && p != end+1 {
		return w, truncated()
	}
	switch {
	case !haveFmt:
		return w, malformed("WAV has no fmt chunk")
	case !haveData:
		return w, malformed("WAV has no data chunk")
	}
	w.channels, w.rate, w.format = f.channels, f.rate, f.name
	blk, step := f.blockAlign, f.bits/8
	w.frames = len(data) / blk // whole: the data chunk was checked
	var sum float64
	// Stretches of sound: 20 ms windows louder than -40 dBFS, merged across short gaps.
	win := max(w.rate/50, 1)
	var winSum float64
	inSound := false
	for i := range w.frames {
		v := f.sample(data[i*blk : i*blk+step]) // first channel
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return w, malformed("WAV float sample of frame %d is not a finite number", i)
		}
		sum += v * v
		winSum += v * v
		if (i+1)%win == 0 || i == w.frames-1 {
			loud := math.Sqrt(winSum/float64(win)) > 0.01
			if loud && !inSound {
				w.segments++
			}
			inSound, winSum = loud, 0
		}
	}
	if w.frames > 0 {
		w.rms = math.Sqrt(sum / float64(w.frames))
	}
	return w, nil
}
