package httpguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/ratelimit"
)

// Failed authentications are slowed per address (docs/operator/security.md): each request that
// presents a key that is wrong takes a token of its address's bucket (Failures); while the
// bucket is empty, a key from that address is not even compared — the answer is 429 with
// Retry-After, whatever the key — so a guesser learns nothing faster than the bucket refills.
// Answering a wrong key 429 but a right one 200 would tell the guesser when it is right at
// full speed: a throttle must refuse before it checks.
//
// A caller with a good key is not slowed by another's guesses from the same address on the
// connections it proved its key on: a connection (ConnContext) remembers the configured key
// it presented, and while its address is throttled its requests that present that same key
// are checked as usual. Requests without a key guess nothing and are never counted.

// Failures counts failed authentications per address (ClientAddr) in bounded memory
// (ratelimit.Keyed: idle addresses are evicted; past the cap, new ones share one budget).
type Failures struct {
	rate  ratelimit.Rate
	table *ratelimit.Keyed
}

// NewFailures allows each address rate's burst of failed authentications, then one per its
// period; nil (no limit) for the zero Rate. maxAddrs bounds the addresses tracked
// (ratelimit.DefaultMaxKeys when ≤ 0).
func NewFailures(rate ratelimit.Rate, maxAddrs int) *Failures {
	if rate.IsZero() {
		return nil
	}
	return &Failures{rate: rate, table: ratelimit.NewKeyed(maxAddrs)}
}

func (f *Failures) limits() ratelimit.Limits { return ratelimit.Limits{Rate: f.rate} }

// ThrottledError refuses a key from an address over its budget of failed authentications.
type ThrottledError struct {
	Addr  string
	Rate  ratelimit.Rate
	Retry time.Duration
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("Too many failed authentications from %s: it may present %s (ZEST_AUTH_FAILURE_LIMIT), so keys from it are not checked now; retry after %d s",
		e.Addr, e.Rate.Words("wrong keys"), ratelimit.RetryAfterSeconds(e.Retry))
}

// Proven keys of a connection.
const (
	provenNone int32 = iota
	provenAPI
	provenAdmin
)

// conn is what the edge remembers of one client connection: the configured key it proved.
type conn struct{ proven atomic.Int32 }

type connKey struct{}

// ConnContext is the http.Server's ConnContext: each connection remembers the key it proved.
func ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, &conn{})
}

func connOf(r *http.Request) *conn {
	c, _ := r.Context().Value(connKey{}).(*conn)
	return c
}

// Verify checks token (from r, or from a message of r's WebSocket) with check, one of
// g.Keys' checks. A wrong token counts against r's address; from an address over its budget a
// token is refused with *ThrottledError before it is compared, unless r's connection proved
// that very key before. nil means accepted.
func (g Guard) Verify(r *http.Request, token string, check func(string) error) error {
	f := g.Failures
	var addr string
	if f != nil && token != "" {
		addr = ClientAddr(r.RemoteAddr)
		if wait := f.table.Wait(addr, f.limits()); wait > 0 && !g.provenBy(r, token) {
			return &ThrottledError{Addr: addr, Rate: f.rate, Retry: wait}
		}
	}
	if err := check(token); err != nil {
		if addr != "" {
			d := f.table.Admit(addr, f.limits())
			d.Release()
		}
		return err
	}
	g.prove(r, token)
	return nil
}

// provenBy reports whether r's connection proved the configured key token is.
func (g Guard) provenBy(r *http.Request, token string) bool {
	c := connOf(r)
	if c == nil {
		return false
	}
	switch c.proven.Load() {
	case provenAPI:
		return keyauth.Equal(token, g.Keys.API)
	case provenAdmin:
		return keyauth.Equal(token, g.Keys.Admin)
	}
	return false
}

// prove records on r's connection the configured key token is (none when it is no configured
// key: with no API key set, any token is accepted and proves nothing).
func (g Guard) prove(r *http.Request, token string) {
	c := connOf(r)
	if c == nil || token == "" {
		return
	}
	switch {
	case g.Keys.Admin != "" && keyauth.Equal(token, g.Keys.Admin):
		c.proven.Store(provenAdmin)
	case g.Keys.API != "" && keyauth.Equal(token, g.Keys.API):
		c.proven.Store(provenAPI)
	}
}

// Refuse answers a failed Verify in the edge's key-refusal shape: 429 with Retry-After for a
// throttled address, 403 when administration has no key configured, else 401.
func Refuse(w http.ResponseWriter, err error) {
	RefuseAs(w, err, WriteError)
}

// ErrorWriter writes an error answer in a route family's shape.
type ErrorWriter func(w http.ResponseWriter, status int, msg string)

// RefuseAs is Refuse in the shape write gives (a route family's: OpenAI's on /api/v1).
func RefuseAs(w http.ResponseWriter, err error, write ErrorWriter) {
	var th *ThrottledError
	switch {
	case errors.As(err, &th):
		w.Header().Set("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(th.Retry)))
		write(w, http.StatusTooManyRequests, err.Error())
	case errors.Is(err, keyauth.ErrAdminNotConfigured):
		write(w, http.StatusForbidden, err.Error())
	default:
		write(w, http.StatusUnauthorized, err.Error())
	}
}

// ClientAddr is the address a caller is counted by: its IP, an IPv6 one by its /64 (which one
// host usually holds whole).
func ClientAddr(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() == nil {
		return (&net.IPNet{IP: ip.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
	}
	return ip.String()
}
