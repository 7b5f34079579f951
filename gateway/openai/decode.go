package openai

import (
	"encoding/json"
	"errors"
	"fmt"

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
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te):
		param := te.Field
		if param == "" {
			param = "the body"
		}
		return &openaichat.FieldError{Param: te.Field, Message: fmt.Sprintf("%s must be %s, not %s", param, jsonerr.Want(te.Type), jsonerr.Got(te.Value))}
	}
	return &openaichat.FieldError{Message: "the body is not a valid request"}
}
