package builtin

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

// ErrUnsupportedAudio means builtin-transcribe cannot decode the audio.
var ErrUnsupportedAudio = errors.New("unsupported audio")

// Transcribe describes WAV audio with builtin-transcribe: it decodes RIFF/WAVE PCM (8, 16,
// 24, 32-bit integer or 32-bit float) and reports its length, format, level and the stretches
// of sound it finds. It does not recognise speech, and says so in its text.
func (e *Engine) Transcribe(_ context.Context, req *inferencev1.TranscribeRequest) (*inferencev1.TranscribeResponse, error) {
	if req.GetModel() != Transcribe {
		return nil, fmt.Errorf("%w: %q transcribes nothing (use %s)", ErrWrongModel, req.GetModel(), Transcribe)
	}
	w, err := parseWAV(req.GetAudio())
	if err != nil {
		name := req.GetFilename()
		if name == "" {
			name = "the audio"
		}
		return nil, fmt.Errorf("%w: %s: %v; builtin-transcribe reads RIFF/WAVE PCM only (convert with e.g. `ffmpeg -i in.mp3 out.wav`)", ErrUnsupportedAudio, name, err)
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
	if lang == "" {
		lang = "en"
	}
	return &inferencev1.TranscribeResponse{Text: text, Language: lang, DurationSeconds: dur}, nil
}

type wavInfo struct {
	channels, rate, frames, segments int
	format                           string
	rms                              float64
}

func parseWAV(b []byte) (wavInfo, error) {
	var w wavInfo
	if len(b) < 12 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		head := b
		if len(head) > 4 {
			head = head[:4]
		}
		return w, fmt.Errorf("not a WAV file (starts with %q)", strings.ToValidUTF8(string(head), "?"))
	}
	var (
		fmtFound            bool
		audioFmt, bits, blk int
		data                []byte
	)
	for p := 12; p+8 <= len(b); {
		id, size := string(b[p:p+4]), int(binary.LittleEndian.Uint32(b[p+4:p+8]))
		body := b[p+8:]
		if size > len(body) {
			size = len(body) // a truncated last chunk: read what is there
		}
		body = body[:size]
		switch id {
		case "fmt ":
			if size < 16 {
				return w, errors.New("fmt chunk too short")
			}
			audioFmt = int(binary.LittleEndian.Uint16(body[0:2]))
			w.channels = int(binary.LittleEndian.Uint16(body[2:4]))
			w.rate = int(binary.LittleEndian.Uint32(body[4:8]))
			blk = int(binary.LittleEndian.Uint16(body[12:14]))
			bits = int(binary.LittleEndian.Uint16(body[14:16]))
			if audioFmt == 0xFFFE && size >= 26 { // WAVE_FORMAT_EXTENSIBLE: the sub-format's first two bytes
				audioFmt = int(binary.LittleEndian.Uint16(body[24:26]))
			}
			fmtFound = true
		case "data":
			data = body
		}
		p += 8 + size + size%2
	}
	switch {
	case !fmtFound:
		return w, errors.New("no fmt chunk")
	case data == nil:
		return w, errors.New("no data chunk")
	case w.channels < 1 || w.rate < 1 || blk < 1:
		return w, errors.New("invalid fmt chunk")
	}
	var sample func([]byte) float64
	switch {
	case audioFmt == 1 && bits == 8:
		sample = func(s []byte) float64 { return (float64(s[0]) - 128) / 128 }
	case audioFmt == 1 && bits == 16:
		sample = func(s []byte) float64 { return float64(int16(binary.LittleEndian.Uint16(s))) / 32768 }
	case audioFmt == 1 && bits == 24:
		sample = func(s []byte) float64 {
			return float64(int32(uint32(s[0])<<8|uint32(s[1])<<16|uint32(s[2])<<24)>>8) / 8388608
		}
	case audioFmt == 1 && bits == 32:
		sample = func(s []byte) float64 { return float64(int32(binary.LittleEndian.Uint32(s))) / 2147483648 }
	case audioFmt == 3 && bits == 32:
		sample = func(s []byte) float64 { return float64(math.Float32frombits(binary.LittleEndian.Uint32(s))) }
	default:
		return w, fmt.Errorf("format %d with %d bits per sample is not PCM this engine decodes", audioFmt, bits)
	}
	w.format = fmt.Sprintf("%d-bit PCM", bits)
	if audioFmt == 3 {
		w.format = "32-bit float"
	}
	step := bits / 8
	w.frames = len(data) / blk
	var sum float64
	// Stretches of sound: 20 ms windows louder than -40 dBFS, merged across short gaps.
	win := max(w.rate/50, 1)
	var winSum float64
	inSound := false
	for f := range w.frames {
		v := sample(data[f*blk : f*blk+step]) // first channel
		sum += v * v
		winSum += v * v
		if (f+1)%win == 0 || f == w.frames-1 {
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
