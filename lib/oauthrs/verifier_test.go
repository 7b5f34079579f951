package oauthrs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// issuer is a fake authorization server: its metadata and its key set, which a test rotates.
type issuer struct {
	srv       *httptest.Server
	mu        sync.Mutex
	keys      []jose.JSONWebKey // public
	jwksGets  atomic.Int32
	oidcOnly  bool // serve OpenID discovery only, RFC 8414's path 404
	claimedIs string
}

func newIssuer(t *testing.T) *issuer {
	is := &issuer{}
	mux := http.NewServeMux()
	meta := func(w http.ResponseWriter, _ *http.Request) {
		name := is.srv.URL
		if is.claimedIs != "" {
			name = is.claimedIs
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": name, "jwks_uri": is.srv.URL + "/keys"})
	}
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		if is.oidcOnly {
			http.NotFound(w, r)
			return
		}
		meta(w, r)
	})
	mux.HandleFunc("/.well-known/openid-configuration", meta)
	mux.HandleFunc("/keys", func(w http.ResponseWriter, _ *http.Request) {
		is.jwksGets.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: is.keys})
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

// signer is a private key the tests sign with, published or not.
type signer struct {
	kid string
	alg jose.SignatureAlgorithm
	key crypto.Signer
}

func rsaSigner(t *testing.T, kid string) signer {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return signer{kid: kid, alg: jose.RS256, key: k}
}

func ecSigner(t *testing.T, kid string) signer {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signer{kid: kid, alg: jose.ES256, key: k}
}

func (is *issuer) publish(ss ...signer) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys = nil
	for _, s := range ss {
		is.keys = append(is.keys, jose.JSONWebKey{Key: s.key.Public(), KeyID: s.kid, Algorithm: string(s.alg), Use: "sig"})
	}
}

func (s signer) sign(t *testing.T, claims any) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: s.alg, Key: jose.JSONWebKey{Key: s.key, KeyID: s.kid}}, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

const public = "https://zest.example.com"

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func setup(t *testing.T) (*issuer, *Verifier, *clock) {
	is := newIssuer(t)
	clk := &clock{t: time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)}
	cfg := DefaultConfig()
	cfg.Issuer, cfg.PublicURL = is.srv.URL, public
	return is, New(cfg, WithClock(clk.now)), clk
}

func claims(is *issuer, clk *clock, aud string) map[string]any {
	return map[string]any{"iss": is.srv.URL, "sub": "alice", "aud": aud, "exp": clk.t.Add(5 * time.Minute).Unix(),
		"iat": clk.t.Unix(), "scope": "openid mcp", "client_id": "app"}
}

func TestVerifyFor(t *testing.T) {
	is, v, clk := setup(t)
	rs, ec, stranger := rsaSigner(t, "r1"), ecSigner(t, "e1"), rsaSigner(t, "r1")
	is.publish(rs, ec)
	preset := "/mcp/presets/p"
	good := func() map[string]any { return claims(is, clk, public+preset) }
	with := func(k string, val any) map[string]any {
		c := good()
		if val == nil {
			delete(c, k)
		} else {
			c[k] = val
		}
		return c
	}
	for _, tc := range []struct {
		name  string
		token string
		want  string // "" accepted, else part of the refusal
	}{
		{"RS256", rs.sign(t, good()), ""},
		{"ES256", ec.sign(t, good()), ""},
		{"audience among several, trailing slash", rs.sign(t, with("aud", []string{"other", public + preset + "/"})), ""},
		{"no scope claim", rs.sign(t, with("scope", nil)), "lacks the scope"},
		{"wrong audience: another preset", rs.sign(t, with("aud", public+"/mcp/presets/q")), "is not this endpoint's resource"},
		{"wrong audience: /mcp", rs.sign(t, with("aud", public+"/mcp")), "is not this endpoint's resource"},
		{"no audience", rs.sign(t, with("aud", nil)), "is not this endpoint's resource"},
		{"wrong issuer", rs.sign(t, with("iss", "https://evil.example.com")), "its issuer is"},
		{"expired", rs.sign(t, with("exp", clk.t.Add(-MaxSkew-time.Second).Unix())), "it expired"},
		{"expired within the skew", rs.sign(t, with("exp", clk.t.Add(-MaxSkew+time.Second).Unix())), ""},
		{"no expiry", rs.sign(t, with("exp", nil)), "no expiry"},
		{"not valid yet", rs.sign(t, with("nbf", clk.t.Add(MaxSkew+time.Minute).Unix())), "not valid yet"},
		{"bad signature: another key with a published kid", stranger.sign(t, good()), "signature is not the issuer's"},
		{"unknown kid", ecSigner(t, "r9").sign(t, good()), `key id "r9" is not among`},
		{"no scope", rs.sign(t, with("scope", "openid")), `lacks the scope "mcp"`},
		{"admin scope alone", rs.sign(t, with("scope", "mcp:admin")), ""},
		{"not a JWT", "abc.def.ghi", "not a JWT"},
		{"too long", strings.Repeat("a", MaxTokenBytes+1), "longer than"},
		{"HS256", hmacToken(t, good()), "not a JWT signed with an accepted algorithm"},
		{"alg none", noneToken(t, good()), "not a JWT signed with an accepted algorithm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := v.VerifyFor(t.Context(), tc.token, preset)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if c.Subject != "alice" {
					t.Errorf("subject %q", c.Subject)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an invalid token saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), tc.token) {
				t.Errorf("the refusal quotes the token: %v", err)
			}
		})
	}
	if _, err := v.VerifyFor(t.Context(), rs.sign(t, with("scope", "openid")), preset); !errors.Is(err, ErrInsufficientScope) {
		t.Errorf("no scope: %v, want ErrInsufficientScope", err)
	}
	if _, err := v.VerifyFor(t.Context(), rs.sign(t, with("aud", "x")), preset); errors.Is(err, ErrInsufficientScope) {
		t.Errorf("a wrong audience is no scope's fault: %v", err)
	}
	c, err := v.VerifyFor(t.Context(), rs.sign(t, with("scp", []string{"mcp:admin"})), preset)
	if err != nil || !c.Admin {
		t.Errorf("scp array with the admin scope: %v admin=%v", err, c != nil && c.Admin)
	}
}

func hmacToken(t *testing.T, claims any) string {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func noneToken(t *testing.T, claims any) string {
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc(b) + "."
}

// A rotation: the issuer signs with a new key the verifier has not seen; the first token that
// names it refetches the set, and unknown kids refetch at most once per MinKeysRefresh.
func TestKeyRotationAndRefetchBound(t *testing.T) {
	is, v, clk := setup(t)
	old, next := rsaSigner(t, "k1"), rsaSigner(t, "k2")
	is.publish(old)
	if _, err := v.VerifyFor(t.Context(), old.sign(t, claims(is, clk, public+"/mcp")), "/mcp"); err != nil {
		t.Fatal(err)
	}
	if n := is.jwksGets.Load(); n != 1 {
		t.Fatalf("key set fetched %d times, want 1", n)
	}
	clk.t = clk.t.Add(MinKeysRefresh)
	is.publish(old, next)
	if _, err := v.VerifyFor(t.Context(), next.sign(t, claims(is, clk, public+"/mcp")), "/mcp"); err != nil {
		t.Fatalf("a rotated key: %v", err)
	}
	if n := is.jwksGets.Load(); n != 2 {
		t.Fatalf("key set fetched %d times, want 2", n)
	}
	// Forged kids in a burst: one fetch per MinKeysRefresh, whatever their number.
	forged := ecSigner(t, "forged")
	for range 50 {
		if _, err := v.VerifyFor(t.Context(), forged.sign(t, claims(is, clk, public+"/mcp")), "/mcp"); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("forged kid: %v", err)
		}
		clk.t = clk.t.Add(MinKeysRefresh / 10)
	}
	if n := is.jwksGets.Load(); n > 2+6 {
		t.Fatalf("50 unknown kids over %v fetched the key set %d times", 5*MinKeysRefresh, n-2)
	}
	// A key withdrawn is refused once the set is older than KeysMaxAge.
	is.publish(next)
	clk.t = clk.t.Add(KeysMaxAge)
	if _, err := v.VerifyFor(t.Context(), old.sign(t, claims(is, clk, public+"/mcp")), "/mcp"); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("a withdrawn key after KeysMaxAge: %v", err)
	}
}

func TestDiscovery(t *testing.T) {
	t.Run("OpenID discovery when RFC 8414's is missing", func(t *testing.T) {
		is, v, clk := setup(t)
		is.oidcOnly = true
		k := ecSigner(t, "e")
		is.publish(k)
		if _, err := v.VerifyFor(t.Context(), k.sign(t, claims(is, clk, public+"/mcp/servers/s")), "/mcp/servers/s"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("metadata naming another issuer", func(t *testing.T) {
		is, v, clk := setup(t)
		is.claimedIs = "https://other.example.com"
		k := ecSigner(t, "e")
		is.publish(k)
		_, err := v.VerifyFor(t.Context(), k.sign(t, claims(is, clk, public+"/mcp")), "/mcp")
		if !errors.Is(err, ErrIssuerUnavailable) || !strings.Contains(err.Error(), "set ZEST_OAUTH_ISSUER") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("issuer down", func(t *testing.T) {
		is, v, clk := setup(t)
		k := ecSigner(t, "e")
		tok := k.sign(t, claims(is, clk, public+"/mcp"))
		is.srv.Close()
		if _, err := v.VerifyFor(t.Context(), tok, "/mcp"); !errors.Is(err, ErrIssuerUnavailable) {
			t.Fatalf("got %v", err)
		}
	})
	if got := MetadataURLs("https://id.example.com/realms/zest"); got[0] != "https://id.example.com/.well-known/oauth-authorization-server/realms/zest" ||
		got[1] != "https://id.example.com/realms/zest/.well-known/openid-configuration" {
		t.Errorf("MetadataURLs: %q", got)
	}
}

func TestVerifyAnyEndpoint(t *testing.T) {
	is, v, clk := setup(t)
	k := ecSigner(t, "e")
	is.publish(k)
	for aud, ok := range map[string]bool{public + "/mcp": true, public + "/mcp/presets/p": true, public + "/mcp/servers/s/": true,
		public + "/v1": false, "https://other.example.com/mcp": false, public: false} {
		_, err := v.VerifyAnyEndpoint(t.Context(), k.sign(t, claims(is, clk, aud)))
		if (err == nil) != ok {
			t.Errorf("aud %s: %v, want accepted %v", aud, err, ok)
		}
	}
}

func TestEndpointAndMetadata(t *testing.T) {
	for path, want := range map[string]string{"/mcp": "/mcp", "/mcp/": "/mcp", "/mcp/sse": "/mcp", "/mcp/servers/a": "/mcp/servers/a",
		"/mcp/presets/p/sse": "/mcp/presets/p", "/mcp/presets/p/message": "/mcp/presets/p", "/mcp/servers/": "/mcp", "/v1/models": "", "/mcpx": ""} {
		got, ok := Endpoint(path)
		if got != want || ok != (want != "") {
			t.Errorf("Endpoint(%q) = %q, %v; want %q", path, got, ok, want)
		}
	}
	cfg := DefaultConfig()
	cfg.Issuer, cfg.PublicURL = "https://id.example.com", public+"/"
	m, ok := cfg.MetadataFor("/mcp/presets/p")
	if !ok || m.Resource != public+"/mcp/presets/p" || m.AuthorizationServers[0] != cfg.Issuer {
		t.Errorf("metadata %+v", m)
	}
	if m, ok := cfg.MetadataFor(""); !ok || m.Resource != public+"/mcp" {
		t.Errorf("root metadata %+v", m)
	}
	if _, ok := cfg.MetadataFor("/mcp/presets/p/sse"); ok {
		t.Error("metadata for a path that is no endpoint")
	}
	if got := cfg.Challenge("/mcp/servers/s"); got != `Bearer resource_metadata="`+public+`/.well-known/oauth-protected-resource/mcp/servers/s", scope="mcp"` {
		t.Errorf("challenge %s", got)
	}
	if got := cfg.ChallengeFor("/mcp", &tokenError{reason: "x", scope: true}); !strings.HasSuffix(got, `, scope="mcp", error="insufficient_scope"`) {
		t.Errorf("challenge for a missing scope %s", got)
	}
	if got := cfg.ChallengeFor("/mcp", invalid("x")); !strings.HasSuffix(got, `, error="invalid_token"`) {
		t.Errorf("challenge for a bad token %s", got)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		issuer, public, want string
	}{
		{"", "", ""},
		{"https://id.example.com", "https://zest.example.com", ""},
		{"https://id.example.com", "", "public-url (ZEST_PUBLIC_URL) is required"},
		{"https://id.example.com", "https://zest.example.com/base", "with no path"},
		{"id.example.com", "https://zest.example.com", "oauth-issuer (ZEST_OAUTH_ISSUER)"},
	} {
		cfg := DefaultConfig()
		cfg.Issuer, cfg.PublicURL = tc.issuer, tc.public
		err := cfg.Validate()
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %q: %v, want %q", tc.issuer, tc.public, err, tc.want)
		}
	}
	if New(DefaultConfig()) != nil {
		t.Error("a verifier without an issuer")
	}
}
