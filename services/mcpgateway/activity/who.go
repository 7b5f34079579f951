package activity

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"unicode/utf8"

	"github.com/zestmcp/zest/lib/keyauth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Callers names who makes the calls a process serves, from the keys it is configured with:
// the holder of the API key or of the admin key by Who of that key; anyone else Anonymous —
// a caller with no token, and a caller whose token is no configured key. The latter gets
// through only while LEMONADE_API_KEY is unset (the API routes then take any token): named by
// a hash of its token, it would pick its own name, or take the name of whoever used that
// token before.
//
// Its interceptors name the caller of every gRPC call once, when it arrives (after the key
// check), and WhoOf reads the name wherever the call goes: the activity, the audit trail,
// approvals.
type Callers struct {
	keys [][sha256.Size]byte // the SHA-256 of each configured key
}

// NewCallers names callers by keys' API and admin keys (the service key names nobody: API and
// admin callers never hold it).
func NewCallers(keys keyauth.Keys) *Callers {
	c := &Callers{}
	for _, k := range []string{keys.API, keys.Admin} {
		if k != "" {
			c.keys = append(c.keys, sha256.Sum256([]byte(k)))
		}
	}
	return c
}

// Of is who presented authorization (an Authorization value, "Bearer <token>"). The token's
// hash is compared with every configured key's in constant time.
func (c *Callers) Of(authorization string) string {
	token := keyauth.BearerToken(authorization)
	if token == "" || c == nil {
		return Anonymous
	}
	sum := sha256.Sum256([]byte(token))
	known := 0
	for _, k := range c.keys {
		known |= subtle.ConstantTimeCompare(sum[:], k[:])
	}
	if known == 0 {
		return Anonymous
	}
	return hex.EncodeToString(sum[:whoBytes])
}

// whoKey is the context key of the caller's name.
type whoKey struct{}

// Context returns ctx naming the caller of its gRPC call (its incoming authorization
// metadata), for WhoOf.
//
// A caller let in by an OAuth access token (keyauth.TokenCallerOf) is named by the token's
// subject, TokenPrefix before it, at most MaxSubjectBytes of it: the issuer vouches for it.
func (c *Callers) Context(ctx context.Context) context.Context {
	if tc, ok := keyauth.TokenCallerOf(ctx); ok {
		return context.WithValue(ctx, whoKey{}, TokenPrefix+truncate(tc.Subject, MaxSubjectBytes))
	}
	authorization := ""
	if v := metadata.ValueFromIncomingContext(ctx, "authorization"); len(v) > 0 {
		authorization = v[0]
	}
	return context.WithValue(ctx, whoKey{}, c.Of(authorization))
}

// ServerOptions name the caller of every unary and streaming call of a gRPC server; put them
// after the key check (lib/grpcserve's chain comes first).
func (c *Callers) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return h(c.Context(ctx), req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, namedStream{ss, c.Context(ss.Context())})
		}),
	}
}

// namedStream is a server stream whose context names its caller.
type namedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s namedStream) Context() context.Context { return s.ctx }

// WhoOf is who made the call of ctx, as Callers named it when the call arrived: Anonymous
// when nothing named it (never a name read from the call's own token).
func WhoOf(ctx context.Context) string {
	if w, ok := ctx.Value(whoKey{}).(string); ok {
		return w
	}
	return Anonymous
}

// whoBytes is how much of a key's SHA-256 names it: 12 hex digits.
const whoBytes = 6

// Who names the holder of a key without revealing it: the first 12 hex digits of the key's
// SHA-256 (Anonymous for no key). The same key is always the same name, so an operator can
// tell callers apart and match a name to a key they hold (printf %s KEY | sha256sum). Only
// a configured key names a caller (Callers).
func Who(key string) string {
	if key == "" {
		return Anonymous
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:whoBytes])
}

// TokenPrefix starts the name of a caller by access token ("oauth:<subject>"); MaxSubjectBytes
// bounds the subject kept.
const (
	TokenPrefix     = "oauth:"
	MaxSubjectBytes = 128
)

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
