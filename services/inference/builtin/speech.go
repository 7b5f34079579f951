package builtin

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"unicode/utf8"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

// Model ids of the built-in media engines (speech, audio, 3D). They are deterministic test
// programs, not models: builtin-tts beeps one tone per character, builtin-audio plays a chord
// sequence picked from the prompt, builtin-3d lifts the image into a height field.
const (
	TTS   = "builtin-tts"
	Audio = "builtin-audio"
	Mesh  = "builtin-3d"
)

// Limits of the built-in audio engines.
const (
	// SampleRate is the rate of every WAV they write (mono, 16-bit PCM).
	SampleRate = 16000
	// MaxSpeechChars caps the input of builtin-tts, as OpenAI's speech API does.
	MaxSpeechChars = 4096
	// ToneSeconds is how long builtin-tts sounds one character at speed 1.
	ToneSeconds = 0.08
	// MinSpeed and MaxSpeed bound speed, as OpenAI's.
	MinSpeed = 0.25
	MaxSpeed = 4.0
	// DefaultAudioSeconds and MaxAudioSeconds bound builtin-audio's clips.
	DefaultAudioSeconds = 5.0
	MaxAudioSeconds     = 120.0
)

// FieldError is a bad request whose fault lies in one field; the node names Field to the
// client (OpenAI's "param").
type FieldError struct {
	Field, Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }
func (e *FieldError) Unwrap() error { return ErrBadRequest }

func fieldErr(field, format string, a ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, a...)}
}

// mediaModels are the built-in media models, listed after the others.
func mediaModels(created int64) []*inferencev1.Model {
	m := func(id string, t inferencev1.ModelType, desc string, labels ...string) *inferencev1.Model {
		return &inferencev1.Model{
			Id: id, Type: t, State: inferencev1.ModelState_MODEL_STATE_LOADED, Engine: "builtin",
			Labels: append([]string{"builtin"}, labels...), OwnedBy: "zest", Created: created, Description: desc,
		}
	}
	return []*inferencev1.Model{
		m(TTS, inferencev1.ModelType_MODEL_TYPE_TTS,
			"Deterministic built-in test engine, not a voice: writes a 16 kHz WAV with one tone per character of the input.", "tts"),
		m(Audio, inferencev1.ModelType_MODEL_TYPE_AUDIO_GENERATION,
			"Deterministic built-in test engine, not a music model: writes a WAV of chords picked from the prompt.", "audio-generation"),
		m(Mesh, inferencev1.ModelType_MODEL_TYPE_MESH,
			"Deterministic built-in test engine, not a reconstruction: a GLB height field of the image's luminance.", "3d"),
	}
}

// Speech speaks req.Input with builtin-tts: each character is a tone of ToneSeconds/speed
// whose pitch follows the character (white space is silence), so equal texts give equal WAVs
// and a test can read the text's shape back from the audio. It is StreamSpeech's chunks joined.
func (e *Engine) Speech(ctx context.Context, req *inferencev1.SpeechRequest) (*inferencev1.SpeechResponse, error) {
	out := &inferencev1.SpeechResponse{}
	err := e.StreamSpeech(ctx, req, func(c *inferencev1.StreamSpeechResponse) error {
		if c.GetContentType() != "" {
			out.ContentType = c.GetContentType()
		}
		out.Audio = append(out.Audio, c.GetAudio()...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// StreamSpeech speaks as Speech does, sending the file as it is made: for a WAV the header
// first (sized for the whole, which is known from the text), then one chunk per character.
func (e *Engine) StreamSpeech(ctx context.Context, req *inferencev1.SpeechRequest, send func(*inferencev1.StreamSpeechResponse) error) error {
	if req.GetModel() != TTS {
		return fmt.Errorf("%w: %q does not speak (use %s)", ErrWrongModel, req.GetModel(), TTS)
	}
	if strings.TrimSpace(req.GetInput()) == "" {
		return fieldErr("input", "input is required: the text to speak")
	}
	n := utf8.RuneCountInString(req.GetInput())
	if n > MaxSpeechChars {
		return fieldErr("input", "input has %d characters; the limit is %d", n, MaxSpeechChars)
	}
	speed := req.GetSpeed()
	if speed == 0 {
		speed = 1
	}
	if speed < MinSpeed || speed > MaxSpeed || math.IsNaN(speed) {
		return fieldErr("speed", "speed %g: give %g to %g", speed, MinSpeed, MaxSpeed)
	}
	format := req.GetResponseFormat()
	if format != "" && format != "wav" && format != "pcm" {
		return fieldErr("response_format", "response_format %q is not served by %s: use wav or pcm", format, TTS)
	}
	per := int(ToneSeconds / speed * SampleRate)
	first := &inferencev1.StreamSpeechResponse{ContentType: "audio/pcm"}
	if format != "pcm" {
		first = &inferencev1.StreamSpeechResponse{ContentType: "audio/wav", Audio: wavHeader(n*per, SampleRate)}
	}
	if err := send(first); err != nil {
		return err
	}
	for _, r := range req.GetInput() {
		if err := ctx.Err(); err != nil {
			return err
		}
		freq := 0.0
		if !isSpace(r) {
			freq = ToneHz(r)
		}
		if err := send(&inferencev1.StreamSpeechResponse{Audio: pcmBytes(appendTone(nil, freq, per, 0.5))}); err != nil {
			return err
		}
	}
	return nil
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }

// ToneHz is the pitch builtin-tts gives character r: 64 steps of 20 Hz from 300 Hz.
func ToneHz(r rune) float64 { return 300 + float64(r%64)*20 }

// appendTone appends n samples of a sine at freq (0: silence) with 5 ms fades (no clicks).
func appendTone(pcm []int16, freq float64, n int, amp float64) []int16 {
	fade := SampleRate / 200
	for i := range n {
		v := 0.0
		if freq > 0 {
			g := amp
			if i < fade {
				g *= float64(i) / float64(fade)
			} else if n-i < fade {
				g *= float64(n-i) / float64(fade)
			}
			v = g * math.Sin(2*math.Pi*freq*float64(i)/SampleRate)
		}
		pcm = append(pcm, int16(v*math.MaxInt16))
	}
	return pcm
}

// GenerateAudio makes a clip with builtin-audio: every half second a chord of three sines
// whose pitches come from a hash of the prompt, seed and lyrics.
func (e *Engine) GenerateAudio(ctx context.Context, req *inferencev1.GenerateAudioRequest) (*inferencev1.GenerateAudioResponse, error) {
	if req.GetModel() != Audio {
		return nil, fmt.Errorf("%w: %q makes no audio (use %s)", ErrWrongModel, req.GetModel(), Audio)
	}
	if strings.TrimSpace(req.GetPrompt()) == "" {
		return nil, fieldErr("prompt", "prompt is required: the music or sound to make")
	}
	d := req.GetDurationSeconds()
	if d == 0 {
		d = DefaultAudioSeconds
	}
	if !(d > 0 && d <= MaxAudioSeconds) {
		return nil, fieldErr("duration", "duration %g: give more than 0 and at most %g seconds", d, MaxAudioSeconds)
	}
	if f := req.GetResponseFormat(); f != "" && f != "wav" {
		return nil, fieldErr("response_format", "response_format %q is not served: use wav", f)
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%d", req.GetPrompt(), req.GetLyrics(), req.GetSeed())
	x := h.Sum64()
	total := int(d * SampleRate)
	step := SampleRate / 2
	pcm := make([]int16, 0, total)
	for start := 0; start < total; start += step {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		root := 110 * math.Pow(2, float64(x%24)/12)
		n := min(step, total-start)
		chord := make([]int16, 0, n)
		for _, ratio := range []float64{1, 1.25, 1.5} {
			tone := appendTone(nil, root*ratio, n, 0.25)
			if len(chord) == 0 {
				chord = tone
				continue
			}
			for i := range chord {
				chord[i] += tone[i]
			}
		}
		pcm = append(pcm, chord...)
	}
	return &inferencev1.GenerateAudioResponse{Audio: WAV(pcm, SampleRate), ContentType: "audio/wav"}, nil
}

// WAV wraps mono 16-bit samples in a RIFF/WAVE file (fmt chunk, PCM format 1, data chunk).
func WAV(pcm []int16, rate int) []byte {
	return append(wavHeader(len(pcm), rate), pcmBytes(pcm)...)
}

// wavHeader is the 44-byte header of a mono 16-bit WAV of samples samples.
func wavHeader(samples, rate int) []byte {
	size := 2 * samples
	b := make([]byte, 44, 44+size)
	copy(b[0:], "RIFF")
	binary.LittleEndian.PutUint32(b[4:], uint32(36+size))
	copy(b[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(b[16:], 16)
	binary.LittleEndian.PutUint16(b[20:], 1) // PCM
	binary.LittleEndian.PutUint16(b[22:], 1) // mono
	binary.LittleEndian.PutUint32(b[24:], uint32(rate))
	binary.LittleEndian.PutUint32(b[28:], uint32(rate*2))
	binary.LittleEndian.PutUint16(b[32:], 2)
	binary.LittleEndian.PutUint16(b[34:], 16)
	copy(b[36:], "data")
	binary.LittleEndian.PutUint32(b[40:], uint32(size))
	return b
}

func pcmBytes(pcm []int16) []byte {
	out := make([]byte, 2*len(pcm))
	for i, s := range pcm {
		binary.LittleEndian.PutUint16(out[2*i:], uint16(s))
	}
	return out
}
