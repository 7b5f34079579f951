package httpguard

import "strings"

// Zest has no OAuth yet (no authorization server, no client registration: issue 26); its
// endpoints take the API key as a bearer token. A client that meets a 401 and looks for OAuth
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

// NoOAuthMessage is the message a request for OAuth discovery or registration gets (ok), when
// path is one: no OAuth here, and how to pass the API key instead.
func NoOAuthMessage(path string) (msg string, ok bool) {
	for _, p := range oauthWellKnown {
		if path == p || strings.HasPrefix(path, p+"/") {
			return noOAuth, true
		}
	}
	for _, p := range oauthEndpoints {
		if path == p {
			return noOAuth, true
		}
	}
	return "", false
}

const noOAuth = "Zest offers no OAuth sign-in (no authorization server, no client registration): " +
	"its endpoints answer 401 when the API key is missing or wrong. Send the key as a bearer token instead, " +
	"for mcp-remote: --header Authorization:${AUTH_HEADER} with the environment variable AUTH_HEADER set to Bearer, a space and the LEMONADE_API_KEY " +
	"(zestctl config claude writes this configuration)"
