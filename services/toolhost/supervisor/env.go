package supervisor

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/zestmcp/zest/lib/envref"
)

// DefaultEnvAllow is what a server inherits of the tool host's environment: the variables
// programs need to find executables and their home, speak the user's language and time zone,
// write temporary files, draw on a terminal and trust the machine's certificates. Nothing else
// of the tool host's environment reaches a server: not its keys, not its settings, not the
// variables of whoever started it. A name ending in * is a prefix.
var DefaultEnvAllow = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL",
	"LANG", "LANGUAGE", "LC_*", "TZ",
	"TMPDIR", "TEMP", "TMP", "TERM",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
}

// reserved names the variables of Zest's own services (envref.ReservedPrefixes): no server
// ever gets one, whatever the allow-list says, and no spec may refer to one.
func reserved(name string) bool { return envref.Reserved(name) }

var allowPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*\*?$`)

// ParseEnvAllow parses the operator's additions to DefaultEnvAllow
// (ZEST_TOOLHOST_ENV_ALLOW): comma-separated variable names, each optionally ending in * to
// name a prefix (NODE_*,PYTHONPATH). It returns the valid entries, and an error naming every
// refused one: a malformed entry, a ZEST_* or LEMONADE_* name, or a prefix that would match
// one (L*).
func ParseEnvAllow(list string) ([]string, error) {
	var out []string
	var errs []error
	for _, e := range strings.Split(list, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if !allowPattern.MatchString(e) {
			errs = append(errs, fmt.Errorf("%q is not a variable name or a prefix ending in * (e.g. PYTHONPATH, NODE_*)", e))
			continue
		}
		if prefix, ok := strings.CutSuffix(e, "*"); ok {
			if p := coversReserved(prefix); p != "" {
				errs = append(errs, fmt.Errorf("%s would match %s* variables, which are %w; no server gets them: name the variables, or use a longer prefix", e, p, ErrReservedVariable))
				continue
			}
		} else if reserved(e) {
			errs = append(errs, fmt.Errorf("%s is %w; no server gets a ZEST_* or LEMONADE_* variable: remove it", e, ErrReservedVariable))
			continue
		}
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

// coversReserved returns the reserved prefix that variables starting with prefix may have.
func coversReserved(prefix string) string {
	for _, p := range envref.ReservedPrefixes {
		if strings.HasPrefix(p, prefix) || strings.HasPrefix(prefix, p) {
			return strings.TrimSuffix(p, "_")
		}
	}
	return ""
}

// envFilter matches variable names against an allow-list of names and prefixes.
type envFilter struct {
	names    map[string]bool
	prefixes []string
}

func newEnvFilter(lists ...[]string) envFilter {
	f := envFilter{names: map[string]bool{}}
	for _, list := range lists {
		for _, e := range list {
			if p, ok := strings.CutSuffix(e, "*"); ok {
				f.prefixes = append(f.prefixes, p)
			} else {
				f.names[e] = true
			}
		}
	}
	return f
}

func (f envFilter) allows(name string) bool {
	if reserved(name) {
		return false
	}
	if f.names[name] {
		return true
	}
	for _, p := range f.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// checkReferences refuses a spec whose env refers to a variable of Zest's own: mcpgateway
// refuses such a config when it is saved (serverconfig), and this is the second line, for a
// spec that comes from elsewhere.
func checkReferences(env map[string]string) error {
	return envref.CheckEnvNotReserved(env)
}

// childEnv is a server's whole environment: the variables of the tool host's environ that
// allow lets through, then the spec's resolved references (which win over an inherited
// variable of the same name).
func childEnv(environ []string, allow envFilter, declared []string) []string {
	mine := make(map[string]bool, len(declared))
	for _, kv := range declared {
		k, _, _ := strings.Cut(kv, "=")
		mine[k] = true
	}
	out := make([]string, 0, len(declared)+16)
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if ok && !mine[k] && allow.allows(k) {
			out = append(out, kv)
		}
	}
	return append(out, declared...)
}
