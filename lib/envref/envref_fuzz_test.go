package envref

import (
	"errors"
	"strings"
	"testing"
)

// FuzzEnvRef checks, for any env name and value, that a value is accepted exactly when it is
// ${NAME} with a valid NAME, that resolving a rejected value answers no pair and an error of
// fixed text (never the value), and that an accepted one resolves to its variable.
//
//	go test -run '^$' -fuzz '^FuzzEnvRef$' -fuzztime 60s ./envref/
func FuzzEnvRef(f *testing.F) {
	for _, v := range []string{"${GH}", "${_A1}", "${a}", "${}", "${1A}", "$GH", "x${GH}", "${GH}x",
		"${GH}\n", "\n${GH}", "${G-H}", "${GH", "GH}", "${${GH}}", "${ GH}", "${GÉ}", "${GH}${GH}",
		"${UNSET_X}", "ghp_abc", "\x00", "", "${\xff}"} {
		f.Add("GITHUB_TOKEN", v)
	}
	f.Add("A-B", "${GH}")
	f.Add("", "${GH}")
	f.Add("1A", "${GH}")
	f.Add("A\n", "${GH}")
	f.Fuzz(func(t *testing.T, key, value string) {
		wantVar, isRef := reference(value)
		got, err := Variable(value)
		if isRef != (err == nil) || got != wantVar {
			t.Fatalf("Variable(%q) = %q, %v; want a reference: %v", value, got, err, isRef)
		}
		if err != nil && !errors.Is(err, ErrRawValue) {
			t.Fatalf("Variable(%q): %v, want ErrRawValue", value, err)
		}

		// Every variable is set (to a value made from its name) except the UNSET_* ones.
		lookup := func(v string) (string, bool) { return "resolved:" + v, !strings.HasPrefix(v, "UNSET_") }
		pairs, err := Resolve(map[string]string{key: value}, lookup)
		var want string
		switch {
		case !validName(key):
			if !errors.Is(err, ErrBadName) || pairs != nil {
				t.Fatalf("Resolve(%q: %q) = %q, %v; want ErrBadName and nothing", key, value, pairs, err)
			}
			return
		case !isRef:
			want = "env " + key + " " + ErrRawValue.Error() // fixed text: the value is never repeated
		case strings.HasPrefix(wantVar, "UNSET_"):
			want = ErrNotSet.Error() + ": " + wantVar
		default:
			if err != nil || len(pairs) != 1 || pairs[0] != key+"=resolved:"+wantVar {
				t.Fatalf("Resolve(%q: %q) = %q, %v; want %s=resolved:%s", key, value, pairs, err, key, wantVar)
			}
			return
		}
		if err == nil || err.Error() != want || pairs != nil {
			t.Fatalf("Resolve(%q: %q) = %q, %v; want nothing and the error %q", key, value, pairs, err, want)
		}
	})
}

// reference is the rule written out apart from the regular expressions: a value is a
// reference when it is "${" + a valid name + "}", and nothing else.
func reference(v string) (name string, ok bool) {
	if len(v) < 3 || !strings.HasPrefix(v, "${") || !strings.HasSuffix(v, "}") {
		return "", false
	}
	name = v[2 : len(v)-1]
	if !validName(name) {
		return "", false
	}
	return name, true
}

// validName: a letter or '_', then letters, digits and '_' (ASCII).
func validName(n string) bool {
	for i := 0; i < len(n); i++ {
		c := n[i]
		letter := c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return n != ""
}
