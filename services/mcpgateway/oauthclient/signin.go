package oauthclient

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/zestmcp/zest/lib/clientmetadata"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"golang.org/x/oauth2"
	"google.golang.org/protobuf/encoding/protojson"
)

// Limits of a sign-in by authorization code.
const (
	// CallbackPath is the edge's route the authorization server sends the browser back to.
	CallbackPath = clientmetadata.CallbackPath
	// SignInTimeout is how long a sign-in started waits for its callback.
	SignInTimeout = 10 * time.Minute
	// MaxPendingSignIns bounds the sign-ins waiting for their callback on one mcpgateway.
	MaxPendingSignIns = 64
	// SweepEvery is how often each mcpgateway forgets the sign-ins whose SignInTimeout has
	// passed, whichever replica started them (SweepSignIns): an abandoned sign-in — never
	// finished, or its replica died — is kept at most SignInTimeout + SweepEvery.
	SweepEvery = SignInTimeout
)

// Errors of a sign-in.
var (
	// ErrSignIn means a callback does not finish a sign-in this mcpgateway started.
	ErrSignIn = errors.New("OAuth sign-in")
)

// pending is a sign-in waiting for its callback: what finishes it, and who started it. It is
// kept sealed in the store (any replica may receive the callback), under pendingKey(state).
type pending struct {
	// Config is the server's config as the sign-in started (protojson: ${VAR} references only).
	Config   json.RawMessage `json:"config"`
	Issuer   string          `json:"issuer"`
	AuthURL  string          `json:"auth_url"`
	TokenURL string          `json:"token_url"`
	ClientID string          `json:"client_id"`
	// RegisteredSecret is the secret a dynamic registration gave, kept (sealed) with the tokens.
	RegisteredSecret string `json:"registered_secret,omitempty"`
	// AuthMethod is how the client authenticates at the token endpoint (authMethod).
	AuthMethod string `json:"auth_method,omitempty"`
	// Indicator is the resource the tokens are asked for (Discovery.ResourceIndicator).
	Indicator string `json:"indicator,omitempty"`
	// IssRequired: the authorization server names itself in its responses (RFC 9207).
	IssRequired bool `json:"iss_required,omitempty"`
	// DPoP: the tokens are to be bound to a key of Zest's (dpopWanted), made for the code
	// exchange.
	DPoP        bool      `json:"dpop,omitempty"`
	RedirectURI string    `json:"redirect_uri"`
	Scopes      []string  `json:"scopes,omitempty"`
	Verifier    string    `json:"verifier"`
	By          string    `json:"by"`
	Binding     string    `json:"binding,omitempty"`
	Expires     time.Time `json:"expires"`
}

// pendingKey is the store's key of a sign-in in progress: the state's hash (the state is the
// sign-in's credential), under a prefix no server id has ("/" is not in an id).
func pendingKey(state string) string { return pendingPrefix + stateKey(state) }

// pendingPrefix starts the store's key of every sign-in in progress.
const pendingPrefix = "sign-in/"

// pendingAAD binds a sealed sign-in to its kind.
var pendingAAD = []byte("zest upstream sign-in")

// StartSignIn starts a sign-in by authorization code (PKCE S256) to cfg's server for by, the
// administrator who asked: it returns the URL to open in a browser, which the authorization
// server sends back to redirectURI (Zest's CallbackPath) with the state. binding, when not
// empty, must come back with the callback (the console's cookie: the browser that started it).
func (s *Signer) StartSignIn(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, redirectURI, by, binding string) (string, error) {
	id, o := cfg.GetId(), cfg.GetOauth()
	switch {
	case o == nil:
		return "", fmt.Errorf("%w: server %q has no oauth block: set oauth (docs/operator/oauth.md)", ErrSignIn, id)
	case o.GetGrant() == serverconfig.GrantClientCredentials:
		return "", fmt.Errorf("%w: server %q signs in with its client credentials (oauth.grant client_credentials): no person signs in", ErrSignIn, id)
	case OnBehalf(cfg):
		return "", fmt.Errorf("%w: server %q is called on behalf of each caller (oauth.grant token_exchange): no one signs in to it, each caller's own access token is exchanged", ErrSignIn, id)
	case s.keys == nil:
		return "", fmt.Errorf("%w: %w", ErrSignIn, ErrNoSecretKey)
	}
	ru, err := url.Parse(redirectURI)
	if err != nil || ru.Path != CallbackPath || (ru.Scheme != "https" && ru.Scheme != "http") {
		return "", fmt.Errorf("%w: redirect_uri %q must be Zest's own https://HOST%s", ErrSignIn, redirectURI, CallbackPath)
	}
	secret, err := s.secret(cfg)
	if err != nil {
		return "", err
	}
	d, err := s.discover(ctx, cfg)
	if err != nil {
		return "", err
	}
	if !d.Server.SupportsS256() {
		return "", fmt.Errorf("%w: server %q: its authorization server %s does not name PKCE S256 in code_challenge_methods_supported, which MCP authorization requires", ErrSignIn, id, d.Server.Issuer)
	}
	if d.Server.AuthorizationEndpoint == "" {
		return "", fmt.Errorf("%w: server %q: its authorization server %s has no authorization_endpoint", ErrSignIn, id, d.Server.Issuer)
	}
	if err := checkKeyMethod(cfg, &d.Server); err != nil {
		return "", fmt.Errorf("%w: %w", ErrSignIn, err)
	}
	want := scopes(cfg, d)
	// A step-up the server asked for (InsufficientScope) is asked for again.
	if rec, err := s.load(ctx, id, false); err == nil && rec.Resource == cfg.GetUrl() {
		want = union(want, rec.StepUp)
	}
	// The client, in order of preference: the one configured (oauth.client_id), Zest's client
	// ID metadata document where the server takes one, a dynamic registration (RFC 7591).
	clientID := o.GetClientId()
	registeredSecret, registeredMethod := "", ""
	if doc, ok := s.clientMetadataURL(redirectURI); clientID == "" && ok && d.Server.ClientIDMetadataDocumentSupported {
		clientID = doc
	}
	if clientID == "" {
		if d.Server.RegistrationEndpoint == "" {
			return "", fmt.Errorf("%w: server %q: oauth.client_id is empty and its authorization server %s offers no dynamic client registration and takes no client ID metadata document (which needs ZEST_PUBLIC_URL, https, as the redirect's base): register Zest there (redirect URI %s) and set oauth.client_id", ErrSignIn, id, d.Server.Issuer, redirectURI)
		}
		reg, err := s.register(ctx, id, d, redirectURI)
		if err != nil {
			return "", err
		}
		clientID, secret, registeredSecret, registeredMethod = reg.ClientID, reg.ClientSecret, reg.ClientSecret, reg.TokenEndpointAuthMethod
	}
	state := rand.Text() + rand.Text()
	rawCfg, err := protojson.Marshal(cfg)
	if err != nil {
		return "", err
	}
	p := &pending{Config: rawCfg, Issuer: d.Server.Issuer, AuthURL: d.Server.AuthorizationEndpoint, TokenURL: d.Server.TokenEndpoint,
		ClientID: clientID, RegisteredSecret: registeredSecret, AuthMethod: clientMethod(cfg, registeredMethod, d), Indicator: d.ResourceIndicator(cfg.GetUrl()), IssRequired: d.Server.IssParameterSupported, DPoP: dpopWanted(cfg, &d.Server), RedirectURI: redirectURI, Scopes: want,
		Verifier: oauth2.GenerateVerifier(), By: by, Binding: binding, Expires: s.now().Add(SignInTimeout)}
	if err := s.holdPending(ctx, state, p); err != nil {
		return "", err
	}
	s.log.Info("upstream sign-in started", "server", id, "by", by, "issuer", d.Server.Issuer)
	conf := p.oauth2(secret)
	return conf.AuthCodeURL(state, oauth2.S256ChallengeOption(p.Verifier), oauth2.SetAuthURLParam("resource", p.Indicator)), nil
}

// clientMetadataURL is the URL of Zest's client ID metadata document, when a sign-in back to
// redirectURI may name Zest by it: the document's one redirect URI is ZEST_PUBLIC_URL's
// callback, and an authorization server takes only an https URL (or http on loopback).
func (s *Signer) clientMetadataURL(redirectURI string) (string, bool) {
	if s.publicURL == "" || redirectURI != s.publicURL+CallbackPath {
		return "", false
	}
	return clientmetadata.URL(s.publicURL)
}

// oauth2 is the sign-in's x/oauth2 configuration, with the client's secret.
func (p *pending) oauth2(secret string) oauth2.Config {
	return oauth2.Config{ClientID: p.ClientID, ClientSecret: secret, RedirectURL: p.RedirectURI, Scopes: p.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: p.AuthURL, TokenURL: p.TokenURL, AuthStyle: authStyle(secret, p.AuthMethod)}}
}

// holdPending keeps p sealed in the store for its callback, once the expired sign-ins are
// forgotten (SweepSignIns); this replica counts its own sign-ins waiting (MaxPendingSignIns).
func (s *Signer) holdPending(ctx context.Context, state string, p *pending) error {
	if _, err := s.SweepSignIns(ctx); err != nil {
		s.log.Warn("the expired sign-ins could not be forgotten", "err", err)
	}
	s.mu.Lock()
	full := len(s.pending) >= MaxPendingSignIns
	if !full {
		s.pending[pendingKey(state)] = p.Expires
	}
	s.mu.Unlock()
	if full {
		return fmt.Errorf("%w: %d sign-ins already wait for their callback: finish one, or wait %s for them to expire", ErrSignIn, MaxPendingSignIns, SignInTimeout)
	}
	plain, err := json.Marshal(p)
	if err != nil {
		return err
	}
	sealed, err := s.keys.Seal(plain, pendingAAD)
	if err != nil {
		return err
	}
	if err := s.store.PutOAuthToken(ctx, pendingKey(state), sealed); err != nil {
		return fmt.Errorf("%w: keep the sign-in: %w", ErrSignIn, err)
	}
	return nil
}

// SweepSignIns forgets every sign-in in progress whose SignInTimeout has passed, whichever
// replica started it (one that died leaves its sign-ins in the shared store for another to
// forget), and one that no key opens (it can never finish). It returns how many it forgot.
func (s *Signer) SweepSignIns(ctx context.Context) (int, error) {
	now := s.now()
	s.mu.Lock()
	for k, until := range s.pending {
		if until.Before(now) {
			delete(s.pending, k)
		}
	}
	s.mu.Unlock()
	if s.keys == nil {
		return 0, nil
	}
	recs, err := s.store.ListOAuthTokens(ctx, pendingPrefix)
	if err != nil {
		return 0, fmt.Errorf("%w: list the sign-ins in progress: %w", ErrSignIn, err)
	}
	forgot := 0
	var errs []error
	for key, sealed := range recs {
		var p pending
		if plain, _, err := s.keys.Open(sealed, pendingAAD); err == nil && json.Unmarshal(plain, &p) == nil && !p.Expires.Before(now) {
			continue
		}
		if err := s.store.DeleteOAuthToken(ctx, key); err != nil {
			errs = append(errs, err)
			continue
		}
		forgot++
	}
	if forgot > 0 {
		s.log.Info("expired sign-ins forgotten", "count", forgot)
	}
	return forgot, errors.Join(errs...)
}

// SweepAbandoned runs SweepSignIns now and every SweepEvery until ctx is done (mcpgateway
// runs it while it serves).
func (s *Signer) SweepAbandoned(ctx context.Context) {
	tick := time.NewTicker(SweepEvery)
	defer tick.Stop()
	for {
		if _, err := s.SweepSignIns(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("the expired sign-ins could not be forgotten", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// takePending returns the sign-in of state and forgets it (one use) when binding is its own;
// nil when there is none (or it is another browser's, which is left for its own callback).
func (s *Signer) takePending(ctx context.Context, state, binding string) (*pending, error) {
	key := pendingKey(state)
	sealed, err := s.store.GetOAuthToken(ctx, key)
	if errors.Is(err, registry.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	plain, _, err := s.keys.Open(sealed, pendingAAD)
	if err != nil {
		return nil, err
	}
	p := &pending{}
	if err := json.Unmarshal(plain, p); err != nil {
		return nil, ErrUnseal
	}
	if p.Binding != "" && subtle.ConstantTimeCompare([]byte(p.Binding), []byte(binding)) != 1 && !p.Expires.Before(s.now()) {
		return nil, nil
	}
	if err := s.store.DeleteOAuthToken(ctx, key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	delete(s.pending, key)
	s.mu.Unlock()
	return p, nil
}

// stateKey is how a state is kept: its hash (the state itself is a bearer of the sign-in).
func stateKey(state string) string {
	h := sha256.Sum256([]byte(state))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// Callback is the query of the authorization server's callback.
type Callback struct {
	State, Code string
	// Error is the server's error code, when it refused.
	Error string
	// Iss is its iss parameter (RFC 9207), nil when it has none.
	Iss *string
}

// FinishSignIn finishes the sign-in of cb.State with the authorization server's callback: its
// code, or its error when it refused. An iss (RFC 9207) must be exactly the issuer the sign-in
// went to, and is required when that issuer's metadata says it sends one: another issuer's
// response (a mix-up) is refused before its code goes anywhere. binding must be the one the
// sign-in started with. It returns the server's id and who started the sign-in.
func (s *Signer) FinishSignIn(ctx context.Context, cb Callback, binding string) (id, by string, err error) {
	state, code, errCode := cb.State, cb.Code, cb.Error
	var p *pending
	if s.keys != nil && state != "" {
		if p, err = s.takePending(ctx, state, binding); err != nil {
			return "", "", fmt.Errorf("%w: %w", ErrSignIn, err)
		}
	}
	if p == nil || p.Expires.Before(s.now()) {
		return "", "", fmt.Errorf("%w: this callback matches no sign-in in progress (expired after %s, used already, or started in another browser): start it again", ErrSignIn, SignInTimeout)
	}
	cfg := &mcpgatewayv1.ServerConfig{}
	if err := protojson.Unmarshal(p.Config, cfg); err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrSignIn, ErrUnseal)
	}
	id = cfg.GetId()
	switch {
	case cb.Iss != nil && *cb.Iss != p.Issuer: // compared as sent: no normalization (RFC 9207 section 2.4)
		return id, p.By, fmt.Errorf("%w: server %q: the authorization response names the issuer %.200q, not %q, which the sign-in went to (RFC 9207): refused; start the sign-in again",
			ErrSignIn, id, *cb.Iss, p.Issuer)
	case cb.Iss == nil && p.IssRequired:
		return id, p.By, fmt.Errorf("%w: server %q: the authorization response has no iss, which its authorization server %s says it sends (RFC 9207): refused; start the sign-in again",
			ErrSignIn, id, p.Issuer)
	}
	if errCode != "" {
		return id, p.By, fmt.Errorf("%w: server %q: the authorization server refused: %s", ErrSignIn, id, strings.ToValidUTF8(errCode, "?"))
	}
	secret := p.RegisteredSecret
	if cfg.GetOauth().GetClientId() != "" {
		if secret, err = s.secret(cfg); err != nil {
			return id, p.By, err
		}
	}
	conf := p.oauth2(secret)
	var key []byte
	if p.DPoP {
		if key, err = newDPoPKey(); err != nil {
			return id, p.By, err
		}
	}
	if ctx, err = s.tokenContext(ctx, id, key); err != nil {
		return id, p.By, err
	}
	indicator := p.Indicator
	if indicator == "" { // a sign-in started before Indicator was kept
		indicator = cfg.GetUrl()
	}
	opts := []oauth2.AuthCodeOption{oauth2.VerifierOption(p.Verifier), oauth2.SetAuthURLParam("resource", indicator)}
	assertion := url.Values{}
	if err := s.addClientAssertion(cfg, p.ClientID, p.Issuer, assertion); err != nil {
		return id, p.By, fmt.Errorf("%w: %w", ErrSignIn, err)
	}
	for k := range assertion {
		opts = append(opts, oauth2.SetAuthURLParam(k, assertion.Get(k)))
	}
	tok, err := conf.Exchange(ctx, code, opts...)
	if err != nil {
		return id, p.By, fmt.Errorf("%w: server %q: the code exchange at %s failed: %w", ErrSignIn, id, p.TokenURL, tokenError(err))
	}
	rec := &record{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, TokenType: tok.Type(), Expiry: s.expiry(tok),
		Resource: cfg.GetUrl(), Issuer: p.Issuer, TokenEndpoint: p.TokenURL, ClientID: p.ClientID, RegisteredSecret: p.RegisteredSecret, AuthMethod: p.AuthMethod, Scopes: p.Scopes, Indicator: indicator, DPoPKey: key}
	rec.Subject = subjectOf(tok.AccessToken, p.ClientID) // an opaque token: its client, as UpstreamOAuthState.subject says
	sv := s.server(id)
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if err := s.save(ctx, id, rec); err != nil {
		return id, p.By, err
	}
	sv.set(rec, "")
	s.log.Info("upstream sign-in finished", "server", id, "by", p.By, "subject", rec.Subject, "expires", rec.Expiry)
	return id, p.By, nil
}
