package oauthclient

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zestmcp/zest/lib/envref"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Limits and timings of the client.
const (
	// RefreshBefore is how long before its expiry an access token is refreshed: a call never
	// goes out with a token about to expire on its way.
	RefreshBefore = time.Minute
	// RequestTimeout bounds one request to an authorization server (discovery, a token).
	RequestTimeout = 15 * time.Second
)

// States of UpstreamOAuthState.status.
const (
	StatusSignedIn    = "signed_in"
	StatusNeedsSignIn = "needs_sign_in"
)

// ErrNeedsSignIn means Zest holds no usable token for the server and cannot get one without a
// person: its error names how to sign in.
var ErrNeedsSignIn = errors.New("needs sign-in")

// Store keeps the sealed token records: the registry (bbolt or etcd).
type Store = registry.OAuthTokens

// record is what Zest keeps for one server, sealed: the tokens and where they came from.
type record struct {
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	TokenType    string    `json:"token_type,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	Subject      string    `json:"subject,omitempty"`
	Resource     string    `json:"resource"`
	// Indicator is the resource its tokens are asked for (Discovery.ResourceIndicator; empty
	// in a record written before it: Resource).
	Indicator     string `json:"indicator,omitempty"`
	Issuer        string `json:"issuer"`
	TokenEndpoint string `json:"token_endpoint"`
	ClientID      string `json:"client_id"`
	// RegisteredSecret is the secret a dynamic client registration gave (RFC 7591); a
	// configured client's secret stays in the environment and is never stored.
	RegisteredSecret string `json:"registered_secret,omitempty"`
	// AuthMethod is how the client authenticates at the token endpoint (authMethod).
	AuthMethod string `json:"auth_method,omitempty"`
	// Scopes are those the token was asked for.
	Scopes []string `json:"scopes,omitempty"`
	// StepUp are the scopes to ask for next: Scopes and those a 403 insufficient_scope of the
	// server asked for beyond them (MCP authorization's step-up); nil when it asked for none.
	StepUp []string `json:"step_up,omitempty"`
	// DPoPKey is the key (PKCS #8, P-256) its tokens are bound to (RFC 9449, dpop.go); empty
	// when they are bearer tokens.
	DPoPKey []byte `json:"dpop_key,omitempty"`
}

// Signer holds the upstream servers' OAuth tokens for one mcpgateway: it gives each request
// its access token, refreshing or requesting one as the server's grant allows, and says where
// each server stands. Tokens never leave it but in an Authorization header to their server
// and sealed to its store.
type Signer struct {
	keys      *Keyring
	store     Store
	lookupEnv func(string) (string, bool)
	hc        *http.Client
	log       *slog.Logger
	now       func() time.Time
	// publicURL is Zest's address as browsers reach it (ZEST_PUBLIC_URL): the base of the
	// client ID metadata document the edge serves (lib/clientmetadata).
	publicURL string

	mu      sync.Mutex
	servers map[string]*server
	// pending are this replica's sign-ins waiting for their callback (pendingKey → expiry);
	// each is kept sealed in the store.
	pending map[string]time.Time
	// exchanges are the callers' exchanged tokens of the grant token_exchange servers.
	exchanges exchanges
	// issuer is ZEST_OAUTH_ISSUER, the issuer of the tokens exchanged (SetCallerIssuer).
	issuer string
	// nonces are the servers' latest DPoP nonces.
	nonces dpopNonces
}

// server is one server's state; mu serializes its token requests (and is held across them).
type server struct {
	mu  sync.Mutex
	rec *record
	// message is why the server needs sign-in, when it does.
	message string
	// shown is rec and message as State reads them without waiting for a token request.
	smu      sync.Mutex
	shownRec *record
	shownMsg string
}

// set records rec and msg (mu held).
func (sv *server) set(rec *record, msg string) {
	sv.rec, sv.message = rec, msg
	sv.smu.Lock()
	sv.shownRec, sv.shownMsg = rec, msg
	sv.smu.Unlock()
}

func (sv *server) shown() (*record, string) {
	sv.smu.Lock()
	defer sv.smu.Unlock()
	return sv.shownRec, sv.shownMsg
}

// Option configures a Signer.
type Option func(*Signer)

// WithPublicURL is Zest's address as browsers reach it (ZEST_PUBLIC_URL): with it, a sign-in
// back to its callback names Zest by its client ID metadata document where the authorization
// server takes one (lib/clientmetadata).
func WithPublicURL(u string) Option {
	return func(s *Signer) { s.publicURL = strings.TrimSuffix(u, "/") }
}

// New returns a signer. keys may be nil (no ZEST_SECRET_KEY_FILE): every server then needs a
// key before it can sign in. hc (nil: a client with RequestTimeout) reaches the authorization
// servers; now (nil: time.Now) is the clock of expiries.
func New(keys *Keyring, store Store, lookupEnv func(string) (string, bool), hc *http.Client, now func() time.Time, log *slog.Logger, opts ...Option) *Signer {
	if hc == nil {
		hc = &http.Client{Timeout: RequestTimeout}
	}
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Signer{keys: keys, store: store, lookupEnv: lookupEnv, hc: hc, log: log, now: now, servers: map[string]*server{}, pending: map[string]time.Time{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

func (s *Signer) server(id string) *server {
	s.mu.Lock()
	defer s.mu.Unlock()
	sv := s.servers[id]
	if sv == nil {
		sv = &server{}
		s.servers[id] = sv
	}
	return sv
}

// signInHint is how a person signs in to server id.
func signInHint(id string) string {
	return fmt.Sprintf("sign in from the console (Servers → %s → Sign in) or with zestctl servers sign-in %s", id, id)
}

// NeedsSignInError is ErrNeedsSignIn for one server: why, and how to sign in.
type NeedsSignInError struct{ ID, Why string }

func (e *NeedsSignInError) Error() string {
	return fmt.Sprintf("server %q needs sign-in: %s; %s", e.ID, e.Why, signInHint(e.ID))
}

// Is makes a NeedsSignInError ErrNeedsSignIn.
func (e *NeedsSignInError) Is(target error) bool { return target == ErrNeedsSignIn }

func needsSignIn(id, why string) error { return &NeedsSignInError{ID: id, Why: why} }

// Fix is what a caller reads of a call that failed because Zest cannot sign in to its server:
// the server that needs sign-in, why and how (NeedsSignInError), or the setting to set
// (ErrNoSecretKey) — the fix alone, not the chain of transports it failed through, and the
// same on every entry point (the admin API, the MCP endpoints, the chat loop). ok is false for
// any other error.
func Fix(err error) (msg string, ok bool) {
	var nsi *NeedsSignInError
	switch {
	case errors.As(err, &nsi):
		return nsi.Error(), true
	case errors.Is(err, ErrNoSecretKey):
		return ErrNoSecretKey.Error(), true
	}
	return "", false
}

// AccessToken returns the access token to send to cfg's server: the one held while it is
// valid beyond RefreshBefore, else a refreshed one, else (client_credentials) a new one.
// force asks for a new token even if the held one looks valid (the server answered 401).
func (s *Signer) AccessToken(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, force bool) (string, error) {
	rec, err := s.accessRecord(ctx, cfg, force)
	if err != nil {
		return "", err
	}
	return rec.AccessToken, nil
}

// accessRecord is the record of the access token AccessToken returns.
func (s *Signer) accessRecord(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, force bool) (*record, error) {
	id := cfg.GetId()
	if s.keys == nil {
		return nil, fmt.Errorf("server %q signs in by OAuth: %w", id, ErrNoSecretKey)
	}
	sv := s.server(id)
	sv.mu.Lock()
	defer sv.mu.Unlock()
	now := s.now()
	if sv.rec == nil || force || !fresh(sv.rec, now) {
		// Another replica may have refreshed it: read the store before asking the server.
		rec, err := s.load(ctx, id, true)
		if err != nil && !errors.Is(err, errNoRecord) {
			return nil, err
		}
		if rec != nil && rec.Resource != cfg.GetUrl() {
			rec = nil // signed in to another URL: not this server's token
		}
		if rec != nil && (sv.rec == nil || rec.AccessToken != sv.rec.AccessToken) && fresh(rec, now) {
			sv.set(rec, "")
			return rec, nil
		}
		sv.set(rec, sv.message)
	}
	if sv.rec != nil && !force && fresh(sv.rec, now) {
		return sv.rec, nil
	}
	if force && sv.rec != nil {
		if err := s.followIssuer(ctx, cfg, sv); err != nil {
			return nil, err
		}
	}
	rec, err := s.renew(ctx, cfg, sv.rec)
	if err != nil {
		if errors.Is(err, ErrNeedsSignIn) {
			sv.set(nil, err.Error())
		}
		return nil, err
	}
	sv.set(rec, "")
	return rec, nil
}

// indicator is the resource rec's tokens are asked for.
func (rec *record) indicator() string {
	if rec.Indicator != "" {
		return rec.Indicator
	}
	return rec.Resource
}

// followIssuer checks, when the server refused a token Zest held as valid, whether its
// metadata now names another authorization server than the one that issued it (SEP-2352): if
// so the tokens, and a client registered there, are forgotten — a client-credentials server
// then requests a token of the new one, and a server a person signs in to needs sign-in
// (whose registration, when Zest registers itself, is made anew there). A discovery that fails
// changes nothing: the refresh is tried as before. sv.mu is held.
func (s *Signer) followIssuer(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, sv *server) error {
	id, old := cfg.GetId(), sv.rec.Issuer
	d, err := s.discover(context.WithValue(ctx, oauth2.HTTPClient, s.hc), cfg)
	if err != nil || old == "" || d.Server.Issuer == old {
		return nil
	}
	if err := s.store.DeleteOAuthToken(ctx, id); err != nil {
		return fmt.Errorf("server %q: forget the tokens of its former authorization server: %w", id, err)
	}
	s.log.Info("upstream names another authorization server: its tokens are forgotten", "server", id, "from", old, "to", d.Server.Issuer)
	sv.set(nil, "")
	if cfg.GetOauth().GetGrant() == serverconfig.GrantClientCredentials {
		return nil
	}
	err = needsSignIn(id, fmt.Sprintf("its authorization server changed from %s to %s", old, d.Server.Issuer))
	sv.set(nil, err.Error())
	return err
}

// fresh reports whether rec's access token is valid beyond RefreshBefore (one without an
// expiry is until the server refuses it).
func fresh(rec *record, now time.Time) bool {
	return rec.AccessToken != "" && (rec.Expiry.IsZero() || rec.Expiry.Add(-RefreshBefore).After(now))
}

// renew gets a new token for cfg: by rec's refresh token, else by client credentials.
func (s *Signer) renew(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, rec *record) (*record, error) {
	id, o := cfg.GetId(), cfg.GetOauth()
	secret, err := s.secret(cfg)
	if err != nil {
		return nil, err
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, s.hc)
	if rec != nil && rec.RefreshToken != "" {
		next, err := s.refresh(ctx, cfg, rec, secret)
		if err == nil || o.GetGrant() != serverconfig.GrantClientCredentials || !errors.Is(err, ErrNeedsSignIn) {
			return next, err
		}
		// A client-credentials server needs no person: it requests a new token instead.
	}
	switch {
	case o.GetGrant() == serverconfig.GrantClientCredentials:
		var stepUp []string
		if rec != nil {
			stepUp = rec.StepUp
		}
		return s.clientCredentials(ctx, cfg, secret, stepUp)
	case rec != nil:
		return nil, needsSignIn(id, "its access token expired and Zest holds no refresh token")
	default:
		return nil, needsSignIn(id, "Zest holds no token for it")
	}
}

// clientCredentials requests a token for cfg with its client credentials, for its scopes and
// those of stepUp.
func (s *Signer) clientCredentials(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, secret string, stepUp []string) (*record, error) {
	id, o := cfg.GetId(), cfg.GetOauth()
	d, err := s.discover(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := checkKeyMethod(cfg, &d.Server); err != nil {
		return nil, err
	}
	method := clientMethod(cfg, "", d)
	want := union(scopes(cfg, d), stepUp)
	key, err := clientCredentialsKey(cfg, d, s.server(id).rec) // the caller holds the server's mu
	if err != nil {
		return nil, err
	}
	if ctx, err = s.tokenContext(ctx, id, key); err != nil {
		return nil, err
	}
	params := url.Values{"resource": {d.ResourceIndicator(cfg.GetUrl())}}
	if err := s.addClientAssertion(cfg, o.GetClientId(), d.Server.Issuer, params); err != nil {
		return nil, err
	}
	cc := clientcredentials.Config{ClientID: o.GetClientId(), ClientSecret: secret, TokenURL: d.Server.TokenEndpoint, AuthStyle: authStyle(secret, method),
		Scopes: want, EndpointParams: params}
	tok, err := cc.Token(ctx)
	if err != nil {
		return nil, fmt.Errorf("server %q: client credentials at %s (check oauth.client_id and %s): %w", id, d.Server.TokenEndpoint, credentialsHint(cfg), tokenError(err))
	}
	next := &record{AccessToken: tok.AccessToken, TokenType: tok.Type(), Expiry: s.expiry(tok), RefreshToken: tok.RefreshToken,
		Resource: cfg.GetUrl(), Indicator: d.ResourceIndicator(cfg.GetUrl()), Issuer: d.Server.Issuer, TokenEndpoint: d.Server.TokenEndpoint,
		ClientID: o.GetClientId(), AuthMethod: method, Scopes: want, DPoPKey: key}
	next.Subject = subjectOf(tok.AccessToken, o.GetClientId())
	s.log.Info("upstream token obtained by client credentials", "server", id, "expires", next.Expiry)
	return next, s.save(ctx, id, next)
}

// union is a's scopes, then those of b not in a.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// InsufficientScope takes a 403 insufficient_scope of cfg's server to the token held, whose
// challenge asked for want (MCP authorization's step-up): the next token is asked for its
// scopes and want. A client-credentials server gets that token at once (retry: send the
// request again with it); a server a person signs in to needs a new sign-in, which asks for
// them, and the error says so. When the token was asked for want already, nothing changes
// (retry false, no error: the 403 stands) — a server that keeps refusing is not asked again.
func (s *Signer) InsufficientScope(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, want []string) (retry bool, err error) {
	id := cfg.GetId()
	sv := s.server(id)
	sv.mu.Lock()
	defer sv.mu.Unlock()
	rec := sv.rec
	if rec == nil || len(want) == 0 || len(union(rec.Scopes, want)) == len(rec.Scopes) {
		return false, nil
	}
	next := *rec
	next.StepUp = union(rec.Scopes, want)
	s.log.Info("upstream asks for more scopes than its token's", "server", id, "scopes", strings.Join(next.StepUp, " "))
	if cfg.GetOauth().GetGrant() == serverconfig.GrantClientCredentials {
		secret, err := s.secret(cfg)
		if err != nil {
			return false, err
		}
		got, err := s.clientCredentials(context.WithValue(ctx, oauth2.HTTPClient, s.hc), cfg, secret, next.StepUp)
		if err != nil {
			return false, err
		}
		sv.set(got, "")
		return true, nil
	}
	why := fmt.Sprintf("it asks for the scopes %q (insufficient_scope), more than its sign-in was granted", strings.Join(want, " "))
	if err := s.save(ctx, id, &next); err != nil {
		return false, err
	}
	sv.set(&next, why)
	return false, needsSignIn(id, why)
}

// expiry is when tok expires by the signer's clock (x/oauth2 counts expires_in from
// time.Now); zero when the server said nothing.
func (s *Signer) expiry(tok *oauth2.Token) time.Time {
	in := tok.ExpiresIn
	switch v := tok.Extra("expires_in").(type) {
	case float64:
		in = int64(v)
	case string:
		in, _ = strconv.ParseInt(v, 10, 64)
	}
	if in > 0 {
		return s.now().Add(time.Duration(in) * time.Second)
	}
	if tok.Expiry.IsZero() {
		return time.Time{}
	}
	return s.now().Add(time.Until(tok.Expiry))
}

// refresh gets a new token for cfg by rec's refresh token; a refused one (revoked, expired)
// forgets the record and is ErrNeedsSignIn.
func (s *Signer) refresh(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, rec *record, secret string) (*record, error) {
	id := cfg.GetId()
	if rec.RegisteredSecret != "" {
		secret = rec.RegisteredSecret
	}
	// x/oauth2's refresh sends no resource (RFC 8707), which MCP authorization requires on
	// every token request: the client-credentials request with its grant_type overridden
	// (which the package allows for this) is a refresh request that carries one.
	params := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rec.RefreshToken}, "resource": {rec.indicator()}}
	if err := s.addClientAssertion(cfg, rec.ClientID, rec.Issuer, params); err != nil {
		return nil, err
	}
	cc := clientcredentials.Config{ClientID: rec.ClientID, ClientSecret: secret, TokenURL: rec.TokenEndpoint, AuthStyle: authStyle(secret, rec.AuthMethod),
		EndpointParams: params}
	ctx, err := s.tokenContext(ctx, id, rec.DPoPKey)
	if err != nil {
		return nil, err
	}
	tok, err := cc.Token(ctx)
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && (re.ErrorCode == "invalid_grant" || re.ErrorCode == "unauthorized_client" || re.ErrorCode == "invalid_client") {
			// Revoked or expired: the record is of no more use.
			if derr := s.store.DeleteOAuthToken(ctx, id); derr != nil {
				s.log.Warn("a refused refresh token could not be forgotten", "server", id, "err", derr)
			}
			s.log.Info("upstream refused the refresh token: the server needs sign-in", "server", id, "error_code", re.ErrorCode)
			return nil, needsSignIn(id, "its authorization server refused the refresh token ("+re.ErrorCode+")")
		}
		return nil, fmt.Errorf("server %q: refresh at %s: %w", id, rec.TokenEndpoint, tokenError(err))
	}
	next := *rec
	next.AccessToken, next.TokenType, next.Expiry = tok.AccessToken, tok.Type(), s.expiry(tok)
	if tok.RefreshToken != "" { // rotated (OAuth 2.1 section 4.3.1 for public clients)
		next.RefreshToken = tok.RefreshToken
	}
	next.Subject = subjectOf(tok.AccessToken, next.Subject)
	return &next, s.save(ctx, id, &next)
}

// tokenError is err without a response body (x/oauth2's message may quote it).
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := ""
		if re.Response != nil {
			status = re.Response.Status
		}
		if re.ErrorCode != "" {
			return fmt.Errorf("HTTP %s, error %q %s", status, re.ErrorCode, re.ErrorDescription)
		}
		return fmt.Errorf("HTTP %s", status)
	}
	return err
}

// Token endpoint authentication methods (RFC 7591 section 2, RFC 8414).
const (
	methodBasic = "client_secret_basic"
	methodPost  = "client_secret_post"
)

// authMethod is how a client with a secret authenticates at d's token endpoint: the method
// its registration gave, else client_secret_basic when the server's metadata lists it (or
// lists none: RFC 8414's default is basic, but x/oauth2 then tries both), else
// client_secret_post when it lists that.
func authMethod(registered string, d *Discovery) string {
	supported := d.Server.TokenEndpointAuthMethodsSupported
	switch {
	case registered != "":
		return registered
	case slices.Contains(supported, methodBasic):
		return methodBasic
	case slices.Contains(supported, methodPost):
		return methodPost
	}
	return ""
}

// authStyle is x/oauth2's way of sending the client's credentials for method: none for a
// public client (its client_id in the body), the secret in the body or by HTTP Basic as the
// method says, else whichever the server takes (x/oauth2 tries Basic, then the body).
func authStyle(secret, method string) oauth2.AuthStyle {
	switch {
	case secret == "" || method == methodPost:
		return oauth2.AuthStyleInParams
	case method == methodBasic:
		return oauth2.AuthStyleInHeader
	}
	return oauth2.AuthStyleAutoDetect
}

// scopes are the configured ones, else those the server's 401 asked for, else those its
// metadata supports (MCP authorization's scope selection).
func scopes(cfg *mcpgatewayv1.ServerConfig, d *Discovery) []string {
	if s := cfg.GetOauth().GetScopes(); len(s) > 0 {
		return s
	}
	if len(d.ChallengeScopes) > 0 {
		return d.ChallengeScopes
	}
	return d.Resource.ScopesSupported
}

// secret resolves oauth.client_secret ("" when none is configured).
func (s *Signer) secret(cfg *mcpgatewayv1.ServerConfig) (string, error) {
	ref := cfg.GetOauth().GetClientSecret()
	if ref == "" {
		return "", nil
	}
	name, err := envref.Variable(ref)
	if err != nil {
		return "", fmt.Errorf("server %q: oauth.client_secret %w", cfg.GetId(), err)
	}
	if err := envref.CheckNotReserved("oauth.client_secret", ref, "UPSTREAM_CLIENT_SECRET", "mcpgateway's environment"); err != nil {
		return "", err
	}
	v, ok := s.lookupEnv(name)
	if !ok {
		return "", fmt.Errorf("server %q: oauth.client_secret: %w: %s (set it in mcpgateway's environment)", cfg.GetId(), envref.ErrNotSet, name)
	}
	return v, nil
}

// discover finds cfg's authorization server (see Discover).
func (s *Signer) discover(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) (*Discovery, error) {
	challenge, err := Challenge(ctx, s.hc, cfg.GetUrl())
	if err != nil {
		return nil, err
	}
	d, err := Discover(ctx, s.hc, cfg.GetUrl(), challenge, cfg.GetOauth().GetAuthorizationServer())
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", cfg.GetId(), err)
	}
	if d.Legacy != "" {
		s.log.Info("upstream publishes no protected-resource metadata: its origin is taken as its authorization server", "server", cfg.GetId(), "endpoints", d.Legacy)
	}
	return d, nil
}

var errNoRecord = errors.New("no token record")

// load reads id's record; reseal seals one of the previous key again (only under the
// server's mu: a record written meanwhile must not be replaced by an older one).
func (s *Signer) load(ctx context.Context, id string, reseal bool) (*record, error) {
	sealed, err := s.store.GetOAuthToken(ctx, id)
	if err != nil {
		if errors.Is(err, registry.ErrNotFound) {
			return nil, errNoRecord
		}
		return nil, fmt.Errorf("server %q: read its OAuth tokens: %w", id, err)
	}
	plain, stale, err := s.keys.Open(sealed, []byte(id))
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", id, err)
	}
	rec := &record{}
	if err := json.Unmarshal(plain, rec); err != nil {
		return nil, fmt.Errorf("server %q: %w", id, ErrUnseal)
	}
	if stale && reseal {
		if err := s.save(ctx, id, rec); err != nil {
			return nil, err
		}
		s.log.Info("upstream OAuth tokens sealed again with the current secret key", "server", id)
	}
	return rec, nil
}

func (s *Signer) save(ctx context.Context, id string, rec *record) error {
	plain, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	sealed, err := s.keys.Seal(plain, []byte(id))
	if err != nil {
		return err
	}
	if err := s.store.PutOAuthToken(ctx, id, sealed); err != nil {
		return fmt.Errorf("server %q: store its OAuth tokens: %w", id, err)
	}
	return nil
}

// subjectOf is the sub claim of a JWT access token, else def (an opaque token says nothing).
// The signature is not checked: the subject is only shown.
func subjectOf(token, def string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return def
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return def
	}
	var c struct {
		Sub string `json:"sub"`
	}
	if json.Unmarshal(b, &c) != nil || c.Sub == "" {
		return def
	}
	return c.Sub
}

// State says where Zest stands with cfg's server: signed in as whom until when, or what to do.
// It never holds a token.
func (s *Signer) State(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) *mcpgatewayv1.UpstreamOAuthState {
	id := cfg.GetId()
	if OnBehalf(cfg) {
		return &mcpgatewayv1.UpstreamOAuthState{Status: StatusOnBehalf, Message: onBehalfMessage}
	}
	if s == nil || s.keys == nil {
		return &mcpgatewayv1.UpstreamOAuthState{Status: StatusNeedsSignIn, Message: ErrNoSecretKey.Error()}
	}
	// From what the last token request left, without waiting for one in progress; from the
	// store when that says nothing current (another replica may have signed in or refreshed).
	rec, message := s.server(id).shown()
	if rec == nil || !fresh(rec, s.now()) {
		stored, err := s.load(ctx, id, false)
		switch {
		case err == nil:
			rec = stored
		case !errors.Is(err, errNoRecord):
			return &mcpgatewayv1.UpstreamOAuthState{Status: StatusNeedsSignIn, Message: err.Error()}
		}
	}
	cc := cfg.GetOauth().GetGrant() == serverconfig.GrantClientCredentials
	if rec != nil && rec.Resource == cfg.GetUrl() && len(rec.StepUp) > 0 && !cc {
		// Its token still serves what it was granted for; the rest needs a new sign-in.
		if message == "" {
			message = fmt.Sprintf("server %q needs sign-in: it asks for the scopes %q, more than its sign-in was granted; %s", id, strings.Join(rec.StepUp, " "), signInHint(id))
		}
		return &mcpgatewayv1.UpstreamOAuthState{Status: StatusNeedsSignIn, Message: message}
	}
	if rec == nil || rec.Resource != cfg.GetUrl() || (!fresh(rec, s.now()) && rec.RefreshToken == "" && !cc) {
		msg := message
		switch {
		case msg != "":
		case cc:
			msg = "Zest requests a token with its client credentials on the next call"
		default:
			msg = signInHint(id)
		}
		return &mcpgatewayv1.UpstreamOAuthState{Status: StatusNeedsSignIn, Message: msg}
	}
	st := &mcpgatewayv1.UpstreamOAuthState{Status: StatusSignedIn, Subject: rec.Subject, Refreshable: rec.RefreshToken != "" || cc, Dpop: rec.bound()}
	if !rec.Expiry.IsZero() {
		st.Expires = rec.Expiry.UTC().Format(time.RFC3339)
	}
	return st
}

// Forget drops what Zest holds for server id (the server was deleted, or signed out).
func (s *Signer) Forget(ctx context.Context, id string) error {
	s.mu.Lock()
	delete(s.servers, id)
	s.mu.Unlock()
	s.exchanges.forget(id)
	s.nonces.forget(id)
	return s.store.DeleteOAuthToken(ctx, id)
}
