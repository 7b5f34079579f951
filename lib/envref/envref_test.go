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

// TestCheckNotReserved: a reference to a variable of Zest's own services is refused with the
// field and the fix (another variable of the environment that resolves it); any other value
// passes, its shape being Check's business.
func TestCheckNotReserved(t *testing.T) {
	for _, c := range []struct {
		field, value, suggest, where string
		want                         string // "": accepted
	}{
		{"env GITHUB_TOKEN", "${ZEST_SERVICE_KEY}", "GITHUB_TOKEN", "the tool host's environment",
			"env GITHUB_TOKEN refers to ${ZEST_SERVICE_KEY}, a variable reserved for Zest's own services; no MCP server gets a ZEST_* or LEMONADE_* variable: put the value in another variable of the tool host's environment (e.g. GITHUB_TOKEN) and write ${GITHUB_TOKEN}"},
		{"bearer_token", "${LEMONADE_ADMIN_API_KEY}", "LEMONADE_TOKEN", "mcpgateway's environment",
			"bearer_token refers to ${LEMONADE_ADMIN_API_KEY}, a variable reserved for Zest's own services; no MCP server gets a ZEST_* or LEMONADE_* variable: put the value in another variable of mcpgateway's environment (e.g. MCP_LEMONADE_TOKEN) and write ${MCP_LEMONADE_TOKEN}"},
		{"env A", "${GITHUB_TOKEN}", "A", "x", ""},
		{"env A", "${ZESTY}", "A", "x", ""},         // not the ZEST_ prefix
		{"env A", "ZEST_SERVICE_KEY", "A", "x", ""}, // not a reference: Check refuses it as raw
		{"env A", "${zest_service_key}", "A", "x", ""},
	} {
		err := CheckNotReserved(c.field, c.value, c.suggest, c.where)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %q: %v, want accepted", c.field, c.value, err)
		case c.want != "" && (!errors.Is(err, ErrReserved) || err.Error() != c.want):
			t.Errorf("%s %q: %v, want %q", c.field, c.value, err, c.want)
		}
	}
	err := CheckEnvNotReserved(map[string]string{"B": "${LEMONADE_API_KEY}", "A": "${ZEST_SESSION_KEY}", "C": "${OK}"})
	if err == nil || !strings.HasPrefix(err.Error(), "env A refers to ${ZEST_SESSION_KEY}") {
		t.Errorf("CheckEnvNotReserved: %v, want the first entry by name (A)", err)
	}
	if err := CheckEnvNotReserved(map[string]string{"A": "${OK}"}); err != nil {
		t.Errorf("CheckEnvNotReserved of a plain reference: %v", err)
	}
}
