package jsonrpcerr

import (
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/zestmcp/zest/lib/ratelimit"
)

// TestShapes: every body is a JSON-RPC error response with id null; a failure (5xx) is
// Internal Error, a refusal Invalid Request; a limit carries ratelimit.JSONRPCCode and the wait.
func TestShapes(t *testing.T) {
	for _, c := range []struct {
		name  string
		write func(*httptest.ResponseRecorder)
		code  int
		body  string
	}{
		{"refusal", func(w *httptest.ResponseRecorder) { WriteStatus(w, 404, "No route") }, 404,
			`{"error":{"code":-32600,"message":"No route"},"id":null,"jsonrpc":"2.0"}`},
		{"failure", func(w *httptest.ResponseRecorder) { WriteStatus(w, 503, "down") }, 503,
			`{"error":{"code":-32603,"message":"down"},"id":null,"jsonrpc":"2.0"}`},
		{"parse error", func(w *httptest.ResponseRecorder) { Write(w, 400, ParseError, "bad") }, 400,
			`{"error":{"code":-32700,"message":"bad"},"id":null,"jsonrpc":"2.0"}`},
		{"limited", func(w *httptest.ResponseRecorder) { WriteLimited(w, "slow down", 1500) }, 429,
			`{"error":{"code":` + strconv.Itoa(ratelimit.JSONRPCCode) + `,"data":{"retry_after_ms":1500},"message":"slow down"},"id":null,"jsonrpc":"2.0"}`},
	} {
		w := httptest.NewRecorder()
		c.write(w)
		if w.Code != c.code || w.Header().Get("Content-Type") != "application/json" || w.Body.String() != c.body+"\n" {
			t.Errorf("%s: %d %q %s", c.name, w.Code, w.Header().Get("Content-Type"), w.Body)
		}
	}
}
