package oauthclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"golang.org/x/oauth2"
)

// testAS is an authorization server and a protected resource (RFC 9728, RFC 8414) for the
// client's unit tests: its token endpoint checks the grant, the client and the resource, and
// counts what it issued. The e2e tests use zitadel/oidc's provider (e2e/internal/oauthserver).
type testAS struct {
	srv *httptest.Server
	// lifetime is the expires_in of its tokens.
	lifetime time.Duration

	mu      sync.Mutex
	issued  int
	refresh map[string]bool   // refresh tokens valid
	codes   map[string]string // code (its PKCE challenge) → resource
	clients map[string]bool   // client ids: "zest", and those registered
	// registration: the metadata names a registration endpoint (RFC 7591).
	registration bool
	// metadataDocs: the metadata says client_id_metadata_document_supported, and a client id
	// that is an https URL is taken (this server reads no document: the e2e one does).
	metadataDocs bool
	grants       []string
	resource     []string
	// hold, when set, receives each token request's arrival and holds it until it reads one.
	hold chan chan struct{}
	// wellKnownOnly: the 401 names no resource_metadata (the client tries the well-known URL).
	wellKnownOnly bool
	// exchanged are the token exchanges it granted.
	exchanged []exchangeSeen
	// prmResource, when set, is the resource its metadata names (else its /mcp; "-": none).
	prmResource string
	// challengeScope, when set, is the scope of its 401's challenge.
	challengeScope string
	// authMethods is its metadata's token_endpoint_auth_methods_supported; with only
	// client_secret_post, a secret sent by HTTP Basic is refused.
	authMethods []string
	// registerPost: a registration gives the secret "s3cret" and client_secret_post.
	registerPost bool
	// auths are how each token request authenticated: basic, post or none.
	auths []string
	// issSupported: its metadata says it sends iss in its authorization responses (RFC 9207);
	// issInRedirect, when set, is the iss its authorization responses carry.
	issSupported  bool
	issInRedirect string
	// issuer2: its protected-resource metadata names /as2 (the same endpoints, another
	// issuer) rather than /as; refused are the access tokens its /mcp answers 401.
	issuer2 bool
	refused map[string]bool
	// scopes are the scope each access or refresh token was issued for, and each code.
	scopes map[string]string
	// rootIssuer, when set, is the issuer of RFC 8414 metadata at the origin's well-known URL
	// (a server of MCP 2025-03-26), its endpoints under /oauth.
	rootIssuer string
	// assertion, when set, authenticates a token request that carries a client assertion
	// (private_key_jwt; clientkey_test.go): the client it names, or "" when refused.
	assertion func(form url.Values) (clientID string)
	// signingAlgs is its metadata's token_endpoint_auth_signing_alg_values_supported.
	signingAlgs []string
}

// exchangeSeen is one token exchange request as the server read it.
type exchangeSeen struct{ subject, audience, tokenType, scope string }

func startAS(t *testing.T) *testAS {
	a := &testAS{lifetime: time.Hour, refresh: map[string]bool{}, codes: map[string]string{}, clients: map[string]bool{"zest": true}, scopes: map[string]string{}}
	mux := http.NewServeMux()
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	base := a.srv.URL
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		refused := a.refused[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		a.mu.Unlock()
		if r.Header.Get("Authorization") == "" || refused {
			ch := `Bearer error="invalid_token"`
			if !a.wellKnownOnly {
				ch += `, resource_metadata="` + base + `/prm/mcp"`
			}
			if a.challengeScope != "" {
				ch += `, scope="` + a.challengeScope + `"`
			}
			w.Header().Set("WWW-Authenticate", ch)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	prm := func(w http.ResponseWriter, _ *http.Request) {
		res := base + "/mcp"
		if a.prmResource == "-" {
			res = ""
		} else if a.prmResource != "" {
			res = a.prmResource
		}
		as := base + "/as"
		if a.issuer2 {
			as = base + "/as2"
		}
		_ = json.NewEncoder(w).Encode(ProtectedResource{Resource: res, AuthorizationServers: []string{as}, ScopesSupported: []string{"mcp"}})
	}
	mux.HandleFunc("/prm/mcp", prm)
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", prm)
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		if a.rootIssuer == "" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(ServerMetadata{Issuer: a.rootIssuer, AuthorizationEndpoint: base + "/oauth/authorize", TokenEndpoint: base + "/oauth/token"})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server/as2", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(ServerMetadata{Issuer: base + "/as2", AuthorizationEndpoint: base + "/as/authorize", TokenEndpoint: base + "/as/token",
			CodeChallengeMethodsSupported: []string{"S256"}})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server/as", func(w http.ResponseWriter, _ *http.Request) {
		m := ServerMetadata{Issuer: base + "/as", AuthorizationEndpoint: base + "/as/authorize", TokenEndpoint: base + "/as/token",
			CodeChallengeMethodsSupported: []string{"S256"}, TokenEndpointAuthMethodsSupported: a.authMethods, IssParameterSupported: a.issSupported,
			TokenEndpointAuthSigningAlgValuesSupported: a.signingAlgs}
		if a.registration {
			m.RegistrationEndpoint = base + "/as/register"
		}
		m.ClientIDMetadataDocumentSupported = a.metadataDocs
		_ = json.NewEncoder(w).Encode(m)
	})
	// The authorization endpoint approves at once (the person signed in): it keeps the PKCE
	// challenge and the resource with the code.
	// Dynamic client registration (RFC 7591): a public client for the redirect URIs given.
	mux.HandleFunc("/as/register", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			RedirectURIs []string `json:"redirect_uris"`
			AuthMethod   string   `json:"token_endpoint_auth_method"`
			AppType      string   `json:"application_type"`
		}
		if json.NewDecoder(r.Body).Decode(&req) != nil || len(req.RedirectURIs) != 1 || req.AuthMethod != "none" || req.AppType != "web" {
			http.Error(w, `{"error":"invalid_client_metadata"}`, http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		id := fmt.Sprintf("dyn-%d", len(a.clients))
		a.clients[id] = true
		a.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		reg := map[string]any{"client_id": id, "redirect_uris": req.RedirectURIs}
		if a.registerPost {
			reg["client_secret"], reg["token_endpoint_auth_method"] = "s3cret", "client_secret_post"
		}
		_ = json.NewEncoder(w).Encode(reg)
	})
	mux.HandleFunc("/as/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		a.mu.Lock()
		known := a.clients[q.Get("client_id")] || (a.metadataDocs && strings.HasPrefix(q.Get("client_id"), "https://"))
		if known {
			a.clients[q.Get("client_id")] = true
		}
		a.mu.Unlock()
		if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("resource") == "" || !known {
			http.Error(w, "bad authorization request", http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		a.codes[q.Get("code_challenge")] = q.Get("resource")
		a.scopes[q.Get("code_challenge")] = q.Get("scope")
		a.mu.Unlock()
		iss := ""
		if a.issInRedirect != "" {
			iss = "&iss=" + url.QueryEscape(a.issInRedirect)
		}
		http.Redirect(w, r, q.Get("redirect_uri")+"?code="+url.QueryEscape(q.Get("code_challenge"))+"&state="+url.QueryEscape(q.Get("state"))+iss, http.StatusFound)
	})
	mux.HandleFunc("/as/token", func(w http.ResponseWriter, r *http.Request) {
		if a.hold != nil {
			release := make(chan struct{})
			a.hold <- release
			<-release
		}
		_ = r.ParseForm()
		id, secret, basic := r.BasicAuth()
		if !basic {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.assertion != nil && r.PostForm.Has("client_assertion") && !basic && secret == "" {
			if id = a.assertion(r.PostForm); id != "" {
				secret = "s3cret" // authenticated by its key
			}
		}
		switch {
		case r.PostForm.Has("client_assertion"):
			a.auths = append(a.auths, "private_key_jwt")
		case basic:
			a.auths = append(a.auths, "basic")
		case secret != "":
			a.auths = append(a.auths, "post")
		default:
			a.auths = append(a.auths, "none")
		}
		a.grants = append(a.grants, r.PostForm.Get("grant_type"))
		a.resource = append(a.resource, r.PostForm.Get("resource"))
		fail := func(code string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":%q}`, code)
		}
		if !a.clients[id] || (secret != "" && secret != "s3cret") || (basic && len(a.authMethods) == 1 && a.authMethods[0] == "client_secret_post") {
			fail("invalid_client")
			return
		}
		scope := r.PostForm.Get("scope")
		switch r.PostForm.Get("grant_type") {
		case "authorization_code":
			code := r.PostForm.Get("code")
			scope = a.scopes[code]
			if res, ok := a.codes[code]; !ok || res != r.PostForm.Get("resource") || oauth2.S256ChallengeFromVerifier(r.PostForm.Get("code_verifier")) != code {
				fail("invalid_grant")
				return
			}
			delete(a.codes, code)
		case "client_credentials":
			if secret == "" {
				fail("invalid_client")
				return
			}
		case "urn:ietf:params:oauth:grant-type:token-exchange":
			// RFC 8693: a confidential client exchanges a caller's access token; the token
			// names the caller (its subject token) and the audience asked for.
			subject := r.PostForm.Get("subject_token")
			if secret == "" || subject == "" || r.PostForm.Get("subject_token_type") != "urn:ietf:params:oauth:token-type:access_token" {
				fail("invalid_request")
				return
			}
			a.issued++
			a.exchanged = append(a.exchanged, exchangeSeen{subject: subject, audience: r.PostForm.Get("audience"),
				tokenType: r.PostForm.Get("requested_token_type"), scope: r.PostForm.Get("scope")})
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("xt-%s-%d", subject, a.issued), "token_type": "Bearer",
				"issued_token_type": r.PostForm.Get("requested_token_type"), "expires_in": int(a.lifetime.Seconds())})
			return
		case "refresh_token":
			rt := r.PostForm.Get("refresh_token")
			if !a.refresh[rt] {
				fail("invalid_grant")
				return
			}
			delete(a.refresh, rt) // rotated
			scope = a.scopes[rt]
		default:
			fail("unsupported_grant_type")
			return
		}
		a.issued++
		rt := fmt.Sprintf("rt-%d", a.issued)
		a.refresh[rt] = true
		a.scopes[rt], a.scopes[fmt.Sprintf("at-%d", a.issued)] = scope, scope
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("at-%d", a.issued), "token_type": "Bearer",
			"expires_in": int(a.lifetime.Seconds()), "refresh_token": rt})
	})
	return a
}

// revokeAll makes every refresh token the server issued invalid.
func (a *testAS) revokeAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.refresh)
}

func (a *testAS) seen() (grants, resources []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.grants...), append([]string(nil), a.resource...)
}

func testKeys(t *testing.T) *Keyring {
	k, err := NewKeyring(bytes.Repeat([]byte{7}, KeyBytes))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func openBolt(t *testing.T) *registry.Bolt {
	r, err := registry.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// clock is a test's clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestDiscover(t *testing.T) {
	a := startAS(t)
	hc := a.srv.Client()
	for _, wk := range []bool{false, true} {
		a.wellKnownOnly = wk
		ch, err := Challenge(t.Context(), hc, a.srv.URL+"/mcp")
		if err != nil {
			t.Fatal(err)
		}
		if got := ResourceMetadataURL(ch); (got != "") == wk {
			t.Fatalf("wellKnownOnly %v: resource_metadata %q from %q", wk, got, ch)
		}
		d, err := Discover(t.Context(), hc, a.srv.URL+"/mcp", ch, "")
		if err != nil {
			t.Fatal(err)
		}
		if d.Server.TokenEndpoint != a.srv.URL+"/as/token" || !d.Server.SupportsS256() || d.Resource.ScopesSupported[0] != "mcp" {
			t.Fatalf("discovery = %+v", d)
		}
	}
	// The override is used, and its metadata must name it as the issuer.
	if _, err := Discover(t.Context(), hc, a.srv.URL+"/other", "", a.srv.URL+"/as/"); err != nil {
		t.Fatalf("override: %v", err)
	}
	if _, err := Discover(t.Context(), hc, a.srv.URL+"/other", "", a.srv.URL+"/nowhere"); !errors.Is(err, ErrDiscovery) {
		t.Fatalf("override without metadata: %v", err)
	}
}

// TestDiscoverRefusesAnotherResource: metadata whose resource is not the server's URL (or a
// parent of it on the same origin) is refused before any authorization request (conformance
// auth/resource-mismatch: Zest went on to sign in with it).
func TestDiscoverRefusesAnotherResource(t *testing.T) {
	a := startAS(t)
	for res, ok := range map[string]bool{
		"https://evil.example.com/mcp": false,
		a.srv.URL + "/other":           false,
		a.srv.URL + "/mc":              false,
		"":                             false,
		a.srv.URL + "/mcp#x":           false,
		a.srv.URL + "/mcp":             true,
		a.srv.URL + "/mcp/":            true,
		a.srv.URL:                      true,
		a.srv.URL + "/":                true,
	} {
		a.prmResource = res
		if res == "" {
			a.prmResource = "-"
		}
		for _, wk := range []bool{false, true} {
			a.wellKnownOnly = wk
			ch, err := Challenge(t.Context(), a.srv.Client(), a.srv.URL+"/mcp")
			if err != nil {
				t.Fatal(err)
			}
			_, err = Discover(t.Context(), a.srv.Client(), a.srv.URL+"/mcp", ch, "")
			if ok != (err == nil) || (!ok && (!errors.Is(err, ErrDiscovery) || !strings.Contains(err.Error(), "check the server's url"))) {
				t.Errorf("resource %q (well-known only %v): %v", res, wk, err)
			}
		}
	}
}

// TestScopeFromTheChallenge: without configured scopes, a sign-in asks for the scope of the
// server's 401 before its metadata's scopes_supported (conformance
// auth/scope-from-www-authenticate: Zest asked for scopes_supported); configured scopes come first.
func TestScopeFromTheChallenge(t *testing.T) {
	a := startAS(t)
	a.challengeScope = "mcp:read mcp:write"
	s := New(testKeys(t), openBolt(t), env(nil), a.srv.Client(), nil, nil)
	for configured, want := range map[string]string{"": "mcp:read mcp:write", "mine": "mine"} {
		cfg := &mcpgatewayv1.ServerConfig{Id: "up", Url: a.srv.URL + "/mcp", Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest"}}
		if configured != "" {
			cfg.Oauth.Scopes = []string{configured}
		}
		authURL, err := s.StartSignIn(t.Context(), cfg, "https://zest.example"+CallbackPath, "admin", "")
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(authURL)
		if got := u.Query().Get("scope"); got != want {
			t.Errorf("configured %q: scope %q, want %q", configured, got, want)
		}
	}
}

// TestTokenEndpointAuthMethod: a client with a secret authenticates at the token endpoint
// the way its registration or the server's metadata says — conformance
// auth/token-endpoint-auth-post: Zest sent a registered client's secret by HTTP Basic first
// (x/oauth2's detection) where the server takes client_secret_post only.
func TestTokenEndpointAuthMethod(t *testing.T) {
	// A registration that gives a secret for client_secret_post: the code exchange and the
	// refresh send it in the body.
	a := startAS(t)
	a.registration, a.registerPost, a.authMethods = true, true, []string{"client_secret_post"}
	c := &clock{t: time.Now()}
	s := New(testKeys(t), openBolt(t), env(map[string]string{"UP_SECRET": "s3cret"}), a.srv.Client(), c.now, nil)
	cfg := &mcpgatewayv1.ServerConfig{Id: "up", Url: a.srv.URL + "/mcp", Oauth: &mcpgatewayv1.UpstreamOAuth{}}
	authURL, err := s.StartSignIn(t.Context(), cfg, "https://zest.example"+CallbackPath, "admin", "")
	if err != nil {
		t.Fatal(err)
	}
	finishSignIn(t, s, authURL)
	c.add(time.Hour)
	if _, err := s.AccessToken(t.Context(), cfg, false); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	got := strings.Join(a.auths, " ")
	a.auths = nil
	a.mu.Unlock()
	if got != "post post" {
		t.Fatalf("the code exchange and the refresh authenticated by %q, want post post", got)
	}

	// Client credentials: the metadata's one method, or Basic first when it lists Basic.
	for methods, want := range map[string]string{"client_secret_post": "post", "client_secret_basic client_secret_post": "basic"} {
		a.authMethods = strings.Fields(methods)
		cc := ccConfig(cfg.GetUrl())
		cc.Id = "cc-" + want
		if _, err := s.AccessToken(t.Context(), cc, false); err != nil {
			t.Fatalf("%s: %v", methods, err)
		}
		a.mu.Lock()
		got := strings.Join(a.auths, " ")
		a.auths = nil
		a.mu.Unlock()
		if got != want {
			t.Errorf("metadata %s: client credentials authenticated by %q, want %q", methods, got, want)
		}
	}
}

// TestDiscoverLegacy: a server that publishes no protected-resource metadata is one of MCP
// 2025-03-26, whose origin is its authorization server: its RFC 8414 metadata there (an
// issuer on that origin), else the default endpoints /authorize, /token and /register —
// conformance auth/2025-03-26-oauth-metadata-backcompat and -endpoint-fallback: Zest refused
// to sign in without oauth.authorization_server.
func TestDiscoverLegacy(t *testing.T) {
	a := startAS(t)
	hc := a.srv.Client()
	base := a.srv.URL
	d, err := Discover(t.Context(), hc, base+"/other", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if d.Legacy != LegacyDefaultEndpoints || d.Server.AuthorizationEndpoint != base+"/authorize" || d.Server.TokenEndpoint != base+"/token" ||
		d.Server.RegistrationEndpoint != base+"/register" || !d.Server.SupportsS256() {
		t.Fatalf("no metadata at all: %+v", d)
	}
	a.rootIssuer = base + "/oauth"
	if d, err = Discover(t.Context(), hc, base+"/other", "", ""); err != nil || d.Legacy != LegacyMetadata || d.Server.TokenEndpoint != base+"/oauth/token" {
		t.Fatalf("metadata at the origin: %+v %v", d, err)
	}
	a.rootIssuer = "https://elsewhere.example"
	if _, err := Discover(t.Context(), hc, base+"/other", "", ""); !errors.Is(err, ErrDiscovery) || !strings.Contains(err.Error(), "not one on that origin") {
		t.Fatalf("an issuer on another origin: %v", err)
	}
	// A server with protected-resource metadata is not one of 2025-03-26.
	if d, err = Discover(t.Context(), hc, base+"/mcp", "", ""); err != nil || d.Legacy != "" || d.Server.TokenEndpoint != base+"/as/token" {
		t.Fatalf("a current server: %+v %v", d, err)
	}
}

// TestStepUp: a 403 insufficient_scope whose challenge asks for more scopes than the token's
// (MCP authorization's step-up) — conformance auth/scope-step-up: Zest passed the 403 on and
// never asked for them. A client-credentials server's request is sent once more with a token
// for them; a server a person signs in to needs sign-in, and the next sign-in asks for them. A
// server that refuses the scopes its token was asked for is not asked again (the 403 stands).
func TestStepUp(t *testing.T) {
	a := startAS(t)
	var mu sync.Mutex
	need := "mcp mcp:write" // the scopes a call needs
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok { // discovery's probe
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		a.mu.Lock()
		granted := strings.Fields(a.scopes[tok])
		a.mu.Unlock()
		mu.Lock()
		defer mu.Unlock()
		for _, sc := range strings.Fields(need) {
			if !slices.Contains(granted, sc) {
				w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="`+need+`"`)
				w.WriteHeader(http.StatusForbidden)
				return
			}
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer up.Close()
	s := New(testKeys(t), openBolt(t), env(map[string]string{"UP_SECRET": "s3cret"}), a.srv.Client(), nil, nil)
	call := func(cfg *mcpgatewayv1.ServerConfig) (int, error) {
		hc := &http.Client{Transport: &Transport{Base: http.DefaultTransport, Signer: s, Config: cfg}}
		resp, err := hc.Post(up.URL, "application/json", strings.NewReader("{}"))
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	// Client credentials: a new token for the scopes asked, the request sent again.
	cc := ccConfig(up.URL)
	cc.Oauth.AuthorizationServer, cc.Oauth.Scopes = a.srv.URL+"/as", []string{"mcp"}
	if status, err := call(cc); err != nil || status != http.StatusOK {
		t.Fatalf("client credentials: %d %v", status, err)
	}
	a.mu.Lock()
	issued := a.issued
	a.mu.Unlock()
	if issued != 2 {
		t.Fatalf("client credentials: %d tokens issued, want 2 (the first, then one for the scopes asked)", issued)
	}

	// Authorization code: the call fails needing sign-in, the next sign-in asks for the scopes.
	cfg := &mcpgatewayv1.ServerConfig{Id: "person", Url: up.URL, Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest", Scopes: []string{"mcp"}, AuthorizationServer: a.srv.URL + "/as"}}
	signIn := func(wantScope string) {
		t.Helper()
		authURL, err := s.StartSignIn(t.Context(), cfg, "https://zest.example"+CallbackPath, "admin", "")
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(authURL)
		if got := u.Query().Get("scope"); got != wantScope {
			t.Fatalf("sign-in asks for %q, want %q", got, wantScope)
		}
		finishSignIn(t, s, authURL)
	}
	signIn("mcp")
	if _, err := call(cfg); !errors.Is(err, ErrNeedsSignIn) || !strings.Contains(err.Error(), `asks for the scopes "mcp mcp:write" (insufficient_scope)`) {
		t.Fatalf("a call that needs more scopes: %v", err)
	}
	if st := s.State(t.Context(), cfg); st.GetStatus() != StatusNeedsSignIn || !strings.Contains(st.GetMessage(), "insufficient_scope") {
		t.Fatalf("state after a step-up: %v", st)
	}
	signIn("mcp mcp:write")
	if status, err := call(cfg); err != nil || status != http.StatusOK {
		t.Fatalf("after the new sign-in: %d %v", status, err)
	}
	if st := s.State(t.Context(), cfg); st.GetStatus() != StatusSignedIn {
		t.Fatalf("state after the new sign-in: %v", st)
	}

	// Refused for the scopes the token was asked for: the 403 stands, no new sign-in asked.
	mu.Lock()
	need = "mcp other"
	mu.Unlock()
	if _, err := call(cfg); !errors.Is(err, ErrNeedsSignIn) {
		t.Fatalf("a call that needs another scope: %v", err)
	}
	signIn("mcp mcp:write other")
	a.mu.Lock()
	clear(a.scopes) // every token now refused
	a.mu.Unlock()
	if status, err := call(cfg); err != nil || status != http.StatusForbidden {
		t.Fatalf("refused for the scopes asked already: %d %v, want the 403", status, err)
	}
}

// TestResourceIndicator: tokens are asked for the resource of the protected-resource metadata
// exactly as published — a pathless one without a "/" added — in the authorization request,
// the code exchange, the refresh and client credentials (conformance 0.2.0-alpha.12
// auth/metadata-var2: Zest sent the server's URL where the metadata names its origin).
func TestResourceIndicator(t *testing.T) {
	a := startAS(t)
	a.prmResource = a.srv.URL // the origin, no path
	c := &clock{t: time.Now()}
	s := New(testKeys(t), openBolt(t), env(map[string]string{"UP_SECRET": "s3cret"}), a.srv.Client(), c.now, nil)
	cfg := &mcpgatewayv1.ServerConfig{Id: "up", Url: a.srv.URL + "/mcp", Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest"}}
	authURL, err := s.StartSignIn(t.Context(), cfg, "https://zest.example"+CallbackPath, "admin", "")
	if err != nil {
		t.Fatal(err)
	}
	if u, _ := url.Parse(authURL); u.Query().Get("resource") != a.srv.URL {
		t.Fatalf("authorization request's resource %q, want %q", u.Query().Get("resource"), a.srv.URL)
	}
	finishSignIn(t, s, authURL)
	c.add(time.Hour)
	if _, err := s.AccessToken(t.Context(), cfg, false); err != nil {
		t.Fatal(err)
	}
	cc := ccConfig(cfg.GetUrl())
	cc.Id = "cc"
	if _, err := s.AccessToken(t.Context(), cc, false); err != nil {
		t.Fatal(err)
	}
	grants, resources := a.seen()
	if len(resources) != 3 {
		t.Fatalf("token requests %v", grants)
	}
	for i, r := range resources {
		if r != a.srv.URL {
			t.Errorf("%s request's resource %q, want %q", grants[i], r, a.srv.URL)
		}
	}
}

// TestIssuerInTheCallback: the callback's iss (RFC 9207) must be exactly the issuer the
// sign-in went to, and is required when its metadata says it sends one; a refused response's
// code is never exchanged (conformance 0.2.0-alpha.12 auth/iss-wrong-issuer, iss-unexpected,
// iss-normalized, iss-supported-missing: Zest took the code whatever the iss).
func TestIssuerInTheCallback(t *testing.T) {
	a := startAS(t)
	issuer := a.srv.URL + "/as"
	s := New(testKeys(t), openBolt(t), env(nil), a.srv.Client(), nil, nil)
	cfg := &mcpgatewayv1.ServerConfig{Id: "up", Url: a.srv.URL + "/mcp", Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest"}}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct {
		advertised bool
		iss        string
		ok         bool
	}{
		{false, "", true},
		{false, issuer, true},
		{false, "https://evil.example", false},
		{true, "", false},
		{true, issuer, true},
		{true, issuer + "/", false},
		{true, strings.ToUpper(issuer[:4]) + issuer[4:], false},
	} {
		a.issSupported, a.issInRedirect = c.advertised, c.iss
		authURL, err := s.StartSignIn(t.Context(), cfg, "https://zest.example"+CallbackPath, "admin", "")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := noFollow.Get(authURL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		q, _ := url.Parse(resp.Header.Get("Location"))
		cb := Callback{State: q.Query().Get("state"), Code: q.Query().Get("code")}
		if q.Query().Has("iss") {
			cb.Iss = new(string)
			*cb.Iss = q.Query().Get("iss")
		}
		before, _ := a.seen()
		_, _, err = s.FinishSignIn(t.Context(), cb, "")
		after, _ := a.seen()
		if c.ok != (err == nil) || (!c.ok && (!errors.Is(err, ErrSignIn) || !strings.Contains(err.Error(), "RFC 9207") || len(after) != len(before))) {
			t.Errorf("advertised %v, iss %q: %v (token requests %d → %d)", c.advertised, c.iss, err, len(before), len(after))
		}
	}
}

// TestChallengeOfAnOperation: a server that lets an unauthenticated initialize through and
// challenges per operation gives its challenge (and the scope it names) to the tools/list
// probe (conformance 0.2.0-alpha.12 auth/scope-step-up: Zest read no challenge and asked for
// scopes_supported).
func TestChallengeOfAnOperation(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"initialize"`) {
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":0,"result":{}}`)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer scope="mcp:basic", resource_metadata="https://x/prm"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	ch, err := Challenge(t.Context(), srv.Client(), srv.URL)
	if err != nil || ResourceMetadataURL(ch) != "https://x/prm" || strings.Join(ChallengeScopes(ch), " ") != "mcp:basic" {
		t.Fatalf("challenge %q, %v", ch, err)
	}
}

// TestIssuerMoved: a server that refuses a token Zest held as valid, and whose metadata now
// names another authorization server (SEP-2352), has its tokens forgotten rather than
// refreshed at the former one — a client-credentials server gets a token of the new one, and a
// server a person signs in to needs sign-in (conformance 0.2.0-alpha.12
// auth/authorization-server-migration: Zest kept refreshing at the former one).
func TestIssuerMoved(t *testing.T) {
	a := startAS(t)
	a.refused = map[string]bool{}
	s := New(testKeys(t), openBolt(t), env(map[string]string{"UP_SECRET": "s3cret"}), a.srv.Client(), nil, nil)
	call := func(cfg *mcpgatewayv1.ServerConfig) error {
		hc := &http.Client{Transport: &Transport{Base: http.DefaultTransport, Signer: s, Config: cfg}}
		resp, err := hc.Post(cfg.GetUrl(), "application/json", strings.NewReader("{}"))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return nil
	}
	cc := ccConfig(a.srv.URL + "/mcp")
	person := &mcpgatewayv1.ServerConfig{Id: "person", Url: a.srv.URL + "/mcp", Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest"}}
	authURL, err := s.StartSignIn(t.Context(), person, "https://zest.example"+CallbackPath, "admin", "")
	if err != nil {
		t.Fatal(err)
	}
	finishSignIn(t, s, authURL)
	if err := call(cc); err != nil {
		t.Fatal(err)
	}
	if err := call(person); err != nil {
		t.Fatal(err)
	}
	// The server moves to /as2 and refuses every token issued so far.
	a.mu.Lock()
	a.issuer2 = true
	for i := 1; i <= a.issued; i++ {
		a.refused[fmt.Sprintf("at-%d", i)] = true
	}
	a.mu.Unlock()
	if err := call(cc); err != nil {
		t.Fatalf("client credentials after the move: %v", err)
	}
	if err := call(person); !errors.Is(err, ErrNeedsSignIn) || !strings.Contains(err.Error(), "authorization server changed from "+a.srv.URL+"/as to "+a.srv.URL+"/as2") {
		t.Fatalf("a person's server after the move: %v", err)
	}
	if st := s.State(t.Context(), person); st.GetStatus() != StatusNeedsSignIn {
		t.Fatalf("state: %v", st)
	}
	if grants, _ := a.seen(); strings.Join(grants, " ") != "authorization_code client_credentials client_credentials" {
		t.Fatalf("token requests %v: the former authorization server was asked to refresh", grants)
	}
}

// TestApplicationType: a registration names its application_type (SEP-837; conformance
// 0.2.0-alpha.12 failed every registration without it): native for a loopback callback.
func TestApplicationType(t *testing.T) {
	for uri, want := range map[string]string{
		"https://zest.example.com" + CallbackPath: "web",
		"http://127.0.0.1:8080" + CallbackPath:    "native",
		"http://[::1]:8080" + CallbackPath:        "native",
		"http://localhost:8080" + CallbackPath:    "native",
		"https://10.0.0.5" + CallbackPath:         "web",
	} {
		if got := applicationType(uri); got != want {
			t.Errorf("%s: %q, want %q", uri, got, want)
		}
	}
}

func TestResourceMetadataURL(t *testing.T) {
	for h, want := range map[string]string{
		`Bearer resource_metadata="https://a/b", error="invalid_token"`:      "https://a/b",
		`Bearer error="invalid_token", resource_metadata="https://a/\"q\""`:  `https://a/"q"`,
		`Basic realm="x", Bearer scope="a b", Resource_Metadata=https://a/c`: "https://a/c",
		`Bearer realm="x"`:             "",
		``:                             "",
		`Bearer resource_metadata="un`: "un",
	} {
		if got := ResourceMetadataURL(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
}

func TestSeal(t *testing.T) {
	k := testKeys(t)
	sealed, err := k.Seal([]byte("at-1"), []byte("up"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("at-1")) {
		t.Fatal("the sealed record holds the token in the clear")
	}
	if p, stale, err := k.Open(sealed, []byte("up")); err != nil || stale || string(p) != "at-1" {
		t.Fatalf("open = %q %v %v", p, stale, err)
	}
	if _, _, err := k.Open(sealed, []byte("other")); !errors.Is(err, ErrUnseal) {
		t.Fatalf("a record moved to another server opened: %v", err)
	}
	sealed[len(sealed)-1] ^= 1
	if _, _, err := k.Open(sealed, []byte("up")); !errors.Is(err, ErrUnseal) {
		t.Fatalf("an altered record opened: %v", err)
	}
	var nilKeys *Keyring
	if _, err := nilKeys.Seal(nil, nil); !errors.Is(err, ErrNoSecretKey) || !strings.Contains(err.Error(), EnvSecretKeyFile) {
		t.Fatalf("without a key: %v", err)
	}
}

// TestKeyRotation: a record sealed with the previous key opens (stale) once
// ZEST_SECRET_KEY_PREVIOUS_FILE names it; without it the error names the setting.
func TestKeyRotation(t *testing.T) {
	dir := t.TempDir()
	oldFile, newFile, bad := filepath.Join(dir, "old"), filepath.Join(dir, "new"), filepath.Join(dir, "bad")
	_ = os.WriteFile(oldFile, bytes.Repeat([]byte{1}, KeyBytes), 0o600)                        // raw
	_ = os.WriteFile(newFile, []byte("AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=\n"), 0o600) // base64 of 32 × 2
	_ = os.WriteFile(bad, []byte("short"), 0o600)
	if k, err := LoadKeyring(env(nil)); k != nil || err != nil {
		t.Fatalf("no setting: %v %v", k, err)
	}
	if _, err := LoadKeyring(env(map[string]string{EnvSecretKeyFile: bad})); err == nil || !strings.Contains(err.Error(), EnvSecretKeyFile) || !strings.Contains(err.Error(), "32 random bytes") {
		t.Fatalf("short key: %v", err)
	}
	old, err := LoadKeyring(env(map[string]string{EnvSecretKeyFile: oldFile}))
	if err != nil {
		t.Fatal(err)
	}
	sealed, _ := old.Seal([]byte("x"), nil)
	cur, err := LoadKeyring(env(map[string]string{EnvSecretKeyFile: newFile}))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cur.Open(sealed, nil); !errors.Is(err, ErrUnseal) || !strings.Contains(err.Error(), EnvSecretKeyPreviousFile) {
		t.Fatalf("old record, new key alone: %v", err)
	}
	both, err := LoadKeyring(env(map[string]string{EnvSecretKeyFile: newFile, EnvSecretKeyPreviousFile: oldFile}))
	if err != nil {
		t.Fatal(err)
	}
	if p, stale, err := both.Open(sealed, nil); err != nil || !stale || string(p) != "x" {
		t.Fatalf("old record while rotating: %q %v %v", p, stale, err)
	}
}

func ccConfig(url string) *mcpgatewayv1.ServerConfig {
	return &mcpgatewayv1.ServerConfig{Id: "up", Url: url, Transport: "streamable-http",
		Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest", ClientSecret: "${UP_SECRET}", Grant: "client_credentials"}}
}

// TestClientCredentialsAndRefresh: client_credentials discovers the server and requests a
// token for its URL (resource); the token is sealed in the store; it is refreshed
// RefreshBefore its expiry by the clock, with the resource; a refused refresh token leaves the
// server needing sign-in (an authorization_code server) with an error naming the fix.
func TestClientCredentialsAndRefresh(t *testing.T) {
	a := startAS(t)
	c := &clock{t: time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)}
	store := openBolt(t)
	s := New(testKeys(t), store, env(map[string]string{"UP_SECRET": "s3cret"}), a.srv.Client(), c.now, slog.New(slog.DiscardHandler))
	cfg := ccConfig(a.srv.URL + "/mcp")
	tok, err := s.AccessToken(t.Context(), cfg, false)
	if err != nil || tok != "at-1" {
		t.Fatalf("first token %q, %v", tok, err)
	}
	if st := s.State(t.Context(), cfg); st.GetStatus() != StatusSignedIn || st.GetSubject() != "zest" || st.GetExpires() != "2026-12-05T05:00:00Z" || !st.GetRefreshable() {
		t.Fatalf("state = %v", st)
	}
	sealed, err := store.GetOAuthToken(t.Context(), "up")
	if err != nil || bytes.Contains(sealed, []byte("at-1")) || bytes.Contains(sealed, []byte("rt-1")) {
		t.Fatalf("stored record %q, %v: want it sealed", sealed, err)
	}
	if tok, _ := s.AccessToken(t.Context(), cfg, false); tok != "at-1" {
		t.Fatalf("a valid token was not reused: %q", tok)
	}
	c.add(time.Hour - RefreshBefore + time.Second)
	if tok, err := s.AccessToken(t.Context(), cfg, false); err != nil || tok != "at-2" {
		t.Fatalf("near expiry: %q, %v; want a refreshed token", tok, err)
	}
	grants, resources := a.seen()
	if strings.Join(grants, ",") != "client_credentials,refresh_token" || resources[0] != cfg.GetUrl() || resources[1] != cfg.GetUrl() {
		t.Fatalf("grants %v, resources %v", grants, resources)
	}
	// Another signer (a replica, or a restart) reads the sealed record.
	s2 := New(testKeys(t), store, env(nil), a.srv.Client(), c.now, nil)
	if tok, err := s2.AccessToken(t.Context(), cfg, false); err != nil || tok != "at-2" {
		t.Fatalf("another signer: %q, %v", tok, err)
	}

	// An authorization_code server whose refresh token is revoked needs sign-in.
	ac := &mcpgatewayv1.ServerConfig{Id: "up", Url: cfg.GetUrl(), Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest"}}
	a.revokeAll()
	c.add(time.Hour)
	_, err = s.AccessToken(t.Context(), ac, false)
	if !errors.Is(err, ErrNeedsSignIn) || !strings.Contains(err.Error(), "zestctl servers sign-in up") || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("revoked: %v", err)
	}
	if st := s.State(t.Context(), ac); st.GetStatus() != StatusNeedsSignIn || !strings.Contains(st.GetMessage(), "refused the refresh token") {
		t.Fatalf("state after revocation = %v", st)
	}
	if _, err := store.GetOAuthToken(t.Context(), "up"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("the refused record is kept: %v", err)
	}
	// Without a key, nothing signs in, and the error names the setting.
	none := New(nil, store, env(nil), a.srv.Client(), c.now, nil)
	if _, err := none.AccessToken(t.Context(), cfg, false); !errors.Is(err, ErrNoSecretKey) || !strings.Contains(err.Error(), EnvSecretKeyFile) {
		t.Fatalf("no key: %v", err)
	}
}

// TestTransport: the transport sends the token, and on a 401 gets a new one and sends the
// request once more (its body again).
func TestTransport(t *testing.T) {
	a := startAS(t)
	var mu sync.Mutex
	reject := "at-1"
	var bodies []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("Authorization") == "" { // discovery's probe
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		bodies = append(bodies, r.Header.Get("Authorization")+" "+string(b))
		if r.Header.Get("Authorization") == "Bearer "+reject {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer up.Close()
	cfg := ccConfig(up.URL)
	cfg.Oauth.AuthorizationServer = a.srv.URL + "/as"
	s := New(testKeys(t), openBolt(t), env(map[string]string{"UP_SECRET": "s3cret"}), a.srv.Client(), nil, nil)
	hc := &http.Client{Transport: &Transport{Base: http.DefaultTransport, Signer: s, Config: cfg}}
	resp, err := hc.Post(up.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(bodies) != 2 || bodies[0] != "Bearer at-1 {}" || bodies[1] != "Bearer at-2 {}" {
		t.Fatalf("status %d, requests %q", resp.StatusCode, bodies)
	}
}

// TestSignIn: a sign-in by authorization code opens the authorization server with PKCE S256
// and the server's URL as the resource; its callback, with the state and the browser's
// binding, stores the tokens; a state is used once, and a callback from another browser or
// after SignInTimeout is refused.
func TestSignIn(t *testing.T) {
	a := startAS(t)
	c := &clock{t: time.Now()}
	s := New(testKeys(t), openBolt(t), env(nil), a.srv.Client(), c.now, nil)
	cfg := &mcpgatewayv1.ServerConfig{Id: "up", Url: a.srv.URL + "/mcp", Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest", Grant: "authorization_code"}}
	if st := s.State(t.Context(), cfg); st.GetStatus() != StatusNeedsSignIn || !strings.Contains(st.GetMessage(), "zestctl servers sign-in up") {
		t.Fatalf("before: %v", st)
	}
	if _, err := s.AccessToken(t.Context(), cfg, false); !errors.Is(err, ErrNeedsSignIn) {
		t.Fatalf("a call before sign-in: %v", err)
	}
	if _, err := s.StartSignIn(t.Context(), cfg, "https://zest.example/elsewhere", "admin", ""); !errors.Is(err, ErrSignIn) || !strings.Contains(err.Error(), CallbackPath) {
		t.Fatalf("another redirect: %v", err)
	}
	// callback follows the authorization server's redirect to Zest's callback, and returns its query.
	callback := func(authURL string) url.Values {
		noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := noFollow.Get(authURL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		u, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || u.Path != CallbackPath {
			t.Fatalf("%d, Location %q: %v", resp.StatusCode, resp.Header.Get("Location"), err)
		}
		return u.Query()
	}
	const redirect = "https://zest.example" + CallbackPath
	authURL, err := s.StartSignIn(t.Context(), cfg, redirect, "admin", "browser-1")
	if err != nil {
		t.Fatal(err)
	}
	q := callback(authURL)
	if _, _, err := s.FinishSignIn(t.Context(), Callback{State: q.Get("state"), Code: q.Get("code")}, "browser-2"); !errors.Is(err, ErrSignIn) {
		t.Fatalf("another browser's callback: %v", err)
	}
	id, by, err := s.FinishSignIn(t.Context(), Callback{State: q.Get("state"), Code: q.Get("code")}, "browser-1")
	if err != nil || id != "up" || by != "admin" {
		t.Fatalf("finish = %q %q %v", id, by, err)
	}
	if tok, err := s.AccessToken(t.Context(), cfg, false); err != nil || tok != "at-1" {
		t.Fatalf("after sign-in: %q, %v", tok, err)
	}
	if st := s.State(t.Context(), cfg); st.GetStatus() != StatusSignedIn || st.GetSubject() != "zest" || !st.GetRefreshable() {
		t.Fatalf("state = %v", st)
	}
	if _, _, err := s.FinishSignIn(t.Context(), Callback{State: q.Get("state"), Code: q.Get("code")}, "browser-1"); !errors.Is(err, ErrSignIn) {
		t.Fatalf("a state used twice: %v", err)
	}
	authURL, err = s.StartSignIn(t.Context(), cfg, redirect, "admin", "")
	if err != nil {
		t.Fatal(err)
	}
	q = callback(authURL)
	c.add(SignInTimeout + time.Second)
	if _, _, err := s.FinishSignIn(t.Context(), Callback{State: q.Get("state"), Code: q.Get("code")}, ""); !errors.Is(err, ErrSignIn) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("a late callback: %v", err)
	}
	cc := ccConfig(cfg.GetUrl())
	if _, err := s.StartSignIn(t.Context(), cc, redirect, "admin", ""); !errors.Is(err, ErrSignIn) || !strings.Contains(err.Error(), "no person signs in") {
		t.Fatalf("client_credentials: %v", err)
	}
}

// TestPendingSignInsBounded: at most MaxPendingSignIns wait for their callback.
func TestPendingSignInsBounded(t *testing.T) {
	a := startAS(t)
	s := New(testKeys(t), openBolt(t), env(nil), a.srv.Client(), nil, nil)
	cfg := &mcpgatewayv1.ServerConfig{Id: "up", Url: a.srv.URL + "/mcp", Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest"}}
	for range MaxPendingSignIns {
		if _, err := s.StartSignIn(t.Context(), cfg, "https://z"+CallbackPath, "admin", ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.StartSignIn(t.Context(), cfg, "https://z"+CallbackPath, "admin", ""); !errors.Is(err, ErrSignIn) || !strings.Contains(err.Error(), "already wait") {
		t.Fatalf("one over the bound: %v", err)
	}
}

// TestDynamicRegistration: without oauth.client_id, Zest registers itself (RFC 7591) where the
// authorization server offers it, signs in with that client, and refreshes with it; where none
// is offered, the sign-in is refused naming oauth.client_id.
func TestDynamicRegistration(t *testing.T) {
	a := startAS(t)
	c := &clock{t: time.Now()}
	s := New(testKeys(t), openBolt(t), env(nil), a.srv.Client(), c.now, nil)
	cfg := &mcpgatewayv1.ServerConfig{Id: "up", Url: a.srv.URL + "/mcp", Oauth: &mcpgatewayv1.UpstreamOAuth{}}
	const redirect = "https://zest.example" + CallbackPath
	if _, err := s.StartSignIn(t.Context(), cfg, redirect, "admin", ""); !errors.Is(err, ErrSignIn) || !strings.Contains(err.Error(), "offers no dynamic client registration") {
		t.Fatalf("without registration: %v", err)
	}
	a.registration = true
	authURL, err := s.StartSignIn(t.Context(), cfg, redirect, "admin", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(authURL, "client_id=dyn-1") {
		t.Fatalf("authorization URL %s: want the registered client", authURL)
	}
	finishSignIn(t, s, authURL)
	c.add(time.Hour)
	if tok, err := s.AccessToken(t.Context(), cfg, false); err != nil || tok != "at-2" {
		t.Fatalf("refresh with the registered client: %q, %v", tok, err)
	}
}

// TestClientMetadataDocument: without oauth.client_id, Zest names itself by the URL of its
// client ID metadata document (ZEST_PUBLIC_URL's) where the authorization server takes one —
// before a dynamic registration, after a configured client — and only for a sign-in back to
// that URL's callback; it signs in and refreshes with it.
func TestClientMetadataDocument(t *testing.T) {
	a := startAS(t)
	a.registration, a.metadataDocs = true, true
	c := &clock{t: time.Now()}
	s := New(testKeys(t), openBolt(t), env(nil), a.srv.Client(), c.now, nil, WithPublicURL("https://zest.example/"))
	cfg := &mcpgatewayv1.ServerConfig{Id: "up", Url: a.srv.URL + "/mcp", Oauth: &mcpgatewayv1.UpstreamOAuth{}}
	const redirect = "https://zest.example" + CallbackPath
	const doc = "https://zest.example/internal/mcp/oauth/client-metadata.json"
	clientOf := func(t *testing.T, s *Signer, cfg *mcpgatewayv1.ServerConfig, redirect string) string {
		t.Helper()
		authURL, err := s.StartSignIn(t.Context(), cfg, redirect, "admin", "")
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(authURL)
		return u.Query().Get("client_id")
	}
	if got := clientOf(t, s, cfg, redirect); got != doc {
		t.Fatalf("client_id %q, want the document's URL", got)
	}
	configured := &mcpgatewayv1.ServerConfig{Id: "up", Url: cfg.GetUrl(), Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest"}}
	if got := clientOf(t, s, configured, redirect); got != "zest" {
		t.Fatalf("client_id %q, want the configured one", got)
	}
	if got := clientOf(t, s, cfg, "https://other.example"+CallbackPath); !strings.HasPrefix(got, "dyn-") {
		t.Fatalf("a redirect the document does not name: client_id %q, want a registered one", got)
	}
	if got := clientOf(t, New(testKeys(t), openBolt(t), env(nil), a.srv.Client(), nil, nil), cfg, redirect); !strings.HasPrefix(got, "dyn-") {
		t.Fatalf("no ZEST_PUBLIC_URL: client_id %q, want a registered one", got)
	}
	plain := New(testKeys(t), openBolt(t), env(nil), a.srv.Client(), nil, nil, WithPublicURL("http://zest.example"))
	if got := clientOf(t, plain, cfg, "http://zest.example"+CallbackPath); !strings.HasPrefix(got, "dyn-") {
		t.Fatalf("a plain http ZEST_PUBLIC_URL: client_id %q, want a registered one", got)
	}
	a.registration = false
	if got := clientOf(t, s, cfg, redirect); got != doc {
		t.Fatalf("without registration: client_id %q, want the document's URL", got)
	}
	a.metadataDocs = false
	if _, err := s.StartSignIn(t.Context(), cfg, redirect, "admin", ""); !errors.Is(err, ErrSignIn) || !strings.Contains(err.Error(), "takes no client ID metadata document") {
		t.Fatalf("neither: %v", err)
	}
	// Signed in and refreshed as the document's client.
	a.metadataDocs = true
	authURL, err := s.StartSignIn(t.Context(), cfg, redirect, "admin", "")
	if err != nil {
		t.Fatal(err)
	}
	finishSignIn(t, s, authURL)
	c.add(time.Hour)
	if tok, err := s.AccessToken(t.Context(), cfg, false); err != nil || tok != "at-2" {
		t.Fatalf("refresh with the document's client: %q, %v", tok, err)
	}
}

// TestStateDoesNotWaitForATokenRequest: the admin API's state of a server answers while a
// token request of that server is in progress (it holds the server's lock across the
// authorization server's answer), from what the last request left.
func TestStateDoesNotWaitForATokenRequest(t *testing.T) {
	a := startAS(t)
	s := New(testKeys(t), openBolt(t), env(map[string]string{"UP_SECRET": "s3cret"}), a.srv.Client(), nil, nil)
	cfg := ccConfig(a.srv.URL + "/mcp")
	a.hold = make(chan chan struct{})
	done := make(chan error, 1)
	go func() { _, err := s.AccessToken(context.Background(), cfg, false); done <- err }()
	release := <-a.hold // the token request is at the authorization server
	state := make(chan *mcpgatewayv1.UpstreamOAuthState, 1)
	go func() { state <- s.State(context.Background(), cfg) }()
	select {
	case st := <-state:
		if st.GetStatus() != StatusNeedsSignIn {
			t.Errorf("state while the first token is requested: %v", st)
		}
	case <-time.After(10 * time.Second):
		t.Error("State waited for the token request")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := s.State(context.Background(), cfg); st.GetStatus() != StatusSignedIn {
		t.Fatalf("after: %v", st)
	}
}

// TestSignInAcrossReplicas: a sign-in started on one mcpgateway is finished by another that
// shares the registry and the key (the callback reaches any replica); the store holds the
// sign-in sealed, and forgets it once used.
func TestSignInAcrossReplicas(t *testing.T) {
	a := startAS(t)
	store := openBolt(t)
	one := New(testKeys(t), store, env(nil), a.srv.Client(), nil, nil)
	two := New(testKeys(t), store, env(nil), a.srv.Client(), nil, nil)
	cfg := &mcpgatewayv1.ServerConfig{Id: "up", Url: a.srv.URL + "/mcp", Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest"}}
	authURL, err := one.StartSignIn(t.Context(), cfg, "https://zest.example"+CallbackPath, "admin", "")
	if err != nil {
		t.Fatal(err)
	}
	q := approve(t, authURL)
	state := q.Get("state")
	sealed, err := store.GetOAuthToken(t.Context(), pendingKey(state))
	if err != nil || bytes.Contains(sealed, []byte(state)) || bytes.Contains(sealed, []byte("verifier\":\"")) {
		t.Fatalf("the stored sign-in: %v (want it sealed)", err)
	}
	if id, by, err := two.FinishSignIn(t.Context(), Callback{State: state, Code: q.Get("code")}, ""); err != nil || id != "up" || by != "admin" {
		t.Fatalf("finished on the other replica: %q %q %v", id, by, err)
	}
	if tok, err := one.AccessToken(t.Context(), cfg, false); err != nil || tok != "at-1" {
		t.Fatalf("the first replica's token: %q, %v", tok, err)
	}
	if _, err := store.GetOAuthToken(t.Context(), pendingKey(state)); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("the used sign-in is kept: %v", err)
	}
}

// TestClientCredentialsAfterARefusedRefresh: a client-credentials server whose refresh token is
// refused requests a new token with its credentials; it never needs a person.
func TestClientCredentialsAfterARefusedRefresh(t *testing.T) {
	a := startAS(t)
	c := &clock{t: time.Now()}
	s := New(testKeys(t), openBolt(t), env(map[string]string{"UP_SECRET": "s3cret"}), a.srv.Client(), c.now, nil)
	cfg := ccConfig(a.srv.URL + "/mcp")
	if tok, err := s.AccessToken(t.Context(), cfg, false); err != nil || tok != "at-1" {
		t.Fatalf("first: %q, %v", tok, err)
	}
	a.revokeAll()
	c.add(2 * time.Hour)
	if tok, err := s.AccessToken(t.Context(), cfg, false); err != nil || tok != "at-2" {
		t.Fatalf("after the refused refresh: %q, %v; want a new token by client credentials", tok, err)
	}
	// x/oauth2 tries the client's secret in the header, then in the body, on a refusal.
	grants, _ := a.seen()
	if g := strings.Join(grants, ","); g != "client_credentials,refresh_token,client_credentials" && g != "client_credentials,refresh_token,refresh_token,client_credentials" {
		t.Fatalf("grants %v", grants)
	}
	if st := s.State(t.Context(), cfg); st.GetStatus() != StatusSignedIn {
		t.Fatalf("state %v", st)
	}
}

// TestAbandonedSignIn: a sign-in started and never finished — its replica gone — is forgotten
// from the shared store by another replica once SignInTimeout has passed (SweepSignIns), and
// not before; meanwhile a second sign-in of the same server starts and finishes; a replica
// whose bound of waiting sign-ins is spent starts a new one once they expire, which forgets
// them. The clock is the test's.
func TestAbandonedSignIn(t *testing.T) {
	a := startAS(t)
	store := openBolt(t)
	c := &clock{t: time.Now()}
	gone := New(testKeys(t), store, env(nil), a.srv.Client(), c.now, nil)
	live := New(testKeys(t), store, env(nil), a.srv.Client(), c.now, nil)
	cfg := &mcpgatewayv1.ServerConfig{Id: "up", Url: a.srv.URL + "/mcp", Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest"}}
	const redirect = "https://zest.example" + CallbackPath
	waiting := func() int {
		t.Helper()
		recs, err := store.ListOAuthTokens(t.Context(), pendingPrefix)
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}
	abandoned, err := gone.StartSignIn(t.Context(), cfg, redirect, "admin", "")
	if err != nil {
		t.Fatal(err)
	}
	abandonedQ := approve(t, abandoned) // the person never came back to Zest with it
	c.add(SignInTimeout / 2)
	if n, err := live.SweepSignIns(t.Context()); err != nil || n != 0 || waiting() != 1 {
		t.Fatalf("within its time: forgot %d (%v), %d waiting", n, err, waiting())
	}
	second, err := live.StartSignIn(t.Context(), cfg, redirect, "admin", "")
	if err != nil {
		t.Fatalf("a second sign-in: %v", err)
	}
	c.add(SignInTimeout/2 + time.Second) // the first's time is up, not the second's
	if n, err := live.SweepSignIns(t.Context()); err != nil || n != 1 || waiting() != 1 {
		t.Fatalf("after its time: forgot %d (%v), %d waiting; want 1 and 1", n, err, waiting())
	}
	if _, _, err := live.FinishSignIn(t.Context(), Callback{State: abandonedQ.Get("state"), Code: abandonedQ.Get("code")}, ""); !errors.Is(err, ErrSignIn) {
		t.Fatalf("the abandoned sign-in's late callback: %v", err)
	}
	q := approve(t, second)
	if id, _, err := live.FinishSignIn(t.Context(), Callback{State: q.Get("state"), Code: q.Get("code")}, ""); err != nil || id != "up" || waiting() != 0 {
		t.Fatalf("the second sign-in: %q, %v, %d waiting", id, err, waiting())
	}

	// The bound spent by abandoned sign-ins: a new one starts once they expire, and they go.
	for range MaxPendingSignIns {
		if _, err := live.StartSignIn(t.Context(), cfg, redirect, "admin", ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := live.StartSignIn(t.Context(), cfg, redirect, "admin", ""); !errors.Is(err, ErrSignIn) {
		t.Fatalf("one over the bound: %v", err)
	}
	c.add(SignInTimeout + time.Second)
	if _, err := live.StartSignIn(t.Context(), cfg, redirect, "admin", ""); err != nil || waiting() != 1 {
		t.Fatalf("after they expired: %v, %d waiting; want the new one alone", err, waiting())
	}
}

// approve follows authURL to the test authorization server, which approves at once, and
// returns the query of the callback it redirects to (state, code, iss).
func approve(t *testing.T, authURL string) url.Values {
	t.Helper()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return loc.Query()
}

// finishSignIn approves the sign-in of authURL and finishes it with s, as the edge's callback.
func finishSignIn(t *testing.T, s *Signer, authURL string) {
	t.Helper()
	q := approve(t, authURL)
	if _, _, err := s.FinishSignIn(t.Context(), Callback{State: q.Get("state"), Code: q.Get("code")}, ""); err != nil {
		t.Fatal(err)
	}
}
