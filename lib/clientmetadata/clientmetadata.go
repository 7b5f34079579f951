// Package clientmetadata is Zest's OAuth client ID metadata document (MCP authorization
// 2025-11-25, draft-ietf-oauth-client-id-metadata-document): when an upstream's authorization
// server says client_id_metadata_document_supported, Zest's client_id is the HTTPS URL of a
// JSON document that describes it, which the edge serves under ZEST_PUBLIC_URL and the
// authorization server fetches. Its one redirect URI is the edge's callback.
//
// The edge serves the document (Handler) and mcpgateway names its URL as the client id (URL):
// both build them here from the same ZEST_PUBLIC_URL.
package clientmetadata

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
)

const (
	// Path is where the edge serves the document: a stable public path, no key.
	Path = "/internal/mcp/oauth/client-metadata.json"
	// CallbackPath is the edge's route an authorization server sends the browser back to
	// after a sign-in: the document's redirect URI.
	CallbackPath = "/internal/mcp/oauth/callback"
	// ClientName is how Zest names itself to an authorization server.
	ClientName = "Zest MCP gateway"
	// MaxAge is how long an authorization server may cache the document (Cache-Control).
	MaxAge = "3600"
)

// Document is the client ID metadata document: an RFC 7591 client metadata whose client_id
// is the document's own URL.
type Document struct {
	ClientID                string   `json:"client_id"`
	ClientName              string   `json:"client_name"`
	ClientURI               string   `json:"client_uri"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
}

// URL is the document's URL for publicURL (ZEST_PUBLIC_URL), and whether an authorization
// server may take it as a client id: an https URL, or http on a loopback host (a
// workstation, the tests). "" and false when publicURL is empty or not a URL.
func URL(publicURL string) (string, bool) {
	base := strings.TrimSuffix(publicURL, "/")
	u, err := url.Parse(base)
	if base == "" || err != nil || u.Host == "" {
		return "", false
	}
	switch u.Scheme {
	case "https":
		return base + Path, true
	case "http":
		ip := net.ParseIP(u.Hostname())
		return base + Path, u.Hostname() == "localhost" || (ip != nil && ip.IsLoopback())
	}
	return "", false
}

// For is the document for publicURL: a public client (PKCE, no secret) that signs in by
// authorization code, with refresh, back to the edge's callback.
func For(publicURL string) Document {
	base := strings.TrimSuffix(publicURL, "/")
	return Document{ClientID: base + Path, ClientName: ClientName, ClientURI: base + "/",
		RedirectURIs: []string{base + CallbackPath}, GrantTypes: []string{"authorization_code", "refresh_token"},
		ResponseTypes: []string{"code"}, TokenEndpointAuthMethod: "none"}
}

// Handler serves For(publicURL) (route it for GET).
func Handler(publicURL string) http.Handler {
	body, _ := json.Marshal(For(publicURL))
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age="+MaxAge)
		_, _ = w.Write(body)
	})
}
