package builtin

import "errors"

// Errors of the built-in engine; the node maps them to gRPC codes.
var (
	// ErrWrongModel means the model exists but does not answer this kind of request.
	ErrWrongModel = errors.New("model does not answer this request")
	// ErrBadRequest means the request itself is malformed.
	ErrBadRequest = errors.New("bad request")
	// ErrUnsupportedAudio means builtin-transcribe cannot decode the audio: it is not a WAV
	// file, or its samples are in a format the engine does not read.
	ErrUnsupportedAudio = errors.New("unsupported audio")
	// ErrMalformedAudio means the audio is a WAV file whose header contradicts itself or the
	// bytes that follow (a size beyond the file, a block_align that does not match the
	// channels and bits, a data chunk before the fmt chunk, …).
	ErrMalformedAudio = errors.New("malformed audio")
)

// audioError is a decoding failure of one kind (ErrUnsupportedAudio or ErrMalformedAudio)
// whose message says what is wrong without repeating the kind.
type audioError struct {
	kind error
	msg  string
}

func (e *audioError) Error() string { return e.msg }
func (e *audioError) Unwrap() error { return e.kind }
