// Package jsonerr words encoding/json's type errors for clients: which field, what it must
// be and what was sent, in JSON's terms — never Go's type names or the decoder's own text.
package jsonerr

import (
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
