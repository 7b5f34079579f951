package upstream

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/zestmcp/zest/lib/mcptest"
	"github.com/zestmcp/zest/lib/ratelimit"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/proto"
)

// TestServerLimitsOnEveryEntry: max_concurrency and rate_limit hold on each way a tools/call
// reaches a server (Call and CallTool, CallWith, CallProgress), count all of them together,
// and leave other methods alone; a refusal is a *LimitError that is also the JSON-RPC error
// clients get.
func TestServerLimitsOnEveryEntry(t *testing.T) {
	u := mcptest.Start(t, mcptest.Options{})
	m := New(nil, nil, nil)
	t.Cleanup(func() { m.Close(t.Context()) })
	cfg := &mcpgatewayv1.ServerConfig{Id: "echo", Transport: "streamable-http", Url: u.URL, Enabled: proto.Bool(true), TimeoutMs: proto.Int32(5000), MaxConcurrency: proto.Int32(1)}
	params, _ := json.Marshal(map[string]any{"name": "echo", "arguments": map[string]string{"text": "hi"}})
	entries := map[string]func() error{
		"Call":     func() error { _, err := m.Call(t.Context(), cfg, "tools/call", params, 0); return err },
		"CallTool": func() error { _, err := m.CallTool(t.Context(), cfg, "echo", params, 0); return err },
		"CallWith": func() error { _, err := m.CallWith(t.Context(), cfg, "tools/call", params, 0, Hooks{}); return err },
		"CallProgress": func() error {
			_, err := m.CallProgress(t.Context(), cfg, "tools/call", params, 0, func([]byte) {})
			return err
		},
	}
	held, err := m.admit(cfg, "tools/call") // one call in flight
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range entries {
		var limited *LimitError
		if err := call(); !errors.As(err, &limited) || limited.Reason != ratelimit.ReasonConcurrency {
			t.Errorf("%s with max_concurrency calls in flight: %v", name, err)
		}
	}
	if _, err := m.Call(t.Context(), cfg, "tools/list", nil, 0); err != nil {
		t.Fatalf("tools/list is not a tool call: %v", err)
	}
	held()
	for name, call := range entries {
		if err := call(); err != nil {
			t.Errorf("%s once the call in flight ended: %v", name, err)
		}
	}

	// The rate: all entries draw on one bucket of the server.
	cfg = &mcpgatewayv1.ServerConfig{Id: "echo", Transport: "streamable-http", Url: u.URL, Enabled: proto.Bool(true), TimeoutMs: proto.Int32(5000), RateLimit: proto.String("4/h")}
	ok := 0
	for range 2 {
		for _, call := range entries {
			if call() == nil {
				ok++
			}
		}
	}
	if ok != 4 {
		t.Fatalf("%d of 8 calls passed a rate_limit of 4/h", ok)
	}
	err = entries["Call"]()
	var rpcErr *RPCError
	if !errors.As(err, &rpcErr) || rpcErr.Code != ratelimit.JSONRPCCode || Outcome(nil, err) != OutcomeRPCError {
		t.Fatalf("over the rate: %v", err)
	}
	var data struct {
		RetryAfterMs int64  `json:"retry_after_ms"`
		Reason       string `json:"reason"`
	}
	if json.Unmarshal(rpcErr.Data, &data) != nil || data.RetryAfterMs < 899_000 || data.Reason != ratelimit.ReasonRate {
		t.Fatalf("data %s", rpcErr.Data)
	}
}
