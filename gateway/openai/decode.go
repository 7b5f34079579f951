package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

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
		return &openaichat.FieldError{Param: te.Field, Message: fmt.Sprintf("%s must be %s, not %s", param, jsonKind(te.Type), valueKind(te.Value))}
	}
	return &openaichat.FieldError{Message: "the body is not a valid request"}
}

// jsonKind names the JSON a Go type is decoded from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// valueKind turns UnmarshalTypeError.Value ("string", "number", "number 1.5", "bool", …)
// into words.
func valueKind(v string) string {
	switch v {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "array":
		return "an array"
	case "object":
		return "an object"
	case "number":
		return "a number"
	}
	if len(v) > len("number ") && v[:len("number ")] == "number " {
		return v[len("number "):]
	}
	return v
}
