package federate

import (
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/approval"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/session"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
)

// TestApproveRefusesWhoCannotBeAsked: a tool that needs no approval goes on; one that does is
// refused, with why and what else works, for a client without elicitation (a session's or a
// request's of MCP 2026-07-28) and a replica without approvals.
func TestApproveRefusesWhoCannotBeAsked(t *testing.T) {
	reg, err := registry.Open(filepath.Join(t.TempDir(), "registry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	h := &Handler{log: slog.New(slog.NewTextHandler(io.Discard, nil)), Approvals: approval.New(reg, time.Minute, nil)}
	cfg := &mcpgatewayv1.ServerConfig{Id: "fs", ApprovalTools: []string{"rm"}}
	msg := mcpserve.Message{ID: json.RawMessage(`7`)}
	if held := h.Approve(t.Context(), cfg, "ls", "ls", "sid", session.Claims{}, nil, msg, nil); held != nil {
		t.Fatalf("a tool without approval was held: %s", held)
	}
	for name, c := range map[string]struct {
		h       *Handler
		sid     string
		relays  string
		message string
	}{
		"no elicitation": {h, "sid", "s", `tool \"rm\" of MCP server \"fs\" requires approval (the server's approval setting), and this MCP client did not declare the elicitation capability`},
		"no approvals":   {&Handler{log: h.log}, "sid", "e", "this mcpgateway cannot ask for one"},
	} {
		held := c.h.Approve(t.Context(), cfg, "rm", "fs_rm", c.sid, session.Claims{Relays: c.relays}, nil, msg, json.RawMessage(`{"name":"rm"}`))
		if s := string(held); !strings.Contains(s, `"isError":true`) || !strings.Contains(s, c.message) || !strings.Contains(s, `"id":7`) {
			t.Errorf("%s: %s", name, held)
		}
		if name == "no elicitation" && !strings.Contains(string(held), "POST /internal/mcp/servers/fs/tools/call") {
			t.Errorf("%s: the admin API is not named: %s", name, held)
		}
	}
	// A request of MCP 2026-07-28 whose client does not accept elicitation.
	if held, _ := h.ApproveModern(t.Context(), cfg, "rm", "rm", upstream.Relays{Sampling: true}, msg, json.RawMessage(`{"name":"rm"}`)); !strings.Contains(string(held), "did not declare the elicitation capability") {
		t.Errorf("modern without elicitation: %s", held)
	}
	if p, _ := h.Approvals.Pending(t.Context()); len(p) != 0 {
		t.Fatalf("a refused call left an approval: %v", p)
	}
}

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
	c := &call{h: &Handler{log: slog.New(slog.NewTextHandler(io.Discard, nil)), Approvals: gate}}
	msg := mcpserve.Message{ID: json.RawMessage(`"zr.x"`)}
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
