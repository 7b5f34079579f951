package openai

import (
	"encoding/json"

	"github.com/zestmcp/zest/lib/jsonerr"
	"github.com/zestmcp/zest/lib/openaichat"
)

// decodeJSON decodes a request body into the struct v. A body that is not a JSON object, or
// a field of the wrong type, is an *openaichat.FieldError in words of its own: no decoder
// text (Go types, "json: …") reaches a client.
func decodeJSON(body []byte, v any) error {
	if _, err := openaichat.DecodeObject(body); err != nil {
		return err
	}
	err := json.Unmarshal(body, v)
	if err == nil {
		return nil
	}
	if field, want, got, ok := jsonerr.TypeError(err); ok {
		name := field
		if name == "" {
			name = "the body"
		}
		return &openaichat.FieldError{Param: field, Message: name + " must be " + want + ", not " + got}
	}
	return &openaichat.FieldError{Message: "the body is not a valid request"}
}
