package serverconfig

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/zestmcp/zest/lib/envref"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// Grants of an oauth block: how Zest obtains the server's tokens.
const (
	// GrantAuthorizationCode: a person signs in (console or zestctl), with PKCE S256.
	GrantAuthorizationCode = "authorization_code"
	// GrantClientCredentials: Zest requests tokens with its own client id and secret.
	GrantClientCredentials = "client_credentials"
)

// Limits of an oauth block.
const (
	// MaxOAuthScopes bounds oauth.scopes.
	MaxOAuthScopes = 32
	// MaxOAuthScopeLen bounds one scope.
	MaxOAuthScopeLen = 128
	// MaxOAuthClientIDLen bounds oauth.client_id.
	MaxOAuthClientIDLen = 256
)

// FieldOAuth is the server config's oauth block.
const FieldOAuth = "oauth"

// parseOAuth checks cfg's oauth block (after the transport is known) and sets its grant's
// default. The client secret is only ever a ${VAR} reference, resolved by mcpgateway.
func parseOAuth(cfg *mcpgatewayv1.ServerConfig) error {
	o := cfg.GetOauth()
	if o == nil {
		return nil
	}
	if cfg.GetTransport() != TransportHTTP {
		return invalid("oauth is a streamable-http field; this server's transport is stdio (set transport to streamable-http, or remove oauth)")
	}
	if cfg.GetBearerToken() != "" {
		return invalid("oauth and bearer_token both set: Zest sends one Authorization header (remove bearer_token to sign in by OAuth, or oauth to send the static token)")
	}
	switch o.GetGrant() {
	case "":
		o.Grant = GrantAuthorizationCode
	case GrantAuthorizationCode, GrantClientCredentials:
	default:
		return invalid("oauth.grant %q: use %s (a person signs in; the default) or %s (machine to machine)", truncate(o.GetGrant(), 40), GrantAuthorizationCode, GrantClientCredentials)
	}
	if id := o.GetClientId(); len(id) > MaxOAuthClientIDLen || strings.ContainsFunc(id, func(r rune) bool { return r < 0x21 || r == 0x7f }) {
		return invalid("oauth.client_id must be at most %d visible characters without spaces (the client id the authorization server registered for Zest)", MaxOAuthClientIDLen)
	}
	if s := o.GetClientSecret(); s != "" {
		if _, err := envref.Variable(s); err != nil {
			return fmt.Errorf("%w: oauth.client_secret %w", ErrInvalid, err)
		}
		if err := envref.CheckNotReserved("oauth.client_secret", s, "UPSTREAM_CLIENT_SECRET", "mcpgateway's environment"); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if o.GetClientId() == "" {
			return invalid("oauth.client_secret is set without oauth.client_id: give the client id the secret belongs to")
		}
	}
	if o.GetGrant() == GrantClientCredentials && (o.GetClientId() == "" || o.GetClientSecret() == "") {
		return invalid("oauth.grant client_credentials needs oauth.client_id and oauth.client_secret (a ${VARIABLE} reference): Zest authenticates as that client")
	}
	if len(o.GetScopes()) > MaxOAuthScopes {
		return invalid("oauth.scopes has %d scopes: at most %d", len(o.GetScopes()), MaxOAuthScopes)
	}
	for _, s := range o.GetScopes() {
		// RFC 6749 section 3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ).
		if s == "" || len(s) > MaxOAuthScopeLen || strings.ContainsFunc(s, func(r rune) bool { return r < 0x21 || r > 0x7e || r == '"' || r == '\\' }) {
			return invalid("oauth.scopes: %q is not a scope: 1 to %d visible ASCII characters, no space, quote or backslash (one scope per entry)", truncate(s, 40), MaxOAuthScopeLen)
		}
	}
	if as := o.GetAuthorizationServer(); as != "" {
		if err := CheckURL(as, cfg.GetAllowInsecureHttp()); err != nil {
			return fmt.Errorf("oauth.authorization_server (the issuer URL, e.g. https://login.example.com): %w", err)
		}
		if u, _ := url.Parse(as); u.RawQuery != "" {
			return invalid("oauth.authorization_server must not have a query: give the issuer URL, e.g. https://login.example.com")
		}
	}
	return nil
}
