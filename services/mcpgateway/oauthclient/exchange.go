package oauthclient

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/zestmcp/zest/lib/keyauth"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// MaxExchangedTokens bounds the exchanged tokens one mcpgateway keeps, one per caller's token
// and server (grant token_exchange). A new one past it drops the expired ones, else the one
// that expires first: the caller it belonged to gets a new exchange at its next call.
const MaxExchangedTokens = 4096

// grantTypeTokenExchange is RFC 8693's grant type.
const grantTypeTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"

// StatusOnBehalf is the state of a grant token_exchange server: Zest holds no token of its
// own, each call goes with its caller's.
const StatusOnBehalf = "on_behalf_of_caller"

// onBehalfMessage is what the state of such a server says.
const onBehalfMessage = "on behalf of each caller: each call goes with the caller's OAuth access token exchanged for one for this server (RFC 8693); Zest holds no token of its own, and refuses callers without an access token"

// ErrNoCallerToken means a call of a grant token_exchange server came from a caller without
// an OAuth access token (an API key, the chat loop, the admin API): there is nobody on whose
// behalf to call it. Its error names the setting and what to do.
var ErrNoCallerToken = errors.New("no caller's access token to exchange")

// OnBehalfError is ErrNoCallerToken for one server.
type OnBehalfError struct{ ID string }

func (e *OnBehalfError) Error() string {
	return fmt.Sprintf("server %q is called on behalf of each caller (its oauth.grant is %s), and this caller holds no OAuth access token: "+
		"call it through an MCP endpoint (/mcp/servers/%s or a preset) with an access token of ZEST_OAUTH_ISSUER, "+
		"or give the server another oauth.grant to call it as Zest", e.ID, serverconfig.GrantTokenExchange, e.ID)
}

// Is makes an OnBehalfError ErrNoCallerToken.
func (e *OnBehalfError) Is(target error) bool { return target == ErrNoCallerToken }

// OnBehalf reports whether cfg's server is called on behalf of each caller (grant
// token_exchange).
func OnBehalf(cfg *mcpgatewayv1.ServerConfig) bool {
	return cfg.GetOauth().GetGrant() == serverconfig.GrantTokenExchange
}

// CheckCaller refuses a call of cfg's server whose caller ctx names holds no access token to
// exchange, when the server is called on behalf of each caller (nil otherwise).
func CheckCaller(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) error {
	if !OnBehalf(cfg) {
		return nil
	}
	if _, ok := keyauth.CallerTokenOf(ctx); !ok {
		return &OnBehalfError{ID: cfg.GetId()}
	}
	return nil
}

// exchangeKey names an exchanged token: the server, its URL and the caller's token, hashed
// (the cache holds no caller's token).
type exchangeKey [sha256.Size]byte

func keyOf(cfg *mcpgatewayv1.ServerConfig, callerToken string) exchangeKey {
	h := sha256.New()
	for _, part := range []string{cfg.GetId(), cfg.GetUrl(), cfg.GetOauth().GetAudience(), callerToken} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	var k exchangeKey
	h.Sum(k[:0])
	return k
}

// exchanged is one caller's token for one server; mu serializes its exchanges (and is held
// across them), so that concurrent calls of one caller make one.
type exchanged struct {
	server string
	mu     sync.Mutex
	token  string
	expiry time.Time
}

// exchanges are the exchanged tokens of a signer, in memory only: they are the callers', and
// die with the process (a restart exchanges again).
type exchanges struct {
	mu sync.Mutex
	m  map[exchangeKey]*exchanged
}

// entry is k's exchanged token, made (and room made for it) when there is none.
func (x *exchanges) entry(k exchangeKey, server string, now time.Time) *exchanged {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.m[k]; e != nil {
		return e
	}
	if x.m == nil {
		x.m = map[exchangeKey]*exchanged{}
	}
	if len(x.m) >= MaxExchangedTokens {
		x.evict(now)
	}
	e := &exchanged{server: server}
	x.m[k] = e
	return e
}

// evict drops the expired tokens, else the one that expires first (x.mu held). An entry whose
// exchange is in progress reads as expired: its call keeps its token, uncached.
func (x *exchanges) evict(now time.Time) {
	var first exchangeKey
	var firstExpiry time.Time
	found := false
	for k, e := range x.m {
		exp, ok := e.peekExpiry()
		if !ok || (!exp.IsZero() && !exp.After(now)) {
			delete(x.m, k)
			continue
		}
		if !found || (!exp.IsZero() && (firstExpiry.IsZero() || exp.Before(firstExpiry))) {
			first, firstExpiry, found = k, exp, true
		}
	}
	if len(x.m) >= MaxExchangedTokens && found {
		delete(x.m, first)
	}
}

// peekExpiry is e's expiry without waiting for an exchange in progress (ok false then, or
// when e holds no token).
func (e *exchanged) peekExpiry() (time.Time, bool) {
	if !e.mu.TryLock() {
		return time.Time{}, false
	}
	defer e.mu.Unlock()
	return e.expiry, e.token != ""
}

// forget drops server id's exchanged tokens.
func (x *exchanges) forget(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for k, e := range x.m {
		if e.server == id {
			delete(x.m, k)
		}
	}
}

// len is how many tokens are kept.
func (x *exchanges) len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.m)
}

// ExchangedToken returns the token to send to cfg's server (grant token_exchange) for the
// caller of ctx: the one exchanged earlier for this caller's token while it is valid beyond
// RefreshBefore, else a new exchange of the caller's token at the server's authorization
// server (RFC 8693: subject_token the caller's access token, resource the server's url).
// force exchanges again (the server answered 401). A caller without an access token is
// refused with OnBehalfError.
func (s *Signer) ExchangedToken(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, force bool) (string, error) {
	ct, ok := keyauth.CallerTokenOf(ctx)
	if !ok {
		return "", &OnBehalfError{ID: cfg.GetId()}
	}
	now := s.now()
	e := s.exchanges.entry(keyOf(cfg, ct.Reveal()), cfg.GetId(), now)
	e.mu.Lock()
	defer e.mu.Unlock()
	if !force && e.token != "" && (e.expiry.IsZero() || e.expiry.Add(-RefreshBefore).After(now)) {
		return e.token, nil
	}
	tok, expiry, err := s.exchange(ctx, cfg, ct.Reveal())
	if err != nil {
		e.token, e.expiry = "", time.Time{}
		return "", err
	}
	e.token, e.expiry = tok, expiry
	return tok, nil
}

// exchange asks cfg's authorization server for a token for cfg's server in exchange for
// subjectToken, as the configured client.
func (s *Signer) exchange(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, subjectToken string) (string, time.Time, error) {
	id, o := cfg.GetId(), cfg.GetOauth()
	secret, err := s.secret(cfg)
	if err != nil {
		return "", time.Time{}, err
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, s.hc)
	d, err := s.discover(ctx, cfg)
	if err != nil {
		return "", time.Time{}, err
	}
	// The caller's token goes only to the issuer that issued it, or to the authorization
	// server the operator named: a server's own metadata must not send Zest's callers' tokens
	// (whose audience is Zest) wherever it likes.
	if o.GetAuthorizationServer() == "" && !sameIssuer(d.Server.Issuer, s.callerIssuer()) {
		return "", time.Time{}, fmt.Errorf("server %q: its metadata names the authorization server %q, and Zest sends its callers' tokens only to ZEST_OAUTH_ISSUER (%q), which issued them: "+
			"set oauth.authorization_server to %q if you trust it with them", id, d.Server.Issuer, s.callerIssuer(), d.Server.Issuer)
	}
	tokenType := o.GetRequestedTokenType()
	if tokenType == "" {
		tokenType = serverconfig.TokenTypeAccessToken
	}
	// x/oauth2 has no token exchange: the client-credentials request with its grant_type
	// overridden (as refresh does) is one, authenticated as the configured client.
	params := url.Values{"grant_type": {grantTypeTokenExchange}, "subject_token": {subjectToken},
		"subject_token_type": {serverconfig.TokenTypeAccessToken}, "requested_token_type": {tokenType}, "resource": {cfg.GetUrl()}}
	if a := o.GetAudience(); a != "" {
		params.Set("audience", a)
	}
	if err := checkKeyMethod(cfg, &d.Server); err != nil {
		return "", time.Time{}, err
	}
	if err := s.addClientAssertion(cfg, o.GetClientId(), d.Server.Issuer, params); err != nil {
		return "", time.Time{}, err
	}
	cc := clientcredentials.Config{ClientID: o.GetClientId(), ClientSecret: secret, TokenURL: d.Server.TokenEndpoint, AuthStyle: authStyle(secret, clientMethod(cfg, "", d)),
		Scopes: scopes(cfg, d), EndpointParams: params}
	tok, err := cc.Token(ctx)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("server %q: token exchange for the caller at %s (check oauth.client_id, %s, and that the authorization server lets that client exchange the tokens of ZEST_OAUTH_ISSUER): %w",
			id, d.Server.TokenEndpoint, credentialsHint(cfg), tokenError(err))
	}
	expiry := s.expiry(tok)
	s.log.DebugContext(ctx, "caller's token exchanged for the upstream", "server", id, "expires", expiry)
	return tok.AccessToken, expiry, nil
}

func sameIssuer(a, b string) bool {
	return b != "" && strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}

// SetCallerIssuer names the issuer of the callers' access tokens (ZEST_OAUTH_ISSUER): the one
// authorization server a grant token_exchange server's metadata may send them to (another
// needs oauth.authorization_server).
func (s *Signer) SetCallerIssuer(issuer string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.issuer = issuer
}

func (s *Signer) callerIssuer() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issuer
}
