package oauthrs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Limits of the verifier.
const (
	// MaxSkew is the clock difference allowed between the issuer and Zest on exp, nbf and iat.
	MaxSkew = 30 * time.Second
	// MinKeysRefresh is the least time between two fetches of the issuer's keys: a token
	// signed by a key not in the set (a rotation, or a forgery) refetches them at most this
	// often, so that unknown key ids cannot make Zest hammer the issuer.
	MinKeysRefresh = 10 * time.Second
	// KeysMaxAge is how long a fetched key set is used before it is fetched again, so that a
	// key the issuer withdrew stops being accepted.
	KeysMaxAge = time.Hour
	// MaxDocumentBytes bounds a metadata document or key set read from the issuer.
	MaxDocumentBytes = 1 << 20
	// MaxTokenBytes bounds a token looked at: a longer one is refused unparsed.
	MaxTokenBytes = 16 << 10
	// FetchTimeout bounds one fetch from the issuer.
	FetchTimeout = 10 * time.Second
)

// algorithms are the signatures accepted: RSA and ECDSA (RS256 and ES256 among them) and
// EdDSA; never "none", never an HMAC (its key would be a secret shared with the issuer).
var algorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA}

// Claims is what Zest reads of a verified token.
type Claims struct {
	Subject  string
	ClientID string
	Scopes   []string
	Expiry   time.Time
	// Admin is whether the token carries the admin scope.
	Admin bool
}

// Verifier verifies the access tokens of the configured issuer. Its issuer's metadata (RFC 8414,
// else OpenID discovery) is fetched at the first token, and its key set (jwks_uri) is kept,
// fetched again after KeysMaxAge and when a token names a key it does not hold, at most once
// per MinKeysRefresh.
type Verifier struct {
	cfg    Config
	client *http.Client
	now    func() time.Time
	log    *slog.Logger

	fetch sync.Mutex // one fetch at a time

	mu      sync.RWMutex
	jwksURI string
	keys    jose.JSONWebKeySet
	fetched time.Time // the last fetch, successful or not (zero: none yet)
	loaded  time.Time // the last successful fetch of the keys
}

// Option configures a Verifier.
type Option func(*Verifier)

// WithHTTPClient fetches the issuer's documents with c (http.DefaultClient's transport otherwise).
func WithHTTPClient(c *http.Client) Option { return func(v *Verifier) { v.client = c } }

// WithClock reads the time from now (tests).
func WithClock(now func() time.Time) Option { return func(v *Verifier) { v.now = now } }

// WithLogger logs fetch failures to log (nil: slog.Default()).
func WithLogger(log *slog.Logger) Option {
	return func(v *Verifier) {
		if log != nil {
			v.log = log
		}
	}
}

// New returns the verifier of cfg's issuer, or nil when none is configured.
func New(cfg Config, opts ...Option) *Verifier {
	if !cfg.Enabled() {
		return nil
	}
	v := &Verifier{cfg: cfg, client: &http.Client{Timeout: FetchTimeout}, now: time.Now, log: slog.Default()}
	for _, o := range opts {
		o(v)
	}
	return v
}

// Settings are the verifier's configuration.
func (v *Verifier) Settings() Config { return v.cfg }

// LooksLikeJWT reports whether token has a JWS's three parts, so that a wrong API key is not
// parsed as a token.
func LooksLikeJWT(token string) bool { return strings.Count(token, ".") == 2 }

// VerifyFor verifies token as an access token for the MCP endpoint endpoint (Endpoint's
// path): the issuer's signature, iss, aud naming the endpoint's resource URL, exp and nbf, and
// the scope required.
func (v *Verifier) VerifyFor(ctx context.Context, token, endpoint string) (*Claims, error) {
	want := v.cfg.ResourceURL(endpoint)
	return v.verify(ctx, token, func(aud string) bool { return sameResource(aud, want) }, want)
}

// VerifyAnyEndpoint verifies token as VerifyFor does, for any MCP endpoint of this Zest: a
// service behind the edge, which checked the very endpoint, takes a token whose audience is one
// of them.
func (v *Verifier) VerifyAnyEndpoint(ctx context.Context, token string) (*Claims, error) {
	return v.verify(ctx, token, func(aud string) bool {
		e, ok := Endpoint(strings.TrimPrefix(strings.TrimSuffix(aud, "/"), v.cfg.base()))
		return ok && sameResource(aud, v.cfg.ResourceURL(e))
	}, v.cfg.base()+"/mcp…")
}

// sameResource compares two resource URLs, a trailing slash aside.
func sameResource(a, b string) bool { return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/") }

func (v *Verifier) verify(ctx context.Context, token string, audOK func(string) bool, wantAud string) (*Claims, error) {
	if len(token) > MaxTokenBytes {
		return nil, invalid(fmt.Sprintf("it is longer than %d bytes", MaxTokenBytes))
	}
	tok, err := jwt.ParseSigned(token, algorithms)
	if err != nil {
		return nil, invalid("not a JWT signed with an accepted algorithm (RS*, PS*, ES*, EdDSA)")
	}
	key, err := v.key(ctx, tok.Headers[0].KeyID)
	if err != nil {
		return nil, err
	}
	var std jwt.Claims
	var extra struct {
		Scope    string          `json:"scope"`
		Scp      json.RawMessage `json:"scp"`
		ClientID string          `json:"client_id"`
		Azp      string          `json:"azp"`
	}
	if err := tok.Claims(key.Key, &std, &extra); err != nil {
		return nil, invalid("its signature is not the issuer's")
	}
	now := v.now()
	switch {
	case std.Issuer != v.cfg.Issuer:
		return nil, invalid(fmt.Sprintf("its issuer is %q, not %q", std.Issuer, v.cfg.Issuer))
	case !slices.ContainsFunc(std.Audience, audOK):
		return nil, invalid(fmt.Sprintf("its audience %q is not this endpoint's resource %s (ask for the token with resource=%s)", []string(std.Audience), wantAud, wantAud))
	case std.Expiry == nil:
		return nil, invalid("it has no expiry (exp)")
	}
	if err := std.ValidateWithLeeway(jwt.Expected{Time: now}, MaxSkew); err != nil {
		switch {
		case errors.Is(err, jwt.ErrExpired):
			return nil, invalid("it expired at " + std.Expiry.Time().UTC().Format(time.RFC3339))
		case errors.Is(err, jwt.ErrNotValidYet):
			return nil, invalid("it is not valid yet (nbf)")
		default:
			return nil, invalid("it was issued in the future (iat)")
		}
	}
	c := &Claims{Subject: std.Subject, ClientID: extra.ClientID, Scopes: scopes(extra.Scope, extra.Scp), Expiry: std.Expiry.Time()}
	if c.ClientID == "" {
		c.ClientID = extra.Azp
	}
	c.Admin = v.cfg.AdminScope != "" && slices.Contains(c.Scopes, v.cfg.AdminScope)
	if v.cfg.Scope != "" && !c.Admin && !slices.Contains(c.Scopes, v.cfg.Scope) {
		return nil, &tokenError{reason: fmt.Sprintf("it lacks the scope %q the MCP endpoints require", v.cfg.Scope), scope: true}
	}
	return c, nil
}

// scopes reads RFC 9068's scope (space-separated) or scp (Entra ID's string, Okta's array).
func scopes(scope string, scp json.RawMessage) []string {
	out := strings.Fields(scope)
	var s string
	var list []string
	switch {
	case json.Unmarshal(scp, &s) == nil:
		out = append(out, strings.Fields(s)...)
	case json.Unmarshal(scp, &list) == nil:
		out = append(out, list...)
	}
	return out
}

// key is the issuer's verification key kid names (the only one, when the token names none),
// fetching the key set when it is stale or lacks kid.
func (v *Verifier) key(ctx context.Context, kid string) (jose.JSONWebKey, error) {
	if k, ok := v.cached(kid); ok {
		return k, nil
	}
	v.fetch.Lock()
	defer v.fetch.Unlock()
	if k, ok := v.cached(kid); ok { // another request fetched them meanwhile
		return k, nil
	}
	v.mu.RLock()
	last, loaded := v.fetched, !v.loaded.IsZero()
	v.mu.RUnlock()
	if last.IsZero() || v.now().Sub(last) >= MinKeysRefresh {
		if err := v.refresh(ctx); err != nil {
			v.log.Warn("oauth: fetching the issuer's keys failed", "issuer", v.cfg.Issuer, "err", err)
			if !loaded {
				return jose.JSONWebKey{}, fmt.Errorf("%w from %s: %w", ErrIssuerUnavailable, v.cfg.Issuer, err)
			}
		}
		if k, ok := v.cached(kid); ok {
			return k, nil
		}
	}
	return jose.JSONWebKey{}, invalid(fmt.Sprintf("its key id %q is not among the issuer's keys", kid))
}

// cached finds kid in a key set that is not older than KeysMaxAge.
func (v *Verifier) cached(kid string) (jose.JSONWebKey, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.loaded.IsZero() || v.now().Sub(v.loaded) >= KeysMaxAge {
		return jose.JSONWebKey{}, false
	}
	var found []jose.JSONWebKey
	if kid == "" {
		found = v.keys.Keys
	} else {
		found = v.keys.Key(kid)
	}
	found = slices.DeleteFunc(slices.Clone(found), func(k jose.JSONWebKey) bool { return k.Use != "" && k.Use != "sig" })
	if len(found) != 1 {
		return jose.JSONWebKey{}, false
	}
	return found[0], true
}

// refresh discovers the key set's address (once) and fetches the keys. Call with fetch held.
func (v *Verifier) refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FetchTimeout)
	defer cancel()
	v.mu.Lock()
	v.fetched = v.now()
	uri := v.jwksURI
	v.mu.Unlock()
	if uri == "" {
		var err error
		if uri, err = v.discover(ctx); err != nil {
			return err
		}
	}
	var set jose.JSONWebKeySet
	if err := v.getJSON(ctx, uri, &set); err != nil {
		return fmt.Errorf("key set: %w", err)
	}
	v.mu.Lock()
	v.jwksURI, v.keys, v.loaded = uri, set, v.now()
	v.mu.Unlock()
	return nil
}

// discover reads the issuer's metadata: RFC 8414's, else OpenID Connect's, and returns its
// jwks_uri after checking that it names the configured issuer.
func (v *Verifier) discover(ctx context.Context) (string, error) {
	var errs []error
	for _, doc := range MetadataURLs(v.cfg.Issuer) {
		var m struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := v.getJSON(ctx, doc, &m); err != nil {
			errs = append(errs, err)
			continue
		}
		switch {
		case m.Issuer != v.cfg.Issuer:
			return "", fmt.Errorf("%s names the issuer %q, not %q: set ZEST_OAUTH_ISSUER to the issuer exactly as it names itself", doc, m.Issuer, v.cfg.Issuer)
		case m.JWKSURI == "":
			return "", fmt.Errorf("%s has no jwks_uri: Zest verifies the issuer's JWT access tokens with its published keys", doc)
		}
		return m.JWKSURI, nil
	}
	return "", fmt.Errorf("no authorization server metadata: %w", errors.Join(errs...))
}

// MetadataURLs are where an issuer's metadata is looked for: RFC 8414's well-known path
// (inserted before the issuer's path), then OpenID Connect discovery's (appended).
func MetadataURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	path := strings.TrimSuffix(u.Path, "/")
	oauth := *u
	oauth.Path = "/.well-known/oauth-authorization-server" + path
	oidc := *u
	oidc.Path = path + "/.well-known/openid-configuration"
	return []string{oauth.String(), oidc.String()}
}

func (v *Verifier) getJSON(ctx context.Context, uri string, out any) error {
	return GetJSON(ctx, v.client, uri, MaxDocumentBytes, out)
}

// GetJSON reads the JSON document at uri into out: HTTP 200 only, at most maxBytes, each
// failure naming the URL. Discovery reads its metadata with it, here and as an OAuth client.
func GetJSON(ctx context.Context, hc *http.Client, uri string, maxBytes int, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", uri, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(maxBytes)+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", uri, err)
	}
	if len(body) > maxBytes {
		return fmt.Errorf("GET %s: the document is longer than %d bytes", uri, maxBytes)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("GET %s: %w", uri, err)
	}
	return nil
}
