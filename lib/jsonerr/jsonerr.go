// Package jsonerr words encoding/json's type errors for clients: which field, what it must
// be and what was sent, in JSON's terms — never Go's type names or the decoder's own text.
package jsonerr

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
)

// TypeError reports the parts of a *json.UnmarshalTypeError inside err: the field's path as
// the decoder gives it ("" for the top level), what the field must be, and what was sent.
func TypeError(err error) (field, want, got string, ok bool) {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return "", "", "", false
	}
	return te.Field, Want(te.Type), Got(te.Value), true
}

// Want names the JSON a Go type decodes from: "a string", "true or false", "an integer in
// range", "a number", "a base64 string", "an array", "an object", "a JSON value".
func Want(t reflect.Type) string {
	if t == nil {
		return "a JSON value"
	}
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
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Interface:
		return "a JSON value"
	}
	return "an object"
}

// Got words UnmarshalTypeError.Value ("string", "number", "number 1.5", "bool", …): "a
// string", "1.5", "a boolean", "an object", "something else".
func Got(v string) string {
	switch {
	case v == "":
		return "something else"
	case v == "bool":
		return "a boolean"
	case v == "number":
		return "a number"
	case strings.HasPrefix(v, "number "):
		return strings.TrimPrefix(v, "number ")
	case v == "object" || v == "array":
		return "an " + v
	}
	return "a " + v
}

// KindOf names the JSON type of a value encoding/json decoded into an any (numbers as
// float64 or, with UseNumber, json.Number): "null", "a boolean", "a number", "a string",
// "an array", "an object"; "something else" for what a decoder does not produce.
func KindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "something else"
}

// KindOfRaw names the JSON type of a raw value as KindOf does, from its first byte (the
// value is not checked further); "nothing" when it is empty.
func KindOfRaw(raw json.RawMessage) string {
	switch raw = bytes.TrimSpace(raw); {
	case len(raw) == 0:
		return "nothing"
	case raw[0] == '"':
		return "a string"
	case raw[0] == '{':
		return "an object"
	case raw[0] == '[':
		return "an array"
	case raw[0] == 't' || raw[0] == 'f':
		return "a boolean"
	case raw[0] == 'n':
		return "null"
	}
	return "a number"
}
