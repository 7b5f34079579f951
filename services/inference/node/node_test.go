package node

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"github.com/zestmcp/zest/services/inference/builtin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// crafted is a 64-byte WAV whose fmt chunk claims 2 channels of 32 bits in 1-byte frames.
func crafted() []byte {
	var b bytes.Buffer
	b.WriteString("RIFF")
	for _, v := range []any{uint32(56), [4]byte{'W', 'A', 'V', 'E'}, [4]byte{'f', 'm', 't', ' '}, uint32(16),
		uint16(1), uint16(2), uint32(8000), uint32(64000), uint16(1), uint16(32), [4]byte{'d', 'a', 't', 'a'}, uint32(20), [20]byte{}} {
		_ = binary.Write(&b, binary.LittleEndian, v)
	}
	return b.Bytes()
}

// TestMalformedAudioIsInvalidArgument: a WAV whose header lies is the caller's mistake
// (INVALID_ARGUMENT, which the edge answers 400), named in the message; it is no crash.
func TestMalformedAudioIsInvalidArgument(t *testing.T) {
	n, err := New(DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		audio []byte
		want  string
	}{
		{"crafted", crafted(), "audio: crafted.wav: WAV block_align 1 does not match 2 channels × 32 bits"},
		{"truncated", crafted()[:50], `audio: truncated.wav: WAV RIFF header declares 64 bytes but the file has 50`},
		{"mp3", []byte("ID3\x03 an mp3"), "RIFF/WAVE PCM only"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := n.Transcribe(t.Context(), &inferencev1.TranscribeRequest{Model: builtin.Transcribe, Audio: c.audio, Filename: c.name + ".wav"})
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), c.want) {
				t.Fatalf("got %v %q, want InvalidArgument with %q", st.Code(), st.Message(), c.want)
			}
		})
	}
}
