package supervisor

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/envref"
)

func TestParseEnvAllow(t *testing.T) {
	cases := []struct {
		name, list string
		want       []string
		errs       []string // substrings of the error, one per refused entry
	}{
		{"empty", "", nil, nil},
		{"names and prefixes", " NODE_* , PYTHONPATH,,HTTPS_PROXY", []string{"NODE_*", "PYTHONPATH", "HTTPS_PROXY"}, nil},
		{"reserved names", "ZEST_SERVICE_KEY,OK,LEMONADE_ADMIN_API_KEY", []string{"OK"},
			[]string{"ZEST_SERVICE_KEY is reserved for Zest's own services", "LEMONADE_ADMIN_API_KEY is reserved"}},
		{"reserved prefixes", "ZEST_*,LEMONADE_X*", nil, []string{"ZEST_* would match ZEST* variables", "LEMONADE_X* would match LEMONADE*"}},
		{"prefixes that cover a reserved one", "*,L*,ZES*,LC_*", []string{"LC_*"}, []string{`"*" is not a variable name`, "L* would match LEMONADE*", "ZES* would match ZEST*"}},
		{"malformed", "A-B,1X,X*Y", nil, []string{`"A-B"`, `"1X"`, `"X*Y"`}},
		{"names that only look alike", "LEMONADE,ZEST", []string{"LEMONADE", "ZEST"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEnvAllow(tc.list)
			if !slices.Equal(got, tc.want) {
				t.Errorf("entries = %q, want %q", got, tc.want)
			}
			if len(tc.errs) == 0 && err != nil {
				t.Fatalf("err = %v", err)
			}
			for _, e := range tc.errs {
				if err == nil || !strings.Contains(err.Error(), e) {
					t.Errorf("err = %v, want it to contain %q", err, e)
				}
			}
		})
	}
}

func TestChildEnvKeepsOnlyAllowedAndDeclared(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin", "HOME=/home/z", "LC_ALL=C.UTF-8", "NODE_OPTIONS=--x", "PYTHONPATH=/p",
		"ZEST_SERVICE_KEY=s3cret", "LEMONADE_ADMIN_API_KEY=adm1n", "AWS_SECRET_ACCESS_KEY=aws", "API_TOKEN=inherited",
		"noequals",
	}
	f := newEnvFilter(DefaultEnvAllow, []string{"NODE_*", "ZEST_SNEAKY", "LEMONADE_*"}) // reserved entries never match
	got := childEnv(environ, f, []string{"API_TOKEN=declared", "ZEST_LIKE_NAME=chosen-by-spec"})
	want := []string{"PATH=/usr/bin", "HOME=/home/z", "LC_ALL=C.UTF-8", "NODE_OPTIONS=--x", "API_TOKEN=declared", "ZEST_LIKE_NAME=chosen-by-spec"}
	if !slices.Equal(got, want) {
		t.Fatalf("child env = %q, want %q", got, want)
	}
}

func TestReferenceToAReservedVariableIsRefused(t *testing.T) {
	s := newSup(t, nil)
	for _, tc := range []struct{ key, ref, fix string }{
		{"API_KEY", "${LEMONADE_API_KEY}", "${API_KEY}"},
		{"TOKEN", "${ZEST_SERVICE_KEY}", "${TOKEN}"},
		{"LEMONADE_API_KEY", "${LEMONADE_API_KEY}", "${MCP_LEMONADE_API_KEY}"},
	} {
		sp := spec("fx")
		sp.Env = map[string]string{tc.key: tc.ref, "OTHER": "${PATH}"}
		_, err := s.EnsureStarted(t.Context(), sp, false)
		if !errors.Is(err, ErrReservedVariable) || !strings.Contains(err.Error(), "env "+tc.key+" refers to "+tc.ref) ||
			!strings.Contains(err.Error(), tc.fix) {
			t.Errorf("env %s=%s: err = %v", tc.key, tc.ref, err)
		}
	}
	// A raw value is reported as such once no reserved variable is referred to.
	sp := spec("fx")
	sp.Env = map[string]string{"A": "raw", "B": "${PATH}"}
	if _, err := s.EnsureStarted(t.Context(), sp, false); !errors.Is(err, envref.ErrRawValue) {
		t.Errorf("raw value: %v", err)
	}
}

// TestChildEnvironmentIsAllowListed: the child sees its declared references, the allowed
// variables of the tool host, and nothing else — no key, no setting, no stray variable.
func TestChildEnvironmentIsAllowListed(t *testing.T) {
	t.Setenv("ZEST_SERVICE_KEY", "service-key-that-must-not-leak")
	t.Setenv("LEMONADE_ADMIN_API_KEY", "admin-key-that-must-not-leak")
	t.Setenv("LEMONADE_API_KEY", "api-key-that-must-not-leak")
	t.Setenv("TOOLHOST_TEST_UNDECLARED", "not-for-children")
	t.Setenv("TOOLHOST_TEST_SECRET", "declared-secret")
	t.Setenv("NODE_TEST_ALLOWED", "by-pattern")
	t.Setenv("LC_TEST_LOCALE", "by-default-pattern")
	s := newSup(t, func(c *Config) { c.EnvAllow = []string{"NODE_*"} })
	sp := spec("fx")
	sp.Env = map[string]string{"API_TOKEN": "${TOOLHOST_TEST_SECRET}"}
	if _, err := s.EnsureStarted(t.Context(), sp, false); err != nil {
		t.Fatal(err)
	}
	res, err := s.Call(t.Context(), "fx", "tools/call", json.RawMessage(`{"name":"environ"}`), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var r struct{ Content []struct{ Text string } }
	var env []string
	if err := json.Unmarshal(res, &r); err != nil || len(r.Content) != 1 || json.Unmarshal([]byte(r.Content[0].Text), &env) != nil {
		t.Fatalf("environ result %s: %v", res, err)
	}
	for _, want := range []string{"API_TOKEN=declared-secret", "NODE_TEST_ALLOWED=by-pattern", "LC_TEST_LOCALE=by-default-pattern"} {
		if !slices.Contains(env, want) {
			t.Errorf("child env lacks %s: %q", want, env)
		}
	}
	allowed := newEnvFilter(DefaultEnvAllow, []string{"NODE_*"})
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k != "API_TOKEN" && !allowed.allows(k) {
			t.Errorf("child env has %s, neither declared nor allowed", k)
		}
		if strings.HasPrefix(k, "ZEST_") || strings.HasPrefix(k, "LEMONADE_") || strings.Contains(kv, "must-not-leak") {
			t.Errorf("child env has %s", k)
		}
	}
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "PATH=") }) {
		t.Errorf("child env lacks PATH: %q", env)
	}
}
