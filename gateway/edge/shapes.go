package edge

import (
	"errors"
	"net/http"
	"strings"

	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/gateway/openai"
	"github.com/zestmcp/zest/lib/jsonrpcerr"
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
func notFound(w http.ResponseWriter, r *http.Request) {
	noRoute(r.Context())
	msg := "No route for " + r.Method + " " + r.URL.Path
	if m, ok := httpguard.NoOAuthMessage(r.URL.Path); ok {
		msg = m
	}
	errorWriter(r.URL.Path)(w, http.StatusNotFound, msg)
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
