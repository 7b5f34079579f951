package serverconfig

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/zestmcp/zest/lib/envref"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// Grants of an oauth block: how Zest obtains the server's tokens.
const (
	// GrantAuthorizationCode: a person signs in (console or zestctl), with PKCE S256.
	GrantAuthorizationCode = "authorization_code"
	// GrantClientCredentials: Zest requests tokens with its own client id and secret.
	GrantClientCredentials = "client_credentials"
	// GrantTokenExchange: each call goes on behalf of its caller, with the caller's OAuth
	// access token exchanged for one for the server (RFC 8693); Zest holds no token of its own.
	GrantTokenExchange = "token_exchange"
)

// Token types of RFC 8693 section 3 that oauth.requested_token_type may name.
const (
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeJWT         = "urn:ietf:params:oauth:token-type:jwt"
)

// Limits of an oauth block.
const (
	// MaxOAuthScopes bounds oauth.scopes.
	MaxOAuthScopes = 32
	// MaxOAuthScopeLen bounds one scope.
	MaxOAuthScopeLen = 128
	// MaxOAuthClientIDLen bounds oauth.client_id.
	MaxOAuthClientIDLen = 256
	// MaxOAuthAudienceLen bounds oauth.audience.
	MaxOAuthAudienceLen = 512
	// MaxOAuthKeyFileLen bounds oauth.client_key_file (a path).
	MaxOAuthKeyFileLen = 1024
	// MaxOAuthKeyIDLen bounds oauth.client_key_id.
	MaxOAuthKeyIDLen = 256
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
	case GrantAuthorizationCode, GrantClientCredentials, GrantTokenExchange:
	default:
		return invalid("oauth.grant %q: use %s (a person signs in; the default), %s (machine to machine) or %s (on behalf of each caller)",
			truncate(o.GetGrant(), 40), GrantAuthorizationCode, GrantClientCredentials, GrantTokenExchange)
	}
	if err := parseTokenExchange(o); err != nil {
		return err
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
	if err := parseClientKey(o); err != nil {
		return err
	}
	if o.GetGrant() == GrantClientCredentials && (o.GetClientId() == "" || (o.GetClientSecret() == "" && o.GetClientKeyFile() == "")) {
		return invalid("oauth.grant client_credentials needs oauth.client_id and oauth.client_secret (a ${VARIABLE} reference) or oauth.client_key_file: Zest authenticates as that client")
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

// parseTokenExchange checks the fields of grant token_exchange, which no other grant reads.
func parseTokenExchange(o *mcpgatewayv1.UpstreamOAuth) error {
	if o.GetGrant() != GrantTokenExchange {
		if o.GetAudience() != "" || o.GetRequestedTokenType() != "" {
			return invalid("oauth.audience and oauth.requested_token_type are read with oauth.grant %s only (set the grant, or remove them)", GrantTokenExchange)
		}
		return nil
	}
	if o.Dpop != nil {
		return invalid("oauth.dpop is read with oauth.grant %s and %s only: the exchanged tokens of grant %s are never bound to a key of Zest's (remove it)", GrantAuthorizationCode, GrantClientCredentials, GrantTokenExchange)
	}
	if o.GetClientId() == "" {
		return invalid("oauth.grant %s needs oauth.client_id (and, for a confidential client, oauth.client_secret as a ${VARIABLE} reference): Zest exchanges each caller's token as that client", GrantTokenExchange)
	}
	if a := o.GetAudience(); len(a) > MaxOAuthAudienceLen || strings.ContainsFunc(a, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		return invalid("oauth.audience must be at most %d visible ASCII characters without spaces (the name of the server at its authorization server)", MaxOAuthAudienceLen)
	}
	switch o.GetRequestedTokenType() {
	case "":
		o.RequestedTokenType = TokenTypeAccessToken
	case TokenTypeAccessToken, TokenTypeJWT:
	default:
		return invalid("oauth.requested_token_type %q: use %s (the default) or %s", truncate(o.GetRequestedTokenType(), 60), TokenTypeAccessToken, TokenTypeJWT)
	}
	return nil
}

// parseClientKey checks oauth.client_key_file and oauth.client_key_id, the client's private key
// (private_key_jwt): the path's form only — mcpgateway reads the file at registration
// (oauthclient.CheckClientKey) and at each token request.
func parseClientKey(o *mcpgatewayv1.UpstreamOAuth) error {
	path, kid := o.GetClientKeyFile(), o.GetClientKeyId()
	if path == "" {
		if kid != "" {
			return invalid("oauth.client_key_id is read with oauth.client_key_file only (set the key's file, or remove the key id)")
		}
		return nil
	}
	switch {
	case o.GetClientSecret() != "":
		return invalid("oauth.client_secret and oauth.client_key_file both set: Zest authenticates at the token endpoint with one (remove client_secret to sign its requests with the key, or client_key_file to send the secret)")
	case o.GetClientId() == "":
		return invalid("oauth.client_key_file is set without oauth.client_id: give the client id the key is registered for")
	case len(path) > MaxOAuthKeyFileLen || !filepath.IsAbs(path) || strings.ContainsFunc(path, unicode.IsControl):
		return invalid("oauth.client_key_file must be an absolute path on mcpgateway's host, at most %d bytes (the client's PEM private key, RSA or EC)", MaxOAuthKeyFileLen)
	case len(kid) > MaxOAuthKeyIDLen || strings.ContainsFunc(kid, func(r rune) bool { return r < 0x21 || r > 0x7e }):
		return invalid("oauth.client_key_id must be at most %d visible ASCII characters without spaces (the key's id at the authorization server)", MaxOAuthKeyIDLen)
	}
	return nil
}
