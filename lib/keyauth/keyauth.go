// Package keyauth checks Lemonade's API and admin keys, over HTTP at the edge and over gRPC in
// every service, so that programmatic control is no back door. Keys are compared in constant
// time and never logged.
package keyauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/zestmcp/zest/lib/oauthrs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// Environment variables that hold the keys: Lemonade's two, and Zest's service key, which
// only Zest's own services hold (mcpgateway presents it to the tool host) — in the variable,
// or in a file the other variable names, which keeps it out of the process's environment.
const (
	EnvAPIKey         = "LEMONADE_API_KEY"
	EnvAdminKey       = "LEMONADE_ADMIN_API_KEY"
	EnvServiceKey     = "ZEST_SERVICE_KEY"
	EnvServiceKeyFile = "ZEST_SERVICE_KEY_FILE"
)

// MinServiceKeyLen is the shortest service key accepted: it guards process launches.
const MinServiceKeyLen = 16

// MaxServiceKeyFileBytes bounds the file of ZEST_SERVICE_KEY_FILE: it holds one key.
const MaxServiceKeyFileBytes = 4096

// Errors carry the exact messages Lemonade's clients expect.
var (
	ErrInvalidAPIKey        = errors.New("Invalid or missing API key")
	ErrInvalidAdminKey      = errors.New("Invalid or missing admin API key")
	ErrAdminNotConfigured   = errors.New("MCP administration requires LEMONADE_ADMIN_API_KEY or LEMONADE_API_KEY")
	ErrServiceNotConfigured = errors.New("the tool host requires ZEST_SERVICE_KEY: set the same key for the tool host and for mcpgateway (ZEST_SERVICE_KEY, or a file named by ZEST_SERVICE_KEY_FILE)")
	ErrInvalidServiceKey    = errors.New("Invalid or missing service key: only Zest's own services (mcpgateway, with ZEST_SERVICE_KEY) may call the tool host")
)

// Keys are the configured keys; an empty key is not configured.
type Keys struct {
	API   string
	Admin string
	// Service is the key Zest's services present to the tool host; API and admin users never
	// hold it.
	Service string
	// ServiceFile names the file that holds Service instead (ZEST_SERVICE_KEY_FILE), read by
	// LoadServiceKey.
	ServiceFile string
}

// FromEnv reads the keys from getenv (os.Getenv when nil). A service that uses the service
// key reads its file with LoadServiceKey when it validates its configuration.
func FromEnv(getenv func(string) string) Keys {
	if getenv == nil {
		getenv = os.Getenv
	}
	return Keys{API: getenv(EnvAPIKey), Admin: getenv(EnvAdminKey), Service: getenv(EnvServiceKey), ServiceFile: getenv(EnvServiceKeyFile)}
}

// LoadServiceKey is what a service that uses the service key calls when it validates its
// configuration: it reads the key from ServiceFile, when that is set, into Service (clearing
// ServiceFile, so that a second call reads nothing), then checks the key's strength. It
// refuses both variables set at once, a file that group or others may read or write (its mode
// allows them anything), one that is not a regular file or is larger than
// MaxServiceKeyFileBytes, and an empty key. Surrounding white space (echo's newline) is not
// part of the key.
func (k *Keys) LoadServiceKey() error {
	if err := k.loadServiceKeyFile(); err != nil {
		return err
	}
	return k.CheckServiceKeyStrength()
}

func (k *Keys) loadServiceKeyFile() error {
	path := k.ServiceFile
	if path == "" {
		return nil
	}
	if k.Service != "" {
		return fmt.Errorf("%s and %s are both set: keep one (the file keeps the key out of the environment, where a process that can read this one's /proc entries would find it)", EnvServiceKey, EnvServiceKeyFile)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", EnvServiceKeyFile, err)
	}
	defer f.Close()
	fi, err := f.Stat() // of the file opened, not of the name, which could change in between
	if err != nil {
		return fmt.Errorf("%s: %w", EnvServiceKeyFile, err)
	}
	switch {
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s %s is not a regular file: name the file that holds the key", EnvServiceKeyFile, path)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%s %s is open to group or others (mode %04o): chmod 600 %s, so that only this service's user may read it", EnvServiceKeyFile, path, fi.Mode().Perm(), path)
	case fi.Size() > MaxServiceKeyFileBytes:
		return fmt.Errorf("%s %s is %d bytes long, more than %d: it must hold the key alone", EnvServiceKeyFile, path, fi.Size(), MaxServiceKeyFileBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxServiceKeyFileBytes+1))
	if err != nil {
		return fmt.Errorf("%s: %w", EnvServiceKeyFile, err)
	}
	key := strings.TrimSpace(string(b))
	switch {
	case len(b) > MaxServiceKeyFileBytes: // it grew after Stat
		return fmt.Errorf("%s %s is more than %d bytes long: it must hold the key alone", EnvServiceKeyFile, path, MaxServiceKeyFileBytes)
	case key == "":
		return fmt.Errorf("%s %s is empty: write the key in it (e.g. openssl rand -hex 32 > %s)", EnvServiceKeyFile, path, path)
	case strings.ContainsAny(key, "\r\n"):
		return fmt.Errorf("%s %s holds more than one line: it must hold the key alone", EnvServiceKeyFile, path)
	}
	k.Service, k.ServiceFile = key, ""
	return nil
}

// CheckServiceKeyStrength refuses a configured service key shorter than MinServiceKeyLen.
func (k Keys) CheckServiceKeyStrength() error {
	if k.Service != "" && len(k.Service) < MinServiceKeyLen {
		return fmt.Errorf("the service key (%s or the file of %s) is %d characters long: use at least %d random characters (e.g. openssl rand -hex 32)", EnvServiceKey, EnvServiceKeyFile, len(k.Service), MinServiceKeyLen)
	}
	return nil
}

// AdminKey is the key that guards administration: the admin key, else the API key.
func (k Keys) AdminKey() string {
	if k.Admin != "" {
		return k.Admin
	}
	return k.API
}

// CallerIsAdmin reports whether the gRPC call of ctx presented the admin key (its incoming
// authorization metadata), or an access token of an administrator that Guard.Token verified:
// false whenever no admin key is configured.
func (k Keys) CallerIsAdmin(ctx context.Context) bool {
	if c, ok := TokenCallerOf(ctx); ok && c.Admin && k.AdminKey() != "" {
		return true
	}
	if k.AdminKey() == "" {
		return false
	}
	auth := metadata.ValueFromIncomingContext(ctx, "authorization")
	return len(auth) > 0 && k.CheckAdmin(BearerToken(auth[0])) == nil
}

// Equal compares two secrets in constant time, independent of their lengths.
func Equal(got, want string) bool {
	g := sha256.Sum256([]byte(got))
	w := sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// BearerToken returns the token of an "Authorization: Bearer <token>" value.
func BearerToken(authorization string) string {
	const p = "bearer "
	if len(authorization) > len(p) && strings.EqualFold(authorization[:len(p)], p) {
		return strings.TrimSpace(authorization[len(p):])
	}
	return ""
}

// CheckAPI accepts any token when no API key is set; otherwise the API key or the admin key.
func (k Keys) CheckAPI(token string) error {
	if k.API == "" {
		return nil
	}
	okAPI := Equal(token, k.API)
	okAdmin := k.Admin != "" && Equal(token, k.Admin)
	if okAPI || okAdmin {
		return nil
	}
	return ErrInvalidAPIKey
}

// CheckAdmin fails closed: with no key configured nothing is accepted.
func (k Keys) CheckAdmin(token string) error {
	want := k.AdminKey()
	if want == "" {
		return ErrAdminNotConfigured
	}
	if !Equal(token, want) {
		return ErrInvalidAdminKey
	}
	return nil
}

// CheckService fails closed: with no service key configured nothing is accepted.
func (k Keys) CheckService(token string) error {
	if k.Service == "" {
		return ErrServiceNotConfigured
	}
	if !Equal(token, k.Service) {
		return ErrInvalidServiceKey
	}
	return nil
}

// Level is the credential a gRPC method needs.
type Level int

// Levels, from the least to the most privileged. A service method is reserved to Zest's own
// services: neither the API key nor the admin key opens it.
const (
	LevelAPI Level = iota
	LevelAdmin
	LevelService
	// LevelEndpoint is LevelAPI, or an OAuth access token Guard.Token accepts: the MCP
	// endpoints' calls, which the edge relays with the caller's token.
	LevelEndpoint
	// LevelPublic needs no key: a method whose request carries its own credential (the
	// upstream OAuth callback's state, single-use and short-lived).
	LevelPublic
)

// Guard decides which key a gRPC method needs.
type Guard struct {
	Keys Keys
	// Level maps a full method name ("/pkg.Service/Method") to the credential it needs; nil
	// means LevelAPI for every method.
	Level func(fullMethod string) Level
	// Token verifies an access token for a LevelEndpoint method (lib/oauthrs), and tells whose
	// it is; nil: keys only. It may fetch the issuer's keys, so it runs in the call's
	// interceptor (Interceptors), not in Tap.
	Token func(ctx context.Context, token string) (TokenCaller, error)
}

// exempt methods answer without a key: health probes and reflection.
func exempt(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/grpc.health.v1.") || strings.HasPrefix(fullMethod, "/grpc.reflection.")
}

func (g Guard) check(fullMethod, authorization string) error {
	if exempt(fullMethod) {
		return nil
	}
	level := LevelAPI
	if g.Level != nil {
		level = g.Level(fullMethod)
	}
	return g.Authorize(authorization, level)
}

// Authorize checks an Authorization value ("Bearer <key>") against the credential level and
// returns the gRPC status the call fails with: PermissionDenied when the level has no key
// configured (fail-closed), Unauthenticated for a missing or wrong key.
func (g Guard) Authorize(authorization string, level Level) error {
	token := BearerToken(authorization)
	var err error
	switch level {
	case LevelPublic:
		return nil
	case LevelService:
		err = g.Keys.CheckService(token)
	case LevelAdmin:
		err = g.Keys.CheckAdmin(token)
	default:
		err = g.Keys.CheckAPI(token)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrAdminNotConfigured), errors.Is(err, ErrServiceNotConfigured):
		return status.Error(codes.PermissionDenied, err.Error())
	default:
		return status.Error(codes.Unauthenticated, err.Error())
	}
}

// Tap checks a call's key from its headers when the call arrives, before gRPC reads its
// message (grpc.InTapHandle; grpcserve installs it): a caller without the key never has a
// request decoded, whatever its size, and the call fails with the status Authorize returns.
// It runs on the connection's reader goroutine, so it only compares keys.
//
// A token that is no key but looks like an access token, on a LevelEndpoint method while
// Token is set, passes Tap marked for Interceptors, which verify it before the handler
// reads the call's message.
func (g Guard) Tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	authorization := ""
	if v := info.Header.Get("authorization"); len(v) > 0 {
		authorization = v[0]
	}
	err := g.check(info.FullMethodName, authorization)
	if token := BearerToken(authorization); err != nil && g.Token != nil && g.Level != nil && g.Level(info.FullMethodName) == LevelEndpoint &&
		oauthrs.LooksLikeJWT(token) {
		return context.WithValue(ctx, pendingToken{}, token), nil
	}
	return ctx, err
}

// pendingToken marks a call whose access token Tap let through for the interceptors to verify.
type pendingToken struct{}

// TokenCaller is who a verified access token names: its subject, and whether it is an
// administrator's.
type TokenCaller struct {
	Subject string
	Admin   bool
}

type tokenCallerKey struct{}

// TokenCallerOf is the caller of ctx's call when it was let in by an access token.
func TokenCallerOf(ctx context.Context) (TokenCaller, bool) {
	c, ok := ctx.Value(tokenCallerKey{}).(TokenCaller)
	return c, ok
}

// CallerToken is the access token a caller was let in by, kept for the servers Zest calls on
// its behalf (an upstream's oauth.grant token_exchange exchanges it, RFC 8693). Formatting,
// logging or marshalling it shows no part of the token: only Reveal does, for the exchange.
type CallerToken struct{ token string }

// Reveal is the token itself.
func (t CallerToken) Reveal() string { return t.token }

// String hides the token from fmt and from anything that prints a value.
func (CallerToken) String() string { return "[caller access token]" }

// GoString hides the token from %#v.
func (t CallerToken) GoString() string { return t.String() }

// LogValue hides the token from log/slog.
func (t CallerToken) LogValue() slog.Value { return slog.StringValue(t.String()) }

// MarshalJSON hides the token from encoding/json.
func (t CallerToken) MarshalJSON() ([]byte, error) { return []byte(`"` + t.String() + `"`), nil }

type callerTokenKey struct{}

// CallerTokenOf is the verified access token ctx's caller was let in by (with TokenCallerOf);
// none for a caller by key.
func CallerTokenOf(ctx context.Context) (CallerToken, bool) {
	t, ok := ctx.Value(callerTokenKey{}).(CallerToken)
	return t, ok
}

// WithCallerToken is ctx holding token as the access token its caller was let in by (what
// the interceptors do once the token is verified; tests of the code that reads it).
func WithCallerToken(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, callerTokenKey{}, CallerToken{token: token})
}

// verifyPending verifies the access token Tap let through, if any: Unauthenticated when
// Token refuses it; else ctx naming the token's caller (TokenCallerOf) and holding the token
// (CallerTokenOf).
func (g Guard) verifyPending(ctx context.Context) (context.Context, error) {
	token, ok := ctx.Value(pendingToken{}).(string)
	if !ok {
		return ctx, nil
	}
	c, err := g.Token(ctx, token)
	if err != nil {
		return ctx, status.Error(codes.Unauthenticated, err.Error())
	}
	return WithCallerToken(context.WithValue(ctx, tokenCallerKey{}, c), token), nil
}

// Interceptors verify the access tokens Tap let through (lib/grpcserve chains them last):
// a call whose token is refused fails before its handler runs or reads a message.
func (g Guard) Interceptors() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ctx, err := g.verifyPending(ctx)
			if err != nil {
				return nil, err
			}
			return h(ctx, req)
		}, func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx, err := g.verifyPending(ss.Context())
			if err != nil {
				return err
			}
			if ctx != ss.Context() {
				ss = tokenStream{ss, ctx}
			}
			return h(srv, ss)
		}
}

// tokenStream is a server stream whose context names its token's caller.
type tokenStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s tokenStream) Context() context.Context { return s.ctx }

// Bearer is per-RPC credentials that send a key as "authorization: Bearer <key>"; an empty key
// sends nothing. It allows plaintext transports: Zest's services talk on loopback or a private
// network the operator secures.
type Bearer string

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (b Bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if b == "" {
		return nil, nil
	}
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (Bearer) RequireTransportSecurity() bool { return false }
