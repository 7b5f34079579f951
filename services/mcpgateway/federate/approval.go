package federate

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/activity"
	"github.com/zestmcp/zest/services/mcpgateway/jsonrpc"
	"github.com/zestmcp/zest/services/mcpgateway/session"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
)

// Approvals on the MCP endpoints: how an MCP client takes part in the approval link of the
// tool-call pipeline (package toolcall, approve.go, says who decides). A call an administrator
// decides waits, and a client that asked for progress is told so. A call the client decides
// (the server's approval_by is "client") asks the client's user: in a session, the call's
// stream carries an elicitation/create naming the server, the tool and the arguments, under a
// relay id signed for the session and the server whose ref names the approval (approvalRef),
// and the client's answer, POSTed to any replica, decides the approval in the registry; for a
// request of MCP 2026-07-28 (no session), the request ends with an input_required result whose
// signed requestState names the approval, and the retry carries the answer (CallTool).

// approvalRef prefixes the relay ref of an approval's elicitation (an upstream's refs never
// start with it: they are the tool host's or this replica's numbers).
const approvalRef = "approval:"

// approvalKey is the inputRequests key of the approval's elicitation in an input_required
// result (MCP 2026-07-28).
const approvalKey = "zest-approval"

// approvalSchema is the elicitation's requestedSchema: nothing to fill in, the answer is the
// action (accept runs the call).
var approvalSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// approver is the toolcall.ClientAsker of one tools/call of an MCP client.
type approver struct {
	c   *call
	msg jsonrpc.Message
	// progressToken is the client's token when it asked for progress (null: it did not).
	progressToken json.RawMessage
}

var _ toolcall.ClientAsker = (*approver)(nil)

// Held tells a client that asked for progress that the call waits for an administrator.
func (a *approver) Held(_ context.Context, ap *mcpgatewayv1.Approval) {
	if len(a.progressToken) == 0 {
		return
	}
	note, _ := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "method": "notifications/progress", "params": map[string]any{
		"progressToken": a.progressToken, "progress": 0,
		"message": fmt.Sprintf("waiting for an administrator's approval of %s on MCP server %s (approval %s, until %s)", ap.GetTool(), ap.GetServerId(), ap.GetId(), ap.GetExpires())}})
	a.c.out.note(note)
}

// ClientCanDecide reports whether the client declared elicitation (in its session, or in a
// modern request's _meta).
func (a *approver) ClientCanDecide() bool {
	if a.c.modern {
		return a.c.modernRelays.Elicitation
	}
	return relays(a.c.claims).Elicitation
}

// AskClient asks the client's user: an elicitation on the call's stream in a session (nil:
// the call waits for the answer), an input_required result for a modern request.
func (a *approver) AskClient(_ context.Context, ap *mcpgatewayv1.Approval) []byte {
	c := a.c
	id := c.cfg.GetId()
	if !c.modern {
		ask, _ := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": c.h.sessions.SignRelay(c.sessionID, id, approvalRef+ap.GetId()),
			"method": upstream.MethodElicitation, "params": elicitation(ap)})
		c.out.note(ask)
		return nil
	}
	exp, _ := time.Parse(time.RFC3339Nano, ap.GetExpires())
	st := session.InputState{Server: id, Method: a.msg.Method, Call: approvalRef + ap.GetId(), Refs: map[string]string{approvalKey: approvalRef + ap.GetId()}, Expires: exp.Unix()}
	res, _ := json.Marshal(map[string]any{"resultType": mcp.ResultTypeInputRequired, "requestState": c.h.sessions.SignState(st),
		"inputRequests": map[string]any{approvalKey: map[string]any{"method": upstream.MethodElicitation, "params": elicitation(ap)}}})
	return res
}

// elicitation is the elicitation/create params that ask for approval a.
func elicitation(a *mcpgatewayv1.Approval) map[string]any {
	shown := a.GetArguments()
	if len(shown) > 2000 {
		shown = activity.Cut(shown, 2000) + "…"
	}
	return map[string]any{
		"message": fmt.Sprintf("Zest asks before running a tool that requires approval.\nMCP server: %s\nTool: %s\nArguments: %s\nAccept to run it; decline to refuse. Without an answer by %s it is not run.",
			a.GetServerId(), a.GetTool(), shown, a.GetExpires()),
		"requestedSchema": approvalSchema}
}

// answerApproval decides the approval named by an elicitation's answer (the relay's ref past
// approvalRef): accept approves, decline and cancel deny, and so does a JSON-RPC error.
func (c *call) answerApproval(ctx context.Context, id string, msg jsonrpc.Message, result json.RawMessage, errMsg string) []byte {
	if c.h.tools.Approvals() == nil {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, "Internal error: this mcpgateway holds no approvals")
	}
	approve, reason, bad := toolcall.ElicitationDecision(result, errMsg)
	if bad != "" {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, "Invalid params: "+bad)
	}
	if _, err := c.h.tools.DecideByClient(ctx, id, approve, reason); err != nil {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_REQUEST, "Invalid Request: the approval this answers is no longer pending: "+err.Error())
	}
	return nil
}
