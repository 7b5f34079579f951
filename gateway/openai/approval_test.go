package openai

import (
	"encoding/json"
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// TestApprovalEvents: a call that waits for approval reaches streaming clients as an
// approval_required zest_event naming the approval; its result and record say how it was decided.
func TestApprovalEvents(t *testing.T) {
	call := &mcpgatewayv1.ToolCallRecord{Round: 1, Id: "call_1", Name: "mcp_fs__rm", ServerId: "fs", Arguments: `{"p":"/x"}`}
	got, _ := json.Marshal(eventJSON(&mcpgatewayv1.ToolEvent{Type: "approval_required", Call: call, ApprovalId: "ab12",
		ApprovalExpires: "2026-12-02T01:05:00.000Z", Message: "waits"}))
	want := `{"approval_id":"ab12","arguments":"{\"p\":\"/x\"}","expires":"2026-12-02T01:05:00.000Z","id":"call_1","message":"waits","name":"mcp_fs__rm","round":1,"server_id":"fs","type":"approval_required"}`
	if string(got) != want {
		t.Fatalf("approval_required\n%s\nwant\n%s", got, want)
	}
	call.Approval, call.IsError = "denied", true
	res := eventJSON(&mcpgatewayv1.ToolEvent{Type: "tool_result", Call: call})
	recs := recordsJSON([]*mcpgatewayv1.ToolCallRecord{call, {Id: "call_2"}})
	if res["approval"] != "denied" || recs[0]["approval"] != "denied" || recs[1]["approval"] != nil {
		t.Fatalf("result %v, records %v", res, recs)
	}
}
