package builtin

import "errors"

// Errors of the built-in engine; the node maps them to gRPC codes.
var (
	// ErrWrongModel means the model exists but does not answer this kind of request.
	ErrWrongModel = errors.New("model does not answer this request")
	// ErrBadRequest means the request itself is malformed.
	ErrBadRequest = errors.New("bad request")
)
