package lemonade

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"strings"
)

// maxAudio is the largest audio lemonade_transcribe_audio takes, in bytes.
func (t *Tools) maxAudio() int {
	if t.audioLimit > 0 {
		return t.audioLimit
	}
	return MaxAudioBytes
}

// readAudio reads audio_path p: a regular file inside dir, at most limit bytes. It opens the
// file through os.Root (no ".." or symlink leads out of dir) without blocking (a FIFO would
// otherwise hold the open until some writer came), refuses anything but a regular file, and
// stops reading at limit+1 bytes whatever the size said when it was opened.
func readAudio(ctx context.Context, dir, p string, limit int) ([]byte, error) {
	rel, err := inside(dir, p, "the audio directory (ZEST_MCP_AUDIO_DIR)")
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("audio directory (ZEST_MCP_AUDIO_DIR): %w", err)
	}
	defer root.Close()
	f, err := root.OpenFile(rel, os.O_RDONLY|openNoBlock, 0)
	if err != nil {
		return nil, fmt.Errorf("audio_path %q: %w", p, unwrapPath(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("audio_path %q: %w", p, unwrapPath(err))
	}
	if !st.Mode().IsRegular() {
		return nil, notRegular(p, st.Mode())
	}
	if st.Size() > int64(limit) {
		return nil, fmt.Errorf("audio_path %q has %d bytes; the limit is %d", p, st.Size(), limit)
	}
	b, err := readAtMost(f, st.Size(), limit)
	if errors.Is(err, errTooLarge) {
		return nil, fmt.Errorf("audio_path %q grew past the %d-byte limit while it was read", p, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("audio_path %q: %w", p, unwrapPath(err))
	}
	return b, nil
}

var errTooLarge = errors.New("over the size limit")

// readAtMost reads r to its end into one buffer sized for size bytes (it grows if r is
// longer); past limit bytes it stops with errTooLarge.
func readAtMost(r io.Reader, size int64, limit int) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(int(min(max(size, 0), int64(limit))) + bytes.MinRead) // ReadFrom grows unless MinRead bytes are free
	if _, err := buf.ReadFrom(io.LimitReader(r, int64(limit)+1)); err != nil {
		return nil, err
	}
	if buf.Len() > limit {
		return nil, errTooLarge
	}
	return buf.Bytes(), nil
}

func notRegular(p string, m fs.FileMode) error {
	kind := "not a regular file"
	switch {
	case m.IsDir():
		kind = "a directory"
	case m&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	case m&fs.ModeDevice != 0:
		kind = "a device"
	}
	return fmt.Errorf("audio_path %q is %s; give a regular audio file inside ZEST_MCP_AUDIO_DIR", p, kind)
}

// unwrapPath drops os's "openat <full path>:" prefix, which repeats what the message already
// names and shows the server's directory layout.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// takeString removes key from args, returning its string value and the other arguments
// (args itself is not changed); a value that is not a string is an error naming key.
func takeString(args map[string]any, key string) (string, map[string]any, error) {
	v, ok := args[key]
	if !ok {
		return "", args, nil
	}
	rest := maps.Clone(args)
	delete(rest, key)
	switch s := v.(type) {
	case string:
		return s, rest, nil
	case nil:
		return "", rest, nil
	}
	return "", nil, fmt.Errorf("argument %s must be a string (base64 of the audio file)", key)
}

// decodeAudio decodes audio_base64 (standard alphabet, padded, line breaks allowed anywhere,
// as base64.StdEncoding.DecodeString takes it) into one buffer of the exact size, refusing
// more than limit bytes of audio before decoding any.
func decodeAudio(s string, limit int) ([]byte, error) {
	// Every character but line breaks and padding carries 6 bits; in valid input this is the
	// exact decoded length, and invalid input is refused by the decoder whatever it says.
	chars := len(s) - strings.Count(s, "\n") - strings.Count(s, "\r") - strings.Count(s, "=")
	n := base64.RawStdEncoding.DecodedLen(chars)
	if n > limit {
		return nil, fmt.Errorf("audio_base64 holds %d bytes of audio; the limit is %d (%d MiB)", n, limit, limit>>20)
	}
	// The streaming decoder checks padding only within the piece it is decoding, so "QQ==QUFB"
	// read in two pieces would pass; padding anywhere but at the end is refused here.
	if i := strings.IndexByte(strings.TrimRight(s, "=\r\n"), '='); i >= 0 {
		return nil, badBase64(base64.CorruptInputError(i))
	}
	out := make([]byte, n)
	dec := base64.NewDecoder(base64.StdEncoding, strings.NewReader(s))
	if _, err := io.ReadFull(dec, out); err != nil {
		return nil, badBase64(err)
	}
	if extra, err := dec.Read(make([]byte, 1)); extra != 0 || !errors.Is(err, io.EOF) {
		return nil, badBase64(err)
	}
	return out, nil
}

func badBase64(err error) error {
	var corrupt base64.CorruptInputError
	if errors.As(err, &corrupt) {
		return fmt.Errorf("audio_base64 is not valid base64: a character that does not belong at byte %d", int64(corrupt))
	}
	return errors.New("audio_base64 is not valid base64: it ends in the middle of a group of four characters")
}
