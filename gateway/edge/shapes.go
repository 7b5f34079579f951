package edge

import (
	"errors"
	"net/http"
	"strings"

	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/gateway/openai"
	"github.com/zestmcp/zest/lib/jsonrpcerr"
	"github.com/zestmcp/zest/lib/oauthrs"
)

// writeErrorFunc writes an error answer in one route family's shape.
type writeErrorFunc func(w http.ResponseWriter, code int, msg string)

// errorWriter returns the error shape of the route family path belongs to, for the answers
// the edge gives in a family's place (no route, a body that timed out): the MCP endpoints'
// (mcpError) under /mcp,
// the admin shape under /internal/mcp, OpenAI's under the four prefixes, Lemonade's
// {"error":"…"} elsewhere.
func errorWriter(path string) writeErrorFunc {
	switch {
	case under(path, "/mcp"):
		return mcpError
	case under(path, "/internal/mcp"):
		return writeAdminError
	}
	for _, p := range Prefixes {
		if under(path, strings.TrimSuffix(p, "/")) {
			return openai.WriteError
		}
	}
	return httpguard.WriteError
}

// mcpError is the MCP endpoints' error shape (lib/jsonrpcerr, mcpgateway's too), for the
// answers the edge gives in their place.
func mcpError(w http.ResponseWriter, code int, msg string) { jsonrpcerr.WriteStatus(w, code, msg) }

func under(path, root string) bool { return path == root || strings.HasPrefix(path, root+"/") }

// notFound answers a path no route serves, in the shape of the family it falls under; a
// client looking for OAuth learns that there is none and how to pass the key instead.
func notFound(w http.ResponseWriter, r *http.Request) { notFoundWith("")(w, r) }

// notFoundWith is notFound with issuer configured (ZEST_OAUTH_ISSUER): a client looking for
// an authorization server at Zest learns which one it is.
func notFoundWith(issuer string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		noRoute(r.Context())
		msg := "No route for " + r.Method + " " + r.URL.Path
		if m, ok := httpguard.OAuthMessage(r.URL.Path, issuer); ok {
			msg = m
		}
		errorWriter(r.URL.Path)(w, http.StatusNotFound, msg)
	}
}

// bodyError answers a body that could not be read whole in a family's shape: 413 past the
// bound (httpguard.LimitBody), 400 otherwise.
func bodyError(write writeErrorFunc) func(w http.ResponseWriter, err error) {
	return func(w http.ResponseWriter, err error) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			write(w, http.StatusRequestEntityTooLarge, httpguard.TooLargeMessage(tooBig.Limit))
			return
		}
		write(w, http.StatusBadRequest, "Bad Request: the body could not be read whole")
	}
}

// resourceMetadata serves each MCP endpoint's protected-resource metadata (RFC 9728) at
// oauthrs.MetadataPath followed by the endpoint's path, and /mcp's at the bare path; a path
// that names no endpoint is 404.
func resourceMetadata(cfg oauthrs.Config) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, ok := cfg.MetadataFor(strings.TrimPrefix(r.URL.Path, oauthrs.MetadataPath))
		if !ok {
			httpguard.WriteError(w, http.StatusNotFound, "No MCP endpoint at "+strings.TrimPrefix(r.URL.Path, oauthrs.MetadataPath)+
				": the protected-resource metadata is at "+oauthrs.MetadataPath+" followed by an endpoint's path (/mcp, /mcp/servers/{id}, /mcp/presets/{id})")
			return
		}
		httpguard.WriteJSON(w, http.StatusOK, m)
	})
}
