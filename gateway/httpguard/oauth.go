package httpguard

import (
	"context"
	"errors"
	"net/http"

	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/oauthrs"
)

// With an issuer configured (ZEST_OAUTH_ISSUER), the MCP endpoints take its access tokens
// beside the API key (docs/operator/oauth.md). Both are checked here, at the edge, before any
// byte of the body is read: a token names the endpoint it was issued for (its audience, RFC
// 8707), so the endpoint comes from the request line alone.

// errNoCredentials refuses a request with neither a key nor a token while an issuer is
// configured and no API key is: the endpoints are not open then.
var errNoCredentials = errors.New("Missing credentials: this endpoint takes an OAuth access token of its issuer (see its protected-resource metadata) or the API key, as a bearer token")

// MCPKeyAs is the MCP endpoints' check, refusing in write's shape: APIKeyAs while no issuer is
// configured; with one, the API (or admin) key, or an access token of the issuer for the
// endpoint of the request's path. A refused token is 401 with the endpoint's challenge and
// error="invalid_token" (403 and insufficient_scope without the scope required); a missing or
// wrong key 401 (the challenge is the edge's root handler's); an issuer whose keys cannot be
// fetched 503.
func (g Guard) MCPKeyAs(write ErrorWriter) func(http.Handler) http.Handler {
	if g.OAuth == nil {
		return g.APIKeyAs(write)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			endpoint, _ := oauthrs.Endpoint(r.URL.Path)
			var claims *oauthrs.Claims
			err := g.Verify(r, keyauth.BearerToken(r.Header.Get("Authorization")), func(token string) error {
				if g.Keys.API != "" && g.Keys.CheckAPI(token) == nil {
					return nil
				}
				if !oauthrs.LooksLikeJWT(token) {
					if g.Keys.API != "" {
						return keyauth.ErrInvalidAPIKey
					}
					return errNoCredentials
				}
				var err error
				claims, err = g.OAuth.VerifyFor(r.Context(), token, endpoint)
				return err
			})
			if errors.Is(err, oauthrs.ErrIssuerUnavailable) {
				w.Header().Set("Retry-After", "10")
				write(w, http.StatusServiceUnavailable, "The OAuth issuer's keys could not be fetched, so the access token cannot be checked now: retry later, or use the API key")
				return
			}
			if errors.Is(err, oauthrs.ErrInvalidToken) {
				// A refused token: the challenge says why (RFC 6750), a missing scope is 403.
				cfg := g.OAuth.Settings()
				w.Header().Set("WWW-Authenticate", cfg.ChallengeFor(endpoint, err))
				status := http.StatusUnauthorized
				if errors.Is(err, oauthrs.ErrInsufficientScope) {
					status = http.StatusForbidden
				}
				write(w, status, err.Error())
				return
			}
			if err != nil {
				RefuseAs(w, err, write)
				return
			}
			if claims != nil {
				r = r.WithContext(context.WithValue(r.Context(), claimsKey{}, claims))
			}
			next.ServeHTTP(w, r)
		})
	}
}

type claimsKey struct{}

// TokenClaims are the claims of the access token r was let in with (nil: a key, or none).
func TokenClaims(r *http.Request) *oauthrs.Claims {
	c, _ := r.Context().Value(claimsKey{}).(*oauthrs.Claims)
	return c
}
