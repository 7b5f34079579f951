package jsonerr

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestTypeError(t *testing.T) {
	var v struct {
		N      int32             `json:"n"`
		F      float64           `json:"f"`
		B      bool              `json:"b"`
		S      string            `json:"s"`
		Data   []byte            `json:"data"`
		List   []string          `json:"list"`
		Obj    map[string]string `json:"obj"`
		Nested struct {
			X int `json:"x"`
		} `json:"nested"`
	}
	for body, want := range map[string]string{
		`{"n":"two"}`:         "n must be an integer in range, not a string",
		`{"n":1.5}`:           "n must be an integer in range, not 1.5",
		`{"f":true}`:          "f must be a number, not a boolean",
		`{"b":"yes"}`:         "b must be true or false, not a string",
		`{"s":{}}`:            "s must be a string, not an object",
		`{"data":3}`:          "data must be a base64 string, not a number",
		`{"list":"x"}`:        "list must be an array, not a string",
		`{"obj":[1]}`:         "obj must be an object, not an array",
		`{"nested":{"x":[]}}`: "nested.x must be an integer in range, not an array",
	} {
		field, w, got, ok := TypeError(json.Unmarshal([]byte(body), &v))
		if msg := field + " must be " + w + ", not " + got; !ok || msg != want || strings.Contains(msg, "int32") {
			t.Errorf("%s: %q, want %q", body, msg, want)
		}
	}
	if _, _, _, ok := TypeError(json.Unmarshal([]byte(`{`), &v)); ok {
		t.Error("a syntax error is not a type error")
	}
}

// TestKindOf: a value decoded into an any (with and without UseNumber) and the same value
// raw are named alike.
func TestKindOf(t *testing.T) {
	for raw, want := range map[string]string{
		`null`: "null", `true`: "a boolean", `false`: "a boolean", `-1.5e3`: "a number", `7`: "a number",
		`"x"`: "a string", `[1]`: "an array", ` {"a":1}`: "an object",
	} {
		var plain, number any
		if err := json.Unmarshal([]byte(raw), &plain); err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&number); err != nil {
			t.Fatal(err)
		}
		if got := []string{KindOf(plain), KindOf(number), KindOfRaw(json.RawMessage(raw))}; got[0] != want || got[1] != want || got[2] != want {
			t.Errorf("%s: %q, want %q", raw, got, want)
		}
	}
	if got := KindOfRaw(json.RawMessage("  ")); got != "nothing" {
		t.Errorf("empty raw value: %q", got)
	}
	if got := KindOf(int32(1)); got != "something else" {
		t.Errorf("a Go value no decoder makes: %q", got)
	}
}
