package lemonade

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTranscribeRefusesAFIFOPromptly: a named pipe under the audio root is refused at once,
// with a message naming audio_path; without a writer, opening it used to hang the call.
func TestTranscribeRefusesAFIFOPromptly(t *testing.T) {
	tools, m, dirs := newMedia(t)
	if err := syscall.Mkfifo(filepath.Join(dirs.Audio, "pipe.wav"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("pipe.wav", filepath.Join(dirs.Audio, "to-pipe.wav")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dirs.Audio, "dir.wav"), 0o755); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"pipe.wav":    `audio_path "pipe.wav" is a named pipe (FIFO)`,
		"to-pipe.wav": `audio_path "to-pipe.wav" is a named pipe (FIFO)`,
		"dir.wav":     `audio_path "dir.wav" is a directory`,
	} {
		t.Run(path, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			done := make(chan string, 1)
			go func() {
				res, _ := tools.transcribe(ctx, callArgs(map[string]any{"audio_path": path}))
				if !res.IsError {
					done <- "not an error: " + text(res)
					return
				}
				done <- text(res)
			}()
			select {
			case got := <-done:
				if !strings.Contains(got, want) {
					t.Fatalf("got %q, want %q", got, want)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("the call did not return within 3 s")
			}
			if m.audio != nil {
				t.Fatal("audio reached the model")
			}
		})
	}
}

func TestTranscribeAudioPathLimit(t *testing.T) {
	tools, m, dirs := newMedia(t)
	tools.audioLimit = 1 << 20
	for name, size := range map[string]int64{"at.wav": 1 << 20, "over.wav": 1<<20 + 1} {
		f, err := os.Create(filepath.Join(dirs.Audio, name))
		if err != nil {
			t.Fatal(err)
		}
		f.Truncate(size)
		f.Close()
	}
	res, _ := tools.transcribe(t.Context(), callArgs(map[string]any{"audio_path": "at.wav"}))
	if res.IsError || len(m.audio) != 1<<20 {
		t.Fatalf("at the limit: %s (%d bytes)", text(res), len(m.audio))
	}
	m.audio = nil
	res, _ = tools.transcribe(t.Context(), callArgs(map[string]any{"audio_path": "over.wav"}))
	if !res.IsError || !strings.Contains(text(res), `audio_path "over.wav" has 1048577 bytes; the limit is 1048576`) || m.audio != nil {
		t.Fatalf("over the limit: %s", text(res))
	}
	// The default is 25 MiB, as docs/user/builtin-tools.md says.
	if tools.audioLimit = 0; tools.maxAudio() != 25<<20 {
		t.Fatalf("default limit %d", tools.maxAudio())
	}
}

// endless is a reader that never ends, counting what it handed out.
type endless struct{ n int }

func (e *endless) Read(p []byte) (int, error) { e.n += len(p); return len(p), nil }

// TestReadAtMostStopsAtTheLimit: a file that is longer than its size said (it grew after the
// Stat) is read no further than limit+1 bytes, and is refused; one at the limit is read whole
// into a buffer allocated once.
func TestReadAtMostStopsAtTheLimit(t *testing.T) {
	r := &endless{}
	if _, err := readAtMost(r, 1<<20, 3<<20); !errors.Is(err, errTooLarge) || r.n > 3<<20+1 {
		t.Fatalf("endless: %v after %d bytes", err, r.n)
	}
	b, err := readAtMost(io.LimitReader(&endless{}, 5<<20), 1<<20, 8<<20)
	if err != nil || len(b) != 5<<20 {
		t.Fatalf("longer than its size: %v, %d bytes", err, len(b))
	}
	b, err = readAtMost(io.LimitReader(&endless{}, 4<<20), 4<<20, 4<<20)
	if err != nil || len(b) != 4<<20 || cap(b) > len(b)+len(b)/8 { // grown, it would have doubled
		t.Fatalf("exactly the limit: %v, %d bytes (cap %d)", err, len(b), cap(b))
	}
}

func TestDecodeAudio(t *testing.T) {
	const limit = 1 << 20
	for _, n := range []int{limit, limit - 1, limit - 2} { // every padding at the limit is accepted
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i * 7)
		}
		for _, end := range []string{"", "\n", "\r\n"} { // as `base64 file` writes it
			b, err := decodeAudio(base64.StdEncoding.EncodeToString(src)+end, limit)
			if err != nil || len(b) != n || b[n-1] != src[n-1] || cap(b) != n {
				t.Fatalf("%d bytes, ending %q: %v (%d bytes, cap %d)", n, end, err, len(b), cap(b))
			}
		}
	}
	if _, err := decodeAudio(base64.StdEncoding.EncodeToString(make([]byte, limit+1)), limit); err == nil ||
		err.Error() != "audio_base64 holds 1048577 bytes of audio; the limit is 1048576 (1 MiB)" {
		t.Fatalf("over: %v", err)
	}
	mime := "eHl6\r\neHl6\neHk="
	if b, err := decodeAudio(mime, limit); err != nil || string(b) != "xyzxyzxy" {
		t.Fatalf("line breaks: %v %q", err, b)
	}
	for in, want := range map[string]string{
		"eHl6*Hl6": "byte 4",
		"eHl6e":    "not valid base64",
		"eHl6eH=6": "not valid base64",
		"eHk=eHl6": "byte 3",
	} {
		if _, err := decodeAudio(in, limit); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v", in, err)
		}
	}
}

func TestTranscribeAudioBase64Arguments(t *testing.T) {
	tools, m, _ := newMedia(t)
	res, _ := tools.transcribe(t.Context(), callArgs(map[string]any{"audio_base64": 12}))
	if !res.IsError || !strings.Contains(text(res), "audio_base64 must be a string") {
		t.Fatalf("number: %s", text(res))
	}
	args := map[string]any{"audio_base64": "eHl6", "filename": "x.wav", "language": "de"}
	res, _ = tools.transcribe(t.Context(), callArgs(args))
	if res.IsError || string(m.audio) != "xyz" || args["audio_base64"] != "eHl6" {
		t.Fatalf("base64: %s; arguments after the call: %v", text(res), args)
	}
	res, _ = tools.transcribe(t.Context(), callArgs(map[string]any{"audio_base64": "eHl6", "nope": 1}))
	if !res.IsError || !strings.Contains(text(res), `unknown field "nope"`) {
		t.Fatalf("unknown field: %s", text(res))
	}
}

// FuzzDecodeAudio: decodeAudio agrees with base64.StdEncoding.DecodeString, the decoder it
// replaced: the same bytes when that accepts at most limit of them, a refusal otherwise.
func FuzzDecodeAudio(f *testing.F) {
	for _, s := range []string{
		"", "QQ==", "QQ==\n", "QQ==\r\n", "QQ=\n=", "QQ\n==", "QUI=\n", "QUJD\n", "QUJD", "QUJDRA==\r\n\r\n",
		"eHl6\r\neHl6\neHk=", "eHl6*Hl6", "eHl6e", "eHl6eH=6", "QQ==QQ==", "QQ=", "Q===", "====", "\n", "=",
		"000=0000", "QQ==QUFB", "QUJD\n=\nQQ==", "QUJDREVGR0g=\n", "QUJDREVGR0hJ\n", "QUJDREVGRw==\n", "QUJDREVG\nRw=\r\n=\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, wantErr := base64.StdEncoding.DecodeString(s)
		for _, limit := range []int{7, 1 << 20} { // at the edge of short inputs; past any input
			got, err := decodeAudio(s, limit)
			switch {
			case wantErr == nil && len(want) <= limit:
				if err != nil || !bytes.Equal(got, want) || cap(got) != len(want) {
					t.Fatalf("%q: got %q (cap %d), %v; want %q (limit %d)", s, got, cap(got), err, want, limit)
				}
			case err == nil:
				t.Fatalf("%q: accepted as %q; DecodeString: %q, %v (limit %d)", s, got, want, wantErr, limit)
			}
		}
	})
}
