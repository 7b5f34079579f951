package envref

import (
	"errors"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	lookup := func(k string) (string, bool) {
		v, ok := map[string]string{"GH": "s3cret", "EMPTY": ""}[k]
		return v, ok
	}
	got, err := Resolve(map[string]string{"GITHUB_TOKEN": "${GH}", "X": "${EMPTY}"}, lookup)
	if err != nil || strings.Join(got, ",") != "GITHUB_TOKEN=s3cret,X=" {
		t.Fatalf("Resolve = %v, %v", got, err)
	}
	cases := []struct {
		name string
		env  map[string]string
		want error
		text string
	}{
		{"raw value", map[string]string{"GITHUB_TOKEN": "ghp_abc"}, ErrRawValue, "env GITHUB_TOKEN must be a ${VARIABLE} reference; raw values are rejected"},
		{"partial reference", map[string]string{"A": "x${GH}"}, ErrRawValue, "env A must be"},
		{"bare dollar", map[string]string{"A": "$GH"}, ErrRawValue, "env A must be"},
		{"missing", map[string]string{"A": "${NOPE}"}, ErrNotSet, "Required MCP environment variable is not set: NOPE"},
		{"bad name", map[string]string{"A-B": "${GH}"}, ErrBadName, `env name "A-B"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Resolve(c.env, lookup)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
				t.Fatalf("err = %v, want %v containing %q", err, c.want, c.text)
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "ghp_abc") {
				t.Fatalf("error leaks a value: %v", err)
			}
		})
	}
}
