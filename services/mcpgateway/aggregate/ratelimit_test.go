package aggregate

import (
	"encoding/json"
	"testing"

	"github.com/zestmcp/zest/lib/ratelimit"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/proto"
)

// TestToolCallOverTheServerRateLimit: a preset's tools/call is held to its server's
// rate_limit as /mcp/servers/{id} is: over it, a JSON-RPC error with ratelimit.JSONRPCCode.
func TestToolCallOverTheServerRateLimit(t *testing.T) {
	f := newFixture(t, "")
	alpha, err := f.reg.GetServer(t.Context(), "alpha")
	if err != nil {
		t.Fatal(err)
	}
	limited := &mcpgatewayv1.ServerConfig{Id: "limited", Transport: alpha.GetTransport(), Url: alpha.GetUrl(), Enabled: proto.Bool(true), Expose: proto.Bool(true), TimeoutMs: proto.Int32(5000), RateLimit: proto.String("1/h")}
	if err := f.reg.PutServer(t.Context(), limited); err != nil {
		t.Fatal(err)
	}
	if err := f.reg.PutPreset(t.Context(), &mcpgatewayv1.Preset{Id: "limited", McpServerIds: []string{"limited"}}); err != nil {
		t.Fatal(err)
	}
	api := withKey(t.Context(), testKeys.API)
	sess, _ := f.open(t, api, "limited")
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mcp_limited__echo","arguments":{"message":"hi"}}}`
	if r := f.result(t, api, "limited", sess, call); r["isError"] == true {
		t.Fatalf("first call: %v", r)
	}
	_, msgs, err := f.exchange(api, "limited", sess, call)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("second call: %q %v", msgs, err)
	}
	var r struct {
		Error struct {
			Code int `json:"code"`
			Data struct {
				RetryAfterMs int64 `json:"retry_after_ms"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msgs[0], &r); err != nil || r.Error.Code != ratelimit.JSONRPCCode || r.Error.Data.RetryAfterMs < 3599_000 {
		t.Fatalf("over the limit: %s", msgs[0])
	}
}
