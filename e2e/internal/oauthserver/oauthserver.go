// Package oauthserver is the OAuth 2.1 authorization server the e2e tests sign in with: the
// OpenID provider of github.com/zitadel/oidc (v3, its op package and example storage), started
// in the test's process on a loopback port. It has one pre-registered public client (PKCE,
// no secret, any loopback redirect port), one user it signs in without a page (the
// authorization step redirects straight back with a code, as a browser would after a login),
// and it issues JWT access tokens whose audience is the resource (RFC 8707) the client asked
// for, with the scopes granted in a scope claim (RFC 9068). A confidential client
// (ExchangeClientID) may exchange its access tokens for others (token exchange, RFC 8693),
// which name it in their act claim.
//
// zitadel's provider is an OpenID provider: it reads no resource parameter and sets a token's
// audience to its client. The harness adds what MCP authorization needs around it, and only
// that: the resource of /authorize is kept with the request (resourceFromAuthorize), and the
// token's audience is that resource (withResource).
package oauthserver

import (
	"context"
	"crypto/sha256"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// ClientID is the pre-registered public client; its redirect is CallbackPath on any loopback
// port (RFC 8252), as mcp-remote's is.
const (
	ClientID     = "zest-test-client"
	CallbackPath = "/oauth/callback"
)

// ZestClientID is the public client Zest signs in to an upstream with (authorization code,
// PKCE), its redirect the edge's ZestCallbackPath on any loopback port.
const (
	ZestClientID     = "zest-upstream"
	ZestCallbackPath = "/internal/mcp/oauth/callback"
)

// Server is a running authorization server.
type Server struct {
	// Issuer is its URL (http://127.0.0.1:port), the issuer of its tokens.
	Issuer string
	store  *store
	// metadataDocs is set by AcceptClientMetadataDocuments.
	metadataDocs atomic.Bool
	// Authorized counts the authorization requests it approved.
	mu         sync.Mutex
	authorized int
}

// Start starts the server for the test's duration. scopes are the scopes beyond OpenID's its
// client may be granted (Zest's "mcp", "mcp:admin").
func Start(t testing.TB, scopes ...string) *Server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Issuer: "http://" + lis.Addr().String()}
	client := storage.NativeClient(ClientID, "http://localhost"+CallbackPath, "http://127.0.0.1"+CallbackPath)
	// Zest's own client for its upstream sign-ins: its callback on the edge, any loopback port.
	zest := storage.NativeClient(ZestClientID, "http://127.0.0.1"+ZestCallbackPath)
	// Zest's confidential client for token exchange (RFC 8693), on behalf of its callers.
	exchange := storage.WebClient(ExchangeClientID, ExchangeClientSecret, "http://127.0.0.1/unused")
	inner := storage.NewStorageWithClients(storage.NewUserStore(s.Issuer), map[string]*storage.Client{ClientID: client, ZestClientID: zest, ExchangeClientID: exchange})
	s.store = &store{Storage: inner, scopes: scopes, resources: map[string]string{}, metadataDocs: &s.metadataDocs}
	provider, err := op.NewProvider(&op.Config{CryptoKey: sha256.Sum256([]byte("zest e2e")), CodeMethodS256: true, AuthMethodPost: true, GrantTypeRefreshToken: true},
		s.store, op.StaticIssuer(s.Issuer), op.WithAllowInsecure())
	if err != nil {
		t.Fatal(err)
	}
	callback := op.AuthCallbackURL(provider)
	mux := http.NewServeMux()
	// The login: the one user, signed in at once.
	mux.Handle("/login/username", op.NewIssuerInterceptor(provider.IssuerFromRequest).HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.FormValue("authRequestID")
		if err := inner.CheckUsernamePassword("test-user@127.0.0.1", "verysecure", id); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.authorized++
		s.mu.Unlock()
		http.Redirect(w, r, callback(r.Context(), id), http.StatusFound)
	}))
	mux.Handle("/", s.clientMetadataSupported(resourceFromAuthorize(provider)))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// Authorized is how many authorization requests the server approved.
func (s *Server) Authorized() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.authorized
}

// Sign signs claims with the server's own signing key (its kid in the header), for tests of
// tokens the server would not issue (an expired one); key overrides the key (nil: the
// server's), so that a test can forge a signature under the server's kid.
func (s *Server) Sign(t testing.TB, claims map[string]any, key any, kid string) string {
	t.Helper()
	sk, err := s.store.SigningKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if key == nil {
		key = sk.Key()
	}
	if kid == "" {
		kid = sk.ID()
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: sk.SignatureAlgorithm(), Key: jose.JSONWebKey{Key: key, KeyID: kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

type resourceKey struct{}

// resourceFromAuthorize passes the resource parameter of an authorization request (RFC 8707)
// to the storage through the request's context.
// The token endpoint's resource goes the same way, for the grants whose request names it
// (client credentials, refresh: the storage keeps no resource with them).
//
// zitadel's token exchange reads the resource and sets the issued token's audience from the
// audience parameter alone: a token exchange that names a resource and no audience gets the
// resource as its audience, as RFC 8707 has it.
func resourceFromAuthorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/authorize" || (r.URL.Path == "/oauth/token" && r.Method == http.MethodPost) {
			if res := r.FormValue("resource"); res != "" {
				r = r.WithContext(context.WithValue(r.Context(), resourceKey{}, res))
				if r.Form.Get("grant_type") == string(oidc.GrantTypeTokenExchange) && r.Form.Get("audience") == "" {
					r.Form.Set("audience", res)
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Exchange client: the confidential client Zest exchanges its callers' access tokens as
// (grant token_exchange, RFC 8693; client_secret_basic).
const (
	ExchangeClientID     = "zest-exchange"
	ExchangeClientSecret = "exchangesecret"
)

// Service client: the example storage's service user, for the client credentials grant.
const (
	ServiceClientID     = "sid1"
	ServiceClientSecret = "verysecret"
)

// RevokeRefreshTokens makes every refresh token issued so far invalid (invalid_grant), as an
// administrator of the authorization server revoking a grant would.
func (s *Server) RevokeRefreshTokens() {
	s.store.mu.Lock()
	s.store.revokedBefore = time.Now()
	s.store.mu.Unlock()
}

// Refreshed counts the refresh token requests the server granted.
func (s *Server) Refreshed() int {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	return s.store.refreshed
}

// store is the example storage with JWT access tokens for the one client, the scopes given
// allowed to it, and each authorization's resource as its token's audience.
type store struct {
	*storage.Storage
	scopes []string

	mu        sync.Mutex
	resources map[string]string // auth request id → resource
	// revokedBefore: refresh tokens used from then are refused (RevokeRefreshTokens).
	revokedBefore time.Time
	refreshed     int
	exchanged     int
	// metadataDocs: a client id that is a URL is read from its client ID metadata document.
	metadataDocs *atomic.Bool
	fetched      []string // the client metadata documents fetched, by URL
}

// ClientCredentials gives the service user JWT access tokens, as the native client has.
func (s *store) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	c, err := s.Storage.ClientCredentials(ctx, id, secret)
	if err != nil {
		return nil, err
	}
	return jwtClient{Client: c, scopes: s.scopes}, nil
}

// ClientCredentialsTokenRequest: the token's audience is the resource asked for.
func (s *store) ClientCredentialsTokenRequest(ctx context.Context, id string, scopes []string) (op.TokenRequest, error) {
	req, err := s.Storage.ClientCredentialsTokenRequest(ctx, id, scopes)
	if err != nil {
		return nil, err
	}
	if res, ok := ctx.Value(resourceKey{}).(string); ok {
		if j, ok := req.(*oidc.JWTTokenRequest); ok {
			j.Audience = []string{res}
		}
	}
	return req, nil
}

// TokenRequestByRefreshToken refuses a revoked refresh token; a refreshed token's audience
// is the resource the refresh asked for.
func (s *store) TokenRequestByRefreshToken(ctx context.Context, token string) (op.RefreshTokenRequest, error) {
	s.mu.Lock()
	revoked := !s.revokedBefore.IsZero()
	if !revoked {
		s.refreshed++
	}
	s.mu.Unlock()
	if revoked {
		return nil, oidc.ErrInvalidGrant().WithDescription("the refresh token was revoked")
	}
	req, err := s.Storage.TokenRequestByRefreshToken(ctx, token)
	if err != nil {
		return nil, err
	}
	if res, ok := ctx.Value(resourceKey{}).(string); ok {
		return refreshForResource{RefreshTokenRequest: req, resource: res}, nil
	}
	return req, nil
}

// refreshForResource is a refresh whose token is for resource.
type refreshForResource struct {
	op.RefreshTokenRequest
	resource string
}

func (r refreshForResource) GetAudience() []string { return []string{r.resource} }

// ValidateTokenExchangeRequest lets Zest's exchange client exchange an access token of this
// server's for an access token (the default) or a JWT; the example storage's own check
// (impersonation by administrators) is not the delegation Zest does.
func (s *store) ValidateTokenExchangeRequest(_ context.Context, req op.TokenExchangeRequest) error {
	if req.GetClientID() != ExchangeClientID {
		return oidc.ErrUnauthorizedClient().WithDescription("only " + ExchangeClientID + " may exchange tokens")
	}
	if req.GetExchangeSubjectTokenType() != oidc.AccessTokenType {
		return oidc.ErrInvalidRequest().WithDescription("subject_token_type must be an access token")
	}
	switch req.GetRequestedTokenType() {
	case "":
		req.SetRequestedTokenType(oidc.AccessTokenType)
	case oidc.AccessTokenType, oidc.JWTTokenType:
	default:
		return oidc.ErrInvalidRequest().WithDescription("requested_token_type must be an access token or a JWT")
	}
	s.mu.Lock()
	s.exchanged++
	s.mu.Unlock()
	return nil
}

// GetPrivateClaimsFromTokenExchangeRequest: the exchanged token carries its scopes and names
// the client that acts for the subject (RFC 8693 section 4.1's act claim: delegation).
func (s *store) GetPrivateClaimsFromTokenExchangeRequest(_ context.Context, req op.TokenExchangeRequest) (map[string]any, error) {
	return map[string]any{"scope": strings.Join(req.GetScopes(), " "), "act": map[string]any{"sub": req.GetClientID()}}, nil
}

// Exchanged counts the token exchanges the server granted.
func (s *Server) Exchanged() int {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	return s.store.exchanged
}

func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	if s.metadataDocs.Load() && (strings.HasPrefix(id, "https://") || strings.HasPrefix(id, "http://")) {
		return s.clientFromDocument(ctx, id)
	}
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return jwtClient{Client: c, scopes: s.scopes}, nil
}

func (s *store) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, userID string) (op.AuthRequest, error) {
	ar, err := s.Storage.CreateAuthRequest(ctx, req, userID)
	if err != nil {
		return nil, err
	}
	if res, ok := ctx.Value(resourceKey{}).(string); ok {
		s.mu.Lock()
		s.resources[ar.GetID()] = res
		s.mu.Unlock()
	}
	return s.withResource(ar), nil
}

func (s *store) AuthRequestByID(ctx context.Context, id string) (op.AuthRequest, error) {
	ar, err := s.Storage.AuthRequestByID(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.withResource(ar), nil
}

func (s *store) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	ar, err := s.Storage.AuthRequestByCode(ctx, code)
	if err != nil {
		return nil, err
	}
	return s.withResource(ar), nil
}

// CreateAccessToken and CreateAccessAndRefreshTokens give the example storage its own request
// type, which it reads the client from.
func (s *store) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	return s.Storage.CreateAccessToken(ctx, unwrap(req))
}

func (s *store) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, refresh string) (string, string, time.Time, error) {
	return s.Storage.CreateAccessAndRefreshTokens(ctx, unwrap(req), refresh)
}

// GetPrivateClaimsFromScopes puts the scopes granted in the access token (RFC 9068's scope).
func (s *store) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	claims, err := s.Storage.GetPrivateClaimsFromScopes(ctx, userID, clientID, scopes)
	if claims == nil {
		claims = map[string]any{}
	}
	claims["scope"] = strings.Join(scopes, " ")
	return claims, err
}

func (s *store) withResource(ar op.AuthRequest) op.AuthRequest {
	s.mu.Lock()
	res, ok := s.resources[ar.GetID()]
	s.mu.Unlock()
	if !ok {
		return ar
	}
	return &resourceRequest{AuthRequest: ar, resource: res}
}

// resourceRequest is an authorization whose tokens are for resource.
type resourceRequest struct {
	op.AuthRequest
	resource string
}

func (r *resourceRequest) GetAudience() []string { return []string{r.resource} }

func unwrap(req op.TokenRequest) op.TokenRequest {
	switch r := req.(type) {
	case *resourceRequest:
		return r.AuthRequest
	case refreshForResource:
		if tr, ok := r.RefreshTokenRequest.(op.TokenRequest); ok {
			return tr
		}
	}
	return req
}

// jwtClient is the example's native client with JWT access tokens and the test's scopes.
type jwtClient struct {
	op.Client
	scopes []string
}

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }

func (c jwtClient) IsScopeAllowed(scope string) bool {
	for _, s := range c.scopes {
		if s == scope {
			return true
		}
	}
	return c.Client.IsScopeAllowed(scope)
}

func (jwtClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
