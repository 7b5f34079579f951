package federate

import (
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/services/mcpgateway/approval"
	"github.com/zestmcp/zest/services/mcpgateway/jsonrpc"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
)

// TestAnswerApproval: an elicitation's answer decides its approval: accept approves, decline,
// cancel and an error deny with why; an unknown action is refused and decides nothing; an
// answer to an approval no longer pending is refused.
func TestAnswerApproval(t *testing.T) {
	reg, err := registry.Open(filepath.Join(t.TempDir(), "registry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	gate := approval.New(reg, time.Minute, nil)
	tools := toolcall.New(toolcall.Config{}, reg, nil, testKeys, toolcall.WithApprovals(gate))
	c := &call{h: New(reg, nil, tools, nil, reg, testKeys, slog.New(slog.NewTextHandler(io.Discard, nil)))}
	msg := jsonrpc.Message{ID: json.RawMessage(`"zr.x"`)}
	for _, tc := range []struct {
		result, errMsg, state, reason, bad string
	}{
		{result: `{"action":"maybe"}`, bad: `the elicitation's action \"maybe\" is none of`},
		{result: `[1]`, bad: `an elicitation result is an object`},
		{result: `{"action":"accept","content":{}}`, state: "approved"},
		{result: `{"action":"decline"}`, state: "denied", reason: "the MCP client's user chose decline"},
		{result: `{"action":"cancel"}`, state: "denied", reason: "the MCP client's user chose cancel"},
		{errMsg: "no handler", state: "denied", reason: "the MCP client answered the elicitation with an error: no handler"},
	} {
		a, err := gate.Open(t.Context(), approval.Request{Server: "fs", Tool: "rm"})
		if err != nil {
			t.Fatal(err)
		}
		resp := c.answerApproval(t.Context(), a.GetId(), msg, json.RawMessage(tc.result), tc.errMsg)
		got, _ := reg.GetApproval(t.Context(), a.GetId())
		if tc.bad != "" {
			if !strings.Contains(string(resp), tc.bad) || got.GetState() != "pending" {
				t.Errorf("%s: %s, state %s", tc.result, resp, got.GetState())
			}
			_, _ = gate.Decide(t.Context(), a.GetId(), false, "")
			continue
		}
		if resp != nil || got.GetState() != tc.state || got.GetReason() != tc.reason {
			t.Errorf("%s %s: %s, approval %v", tc.result, tc.errMsg, resp, got)
		}
		if again := c.answerApproval(t.Context(), a.GetId(), msg, json.RawMessage(`{"action":"accept"}`), ""); !strings.Contains(string(again), "no longer pending") {
			t.Errorf("a second answer: %s", again)
		}
	}
}
