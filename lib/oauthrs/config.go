// Package oauthrs makes Zest an OAuth 2.1 protected resource (MCP authorization, 2025-06-18 and
// later): it knows which resource each MCP endpoint is (RFC 8707's canonical URL under
// ZEST_PUBLIC_URL), describes it (RFC 9728 protected-resource metadata), challenges a caller
// without a token (WWW-Authenticate: Bearer resource_metadata=…), and verifies the access
// tokens (JWT) the configured issuer signs (verifier.go). With no issuer configured it does
// nothing: the endpoints take the API key alone.
package oauthrs

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"
)

// Config is the OAuth resource-server settings; the edge and mcpgateway share them.
type Config struct {
	// Issuer is the authorization server whose access tokens the MCP endpoints take
	// (ZEST_OAUTH_ISSUER; empty: none, the API key alone).
	Issuer string
	// PublicURL is Zest's address as clients reach it, scheme://host[:port] (ZEST_PUBLIC_URL):
	// each endpoint's resource URL, the audience its tokens must name, is under it.
	PublicURL string
	// Scope is the scope a token must carry to use the MCP endpoints (ZEST_OAUTH_SCOPE; empty:
	// none required). A token carrying AdminScope is an administrator's.
	Scope string
	// AdminScope names an administrator's token (ZEST_OAUTH_ADMIN_SCOPE; empty: no token is).
	AdminScope string
}

// Defaults of the scopes.
const (
	DefaultScope      = "mcp"
	DefaultAdminScope = "mcp:admin"
)

// DefaultConfig has no issuer (OAuth off) and the default scopes.
func DefaultConfig() Config { return Config{Scope: DefaultScope, AdminScope: DefaultAdminScope} }

// RegisterFlags adds the OAuth flags (ZEST_OAUTH_ISSUER, ZEST_PUBLIC_URL, ZEST_OAUTH_SCOPE,
// ZEST_OAUTH_ADMIN_SCOPE).
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Issuer, "oauth-issuer", c.Issuer, "OAuth authorization server (issuer URL) whose access tokens the MCP endpoints take beside the API key; empty: keys only")
	fs.StringVar(&c.PublicURL, "public-url", c.PublicURL, "Zest's address as clients reach it (scheme://host[:port]): each MCP endpoint's OAuth resource URL, the audience of its tokens, is under it")
	fs.StringVar(&c.Scope, "oauth-scope", c.Scope, "scope an access token must carry to use the MCP endpoints (empty: none)")
	fs.StringVar(&c.AdminScope, "oauth-admin-scope", c.AdminScope, "scope that makes an access token an administrator's (empty: none does)")
}

// Enabled reports whether an issuer is configured.
func (c Config) Enabled() bool { return c.Issuer != "" }

// Validate checks the settings when an issuer is configured.
func (c Config) Validate() error {
	if !c.Enabled() {
		return nil
	}
	var errs []error
	if u, err := url.Parse(c.Issuer); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.RawQuery != "" || u.Fragment != "" {
		errs = append(errs, fmt.Errorf("oauth-issuer (ZEST_OAUTH_ISSUER) %q: want the issuer's URL, https://host[/path], exactly as its tokens' iss claim says it", c.Issuer))
	}
	if c.PublicURL == "" {
		errs = append(errs, errors.New("public-url (ZEST_PUBLIC_URL) is required with oauth-issuer: set it to Zest's address as clients reach it (e.g. https://zest.example.com), the base of each endpoint's resource URL"))
	} else if u, err := url.Parse(c.PublicURL); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || strings.TrimSuffix(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
		errs = append(errs, fmt.Errorf("public-url (ZEST_PUBLIC_URL) %q: want scheme://host[:port] with no path, Zest's address as clients reach it", c.PublicURL))
	}
	if strings.ContainsAny(c.Scope, " \"\\") || strings.ContainsAny(c.AdminScope, " \"\\") {
		errs = append(errs, errors.New("oauth-scope and oauth-admin-scope (ZEST_OAUTH_SCOPE, ZEST_OAUTH_ADMIN_SCOPE): want one scope each, without spaces or quotes"))
	}
	return errors.Join(errs...)
}

// base is PublicURL without a trailing slash.
func (c Config) base() string { return strings.TrimSuffix(c.PublicURL, "/") }

// Endpoint is the MCP endpoint a request path belongs to — /mcp, /mcp/servers/{id} or
// /mcp/presets/{id}, whatever follows (HTTP+SSE's /sse and /message are the endpoint's) — and
// false for a path outside /mcp.
func Endpoint(path string) (string, bool) {
	if path != "/mcp" && !strings.HasPrefix(path, "/mcp/") {
		return "", false
	}
	parts := strings.SplitN(strings.TrimPrefix(path, "/mcp/"), "/", 3)
	if len(parts) >= 2 && (parts[0] == "servers" || parts[0] == "presets") && parts[1] != "" {
		return "/mcp/" + parts[0] + "/" + parts[1], true
	}
	return "/mcp", true
}

// ResourceURL is the resource (RFC 8707) of the endpoint that path belongs to: the audience
// its tokens must name.
func (c Config) ResourceURL(endpoint string) string { return c.base() + endpoint }

// MetadataPath is where the protected-resource metadata of every endpoint is served, the
// endpoint's path after it (RFC 9728 section 3.1).
const MetadataPath = "/.well-known/oauth-protected-resource"

// MetadataURL is the address of endpoint's protected-resource metadata.
func (c Config) MetadataURL(endpoint string) string { return c.base() + MetadataPath + endpoint }

// Challenge is the WWW-Authenticate value of a 401 on endpoint: where its metadata is, and the
// scope to ask for (RFC 9728 section 5.1, MCP authorization's scope selection).
func (c Config) Challenge(endpoint string) string {
	v := `Bearer resource_metadata="` + c.MetadataURL(endpoint) + `"`
	if c.Scope != "" {
		v += `, scope="` + c.Scope + `"`
	}
	return v
}

// ChallengeFor is Challenge for a refused token, with RFC 6750's error code: invalid_token, or
// insufficient_scope when err Is ErrInsufficientScope (a 403).
func (c Config) ChallengeFor(endpoint string, err error) string {
	code := "invalid_token"
	if errors.Is(err, ErrInsufficientScope) {
		code = "insufficient_scope"
	}
	return c.Challenge(endpoint) + `, error="` + code + `"`
}

// Metadata is endpoint's protected-resource metadata document (RFC 9728 section 2).
type Metadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// MetadataFor is the metadata of the endpoint named by the path after MetadataPath (suffix;
// empty: the root document, which describes /mcp), false when suffix names no endpoint.
func (c Config) MetadataFor(suffix string) (Metadata, bool) {
	endpoint := "/mcp"
	if suffix != "" {
		e, ok := Endpoint(suffix)
		if !ok || e != suffix {
			return Metadata{}, false
		}
		endpoint = e
	}
	m := Metadata{Resource: c.ResourceURL(endpoint), AuthorizationServers: []string{c.Issuer},
		BearerMethodsSupported: []string{"header"}, ResourceName: "Zest " + endpoint}
	for _, s := range []string{c.Scope, c.AdminScope} {
		if s != "" {
			m.ScopesSupported = append(m.ScopesSupported, s)
		}
	}
	return m, true
}
