package httpguard

import (
	"strings"
	"testing"
)

// TestNoOAuthMessage: the paths a client looks for OAuth at (discovery documents, with the
// resource's path after them or not, and the endpoints of the fallback) get the message that
// says how to pass the key; other paths, and look-alikes, do not.
func TestNoOAuthMessage(t *testing.T) {
	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp",
		"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration", "/register", "/authorize", "/token"} {
		msg, ok := OAuthMessage(p, "")
		if !ok || !strings.Contains(msg, "LEMONADE_API_KEY") || !strings.Contains(msg, "--header Authorization:${AUTH_HEADER}") {
			t.Errorf("%s: %q, %v", p, msg, ok)
		}
	}
	for _, p := range []string{"/", "/mcp", "/registers", "/api/v1/register", "/.well-known/oauth-protected-resources", "/.well-known/security.txt"} {
		if msg, ok := OAuthMessage(p, ""); ok {
			t.Errorf("%s: %q", p, msg)
		}
	}
}

// TestOAuthMessageWithAnIssuer: with an issuer configured, the discovery paths Zest does not
// serve name the issuer instead of saying there is no OAuth.
func TestOAuthMessageWithAnIssuer(t *testing.T) {
	for _, p := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration/mcp", "/register", "/token"} {
		msg, ok := OAuthMessage(p, "https://id.example.com")
		if !ok || !strings.Contains(msg, "not an authorization server") || !strings.Contains(msg, "https://id.example.com") || strings.Contains(msg, "no OAuth") {
			t.Errorf("%s: %q, %v", p, msg, ok)
		}
	}
}
