package httpguard

import (
	"slices"
	"strings"
)

// Zest is no authorization server. Without ZEST_OAUTH_ISSUER its endpoints take the API key
// alone, as a bearer token; with one they take that issuer's access tokens too (oauth.go). A
// client that meets a 401 and looks for OAuth
// (RFC 9728 protected-resource metadata, RFC 8414 authorization-server metadata, OpenID
// discovery, then RFC 7591 registration at /register, the fallback when no metadata is found)
// gets a 404 that says so and what to do, not a bare "No route": mcp-remote shows the body of
// the rejected registration to its user ("Dynamic Client Registration rejected (HTTP 404): …").

// oauthPaths are the discovery documents clients look for at the root (each may carry the
// resource's path after it) and the endpoints they fall back to without metadata.
var (
	oauthWellKnown = []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"}
	oauthEndpoints = []string{"/register", "/authorize", "/token"}
)

// OAuthMessage is the message a request for OAuth discovery or registration at Zest gets (ok),
// when path is one: with no issuer, no OAuth here and how to pass the API key instead; with
// one, that Zest is not the authorization server and which one is.
func OAuthMessage(path, issuer string) (msg string, ok bool) {
	found := slices.Contains(oauthEndpoints, path) || slices.ContainsFunc(oauthWellKnown, func(p string) bool {
		return path == p || strings.HasPrefix(path, p+"/")
	})
	switch {
	case !found:
		return "", false
	case issuer != "":
		return "Zest is not an authorization server: its MCP endpoints take access tokens of the issuer " + issuer +
			" (each endpoint's metadata, " + oauthWellKnown[0] + " followed by the endpoint's path, names it), or the API key as a bearer token", true
	}
	return noOAuth, true
}

const noOAuth = "Zest offers no OAuth sign-in (no authorization server, no client registration): " +
	"its endpoints answer 401 when the API key is missing or wrong. Send the key as a bearer token instead, " +
	"for mcp-remote: --header Authorization:${AUTH_HEADER} with the environment variable AUTH_HEADER set to Bearer, a space and the LEMONADE_API_KEY " +
	"(zestctl config claude writes this configuration)"
