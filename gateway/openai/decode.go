package openai

import (
	"bytes"
	"encoding/json"

	"github.com/zestmcp/zest/lib/jsonerr"
	"github.com/zestmcp/zest/lib/openaichat"
)

// decodeJSON decodes a request body into the struct v. A body that is not a JSON object, or
// a field of the wrong type, is an *openaichat.FieldError in words of its own: no decoder
// text (Go types, "json: …") reaches a client. The body is decoded once; only a body that is
// not an object at all is read again, by openaichat.DecodeObject, to say how.
func decodeJSON(body []byte, v any) error {
	err := json.Unmarshal(body, v)
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); err == nil && len(trimmed) > 0 && trimmed[0] == '{' {
		return nil
	}
	// Unmarshal checks the syntax of the whole body before it decodes: a type error names a
	// member of a well-formed object, unless the body itself is of the wrong type ("").
	if field, want, got, ok := jsonerr.TypeError(err); ok && field != "" {
		return &openaichat.FieldError{Param: field, Message: field + " must be " + want + ", not " + got}
	}
	if _, err := openaichat.DecodeObject(body); err != nil {
		return err // not a JSON object (null, an array, malformed, two values, …)
	}
	return &openaichat.FieldError{Message: "the body is not a valid request"}
}
