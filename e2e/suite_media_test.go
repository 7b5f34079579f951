package e2e

// Audio a test sends: WAV files and multipart forms.

import (
	"bytes"
	"encoding/binary"
	"math"
	"mime/multipart"
	"testing"
)

// toneWAV is one second of a 440 Hz tone, 16 kHz mono 16-bit PCM.
func toneWAV() []byte { return toneWAVSized(32000) }

// toneWAVSized is a 440 Hz tone, 16 kHz mono 16-bit PCM, with a data chunk of n bytes
// (rounded down to whole frames): the file has 44 bytes more.
func toneWAVSized(n int) []byte {
	const rate = 16000
	pcm := make([]int16, n/2)
	for i := range pcm {
		pcm[i] = int16(16000 * math.Sin(2*math.Pi*440*float64(i)/rate))
	}
	var b bytes.Buffer
	b.Grow(44 + 2*len(pcm))
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

// craftedWAV is 64 bytes whose fmt chunk claims 2 channels of 32 bits in 1-byte frames: it
// crashed the inference node's decoder.
func craftedWAV() []byte {
	var b bytes.Buffer
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(56))
	b.WriteString("WAVEfmt ")
	for _, v := range []any{uint32(16), uint16(1), uint16(2), uint32(8000), uint32(64000), uint16(1), uint16(32)} {
		binary.Write(&b, binary.LittleEndian, v)
	}
	b.WriteString("data")
	binary.Write(&b, binary.LittleEndian, uint32(20))
	b.Write(make([]byte, 20))
	return b.Bytes()
}

func multipartAudio(t *testing.T, audio []byte, fields map[string]string) (string, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	fw, _ := mw.CreateFormFile("file", "tone.wav")
	fw.Write(audio)
	for k, v := range fields {
		mw.WriteField(k, v)
	}
	mw.Close()
	return b.String(), mw.FormDataContentType()
}
