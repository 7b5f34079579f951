package edge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/gateway/openai"
	"github.com/zestmcp/zest/lib/envflag"
	"github.com/zestmcp/zest/lib/jsonrpcerr"
	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/ratelimit"
)

// Limits per key (docs/operator/untrusted-tools.md): every API route counts its caller's calls in a
// token bucket and its calls in flight, per caller — the admin key, the API key, or for a
// caller that presents neither (no key configured, or a route open without one) its address —
// and refuses a call over either with 429, Retry-After and the route family's error shape.
// Callers are told apart by the keys Lemonade has, so the clients that share a key share its
// budget; an anonymous caller is its address (an IPv6 address by its /64, which one host
// usually holds whole).
//
// Two sets of limits, two kinds of caller. A configured key, and a caller on this machine's
// loopback (where no key is needed, the person at the machine), take ZEST_RATE_LIMIT and
// ZEST_CONCURRENCY_LIMIT: none by default — the operator gave them the key, or the machine,
// and an evaluation harness at 128 completions at once is their legitimate work. A caller from
// another address without a key takes ZEST_ANONYMOUS_RATE_LIMIT and
// ZEST_ANONYMOUS_CONCURRENCY_LIMIT, per address: far above what a person or Lemonade's GUI
// needs, low enough that one address looping on the API cannot take the services from the
// others.

// Defaults of the limits per key.
const (
	DefaultRateLimit                 = ratelimit.Off
	DefaultConcurrencyLimit          = 0
	DefaultAnonymousRateLimit        = "100/s:200"
	DefaultAnonymousConcurrencyLimit = 64
	// MaxConcurrencyLimit bounds ZEST_CONCURRENCY_LIMIT and ZEST_ANONYMOUS_CONCURRENCY_LIMIT.
	MaxConcurrencyLimit = 100_000
)

// Roles an override names besides a key's hash, and the roles of keyless callers.
const (
	roleAPI       = "api"
	roleAdmin     = "admin"
	roleLoopback  = "loopback"  // no configured key, from this machine's loopback
	roleAnonymous = "anonymous" // no configured key, from another address
)

// keyLimits holds the limits per key and their state.
type keyLimits struct {
	keys      keyauth.Keys
	def       ratelimit.Limits          // keys and loopback
	anonymous ratelimit.Limits          // keyless callers from another address
	overrides map[string]ratelimit.Rate // role → rate (zero: not limited by rate)
	table     *ratelimit.Keyed
}

// parseKeyLimits reads ZEST_RATE_LIMIT, ZEST_CONCURRENCY_LIMIT, ZEST_ANONYMOUS_RATE_LIMIT,
// ZEST_ANONYMOUS_CONCURRENCY_LIMIT and ZEST_RATE_LIMIT_KEYS; an error names the setting and
// the fix.
func parseKeyLimits(c *Config) (*keyLimits, error) {
	def, err := ratelimit.ParseSetting(c.RateLimit)
	if err != nil {
		return nil, fmt.Errorf("rate-limit (ZEST_RATE_LIMIT): %w, or off", err)
	}
	anon, err := ratelimit.ParseSetting(c.AnonymousRateLimit)
	if err != nil {
		return nil, fmt.Errorf("anonymous-rate-limit (ZEST_ANONYMOUS_RATE_LIMIT): %w, or off", err)
	}
	for _, n := range []struct {
		flag string
		v    int
	}{{"concurrency-limit", c.ConcurrencyLimit}, {"anonymous-concurrency-limit", c.AnonymousConcurrencyLimit}} {
		if n.v < 0 || n.v > MaxConcurrencyLimit {
			return nil, fmt.Errorf("%s (%s) %d: want 0 (no limit) to %d calls in flight per key", n.flag, envflag.EnvName(n.flag), n.v, MaxConcurrencyLimit)
		}
	}
	byName, err := ratelimit.ParseOverrides(c.RateLimitKeys)
	if err != nil {
		return nil, fmt.Errorf("rate-limit-keys (ZEST_RATE_LIMIT_KEYS): %w", err)
	}
	l := &keyLimits{keys: c.Keys, def: ratelimit.Limits{Rate: def, Concurrency: c.ConcurrencyLimit},
		anonymous: ratelimit.Limits{Rate: anon, Concurrency: c.AnonymousConcurrencyLimit},
		overrides: map[string]ratelimit.Rate{}, table: ratelimit.NewKeyed(c.RateLimitMaxCallers)}
	for name, r := range byName {
		role := name
		switch name {
		case roleAnonymous, roleLoopback:
			return nil, fmt.Errorf("rate-limit-keys (ZEST_RATE_LIMIT_KEYS): %q names no key: callers without a key from another address take ZEST_ANONYMOUS_RATE_LIMIT, those on loopback ZEST_RATE_LIMIT", name)
		case roleAPI:
			if c.Keys.API == "" {
				return nil, fmt.Errorf("rate-limit-keys (ZEST_RATE_LIMIT_KEYS): %q names %s, which is not set: set it or drop %q", name, keyauth.EnvAPIKey, name)
			}
		case roleAdmin:
			if c.Keys.Admin == "" {
				return nil, fmt.Errorf("rate-limit-keys (ZEST_RATE_LIMIT_KEYS): %q names %s, which is not set: set it or drop %q", name, keyauth.EnvAdminKey, name)
			}
		default:
			switch {
			case c.Keys.Admin != "" && keyHash(c.Keys.Admin) == name:
				role = roleAdmin
			case c.Keys.API != "" && keyHash(c.Keys.API) == name:
				role = roleAPI
			default:
				return nil, fmt.Errorf("rate-limit-keys (ZEST_RATE_LIMIT_KEYS): %q is neither a role (api, admin) nor the hash of %s or %s (the first 12 hex digits of its SHA-256, as the activity log shows it)", name, keyauth.EnvAPIKey, keyauth.EnvAdminKey)
			}
		}
		if _, dup := l.overrides[role]; dup {
			return nil, fmt.Errorf("rate-limit-keys (ZEST_RATE_LIMIT_KEYS): the %s key is named twice (by its role and by its hash): keep one", role)
		}
		l.overrides[role] = r
	}
	return l, nil
}

// keyHash names a key as the activity log does (services/mcpgateway/activity.Who).
func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:6])
}

// caller tells who made r: the table's key, the role whose limits apply, and how a message
// names it. Only a configured key, or an access token the edge verified (its subject), names a
// caller: any other token is anonymous (a token that opens nothing must not buy a fresh budget
// per value).
func (l *keyLimits) caller(r *http.Request) (key, role, label string) {
	if tok := keyauth.BearerToken(r.Header.Get("Authorization")); tok != "" {
		if l.keys.Admin != "" && keyauth.Equal(tok, l.keys.Admin) {
			return roleAdmin, roleAdmin, "the admin key (" + keyauth.EnvAdminKey + ")"
		}
		if l.keys.API != "" && keyauth.Equal(tok, l.keys.API) {
			return roleAPI, roleAPI, "the API key (" + keyauth.EnvAPIKey + ")"
		}
	}
	// A caller let in by an access token is its subject, whose token carries its role.
	if c := httpguard.TokenClaims(r); c != nil {
		role := roleAPI
		if c.Admin {
			role = roleAdmin
		}
		return "oauth " + c.Subject, role, "the OAuth subject " + strconv.Quote(c.Subject)
	}
	addr := httpguard.ClientAddr(r.RemoteAddr)
	if isLoopback(r.RemoteAddr) {
		return "addr " + addr, roleLoopback, "the address " + addr
	}
	return "addr " + addr, roleAnonymous, "the address " + addr
}

// isLoopback reports whether a remote address is this machine's loopback.
func isLoopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// off reports whether no caller is limited at all (both sets of limits off, no override that
// sets a rate): the routes are served without the check.
func (l *keyLimits) off() bool {
	if !l.def.IsZero() || !l.anonymous.IsZero() {
		return false
	}
	for _, r := range l.overrides {
		if !r.IsZero() {
			return false
		}
	}
	return true
}

// limitsOf are the limits of a role and the settings that gave its rate and its concurrency:
// the anonymous ones, or the default with the role's rate overridden.
func (l *keyLimits) limitsOf(role string) (lim ratelimit.Limits, rateFrom, concurrencyFrom string) {
	if role == roleAnonymous {
		return l.anonymous, "ZEST_ANONYMOUS_RATE_LIMIT", "ZEST_ANONYMOUS_CONCURRENCY_LIMIT"
	}
	lim, rateFrom = l.def, "ZEST_RATE_LIMIT"
	if r, ok := l.overrides[role]; ok {
		lim.Rate, rateFrom = r, "ZEST_RATE_LIMIT_KEYS"
	}
	return lim, rateFrom, "ZEST_CONCURRENCY_LIMIT"
}

// limitedWriter writes a 429 in a route family's shape (Retry-After is set already).
type limitedWriter func(w http.ResponseWriter, msg string, retryAfterMs int64)

// wrap limits the calls of next per caller; write answers a refused one. A response its
// client holds open (a stream mcpgateway asks the edge to admit: admitter) gives back its
// place among the calls in flight once admitted (inFlight): a client holds it for hours, and
// the streams have bounds of their own (streams.go).
func (l *keyLimits) wrap(write limitedWriter, next http.Handler) http.Handler {
	if l.off() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, role, label := l.caller(r)
		lim, from, concurrencyFrom := l.limitsOf(role)
		d := l.table.Admit(key, lim)
		if !d.OK {
			secs := ratelimit.RetryAfterSeconds(d.RetryAfter)
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			var msg string
			if d.Reason == ratelimit.ReasonConcurrency {
				msg = fmt.Sprintf("Too many requests: %s has %d requests in flight, its limit (%s); retry when one has finished, after %d s", label, lim.Concurrency, concurrencyFrom, secs)
			} else {
				msg = fmt.Sprintf("Rate limit exceeded: %s may make %s (%s); retry after %d s", label, lim.Rate.Words("requests"), from, secs)
			}
			if d.Overflow {
				msg += " (the edge tracks too many callers at once: new ones share one budget)"
			}
			write(w, msg, max(1, d.RetryAfter.Milliseconds()))
			return
		}
		defer d.Release()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), inFlightKey{}, &d)))
	})
}

// inFlightKey keys the request's place among its caller's calls in flight (wrap).
type inFlightKey struct{}

// leaveInFlight gives back r's place among its caller's calls in flight: it holds a stream.
// The handler's goroutine calls it, as wrap's release.
func leaveInFlight(r *http.Request) {
	if d, ok := r.Context().Value(inFlightKey{}).(*ratelimit.Decision); ok {
		d.Release()
	}
}

// batch counts the other n−1 messages of a request that weighs n (a batch of n messages:
// admitter) against the rate of its caller (the first was counted as the request).
// Over the rate, or more than its burst, it writes a 429 with write and returns false.
func (l *keyLimits) batch(write limitedWriter) func(w http.ResponseWriter, r *http.Request, n int) bool {
	return func(w http.ResponseWriter, r *http.Request, n int) bool {
		key, role, label := l.caller(r)
		lim, from, _ := l.limitsOf(role)
		var d ratelimit.Decision
		if !lim.Rate.IsZero() && n > lim.Rate.Burst { // the bucket never holds the whole batch
			d = ratelimit.Decision{Reason: ratelimit.ReasonBurst, RetryAfter: lim.Rate.Fill()}
		} else {
			d = l.table.Take(key, lim, n-1)
		}
		if d.OK {
			return true
		}
		secs := ratelimit.RetryAfterSeconds(d.RetryAfter)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		msg := fmt.Sprintf("Rate limit exceeded: %s may make %s (%s), and a batch counts each of its %d messages; retry after %d s", label, lim.Rate.Words("requests"), from, n, secs)
		if d.Reason == ratelimit.ReasonBurst {
			msg = fmt.Sprintf("Rate limit exceeded: a batch of %d messages is more than the %d requests %s may make at once (%s, %s): send at most %d per batch", n, lim.Rate.Burst, label, lim.Rate.Words("requests"), from, lim.Rate.Burst)
		}
		write(w, msg, max(1, d.RetryAfter.Milliseconds()))
		return false
	}
}

// The 429 of each route family.

// openAILimited is OpenAI's rate-limit error: {"error":{"message","type":"requests","param":null,"code":"rate_limit_exceeded"}}.
func openAILimited(w http.ResponseWriter, msg string, _ int64) { openai.WriteLimited(w, msg) }

// mcpLimited is the MCP endpoints' 429 (lib/jsonrpcerr, id null: the edge has not read the
// request) with ratelimit.JSONRPCCode and the wait in data.retry_after_ms.
func mcpLimited(w http.ResponseWriter, msg string, retryAfterMs int64) {
	jsonrpcerr.WriteLimited(w, msg, retryAfterMs)
}

// adminLimited is the admin routes' shape with status_code 429.
func adminLimited(w http.ResponseWriter, msg string, _ int64) {
	writeAdminError(w, http.StatusTooManyRequests, msg)
}
