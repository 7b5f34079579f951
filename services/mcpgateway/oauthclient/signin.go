package oauthclient

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"golang.org/x/oauth2"
)

// Limits of a sign-in by authorization code.
const (
	// CallbackPath is the edge's route the authorization server sends the browser back to.
	CallbackPath = "/internal/mcp/oauth/callback"
	// SignInTimeout is how long a sign-in started waits for its callback.
	SignInTimeout = 10 * time.Minute
	// MaxPendingSignIns bounds the sign-ins waiting for their callback on one mcpgateway.
	MaxPendingSignIns = 64
)

// Errors of a sign-in.
var (
	// ErrSignIn means a callback does not finish a sign-in this mcpgateway started.
	ErrSignIn = errors.New("OAuth sign-in")
)

// pending is a sign-in waiting for its callback: what finishes it, and who started it.
type pending struct {
	cfg      *mcpgatewayv1.ServerConfig
	d        *Discovery
	conf     oauth2.Config
	verifier string
	by       string
	binding  string
	expires  time.Time
	// registeredSecret is the secret a dynamic registration gave, kept (sealed) with the tokens.
	registeredSecret string
}

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
	clientID := o.GetClientId()
	registeredSecret := ""
	if clientID == "" {
		// No client configured: dynamic client registration (RFC 7591) where the server offers it.
		if d.Server.RegistrationEndpoint == "" {
			return "", fmt.Errorf("%w: server %q: oauth.client_id is empty and its authorization server %s offers no dynamic client registration: register Zest there (redirect URI %s) and set oauth.client_id", ErrSignIn, id, d.Server.Issuer, redirectURI)
		}
		reg, err := s.register(ctx, id, d, redirectURI)
		if err != nil {
			return "", err
		}
		clientID, secret, registeredSecret = reg.ClientID, reg.ClientSecret, reg.ClientSecret
	}
	if !d.Server.SupportsS256() {
		return "", fmt.Errorf("%w: server %q: its authorization server %s does not name PKCE S256 in code_challenge_methods_supported, which MCP authorization requires", ErrSignIn, id, d.Server.Issuer)
	}
	if d.Server.AuthorizationEndpoint == "" {
		return "", fmt.Errorf("%w: server %q: its authorization server %s has no authorization_endpoint", ErrSignIn, id, d.Server.Issuer)
	}
	state := rand.Text() + rand.Text()
	p := &pending{cfg: cfg, d: d, verifier: oauth2.GenerateVerifier(), by: by, binding: binding, expires: s.now().Add(SignInTimeout), registeredSecret: registeredSecret,
		conf: oauth2.Config{ClientID: clientID, ClientSecret: secret, RedirectURL: redirectURI, Scopes: scopes(cfg, d),
			Endpoint: oauth2.Endpoint{AuthURL: d.Server.AuthorizationEndpoint, TokenURL: d.Server.TokenEndpoint, AuthStyle: authStyle(secret)}}}
	s.mu.Lock()
	now := s.now()
	for k, q := range s.pending {
		if q.expires.Before(now) {
			delete(s.pending, k)
		}
	}
	if len(s.pending) >= MaxPendingSignIns {
		s.mu.Unlock()
		return "", fmt.Errorf("%w: %d sign-ins already wait for their callback: finish one, or wait %s for them to expire", ErrSignIn, MaxPendingSignIns, SignInTimeout)
	}
	s.pending[stateKey(state)] = p
	s.mu.Unlock()
	s.log.Info("upstream sign-in started", "server", id, "by", by, "issuer", d.Server.Issuer)
	return p.conf.AuthCodeURL(state, oauth2.S256ChallengeOption(p.verifier), oauth2.SetAuthURLParam("resource", cfg.GetUrl())), nil
}

// stateKey is how a state is kept: its hash (the state itself is a bearer of the sign-in).
func stateKey(state string) string {
	h := sha256.Sum256([]byte(state))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// FinishSignIn finishes the sign-in of state with the authorization server's callback: code,
// or errCode when it refused. binding must be the one the sign-in started with. It returns the
// server's id and who started the sign-in.
func (s *Signer) FinishSignIn(ctx context.Context, state, code, errCode, binding string) (id, by string, err error) {
	s.mu.Lock()
	p := s.pending[stateKey(state)]
	if p != nil && (p.binding == "" || subtle.ConstantTimeCompare([]byte(p.binding), []byte(binding)) == 1) {
		delete(s.pending, stateKey(state)) // one use
	} else {
		p = nil
	}
	s.mu.Unlock()
	if p == nil || p.expires.Before(s.now()) {
		return "", "", fmt.Errorf("%w: this callback matches no sign-in in progress here (expired after %s, used already, or started in another browser): start it again", ErrSignIn, SignInTimeout)
	}
	id = p.cfg.GetId()
	if errCode != "" {
		return id, p.by, fmt.Errorf("%w: server %q: the authorization server refused: %s", ErrSignIn, id, strings.ToValidUTF8(errCode, "?"))
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, s.hc)
	tok, err := p.conf.Exchange(ctx, code, oauth2.VerifierOption(p.verifier), oauth2.SetAuthURLParam("resource", p.cfg.GetUrl()))
	if err != nil {
		return id, p.by, fmt.Errorf("%w: server %q: the code exchange at %s failed: %w", ErrSignIn, id, p.d.Server.TokenEndpoint, tokenError(err))
	}
	rec := &record{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, TokenType: tok.Type(), Expiry: s.expiry(tok),
		Resource: p.cfg.GetUrl(), Issuer: p.d.Server.Issuer, TokenEndpoint: p.d.Server.TokenEndpoint, ClientID: p.conf.ClientID,
		RegisteredSecret: p.registeredSecret}
	rec.Subject = subjectOf(tok.AccessToken, p.by)
	sv := s.server(id)
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if err := s.save(ctx, id, rec); err != nil {
		return id, p.by, err
	}
	sv.set(rec, "")
	s.log.Info("upstream sign-in finished", "server", id, "by", p.by, "subject", rec.Subject, "expires", rec.Expiry)
	return id, p.by, nil
}
