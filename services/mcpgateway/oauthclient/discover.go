// Package oauthclient signs Zest in to its upstream streamable-http servers as an OAuth 2.1
// client (MCP authorization, 2025-06-18 and later): discovery from the server's 401 (RFC 9728
// protected-resource metadata, then RFC 8414 / OpenID discovery of its authorization server),
// tokens for the server's URL as the resource (RFC 8707), PKCE S256 on every authorization
// code, client credentials for machine-to-machine, refresh before expiry, and the tokens kept
// sealed (AES-256-GCM) in the registry under the key of ZEST_SECRET_KEY_FILE. The flows are
// golang.org/x/oauth2's.
package oauthclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/zestmcp/zest/lib/oauthrs"
)

// MaxMetadataBytes bounds a metadata document read during discovery.
const MaxMetadataBytes = 256 << 10

// ErrDiscovery means the server's authorization could not be discovered.
var ErrDiscovery = errors.New("OAuth discovery")

// ProtectedResource is the part of a server's RFC 9728 metadata Zest reads.
type ProtectedResource struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported"`
}

// ServerMetadata is the part of an authorization server's RFC 8414 (or OpenID) metadata Zest reads.
type ServerMetadata struct {
	Issuer                        string   `json:"issuer"`
	AuthorizationEndpoint         string   `json:"authorization_endpoint"`
	TokenEndpoint                 string   `json:"token_endpoint"`
	RegistrationEndpoint          string   `json:"registration_endpoint,omitempty"`
	RevocationEndpoint            string   `json:"revocation_endpoint,omitempty"`
	CodeChallengeMethodsSupported []string `json:"code_challenge_methods_supported,omitempty"`
	GrantTypesSupported           []string `json:"grant_types_supported,omitempty"`
	// ClientIDMetadataDocumentSupported: the server takes a client id that is the URL of a
	// client ID metadata document (MCP authorization 2025-11-25), which it fetches.
	ClientIDMetadataDocumentSupported bool `json:"client_id_metadata_document_supported,omitempty"`
	// TokenEndpointAuthMethodsSupported: how a client with a secret authenticates at the
	// token endpoint (RFC 8414: client_secret_basic when absent).
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported,omitempty"`
	// TokenEndpointAuthSigningAlgValuesSupported: the algorithms of the client assertions it
	// takes (private_key_jwt; checkKeyMethod).
	TokenEndpointAuthSigningAlgValuesSupported []string `json:"token_endpoint_auth_signing_alg_values_supported,omitempty"`
	// IssParameterSupported: the server names itself (iss) in every authorization response
	// (RFC 9207), so a response without it is refused.
	IssParameterSupported bool `json:"authorization_response_iss_parameter_supported,omitempty"`
	// DPoPSigningAlgValuesSupported: the server binds tokens to a client's key by DPoP proofs
	// of these algorithms (RFC 9449 section 5.1).
	DPoPSigningAlgValuesSupported []string `json:"dpop_signing_alg_values_supported,omitempty"`
}

// SupportsS256 reports whether the server names PKCE S256 (MCP authorization: a client must
// refuse to go on without it).
func (m *ServerMetadata) SupportsS256() bool {
	return slices.Contains(m.CodeChallengeMethodsSupported, "S256")
}

// Discovery is what Zest found for one server.
type Discovery struct {
	Resource ProtectedResource
	Server   ServerMetadata
	// ChallengeScopes are the scope of the server's 401 challenge (RFC 6750 section 3): the
	// scopes it asks for, first choice of a client that is told none (MCP authorization's
	// scope selection).
	ChallengeScopes []string
	// Legacy says the server published no protected-resource metadata, so its authorization
	// server was taken to be its origin (MCP 2025-03-26): LegacyMetadata, or
	// LegacyDefaultEndpoints when the origin published no metadata either.
	Legacy string
}

// ResourceIndicator is the resource Zest asks tokens for (RFC 8707) for the server at url: the
// resource of its protected-resource metadata exactly as published (MCP authorization: not
// reparsed, so no "/" is added to a pathless one), else url.
func (d *Discovery) ResourceIndicator(url string) string {
	if d.Resource.Resource != "" {
		return d.Resource.Resource
	}
	return url
}

// Ways of a server of MCP 2025-03-26 (Discovery.Legacy).
const (
	LegacyMetadata         = "the authorization server metadata at the server's origin (MCP 2025-03-26)"
	LegacyDefaultEndpoints = "the default endpoints /authorize, /token and /register at the server's origin (MCP 2025-03-26)"
)

// probes are the unauthenticated MCP requests Challenge sends, in order: initialize, then
// tools/list for a server that lets initialize through and requires a token (and says which
// scopes) per operation.
var probes = []string{
	`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"zest-mcpgateway","version":"0.1.0"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
}

// Challenge sends resource unauthenticated MCP requests (probes) and returns the
// WWW-Authenticate header of the first 401 ("" when none answered 401, or without one).
func Challenge(ctx context.Context, hc *http.Client, resource string) (string, error) {
	for _, body := range probes {
		h, unauthorized, err := probe(ctx, hc, resource, body)
		if err != nil || unauthorized {
			return h, err
		}
	}
	return "", nil
}

// probe sends resource one unauthenticated request: the WWW-Authenticate of its answer, and
// whether it was 401.
func probe(ctx context.Context, hc *http.Client, resource, body string) (string, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, resource, strings.NewReader(body))
	if err != nil {
		return "", false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return "", false, fmt.Errorf("%w: %s: %w", ErrDiscovery, resource, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxMetadataBytes))
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return "", false, nil
	}
	return resp.Header.Get("WWW-Authenticate"), true, nil
}

// ResourceMetadataURL is the resource_metadata parameter of a Bearer challenge (RFC 9728
// section 5.1), "" when there is none.
func ResourceMetadataURL(challenge string) string {
	for _, p := range challengeParams(challenge) {
		if strings.EqualFold(p[0], "resource_metadata") {
			return p[1]
		}
	}
	return ""
}

// ChallengeScopes are the scope parameter of a Bearer challenge, split on spaces (nil when
// there is none).
func ChallengeScopes(challenge string) []string {
	for _, p := range challengeParams(challenge) {
		if strings.EqualFold(p[0], "scope") {
			return strings.Fields(p[1])
		}
	}
	return nil
}

// ChallengeError is the error parameter of a Bearer challenge (RFC 6750 section 3.1), "" when
// there is none.
func ChallengeError(challenge string) string {
	for _, p := range challengeParams(challenge) {
		if strings.EqualFold(p[0], "error") {
			return p[1]
		}
	}
	return ""
}

// challengeParams splits the auth-params of a Bearer challenge, else of a DPoP one (RFC 9449
// section 7.1), quoted or token values.
func challengeParams(h string) [][2]string {
	scheme := "bearer"
	i := strings.Index(strings.ToLower(h), scheme)
	if i < 0 {
		scheme = "dpop"
		if i = strings.Index(strings.ToLower(h), scheme); i < 0 {
			return nil
		}
	}
	s := h[i+len(scheme):]
	var out [][2]string
	for {
		s = strings.TrimLeft(s, " \t,")
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return out
		}
		name := strings.TrimSpace(s[:eq])
		s = strings.TrimLeft(s[eq+1:], " \t")
		var val string
		if strings.HasPrefix(s, `"`) {
			var b strings.Builder
			j := 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				b.WriteByte(s[j])
			}
			val, s = b.String(), s[min(j+1, len(s)):]
		} else {
			end := strings.IndexAny(s, ", \t")
			if end < 0 {
				end = len(s)
			}
			val, s = s[:end], s[end:]
		}
		out = append(out, [2]string{name, val})
	}
}

// wellKnown is the well-known URL of suffix for u, its path appended (RFC 8414 section 3,
// RFC 9728 section 3.1): https://h/.well-known/suffix/path.
func wellKnown(u *url.URL, suffix string) string {
	w := url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/.well-known/" + suffix + strings.TrimSuffix(u.Path, "/")}
	return w.String()
}

// resourceCovers reports whether the protected-resource metadata's resource names the server
// at u (MCP authorization: a client must check it before it authorizes): the same origin, and
// u's path at or under the resource's path. A metadata document that another server's URL
// names would have Zest sign in, and send its tokens, for that server.
func resourceCovers(resource string, u *url.URL) bool {
	r, err := url.Parse(resource)
	if err != nil || r.Fragment != "" || !strings.EqualFold(r.Scheme, u.Scheme) || !strings.EqualFold(r.Host, u.Host) {
		return false
	}
	rp, up := strings.TrimSuffix(r.Path, "/"), strings.TrimSuffix(u.Path, "/")
	return rp == up || strings.HasPrefix(up, rp+"/")
}

// Discover finds the authorization of resource (the server's URL): its protected-resource
// metadata from challenge's resource_metadata, else from the well-known URLs (with the
// resource's path, then without), whose resource must name the server; then the
// authorization server (issuer, when not empty, instead of the one the metadata names) by
// RFC 8414, then OpenID discovery.
func Discover(ctx context.Context, hc *http.Client, resource, challenge, issuer string) (*Discovery, error) {
	ru, err := url.Parse(resource)
	if err != nil {
		return nil, fmt.Errorf("%w: url %q: %w", ErrDiscovery, resource, err)
	}
	d := &Discovery{}
	var tried []string
	candidates := []string{}
	if m := ResourceMetadataURL(challenge); m != "" {
		candidates = append(candidates, m)
	} else {
		candidates = append(candidates, wellKnown(ru, "oauth-protected-resource"))
		if strings.Trim(ru.Path, "/") != "" {
			candidates = append(candidates, wellKnown(&url.URL{Scheme: ru.Scheme, Host: ru.Host}, "oauth-protected-resource"))
		}
	}
	d.ChallengeScopes = ChallengeScopes(challenge)
	found := false
	for _, c := range candidates {
		tried = append(tried, c)
		if err := oauthrs.GetJSON(ctx, hc, c, MaxMetadataBytes, &d.Resource); err == nil {
			found = true
			if !resourceCovers(d.Resource.Resource, ru) {
				return nil, fmt.Errorf("%w: the protected-resource metadata at %s is for the resource %q, not %s (RFC 9728 section 3.3): Zest does not sign in to a server whose metadata names another; check the server's url", ErrDiscovery, c, d.Resource.Resource, resource)
			}
			break
		}
	}
	if !found && issuer == "" {
		return discoverLegacy(ctx, hc, ru, d)
	}
	if issuer == "" {
		if len(d.Resource.AuthorizationServers) == 0 {
			return nil, fmt.Errorf("%w: the protected-resource metadata of %s names no authorization_servers: set oauth.authorization_server", ErrDiscovery, resource)
		}
		issuer = d.Resource.AuthorizationServers[0]
	}
	if iu, err := url.Parse(issuer); err != nil || (iu.Scheme != "https" && iu.Scheme != "http") || iu.Host == "" {
		return nil, fmt.Errorf("%w: authorization server %q is not an http(s) URL", ErrDiscovery, issuer)
	}
	// RFC 8414's well-known URL, then OpenID discovery's: the ones Zest's own verifier reads.
	asCandidates := oauthrs.MetadataURLs(issuer)
	tried = tried[:0]
	for _, c := range asCandidates {
		tried = append(tried, c)
		var m ServerMetadata
		if err := oauthrs.GetJSON(ctx, hc, c, MaxMetadataBytes, &m); err != nil {
			continue
		}
		// RFC 8414 section 3.3: the issuer must be the one asked for.
		if strings.TrimSuffix(m.Issuer, "/") != strings.TrimSuffix(issuer, "/") {
			return nil, fmt.Errorf("%w: %s names issuer %q, not %q (RFC 8414 section 3.3)", ErrDiscovery, c, m.Issuer, issuer)
		}
		if m.TokenEndpoint == "" {
			return nil, fmt.Errorf("%w: %s names no token_endpoint", ErrDiscovery, c)
		}
		d.Server = m
		return d, nil
	}
	return nil, fmt.Errorf("%w: no authorization server metadata for %s (tried %s)", ErrDiscovery, issuer, strings.Join(tried, ", "))
}

// discoverLegacy finds the authorization of a server that publishes no protected-resource
// metadata as MCP 2025-03-26 says: its origin is its authorization server, whose RFC 8414 (or
// OpenID) metadata gives the endpoints — the issuer it names on that same origin — else the
// default endpoints /authorize, /token and /register there (PKCE S256, which that revision
// requires of every authorization server).
func discoverLegacy(ctx context.Context, hc *http.Client, ru *url.URL, d *Discovery) (*Discovery, error) {
	origin := (&url.URL{Scheme: ru.Scheme, Host: ru.Host}).String()
	for _, c := range oauthrs.MetadataURLs(origin) {
		var m ServerMetadata
		if err := oauthrs.GetJSON(ctx, hc, c, MaxMetadataBytes, &m); err != nil {
			continue
		}
		if iu, err := url.Parse(m.Issuer); err != nil || !strings.EqualFold(iu.Scheme, ru.Scheme) || !strings.EqualFold(iu.Host, ru.Host) {
			return nil, fmt.Errorf("%w: %s publishes no protected-resource metadata, and the authorization server metadata at its origin (%s) names the issuer %q, not one on that origin: set oauth.authorization_server", ErrDiscovery, ru, c, m.Issuer)
		}
		if m.TokenEndpoint == "" {
			return nil, fmt.Errorf("%w: %s names no token_endpoint", ErrDiscovery, c)
		}
		d.Server, d.Legacy = m, LegacyMetadata
		return d, nil
	}
	d.Server = ServerMetadata{Issuer: origin, AuthorizationEndpoint: origin + "/authorize", TokenEndpoint: origin + "/token",
		RegistrationEndpoint: origin + "/register", CodeChallengeMethodsSupported: []string{"S256"}}
	d.Legacy = LegacyDefaultEndpoints
	return d, nil
}
