package oauthclient

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"golang.org/x/oauth2"
)

// DPoP (RFC 9449): when a server's authorization server lists ES256 in its
// dpop_signing_alg_values_supported, Zest binds that server's tokens to a P-256 key of its own,
// made at the first token request (the sign-in's code exchange, or the first client-credentials
// request) and kept sealed with the tokens (record.DPoPKey), so that every replica proves the
// same key. Each token request, and each request to the server with a DPoP-bound token
// (token_type DPoP), carries a fresh proof of it (DPoP header); a server that asks for a nonce
// (use_dpop_nonce, DPoP-Nonce) gets the request once more with it, and its latest nonce goes
// with the next proofs.

// Names of DPoP (RFC 9449).
const (
	// DPoPAlg is the one algorithm Zest signs proofs with (P-256 keys).
	DPoPAlg = "ES256"
	// dpopHeader carries a proof; dpopNonceHeader a server's nonce.
	dpopHeader      = "DPoP"
	dpopNonceHeader = "DPoP-Nonce"
	// dpopProofType is a proof's typ.
	dpopProofType = "dpop+jwt"
	// tokenTypeDPoP is the token_type of a DPoP-bound access token, and its Authorization scheme.
	tokenTypeDPoP = "DPoP"
	// errUseDPoPNonce is the error a server answers a proof without its nonce with.
	errUseDPoPNonce = "use_dpop_nonce"
)

// Limits of DPoP.
const (
	// MaxDPoPNonceLen bounds a nonce a server gives (DPoP-Nonce): a longer one is not kept,
	// and the request is not sent again with it.
	MaxDPoPNonceLen = 512
	// maxTokenErrorBytes bounds the error body of a token request read for use_dpop_nonce.
	maxTokenErrorBytes = 64 << 10
)

// dpopWanted reports whether cfg's tokens are to be bound, given its authorization server's
// metadata: the server lists ES256, and oauth.dpop is not false.
func dpopWanted(cfg *mcpgatewayv1.ServerConfig, m *ServerMetadata) bool {
	o := cfg.GetOauth()
	if o.Dpop != nil && !o.GetDpop() {
		return false
	}
	return slices.Contains(m.DPoPSigningAlgValuesSupported, DPoPAlg)
}

// newDPoPKey is a new P-256 key, as PKCS #8 (record.DPoPKey).
func newDPoPKey() ([]byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return x509.MarshalPKCS8PrivateKey(k)
}

// parseDPoPKey reads a key newDPoPKey made.
func parseDPoPKey(der []byte) (*ecdsa.PrivateKey, error) {
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("the DPoP key kept with the tokens: %w", err)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok || ek.Curve != elliptic.P256() {
		return nil, fmt.Errorf("the DPoP key kept with the tokens is not a P-256 key")
	}
	return ek, nil
}

// clientCredentialsKey is the DPoP key of a client-credentials token for cfg from d's
// authorization server: held's, when it has one of that server, else a new one; nil when the
// tokens are not to be bound.
func clientCredentialsKey(cfg *mcpgatewayv1.ServerConfig, d *Discovery, held *record) ([]byte, error) {
	if !dpopWanted(cfg, &d.Server) {
		return nil, nil
	}
	if held != nil && len(held.DPoPKey) > 0 && held.Issuer == d.Server.Issuer {
		return held.DPoPKey, nil
	}
	return newDPoPKey()
}

// bound reports whether rec's access token is DPoP-bound: sent with the DPoP scheme and a
// proof of rec's key. A token that came back as a bearer token (the authorization server did
// not bind it) goes as one.
func (rec *record) bound() bool {
	return len(rec.DPoPKey) > 0 && strings.EqualFold(rec.TokenType, tokenTypeDPoP)
}

// htu is a proof's htu for u: without its query and fragment (RFC 9449 section 4.2).
func htu(u *url.URL) string {
	c := *u
	c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment, c.User = "", false, "", "", nil
	return c.String()
}

// dpopClaims are a proof's claims (RFC 9449 section 4.2).
type dpopClaims struct {
	JTI   string `json:"jti"`
	HTM   string `json:"htm"`
	HTU   string `json:"htu"`
	IAT   int64  `json:"iat"`
	ATH   string `json:"ath,omitempty"`
	Nonce string `json:"nonce,omitempty"`
}

// dpopProof is a proof of key for a request of method to target at now: with ath when
// accessToken is not empty (a request to the resource), and nonce when not empty.
func dpopProof(key *ecdsa.PrivateKey, method string, target *url.URL, accessToken, nonce string, now time.Time) (string, error) {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{EmbedJWK: true}).WithType(dpopProofType))
	if err != nil {
		return "", err
	}
	c := dpopClaims{JTI: rand.Text(), HTM: method, HTU: htu(target), IAT: now.Unix(), Nonce: nonce}
	if accessToken != "" {
		h := sha256.Sum256([]byte(accessToken))
		c.ATH = base64.RawURLEncoding.EncodeToString(h[:])
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	jws, err := sig.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// dpopNonces are the latest nonces the servers gave, by Zest's server id and the URL (htu)
// that gave them: the authorization server's token endpoint and the MCP server each give
// their own.
type dpopNonces struct {
	mu sync.Mutex
	m  map[string]map[string]string
}

func (n *dpopNonces) get(id, u string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.m[id][u]
}

// note keeps resp's DPoP-Nonce for id's u, if it has a valid one; it reports whether it did.
func (n *dpopNonces) note(id, u string, resp *http.Response) bool {
	v := resp.Header.Get(dpopNonceHeader)
	if v == "" || len(v) > MaxDPoPNonceLen || !nqchar(v) {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[string]map[string]string{}
	}
	if n.m[id] == nil {
		n.m[id] = map[string]string{}
	}
	n.m[id][u] = v
	return true
}

// forget drops id's nonces.
func (n *dpopNonces) forget(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.m, id)
}

// nqchar reports whether v is a nonce RFC 9449 allows (NQCHAR: %x21 / %x23-5B / %x5D-7E).
func nqchar(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// proofTransport adds a proof of key to each token request (RFC 9449 section 5) of server
// id, and sends one refused with use_dpop_nonce once more with the nonce given (section 8).
type proofTransport struct {
	base   http.RoundTripper
	key    *ecdsa.PrivateKey
	id     string
	nonces *dpopNonces
	now    func() time.Time
}

func (t *proofTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	u := htu(req.URL)
	resp, err := t.send(req, u)
	if err != nil {
		return nil, err
	}
	fresh := t.nonces.note(t.id, u, resp)
	if resp.StatusCode != http.StatusBadRequest || !fresh || req.GetBody == nil {
		return resp, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenErrorBytes))
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error != errUseDPoPNonce {
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return resp, nil
	}
	again := req.Clone(req.Context())
	if again.Body, err = req.GetBody(); err != nil {
		return nil, err
	}
	resp, err = t.send(again, u)
	if err == nil {
		t.nonces.note(t.id, u, resp)
	}
	return resp, err
}

// send sends req with a proof (and the latest nonce of u).
func (t *proofTransport) send(req *http.Request, u string) (*http.Response, error) {
	p, err := dpopProof(t.key, req.Method, req.URL, "", t.nonces.get(t.id, u), t.now())
	if err != nil {
		return nil, fmt.Errorf("server %q: DPoP proof: %w", t.id, err)
	}
	r := req.Clone(req.Context())
	r.Header.Set(dpopHeader, p)
	return t.base.RoundTrip(r)
}

// tokenContext is ctx for a token request of server id by x/oauth2: its HTTP client is the
// signer's, which adds a proof of der's key to the request when der is not empty.
func (s *Signer) tokenContext(ctx context.Context, id string, der []byte) (context.Context, error) {
	if len(der) == 0 {
		return context.WithValue(ctx, oauth2.HTTPClient, s.hc), nil
	}
	key, err := parseDPoPKey(der)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w (sign in again)", id, err)
	}
	base := s.hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc := *s.hc
	hc.Transport = &proofTransport{base: base, key: key, id: id, nonces: &s.nonces, now: s.now}
	return context.WithValue(ctx, oauth2.HTTPClient, &hc), nil
}

// credential is what a request to a server goes with: its access token, and the DPoP key it
// is bound to (nil for a bearer token).
type credential struct {
	token string
	key   *ecdsa.PrivateKey
}

// credentialOf is rec's credential.
func credentialOf(id string, rec *record) (credential, error) {
	c := credential{token: rec.AccessToken}
	if !rec.bound() {
		return c, nil
	}
	k, err := parseDPoPKey(rec.DPoPKey)
	if err != nil {
		return credential{}, fmt.Errorf("server %q: %w (sign in again)", id, err)
	}
	c.key = k
	return c, nil
}

// credential returns what a request to cfg's server goes with (see AccessToken): its token,
// and its DPoP key when the token is bound.
func (s *Signer) credential(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, force bool) (credential, error) {
	rec, err := s.accessRecord(ctx, cfg, force)
	if err != nil {
		return credential{}, err
	}
	return credentialOf(cfg.GetId(), rec)
}

// authorize sets req's Authorization for c: the DPoP scheme and a proof of its key (with the
// latest nonce the server gave for this URL) for a bound token, else Bearer.
func (s *Signer) authorize(req *http.Request, id string, c credential) error {
	if c.key == nil {
		req.Header.Set("Authorization", "Bearer "+c.token)
		return nil
	}
	p, err := dpopProof(c.key, req.Method, req.URL, c.token, s.nonces.get(id, htu(req.URL)), s.now())
	if err != nil {
		return fmt.Errorf("server %q: DPoP proof: %w", id, err)
	}
	req.Header.Set("Authorization", tokenTypeDPoP+" "+c.token)
	req.Header.Set(dpopHeader, p)
	return nil
}

// nonceRetry reports whether resp, an answer of id's server to a request with c, asks for a
// proof with the nonce it gives (RFC 9449 section 9: 401, use_dpop_nonce, DPoP-Nonce) — kept,
// then, for the next proofs. Any nonce it gives is kept.
func (s *Signer) nonceRetry(id string, req *http.Request, c credential, resp *http.Response) bool {
	if c.key == nil {
		return false
	}
	fresh := s.nonces.note(id, htu(req.URL), resp)
	if !fresh || resp.StatusCode != http.StatusUnauthorized {
		return false
	}
	// The DPoP challenge may come beside a Bearer one, in a header of its own.
	for _, h := range resp.Header.Values("WWW-Authenticate") {
		if ChallengeError(h) == errUseDPoPNonce {
			return true
		}
	}
	return false
}
