package upstream

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/zestmcp/zest/lib/mcptest"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/proto"
)

// TestGenericCallsRefuseToolsCall: a tools/call reaches a server only through the tool-call
// pipeline's dispatch (DispatchToolCall, ResumeToolCall); every generic call refuses it with
// ErrBypass before anything is sent, and passes other methods on.
func TestGenericCallsRefuseToolsCall(t *testing.T) {
	u := mcptest.Start(t, mcptest.Options{})
	m := New(nil, nil, nil)
	t.Cleanup(func() { m.Close(t.Context()) })
	cfg := &mcpgatewayv1.ServerConfig{Id: "echo", Transport: "streamable-http", Url: u.URL, Enabled: proto.Bool(true), TimeoutMs: proto.Int32(5000)}
	params, _ := json.Marshal(map[string]any{"name": "echo", "arguments": map[string]string{"text": "hi"}})
	for name, call := range map[string]func() error{
		"Call":     func() error { _, err := m.Call(t.Context(), cfg, "tools/call", params, 0); return err },
		"CallWith": func() error { _, err := m.CallWith(t.Context(), cfg, "tools/call", params, 0, Hooks{}); return err },
		"CallProgress": func() error {
			_, err := m.CallProgress(t.Context(), cfg, "tools/call", params, 0, func([]byte) {})
			return err
		},
		"Resume": func() error { _, err := m.Resume(t.Context(), cfg, "tools/call", "t:1", nil, Hooks{}); return err },
	} {
		if err := call(); !errors.Is(err, ErrBypass) {
			t.Errorf("%s of tools/call: %v, want ErrBypass", name, err)
		}
	}
	if got := u.ToolCalls(); len(got) != 0 {
		t.Fatalf("the server got tool calls %v", got)
	}
	if _, err := m.Call(t.Context(), cfg, "tools/list", nil, 0); err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if raw, err := m.DispatchToolCall(t.Context(), cfg, params, 0, Hooks{}); err != nil || len(u.ToolCalls()) != 1 {
		t.Fatalf("the dispatch: %s %v (server got %v)", raw, err, u.ToolCalls())
	}
}
