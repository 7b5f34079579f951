package oauthclient

import (
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// dpopServer is an authorization server that binds its tokens by DPoP (RFC 9449) and an MCP
// server (/mcp) that takes them, for the DPoP unit tests: each verifies every proof as RFC
// 9449 section 4.3 says (typ, alg, the jwk's signature, htm, htu, iat, a jti never seen, ath
// and the token's key at the resource), and, with requireNonce, each asks for its own nonce.
type dpopServer struct {
	srv *httptest.Server
	// algs is the metadata's dpop_signing_alg_values_supported.
	algs []string
	// bearer: tokens come back as token_type Bearer, unbound.
	bearer       bool
	requireNonce bool
	// now is the clock a proof's iat is checked by (the signer's).
	now func() time.Time

	mu sync.Mutex
	// jkt is the key thumbprint each access token is bound to; refresh too, for refresh tokens.
	jkt, refresh map[string]string
	jtis         map[string]bool
	issued       int
	// tokenProofs and resourceAuth are what each token request and each /mcp request came
	// with: the proof's key thumbprint ("" without a proof), and the Authorization.
	tokenProofs, resourceAuth []string
	// nonceChallenges counts the use_dpop_nonce answers, by endpoint.
	nonceChallenges map[string]int
	// errs are the proofs refused, and why.
	errs []string
}

// mcpBody is the body of each MCP request of the tests (sent again whole on a retry).
const mcpBody = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`

const (
	asNonce = "as-nonce-1"
	rsNonce = "rs-nonce-1"
)

func startDPoP(t *testing.T) *dpopServer {
	d := &dpopServer{algs: []string{"ES256"}, now: time.Now, jkt: map[string]string{}, refresh: map[string]string{}, jtis: map[string]bool{}, nonceChallenges: map[string]int{}}
	mux := http.NewServeMux()
	d.srv = httptest.NewServer(mux)
	t.Cleanup(d.srv.Close)
	base := d.srv.URL
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(ProtectedResource{Resource: base + "/mcp", AuthorizationServers: []string{base + "/as"}})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server/as", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(ServerMetadata{Issuer: base + "/as", AuthorizationEndpoint: base + "/as/authorize", TokenEndpoint: base + "/as/token",
			CodeChallengeMethodsSupported: []string{"S256"}, DPoPSigningAlgValuesSupported: d.algs, TokenEndpointAuthMethodsSupported: []string{methodBasic}})
	})
	mux.HandleFunc("/as/authorize", func(w http.ResponseWriter, r *http.Request) {
		u, _ := url.Parse(r.URL.Query().Get("redirect_uri"))
		u.RawQuery = url.Values{"code": {"code-1"}, "state": {r.URL.Query().Get("state")}}.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound)
	})
	mux.HandleFunc("/as/token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		d.mu.Lock()
		defer d.mu.Unlock()
		jkt, nonce, err := d.verify(r, base+"/as/token", "")
		if err != nil {
			d.errs = append(d.errs, "token: "+err.Error())
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"invalid_dpop_proof"}`)
			return
		}
		d.tokenProofs = append(d.tokenProofs, jkt)
		if jkt != "" && d.requireNonce && nonce != asNonce {
			d.nonceChallenges["token"]++
			w.Header().Set("DPoP-Nonce", asNonce)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"use_dpop_nonce","error_description":"a nonce is required"}`)
			return
		}
		if rt := r.PostForm.Get("refresh_token"); r.PostForm.Get("grant_type") == "refresh_token" && d.refresh[rt] != jkt {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"invalid_grant","error_description":"refresh token bound to another key"}`)
			return
		}
		d.issued++
		at, rt := fmt.Sprintf("at-%d", d.issued), fmt.Sprintf("rt-%d", d.issued)
		typ := "Bearer"
		if jkt != "" && !d.bearer {
			typ = "DPoP"
			d.jkt[at] = jkt
		}
		d.refresh[rt] = jkt
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": at, "token_type": typ, "expires_in": 3600, "refresh_token": rt})
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		defer d.mu.Unlock()
		auth := r.Header.Get("Authorization")
		if auth == "" {
			w.Header().Set("WWW-Authenticate", `DPoP resource_metadata="`+base+`/.well-known/oauth-protected-resource/mcp"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if b, _ := io.ReadAll(r.Body); string(b) != mcpBody {
			d.errs = append(d.errs, fmt.Sprintf("mcp: body %q", b))
		}
		d.resourceAuth = append(d.resourceAuth, auth)
		scheme, tok, _ := strings.Cut(auth, " ")
		if want := d.jkt[tok]; want != "" || scheme != "Bearer" {
			jkt, nonce, err := d.verify(r, base+"/mcp", tok)
			switch {
			case err != nil:
				d.errs = append(d.errs, "mcp: "+err.Error())
			case scheme != "DPoP" || jkt != want:
				d.errs = append(d.errs, fmt.Sprintf("mcp: scheme %q, proof of %q for a token bound to %q", scheme, jkt, want))
			case d.requireNonce && nonce != rsNonce:
				d.nonceChallenges["mcp"]++
				w.Header().Add("WWW-Authenticate", `Bearer realm="mcp"`)
				w.Header().Add("WWW-Authenticate", `DPoP error="use_dpop_nonce", error_description="a nonce is required"`)
				w.Header().Set("DPoP-Nonce", rsNonce)
				w.WriteHeader(http.StatusUnauthorized)
				return
			default:
				_, _ = io.WriteString(w, "ok")
				return
			}
			w.Header().Set("WWW-Authenticate", `DPoP error="invalid_dpop_proof"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.Header.Get("DPoP") != "" {
			d.errs = append(d.errs, "mcp: a proof with a bearer token")
		}
		_, _ = io.WriteString(w, "ok")
	})
	return d
}

// verify checks r's proof for a request to target (with ath for token, when not empty): its
// key's thumbprint and its nonce, or why it is refused. A request without a proof is "" (d.mu held).
func (d *dpopServer) verify(r *http.Request, target, token string) (jkt, nonce string, err error) {
	vals := r.Header.Values("DPoP")
	if len(vals) == 0 {
		return "", "", nil
	}
	if len(vals) > 1 {
		return "", "", fmt.Errorf("%d proofs", len(vals))
	}
	jws, err := jose.ParseSignedCompact(vals[0], []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return "", "", err
	}
	h := jws.Signatures[0].Protected
	if h.ExtraHeaders["typ"] != "dpop+jwt" || h.JSONWebKey == nil || !h.JSONWebKey.IsPublic() {
		return "", "", fmt.Errorf("header typ %v, jwk %v", h.ExtraHeaders["typ"], h.JSONWebKey)
	}
	payload, err := jws.Verify(h.JSONWebKey)
	if err != nil {
		return "", "", fmt.Errorf("signature: %w", err)
	}
	var c dpopClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return "", "", err
	}
	switch {
	case c.JTI == "" || d.jtis[c.JTI]:
		return "", "", fmt.Errorf("jti %q missing or replayed", c.JTI)
	case c.HTM != r.Method || c.HTU != target:
		return "", "", fmt.Errorf("htm %q htu %q, want %s %s", c.HTM, c.HTU, r.Method, target)
	case d.now().Sub(time.Unix(c.IAT, 0)).Abs() > time.Minute:
		return "", "", fmt.Errorf("iat %d", c.IAT)
	}
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		if c.ATH != base64.RawURLEncoding.EncodeToString(sum[:]) {
			return "", "", fmt.Errorf("ath %q does not match the token", c.ATH)
		}
	} else if c.ATH != "" {
		return "", "", fmt.Errorf("ath %q at the token endpoint", c.ATH)
	}
	d.jtis[c.JTI] = true
	tp, err := h.JSONWebKey.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", "", err
	}
	return base64.RawURLEncoding.EncodeToString(tp), c.Nonce, nil
}

func (d *dpopServer) seen() (tokenProofs, resourceAuth, errs []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.tokenProofs...), append([]string(nil), d.resourceAuth...), append([]string(nil), d.errs...)
}

// call sends one MCP request to d through a Transport of s.
func (d *dpopServer) call(t *testing.T, s *Signer, cfg *mcpgatewayv1.ServerConfig) {
	t.Helper()
	hc := &http.Client{Transport: &Transport{Base: http.DefaultTransport, Signer: s, Config: cfg}}
	resp, err := hc.Post(d.srv.URL+"/mcp?session=1#frag", "application/json", strings.NewReader(mcpBody))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "ok" {
		t.Fatalf("MCP request: %d %s", resp.StatusCode, b)
	}
}

func dpopCC(d *dpopServer) *mcpgatewayv1.ServerConfig {
	return ccConfig(d.srv.URL + "/mcp")
}

func dpopSigner(t *testing.T, d *dpopServer, store Store, c *clock) *Signer {
	now := time.Now
	if c != nil {
		now = c.now
	}
	return New(testKeys(t), store, env(map[string]string{"UP_SECRET": "s3cret"}), d.srv.Client(), now, slog.New(slog.DiscardHandler))
}

// TestDPoPClientCredentials: an authorization server that lists ES256 gets a proof with each
// client-credentials request and binds the token; each MCP request goes as
// "Authorization: DPoP" with a fresh proof of the same key (htu without the query, ath); the
// key is kept sealed with the tokens, so a new token (a 401) and another replica prove the
// same key; the state says the tokens are bound, and the sealed record holds no key in clear.
func TestDPoPClientCredentials(t *testing.T) {
	d := startDPoP(t)
	store := openBolt(t)
	s := dpopSigner(t, d, store, nil)
	cfg := dpopCC(d)
	d.call(t, s, cfg)
	d.call(t, s, cfg)
	if _, err := s.AccessToken(t.Context(), cfg, true); err != nil { // a new token, as after a 401
		t.Fatal(err)
	}
	s2 := dpopSigner(t, d, store, nil) // another replica
	d.call(t, s2, cfg)
	proofs, auth, errs := d.seen()
	if len(errs) > 0 {
		t.Fatalf("proofs refused: %v", errs)
	}
	if len(proofs) != 2 || proofs[0] == "" || proofs[1] != proofs[0] {
		t.Fatalf("token requests' proofs %q: want two of one key", proofs)
	}
	if want := []string{"DPoP at-1", "DPoP at-1", "DPoP at-2"}; strings.Join(auth, ",") != strings.Join(want, ",") {
		t.Fatalf("MCP requests' Authorization %q, want %q", auth, want)
	}
	if st := s.State(t.Context(), cfg); st.GetStatus() != StatusSignedIn || !st.GetDpop() {
		t.Fatalf("state = %v: want signed in, DPoP-bound", st)
	}
	rec, err := s.load(t.Context(), "up", false)
	if err != nil || len(rec.DPoPKey) == 0 {
		t.Fatalf("the record holds no DPoP key: %v", err)
	}
	sealed, _ := store.GetOAuthToken(t.Context(), "up")
	if strings.Contains(string(sealed), base64.StdEncoding.EncodeToString(rec.DPoPKey)) {
		t.Fatal("the DPoP key is stored in clear")
	}
}

// TestDPoPNonce: an authorization server and an MCP server that ask for their nonce
// (use_dpop_nonce, DPoP-Nonce) get the request once more with it, and the next requests carry
// it without being asked again: the MCP server's challenge costs no new token.
func TestDPoPNonce(t *testing.T) {
	d := startDPoP(t)
	d.requireNonce = true
	s := dpopSigner(t, d, openBolt(t), nil)
	cfg := dpopCC(d)
	d.call(t, s, cfg)
	d.call(t, s, cfg)
	if _, err := s.AccessToken(t.Context(), cfg, true); err != nil {
		t.Fatal(err)
	}
	_, auth, errs := d.seen()
	if len(errs) > 0 {
		t.Fatalf("proofs refused: %v", errs)
	}
	d.mu.Lock()
	challenges, issued := fmt.Sprint(d.nonceChallenges), d.issued
	d.mu.Unlock()
	if challenges != "map[mcp:1 token:1]" || strings.Join(auth, ",") != "DPoP at-1,DPoP at-1,DPoP at-1" || issued != 2 {
		t.Fatalf("nonce challenges %s, MCP requests %q, %d tokens issued: want one challenge of each server, 3 requests with the first token, 2 tokens", challenges, auth, issued)
	}
}

// TestDPoPNonceBounded: a DPoP-Nonce longer than MaxDPoPNonceLen, or not of RFC 9449's
// characters, is not kept.
func TestDPoPNonceBounded(t *testing.T) {
	var n dpopNonces
	for _, v := range []string{strings.Repeat("n", MaxDPoPNonceLen+1), "a b", `a"b`} {
		resp := &http.Response{Header: http.Header{"Dpop-Nonce": {v}}}
		if n.note("up", "https://x/mcp", resp) || n.get("up", "https://x/mcp") != "" {
			t.Fatalf("nonce %.20q kept", v)
		}
	}
	ok := strings.Repeat("n", MaxDPoPNonceLen)
	if !n.note("up", "https://x/mcp", &http.Response{Header: http.Header{"Dpop-Nonce": {ok}}}) || n.get("up", "https://x/mcp") != ok {
		t.Fatal("a nonce of MaxDPoPNonceLen is not kept")
	}
	n.forget("up")
	if n.get("up", "https://x/mcp") != "" {
		t.Fatal("forget kept the nonce")
	}
}

// TestDPoPBearer: a token that comes back as token_type Bearer (not bound) goes as a bearer
// token without a proof; an authorization server that lists no ES256, or a server with
// oauth.dpop false, gets no proof at all.
func TestDPoPBearer(t *testing.T) {
	for name, setup := range map[string]func(*dpopServer, *mcpgatewayv1.ServerConfig){
		"token type Bearer": func(d *dpopServer, _ *mcpgatewayv1.ServerConfig) { d.bearer = true },
		"no ES256":          func(d *dpopServer, _ *mcpgatewayv1.ServerConfig) { d.algs = []string{"RS256"} },
		"oauth.dpop false":  func(_ *dpopServer, cfg *mcpgatewayv1.ServerConfig) { off := false; cfg.Oauth.Dpop = &off },
	} {
		t.Run(name, func(t *testing.T) {
			d := startDPoP(t)
			cfg := dpopCC(d)
			setup(d, cfg)
			s := dpopSigner(t, d, openBolt(t), nil)
			d.call(t, s, cfg)
			proofs, auth, errs := d.seen()
			if len(errs) > 0 || len(auth) != 1 || auth[0] != "Bearer at-1" {
				t.Fatalf("MCP requests %q, errors %v: want one bearer token", auth, errs)
			}
			if wantProof := name == "token type Bearer"; len(proofs) != 1 || (proofs[0] != "") != wantProof {
				t.Fatalf("token request proofs %q: want a proof %v", proofs, wantProof)
			}
			if st := s.State(t.Context(), cfg); st.GetDpop() {
				t.Fatalf("state = %v: says DPoP-bound", st)
			}
		})
	}
}

// TestDPoPSignInAndRefresh: a sign-in's code exchange carries a proof of a new key, kept with
// the tokens; the refresh carries a proof of the same key (the authorization server refuses
// a refresh token with another's), and its token goes bound.
func TestDPoPSignInAndRefresh(t *testing.T) {
	d := startDPoP(t)
	c := &clock{t: time.Now()}
	d.now = c.now
	s := dpopSigner(t, d, openBolt(t), c)
	cfg := &mcpgatewayv1.ServerConfig{Id: "up", Url: d.srv.URL + "/mcp", Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest"}}
	authURL, err := s.StartSignIn(t.Context(), cfg, "https://zest.example"+CallbackPath, "admin", "")
	if err != nil {
		t.Fatal(err)
	}
	finishSignIn(t, s, authURL)
	d.call(t, s, cfg)
	c.add(time.Hour)
	d.call(t, s, cfg)
	proofs, auth, errs := d.seen()
	if len(errs) > 0 {
		t.Fatalf("proofs refused: %v", errs)
	}
	if len(proofs) != 2 || proofs[0] == "" || proofs[1] != proofs[0] {
		t.Fatalf("code exchange and refresh proofs %q: want two of one key", proofs)
	}
	if strings.Join(auth, ",") != "DPoP at-1,DPoP at-2" {
		t.Fatalf("MCP requests %q", auth)
	}
}

// TestDPoPProof: a proof's header and claims (RFC 9449 section 4.2): typ dpop+jwt, ES256, the
// public key alone as jwk, htu without query or fragment, a new jti each time, ath only with
// a token, nonce when given.
func TestDPoPProof(t *testing.T) {
	der, err := newDPoPKey()
	if err != nil {
		t.Fatal(err)
	}
	key, err := parseDPoPKey(der)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("https://user:pw@mcp.example/mcp/x?a=1#f")
	now := time.Unix(1_800_000_000, 0)
	parse := func(p string) (jose.Header, dpopClaims) {
		jws, err := jose.ParseSignedCompact(p, []jose.SignatureAlgorithm{jose.ES256})
		if err != nil {
			t.Fatal(err)
		}
		h := jws.Signatures[0].Protected
		b, err := jws.Verify(h.JSONWebKey)
		if err != nil {
			t.Fatal(err)
		}
		var c dpopClaims
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		return h, c
	}
	p1, _ := dpopProof(key, "POST", u, "tok", "n-1", now)
	p2, _ := dpopProof(key, "GET", u, "", "", now)
	h, c1 := parse(p1)
	_, c2 := parse(p2)
	sum := sha256.Sum256([]byte("tok"))
	switch {
	case h.ExtraHeaders["typ"] != "dpop+jwt" || h.Algorithm != "ES256" || !h.JSONWebKey.IsPublic():
		t.Fatalf("header %+v", h)
	case c1.HTU != "https://mcp.example/mcp/x" || c1.HTM != "POST" || c1.IAT != now.Unix() || c1.Nonce != "n-1":
		t.Fatalf("claims %+v", c1)
	case c1.ATH != base64.RawURLEncoding.EncodeToString(sum[:]) || c2.ATH != "" || c2.Nonce != "":
		t.Fatalf("ath %q, %q", c1.ATH, c2.ATH)
	case c1.JTI == "" || c1.JTI == c2.JTI:
		t.Fatalf("jti %q, %q", c1.JTI, c2.JTI)
	}
	if _, err := parseDPoPKey([]byte(rand.Text())); err == nil {
		t.Fatal("a key that is no PKCS #8 was read")
	}
}

// TestDPoPChallenge: a DPoP challenge's parameters are read as a Bearer one's.
func TestDPoPChallenge(t *testing.T) {
	h := `DPoP error="use_dpop_nonce", resource_metadata="https://x/prm", algs="ES256"`
	if ChallengeError(h) != "use_dpop_nonce" || ResourceMetadataURL(h) != "https://x/prm" {
		t.Fatalf("error %q, resource_metadata %q", ChallengeError(h), ResourceMetadataURL(h))
	}
}
