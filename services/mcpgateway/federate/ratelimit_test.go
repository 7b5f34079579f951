package federate

import (
	"encoding/json"
	"testing"

	"github.com/zestmcp/zest/lib/mcptest"
	"github.com/zestmcp/zest/lib/ratelimit"
)

// TestToolCallOverTheServerRateLimit: a tools/call over its server's rate_limit is answered
// with a JSON-RPC error (ratelimit.JSONRPCCode, data.retry_after_ms) without reaching the
// server; other methods are not counted.
func TestToolCallOverTheServerRateLimit(t *testing.T) {
	u := mcptest.Start(t, mcptest.Options{})
	f := newFixture(t, u.URL)
	ctx := withKey(t.Context(), testKeys.API)
	sess, _ := f.open(t, ctx, "limited")
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	if _, msgs, err := f.exchange(ctx, "limited", sess, call); err != nil || len(msgs) != 1 || !json.Valid(msgs[0]) {
		t.Fatalf("first call: %q %v", msgs, err)
	}
	for range 3 { // not tools/call: not limited
		if _, msgs, err := f.exchange(ctx, "limited", sess, `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`); err != nil || len(msgs) != 1 {
			t.Fatalf("tools/list: %q %v", msgs, err)
		}
	}
	_, msgs, err := f.exchange(ctx, "limited", sess, call)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("second call: %q %v", msgs, err)
	}
	var r struct {
		ID    int `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				RetryAfterMs int64  `json:"retry_after_ms"`
				Server       string `json:"server"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msgs[0], &r); err != nil || r.ID != 7 || r.Error.Code != ratelimit.JSONRPCCode || r.Error.Data.RetryAfterMs < 3599_000 ||
		r.Error.Data.Server != "limited" || r.Error.Message != `MCP server "limited" is over its rate_limit of 1 tool calls per hour: retry after 3600 s` {
		t.Fatalf("over the limit: %s", msgs[0])
	}
	if n := len(u.ToolCalls()); n != 1 {
		t.Fatalf("the server saw %d tool calls; want 1", n)
	}
}
