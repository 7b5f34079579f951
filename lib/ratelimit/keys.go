package ratelimit

import (
	"fmt"
	"regexp"
	"strings"
)

// Off is the value that turns a limit off in an environment variable (ZEST_RATE_LIMIT=off)
// and in an override (admin=off).
const Off = "off"

// ParseSetting reads a rate setting: Off or "" is no limit (the zero Rate), anything else
// as Parse reads it.
func ParseSetting(s string) (Rate, error) {
	if s == "" || s == Off {
		return Rate{}, nil
	}
	return Parse(s)
}

// KeyName is the shape of a name in an override list: a role (a word) or the 12 hex digits
// the activity log names a key by.
var KeyName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$|^[0-9a-f]{12}$`)

// ParseOverrides reads a list of overrides per key, "name=rate,name=rate" (spaces around the
// items allowed): each name a role or a 12-hex key hash (KeyName), each rate as ParseSetting
// reads it (Off: that key is not limited). A name given twice is refused. Which names mean
// something is the caller's to check.
func ParseOverrides(s string) (map[string]Rate, error) {
	out := map[string]Rate{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		name, val, ok := strings.Cut(item, "=")
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: item %q has no \"=\": write name=rate, e.g. api=50/s,admin=off,3f2a9c1b0d4e=5/s", ErrSyntax, truncate(item, 40))
		case !KeyName.MatchString(name):
			return nil, fmt.Errorf("%w: %q does not name a key: use a role (api, admin, anonymous) or the 12 hex digits of the key's SHA-256 that the activity log shows (printf %%s KEY | sha256sum | cut -c1-12) — never the key itself", ErrSyntax, truncate(name, 40))
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%w: %q is named twice: keep one", ErrSyntax, name)
		}
		r, err := ParseSetting(val)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = r
	}
	return out, nil
}

// JSONRPCCode is the JSON-RPC error code of a call refused by a limit, at the edge (/mcp
// over its key's limit) and in mcpgateway (a server over its rate_limit or max_concurrency):
// in JSON-RPC's range for implementation-defined server errors (-32000 to -32099), and
// "429" read backwards from its end. Its data carries retry_after_ms.
const JSONRPCCode = -32029
