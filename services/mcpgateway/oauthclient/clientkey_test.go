package oauthclient

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/zestmcp/zest/lib/keyauth"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
)

// writeKey writes key's PEM (PKCS #8, or the block type given) to a 0600 file of dir.
func writeKey(t *testing.T, dir, name string, key any, blockType string) string {
	t.Helper()
	var der []byte
	var err error
	switch blockType {
	case "PRIVATE KEY":
		der, err = x509.MarshalPKCS8PrivateKey(key)
	case "RSA PRIVATE KEY":
		der = x509.MarshalPKCS1PrivateKey(key.(*rsa.PrivateKey))
	case "EC PRIVATE KEY":
		der, err = x509.MarshalECPrivateKey(key.(*ecdsa.PrivateKey))
	}
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// seenAssertion is a client assertion the test authorization server verified.
type seenAssertion struct {
	grant  string
	kid    string
	claims jwt.Claims
	// secret: the request carried a client_secret too.
	secret bool
}

// verifyAssertions makes a verify every client assertion with pub as RFC 7523 section 3
// says, as of now(): its type, signature, iss = sub = the client, aud its issuer, a jti, and
// an expiry in the future; the verified ones are appended to seen (under a.mu).
func verifyAssertions(t *testing.T, a *testAS, pub crypto.PublicKey, alg jose.SignatureAlgorithm, now func() time.Time, seen *[]seenAssertion) {
	a.assertion = func(form url.Values) string {
		if form.Get("client_assertion_type") != ClientAssertionType {
			t.Errorf("client_assertion_type %q", form.Get("client_assertion_type"))
			return ""
		}
		tok, err := jwt.ParseSigned(form.Get("client_assertion"), []jose.SignatureAlgorithm{alg})
		if err != nil {
			t.Errorf("client assertion: %v", err)
			return ""
		}
		var c jwt.Claims
		if err := tok.Claims(pub, &c); err != nil {
			t.Errorf("client assertion's signature: %v", err)
			return ""
		}
		if err := c.ValidateWithLeeway(jwt.Expected{Issuer: "zest", Subject: "zest", AnyAudience: jwt.Audience{a.srv.URL + "/as"}, Time: now()}, 0); err != nil || c.ID == "" || c.Expiry == nil {
			t.Errorf("client assertion's claims %+v: %v", c, err)
			return ""
		}
		*seen = append(*seen, seenAssertion{grant: form.Get("grant_type"), kid: tok.Headers[0].KeyID, claims: c, secret: form.Has("client_secret")})
		return c.Issuer
	}
}

// TestClientAssertion: a client with a key (oauth.client_key_file) authenticates every token
// request — client credentials, the code exchange of a sign-in, the refresh, a token
// exchange — with a JWT
// client assertion (private_key_jwt, RFC 7523) that the authorization server verifies with
// the public key: iss and sub the client id, aud the issuer, a jti of its own, an expiry
// ClientAssertionLifetime on, the key's id as kid; no secret goes with it. RSA, EC, and the
// PEM forms of each are read.
func TestClientAssertion(t *testing.T) {
	dir := t.TempDir()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ec384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rk, err := rsa.GenerateKey(rand.Reader, MinClientRSABits)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		name, block string
		key         any
		pub         crypto.PublicKey
		alg         jose.SignatureAlgorithm
		kid         string
	}{
		{"ec-pkcs8", "PRIVATE KEY", ec, &ec.PublicKey, jose.ES256, "k1"},
		{"ec-sec1", "EC PRIVATE KEY", ec384, &ec384.PublicKey, jose.ES384, ""},
		{"rsa-pkcs1", "RSA PRIVATE KEY", rk, &rk.PublicKey, jose.RS256, "rsa-1"},
	} {
		t.Run(k.name, func(t *testing.T) {
			a := startAS(t)
			a.authMethods = []string{"private_key_jwt"}
			c := &clock{t: time.Now()}
			var seen []seenAssertion
			verifyAssertions(t, a, k.pub, k.alg, c.now, &seen)
			s := New(testKeys(t), openBolt(t), env(nil), a.srv.Client(), c.now, nil)
			o := &mcpgatewayv1.UpstreamOAuth{ClientId: "zest", ClientKeyFile: writeKey(t, dir, k.name+".pem", k.key, k.block), ClientKeyId: k.kid}

			// Client credentials.
			cc := &mcpgatewayv1.ServerConfig{Id: "cc", Url: a.srv.URL + "/mcp", Oauth: o}
			cc.Oauth.Grant = serverconfig.GrantClientCredentials
			if _, err := s.AccessToken(t.Context(), cc, false); err != nil {
				t.Fatal(err)
			}
			// A sign-in's code exchange, then a refresh after expiry.
			ac := &mcpgatewayv1.ServerConfig{Id: "ac", Url: a.srv.URL + "/mcp", Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest", ClientKeyFile: o.ClientKeyFile, ClientKeyId: k.kid}}
			authURL, err := s.StartSignIn(t.Context(), ac, "https://zest.example"+CallbackPath, "admin", "")
			if err != nil {
				t.Fatal(err)
			}
			finishSignIn(t, s, authURL)
			c.add(time.Hour)
			if _, err := s.AccessToken(t.Context(), ac, false); err != nil {
				t.Fatal(err)
			}
			// A caller's token exchanged (grant token_exchange).
			tx := &mcpgatewayv1.ServerConfig{Id: "tx", Url: a.srv.URL + "/mcp", Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest", Grant: serverconfig.GrantTokenExchange,
				RequestedTokenType: serverconfig.TokenTypeAccessToken, ClientKeyFile: o.ClientKeyFile, ClientKeyId: k.kid}}
			s.SetCallerIssuer(a.srv.URL + "/as")
			if _, err := s.ExchangedToken(keyauth.WithCallerToken(t.Context(), "alice"), tx, false); err != nil {
				t.Fatal(err)
			}

			a.mu.Lock()
			defer a.mu.Unlock()
			if got := strings.Join(a.auths, " "); got != "private_key_jwt private_key_jwt private_key_jwt private_key_jwt" {
				t.Fatalf("token requests authenticated by %q; want private_key_jwt for each", got)
			}
			var grants []string
			jtis := map[string]bool{}
			for _, x := range seen {
				grants = append(grants, x.grant)
				jtis[x.claims.ID] = true
				if x.kid != k.kid || x.secret {
					t.Errorf("%s: kid %q (want %q), a secret sent beside it: %v", x.grant, x.kid, k.kid, x.secret)
				}
				if life := x.claims.Expiry.Time().Sub(x.claims.IssuedAt.Time()); life != ClientAssertionLifetime {
					t.Errorf("%s: the assertion lives %v; want %v", x.grant, life, ClientAssertionLifetime)
				}
			}
			if strings.Join(grants, " ") != "client_credentials authorization_code refresh_token "+grantTypeTokenExchange || len(jtis) != 4 {
				t.Fatalf("assertions verified for %v with %d distinct jti; want one for each of the four grants", grants, len(jtis))
			}
		})
	}
}

// TestClientKeyRefused: a key file that is missing, unreadable, not a key, encrypted, too
// large, or a key Zest does not sign with is refused at registration (CheckClientKey:
// serverconfig.ErrInvalid naming oauth.client_key_file), and the file's content is never in
// the error; the token request of a key that went missing since names the field too, and no
// request is sent.
func TestClientKeyRefused(t *testing.T) {
	dir := t.TempDir()
	const secretish = "not-a-key-but-private"
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, path, want string }{
		{"missing", filepath.Join(dir, "none.pem"), "cannot be read by mcpgateway"},
		{"a directory", dir, "cannot be read by mcpgateway"},
		{"not pem", write("text.pem", secretish), "holds no PEM private key"},
		{"a certificate only", write("cert.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte(secretish)}))), "holds no PEM private key"},
		{"a broken key", write("broken.pem", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte(secretish)}))), "holds no PEM private key"},
		{"encrypted", write("enc.pem", string(pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte(secretish)}))), "holds an encrypted private key"},
		{"too large", write("big.pem", strings.Repeat("k", MaxClientKeyFileBytes+1)), "is larger than"},
		{"small rsa", writeKey(t, dir, "small.pem", small, "RSA PRIVATE KEY"), "1024-bit RSA key"},
		{"ed25519", writeKey(t, dir, "ed.pem", ed, "PRIVATE KEY"), "give an RSA key or an EC key"},
		{"p-224", writeKey(t, dir, "p224.pem", p224, "PRIVATE KEY"), "give an RSA key or an EC key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := &mcpgatewayv1.ServerConfig{Id: "up", Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest", ClientKeyFile: c.path}}
			err := CheckClientKey(cfg)
			if !errors.Is(err, serverconfig.ErrInvalid) || !strings.Contains(err.Error(), "oauth.client_key_file") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v; want ErrInvalid naming oauth.client_key_file and %q", err, c.want)
			}
			if strings.Contains(err.Error(), secretish) || strings.Contains(err.Error(), "kkkk") {
				t.Fatalf("the error quotes the file: %v", err)
			}
			if f := serverconfig.Field(err); f != serverconfig.FieldOAuth {
				t.Errorf("field %q; want %q", f, serverconfig.FieldOAuth)
			}
		})
	}
	if err := CheckClientKey(&mcpgatewayv1.ServerConfig{Id: "up", Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest"}}); err != nil {
		t.Fatalf("no key: %v", err)
	}

	// A key removed after registration: the token request is not sent, and says why.
	a := startAS(t)
	s := New(testKeys(t), openBolt(t), env(nil), a.srv.Client(), nil, nil)
	cfg := &mcpgatewayv1.ServerConfig{Id: "cc", Url: a.srv.URL + "/mcp", Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest",
		Grant: serverconfig.GrantClientCredentials, ClientKeyFile: filepath.Join(dir, "gone.pem")}}
	if _, err := s.AccessToken(t.Context(), cfg, false); err == nil || !strings.Contains(err.Error(), "oauth.client_key_file") {
		t.Fatalf("a missing key: %v", err)
	}
	if grants, _ := a.seen(); len(grants) != 0 {
		t.Fatalf("token requests %v sent without the key", grants)
	}
}

// TestClientKeyNotTaken: an authorization server whose metadata lists its token endpoint's
// methods without private_key_jwt, or its assertions' algorithms without the key's, is
// refused saying so before any token request, for client credentials and a sign-in alike.
func TestClientKeyNotTaken(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	path := writeKey(t, t.TempDir(), "k.pem", ec, "PRIVATE KEY")
	a := startAS(t)
	s := New(testKeys(t), openBolt(t), env(nil), a.srv.Client(), nil, nil)
	for _, c := range []struct {
		methods, algs []string
		want          string
	}{
		{[]string{"client_secret_basic", "client_secret_post"}, nil, `lists token_endpoint_auth_methods_supported "client_secret_basic client_secret_post", without private_key_jwt`},
		{[]string{"private_key_jwt"}, []string{"RS256", "PS256"}, `the key signs ES256, and its authorization server ` + a.srv.URL + `/as lists token_endpoint_auth_signing_alg_values_supported "RS256 PS256"`},
	} {
		a.authMethods, a.signingAlgs = c.methods, c.algs
		cc := &mcpgatewayv1.ServerConfig{Id: "cc", Url: a.srv.URL + "/mcp", Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest", Grant: serverconfig.GrantClientCredentials, ClientKeyFile: path}}
		if _, err := s.AccessToken(t.Context(), cc, false); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "oauth.client_key_file") {
			t.Errorf("client credentials: %v; want %q", err, c.want)
		}
		ac := &mcpgatewayv1.ServerConfig{Id: "ac", Url: a.srv.URL + "/mcp", Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest", ClientKeyFile: path}}
		if _, err := s.StartSignIn(t.Context(), ac, "https://zest.example"+CallbackPath, "admin", ""); !errors.Is(err, ErrSignIn) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("sign-in: %v; want %q", err, c.want)
		}
	}
	if grants, _ := a.seen(); len(grants) != 0 {
		t.Fatalf("token requests %v sent", grants)
	}
}
