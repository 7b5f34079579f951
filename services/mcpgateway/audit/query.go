package audit

import (
	"fmt"
	"strconv"
	"time"

	"github.com/zestmcp/zest/services/mcpgateway/registry"
)

// Filters is what a listing or an export selects, as a request spells it.
type Filters struct {
	After, Before, Kind, Server, Who string
}

// maxFilterBytes bounds a filter's value: an id, a time, a server id or a who is far shorter.
const maxFilterBytes = 128

// Query checks f and makes the registry's query of it. after and before take an entry id or
// an RFC 3339 time (a time T as after keeps the entries at T and later, as before those
// before T); kind is "", "admin", "tool" or "trim". Errors name the parameter and the fix.
func (f Filters) Query() (registry.AuditQuery, error) {
	q := registry.AuditQuery{Kind: f.Kind, Server: f.Server, Who: f.Who}
	var err error
	if q.After, err = Bound("after", f.After); err != nil {
		return q, err
	}
	if q.Before, err = Bound("before", f.Before); err != nil {
		return q, err
	}
	switch f.Kind {
	case "", KindAdmin, KindTool, KindTrim:
	default:
		return q, fmt.Errorf("kind %q: want %q, %q or %q (or nothing for every kind)", f.Kind, KindAdmin, KindTool, KindTrim)
	}
	for name, v := range map[string]string{"server": f.Server, "who": f.Who} {
		if len(v) > maxFilterBytes {
			return q, fmt.Errorf("%s is %d bytes long: a %s is at most %d", name, len(v), name, maxFilterBytes)
		}
	}
	return q, nil
}

// Bound reads an after or before parameter (name) as a bound of the registry's ids: "" is
// none, an entry id is itself, an RFC 3339 time is registry.AuditTimeBound of it.
func Bound(name, v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if IsID(v) {
		return v, nil
	}
	if len(v) <= maxFilterBytes {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return registry.AuditTimeBound(t), nil
		}
	}
	return "", fmt.Errorf("%s %q: want an entry id (as ListAudit answers it: 16 hex digits, -, 16 hex digits) or an RFC 3339 time (2026-01-02T15:04:05Z)", name, clip(v))
}

// IsID reports whether v is shaped as an entry id.
func IsID(v string) bool {
	if len(v) != registry.AuditIDLen || v[16] != '-' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; i != 16 && !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// clip shortens a bad value quoted in an error.
func clip(v string) string {
	if len(v) > 48 {
		return v[:48] + "…"
	}
	return v
}

// Limits of a listing.
const (
	// DefaultListLimit is how many entries ListAudit answers when the request says 0.
	DefaultListLimit = 100
	// MaxListLimit bounds ListAudit's limit (use the export for more).
	MaxListLimit = 1000
)

// Limit checks a listing's limit (0: DefaultListLimit).
func Limit(n int32) (int, error) {
	switch {
	case n == 0:
		return DefaultListLimit, nil
	case n < 0 || n > MaxListLimit:
		return 0, fmt.Errorf("limit %s is out of range: use a whole number from 1 to %d (0: %d), or the export for everything", strconv.Itoa(int(n)), MaxListLimit, DefaultListLimit)
	}
	return int(n), nil
}
