package oauthclient

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/keyauth"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
)

func txConfig(url string) *mcpgatewayv1.ServerConfig {
	return &mcpgatewayv1.ServerConfig{Id: "up", Url: url, Transport: "streamable-http",
		Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest", ClientSecret: "${UP_SECRET}", Grant: serverconfig.GrantTokenExchange,
			Audience: "tools", RequestedTokenType: serverconfig.TokenTypeAccessToken, Scopes: []string{"mcp"}}}
}

func (a *testAS) exchanges() []exchangeSeen {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]exchangeSeen(nil), a.exchanged...)
}

// TestTokenExchange: a server of grant token_exchange is called with the caller's access
// token exchanged at its authorization server (RFC 8693: the caller's token as subject_token,
// the server's url as resource, the audience and token type configured, as the configured
// client); each caller's token gets its own, kept until RefreshBefore its expiry; a caller
// without an access token is refused naming the setting; nothing is stored, no secret key is
// needed; the state says "on behalf of each caller".
func TestTokenExchange(t *testing.T) {
	a := startAS(t)
	c := &clock{t: time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)}
	store := openBolt(t)
	s := New(nil, store, env(map[string]string{"UP_SECRET": "s3cret"}), a.srv.Client(), c.now, slog.New(slog.DiscardHandler))
	cfg := txConfig(a.srv.URL + "/mcp")
	s.SetCallerIssuer(a.srv.URL + "/as")
	alice, bob := keyauth.WithCallerToken(t.Context(), "alice"), keyauth.WithCallerToken(t.Context(), "bob")

	tokA, err := s.ExchangedToken(alice, cfg, false)
	if err != nil || tokA != "xt-alice-1" {
		t.Fatalf("alice: %q, %v", tokA, err)
	}
	tokB, err := s.ExchangedToken(bob, cfg, false)
	if err != nil || tokB != "xt-bob-2" {
		t.Fatalf("bob: %q, %v", tokB, err)
	}
	if again, _ := s.ExchangedToken(alice, cfg, false); again != tokA {
		t.Fatalf("alice's token was not kept: %q", again)
	}
	grants, resources := a.seen()
	if len(grants) != 2 || grants[0] != grantTypeTokenExchange || resources[0] != cfg.GetUrl() || resources[1] != cfg.GetUrl() {
		t.Fatalf("grants %v, resources %v", grants, resources)
	}
	if x := a.exchanges(); x[0] != (exchangeSeen{subject: "alice", audience: "tools", tokenType: serverconfig.TokenTypeAccessToken, scope: "mcp"}) {
		t.Fatalf("exchange request %+v", x[0])
	}
	// Near its expiry, and when the server refused it (force), the caller's token is exchanged again.
	c.add(time.Hour - RefreshBefore + time.Second)
	if tok, err := s.ExchangedToken(alice, cfg, false); err != nil || tok != "xt-alice-3" {
		t.Fatalf("near expiry: %q, %v", tok, err)
	}
	if tok, err := s.ExchangedToken(alice, cfg, true); err != nil || tok != "xt-alice-4" {
		t.Fatalf("forced: %q, %v", tok, err)
	}

	// A caller by key: refused, naming the setting; nothing was asked of the server.
	n := len(a.exchanges())
	_, err = s.ExchangedToken(t.Context(), cfg, false)
	if !errors.Is(err, ErrNoCallerToken) || !strings.Contains(err.Error(), `server "up" is called on behalf of each caller (its oauth.grant is token_exchange)`) ||
		!strings.Contains(err.Error(), "ZEST_OAUTH_ISSUER") {
		t.Fatalf("no caller token: %v", err)
	}
	if CheckCaller(t.Context(), cfg) == nil || CheckCaller(alice, cfg) != nil || CheckCaller(t.Context(), ccConfig(cfg.GetUrl())) != nil {
		t.Fatal("CheckCaller")
	}
	if len(a.exchanges()) != n {
		t.Fatal("a caller without a token reached the authorization server")
	}

	// Nothing stored, and the state holds no token.
	if _, err := store.GetOAuthToken(t.Context(), "up"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("an exchanged token was stored: %v", err)
	}
	if st := s.State(t.Context(), cfg); st.GetStatus() != StatusOnBehalf || st.GetSubject() != "" || st.GetExpires() != "" || !strings.Contains(st.GetMessage(), "on behalf of each caller") {
		t.Fatalf("state = %v", st)
	}
	if _, err := s.StartSignIn(t.Context(), cfg, "http://127.0.0.1/cb", "admin-key", ""); !errors.Is(err, ErrSignIn) {
		t.Fatalf("a sign-in: %v", err)
	}
	// Forgetting the server drops its callers' tokens.
	if err := s.Forget(t.Context(), "up"); err != nil || s.exchanges.len() != 0 {
		t.Fatalf("forget: %v, %d kept", err, s.exchanges.len())
	}

	// An authorization server other than the callers' issuer, named by the server's metadata
	// alone, is never sent a caller's token; oauth.authorization_server names one to trust.
	s.SetCallerIssuer("https://id.example.com")
	n = len(a.exchanges())
	if _, err := s.ExchangedToken(keyauth.WithCallerToken(t.Context(), "carol"), cfg, false); err == nil ||
		!strings.Contains(err.Error(), "ZEST_OAUTH_ISSUER") || !strings.Contains(err.Error(), "oauth.authorization_server") || len(a.exchanges()) != n {
		t.Fatalf("another issuer: %v, %d exchanges", err, len(a.exchanges())-n)
	}
	trusted := txConfig(cfg.GetUrl())
	trusted.Oauth.AuthorizationServer = a.srv.URL + "/as"
	if _, err := s.ExchangedToken(keyauth.WithCallerToken(t.Context(), "carol"), trusted, false); err != nil {
		t.Fatalf("the named authorization server: %v", err)
	}
	s.SetCallerIssuer(a.srv.URL + "/as")

	// An authorization server that refuses the exchange: the error names the settings, and
	// holds no token.
	bad := txConfig(cfg.GetUrl())
	bad.Oauth.ClientId = "stranger"
	_, err = s.ExchangedToken(alice, bad, false)
	if err == nil || !strings.Contains(err.Error(), "invalid_client") || !strings.Contains(err.Error(), "oauth.client_id") || strings.Contains(err.Error(), "alice") {
		t.Fatalf("refused exchange: %v", err)
	}
}

// TestTransportOnBehalf: the transport of a token_exchange server sends each request with its
// caller's exchanged token, exchanges again once on a 401, and sends nothing for a request
// without a caller's token.
func TestTransportOnBehalf(t *testing.T) {
	a := startAS(t)
	var mu sync.Mutex
	var seen []string
	reject := "Bearer xt-alice-1"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("Authorization") == "" { // discovery's probe
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		seen = append(seen, r.Header.Get("Authorization"))
		if r.Header.Get("Authorization") == reject {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer up.Close()
	cfg := txConfig(up.URL)
	cfg.Oauth.AuthorizationServer = a.srv.URL + "/as"
	s := New(nil, openBolt(t), env(map[string]string{"UP_SECRET": "s3cret"}), a.srv.Client(), nil, nil)
	hc := &http.Client{Transport: &Transport{Base: http.DefaultTransport, Signer: s, Config: cfg}}
	post := func(caller string) (int, error) {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", up.URL, strings.NewReader("{}"))
		if caller != "" {
			req = req.WithContext(keyauth.WithCallerToken(req.Context(), caller))
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := post("alice"); err != nil || code != 200 {
		t.Fatalf("alice: %d %v", code, err)
	}
	if code, err := post("bob"); err != nil || code != 200 {
		t.Fatalf("bob: %d %v", code, err)
	}
	if _, err := post(""); !errors.Is(err, ErrNoCallerToken) {
		t.Fatalf("no caller: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := fmt.Sprint(seen); got != "[Bearer xt-alice-1 Bearer xt-alice-2 Bearer xt-bob-3]" {
		t.Fatalf("the server saw %s", got)
	}
}

// TestExchangedTokensBounded: past MaxExchangedTokens a new caller's token drops the expired
// ones, else the one that expires first.
func TestExchangedTokensBounded(t *testing.T) {
	now := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
	var x exchanges
	key := func(i int) exchangeKey { return keyOf(txConfig("https://up.example/mcp"), fmt.Sprint("caller-", i)) }
	for i := range MaxExchangedTokens {
		e := x.entry(key(i), "up", now)
		// caller-0 expires first; the others an hour later each.
		e.token, e.expiry = "t", now.Add(time.Duration(i+1)*time.Hour)
	}
	if x.len() != MaxExchangedTokens {
		t.Fatalf("%d kept", x.len())
	}
	x.entry(key(MaxExchangedTokens), "up", now).token = "t"
	if x.len() != MaxExchangedTokens {
		t.Fatalf("past the limit: %d kept", x.len())
	}
	x.mu.Lock()
	_, first := x.m[key(0)]
	_, second := x.m[key(1)]
	x.mu.Unlock()
	if first || !second {
		t.Fatalf("kept caller-0 %v, caller-1 %v: want the one that expires first dropped", first, second)
	}
	// Three hours on, caller-1 and caller-2 have expired: both go, for one new one.
	x.entry(key(MaxExchangedTokens+1), "up", now.Add(3*time.Hour))
	if x.len() != MaxExchangedTokens-1 {
		t.Fatalf("after expiry: %d kept; want the expired ones dropped", x.len())
	}
}
