package httpguard

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/oauthrs"
)

// unreadBody fails the test when the handler reads it: a refusal comes before the body.
type unreadBody struct{ t *testing.T }

func (b unreadBody) Read([]byte) (int, error) {
	b.t.Error("the body was read before the credentials were checked")
	return 0, nil
}

func (unreadBody) Close() error { return nil }

// TestMCPKeyAs: with an issuer configured, the MCP endpoints' check takes the API key, and
// refuses before reading the body a request without credentials (even with no API key set: the
// endpoints are not open then), a token that is no JWT, and a token it cannot check because
// the issuer is down (503 with Retry-After, not 401, which would send the client to sign in
// again). Without an issuer, it is APIKeyAs.
func TestMCPKeyAs(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	cfg := oauthrs.DefaultConfig()
	cfg.Issuer, cfg.PublicURL = down.URL, "https://zest.example.com"
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	token, err := jwt.Signed(sig).Claims(jwt.Claims{Issuer: down.URL, Audience: jwt.Audience{"https://zest.example.com/mcp"},
		Expiry: jwt.NewNumericDate(time.Now().Add(time.Minute))}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, apiKey, auth string
		status             int
		says               string
	}{
		{"the API key", "api", "Bearer api", 200, ""},
		{"a wrong key", "api", "Bearer nope", 401, keyauth.ErrInvalidAPIKey.Error()},
		{"nothing, no API key set", "", "", 401, "Missing credentials"},
		{"not a JWT", "", "Bearer a.b.c", 401, "Invalid access token"},
		{"the issuer down", "api", "Bearer " + token, 503, "could not be fetched"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := Guard{Keys: keyauth.Keys{API: tc.apiKey}, OAuth: oauthrs.New(cfg)}
			h := g.MCPKeyAs(WriteError)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
			req := httptest.NewRequest("POST", "/mcp", nil)
			req.Body = unreadBody{t}
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.says) {
				t.Errorf("%d %s, want %d saying %q", rec.Code, rec.Body, tc.status, tc.says)
			}
			if www := rec.Header().Get("WWW-Authenticate"); (tc.name == "not a JWT") != strings.Contains(www, `error="invalid_token"`) {
				t.Errorf("WWW-Authenticate %q", www)
			}
			if tc.status == 503 && rec.Header().Get("Retry-After") == "" {
				t.Error("503 without Retry-After")
			}
			if strings.Contains(rec.Body.String(), token) {
				t.Error("the answer quotes the token")
			}
		})
	}
	// No issuer: the key alone, and no key set opens the endpoints (as before).
	g := Guard{}
	rec := httptest.NewRecorder()
	g.MCPKeyAs(WriteError)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })).ServeHTTP(rec, httptest.NewRequest("POST", "/mcp", nil))
	if rec.Code != 204 {
		t.Errorf("no issuer, no key: %d", rec.Code)
	}
}
