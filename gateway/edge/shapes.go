package edge

import (
	"net/http"
	"strings"

	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/gateway/mcphttp"
	"github.com/zestmcp/zest/gateway/openai"
)

// writeErrorFunc writes an error answer in one route family's shape.
type writeErrorFunc func(w http.ResponseWriter, code int, msg string)

// errorWriter returns the error shape of the route family path belongs to, for the answers
// the edge gives in a family's place (no route, a body that timed out): JSON-RPC under /mcp,
// the admin shape under /internal/mcp, OpenAI's under the four prefixes, Lemonade's
// {"error":"…"} elsewhere.
func errorWriter(path string) writeErrorFunc {
	switch {
	case under(path, "/mcp"):
		return mcphttp.WriteInvalidRequest
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

func under(path, root string) bool { return path == root || strings.HasPrefix(path, root+"/") }

// notFound answers a path no route serves, in the shape of the family it falls under.
func notFound(w http.ResponseWriter, r *http.Request) {
	noRoute(r.Context())
	errorWriter(r.URL.Path)(w, http.StatusNotFound, "No route for "+r.Method+" "+r.URL.Path)
}
