package federate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/approval"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"github.com/zestmcp/zest/services/mcpgateway/session"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
)

// Approvals on the MCP endpoints. A tools/call of a tool whose server requires approval
// (serverconfig.NeedsApproval) asks the client's user: the call's stream carries an
// elicitation/create naming the server, the tool and the arguments, under a relay id signed
// for the session and the server whose ref names the approval (approvalRef). The client's
// answer, POSTed to any replica, decides the approval in the registry (accept approves;
// decline, cancel or an error deny), which the waiting replica reads (package approval). A
// client that did not declare elicitation, or a request of MCP 2026-07-28 (no session), is
// refused with an isError result that says why and what else works.

// approvalRef prefixes the relay ref of an approval's elicitation (an upstream's refs never
// start with it: they are the tool host's or this replica's numbers).
const approvalRef = "approval:"

// approvalSchema is the elicitation's requestedSchema: nothing to fill in, the answer is the
// action (accept runs the call).
var approvalSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// refused is an isError tools/call result with text.
func refused(id json.RawMessage, text string) []byte {
	res, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}, "isError": true})
	return mcpserve.Result(id, res)
}

// Approve holds a tools/call of tool (its own name on cfg's server; chatName the name the
// client called) until the client's user approves it through elicitation, when its server
// requires approval. It returns nil when the call may go on, else the answer to send instead.
// sessionID and cl are the client's session ("" for a request of MCP 2026-07-28).
func (h *Handler) Approve(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, tool, chatName, sessionID string, cl session.Claims, out *Output, msg mcpserve.Message, params json.RawMessage) []byte {
	if !serverconfig.NeedsApproval(cfg, tool) {
		return nil
	}
	id := cfg.GetId()
	switch {
	case h.Approvals == nil:
		return refused(msg.ID, fmt.Sprintf("The tool call was not run: tool %q of MCP server %q requires approval, and this mcpgateway cannot ask for one.", tool, id))
	case sessionID == "" || !relays(cl).Elicitation:
		why := "this MCP client did not declare the elicitation capability, so its user cannot be asked"
		if sessionID == "" {
			why = "this request of MCP 2026-07-28 has no session, and Zest asks for approval only through a session's elicitation"
		}
		h.log.InfoContext(ctx, "tool call refused", "server", id, "tool", tool, "reason", "approval required, no elicitation")
		return refused(msg.ID, fmt.Sprintf("The tool call was not run: tool %q of MCP server %q requires approval (the server's approval setting), and %s. "+
			"Use an MCP client that supports elicitation, or ask an administrator to run it (the admin API's POST /internal/mcp/servers/%s/tools/call, or a chat, which waits for an administrator's approval).",
			tool, id, why, id))
	}
	var p struct {
		Arguments json.RawMessage `json:"arguments"`
	}
	_ = json.Unmarshal(params, &p)
	args := string(p.Arguments)
	if args == "" || args == "null" {
		args = "{}"
	}
	a, err := h.Approvals.Open(ctx, approval.Request{Server: id, Tool: tool, ChatName: chatName, Arguments: args})
	if errors.Is(err, approval.ErrTooMany) {
		return refused(msg.ID, "The tool call was not run: it needs approval, and "+err.Error()+".")
	}
	if err != nil {
		return mcpserve.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, h.failure(ctx, id, "asking approval for a tool of", err))
	}
	shown := a.GetArguments()
	if len(shown) > 2000 {
		shown = activityCut(shown, 2000) + "…"
	}
	ask, _ := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": h.sessions.SignRelay(sessionID, id, approvalRef+a.GetId()),
		"method": upstream.MethodElicitation, "params": map[string]any{
			"message": fmt.Sprintf("Zest asks before running a tool that requires approval.\nMCP server: %s\nTool: %s\nArguments: %s\nAccept to run it; decline to refuse. Without an answer by %s it is not run.",
				id, tool, shown, a.GetExpires()),
			"requestedSchema": approvalSchema}})
	h.log.InfoContext(ctx, "tool call waits for approval", "server", id, "tool", tool, "approval", a.GetId(), "via", "elicitation")
	out.note(ask)
	d, err := h.Approvals.Wait(ctx, a)
	switch {
	case err != nil && ctx.Err() == nil:
		return mcpserve.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, h.failure(ctx, id, "reading the approval of a tool of", err))
	}
	h.log.InfoContext(ctx, "tool call approval decided", "server", id, "tool", tool, "approval", a.GetId(), "state", d.GetState())
	switch d.GetState() {
	case registry.ApprovalApproved:
		return nil
	case registry.ApprovalDenied:
		return refused(msg.ID, fmt.Sprintf("The tool call was not run: it was declined (approval_denied%s).", becauseOf(d.GetReason())))
	case registry.ApprovalExpired:
		return refused(msg.ID, fmt.Sprintf("The tool call was not run: nobody approved it within %v (approval_expired; ZEST_APPROVAL_TIMEOUT).", h.Approvals.Timeout()))
	}
	return refused(msg.ID, "The tool call was not run: the request ended before a decision (approval withdrawn).")
}

func becauseOf(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}

// activityCut cuts s to at most n bytes between characters.
func activityCut(s string, n int) string {
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:min(n, len(s))]
}

// answerApproval decides the approval named by an elicitation's answer (the relay's ref past
// approvalRef): accept approves, decline and cancel deny, and so does a JSON-RPC error.
func (c *call) answerApproval(ctx context.Context, id string, msg mcpserve.Message, result json.RawMessage, errMsg string) []byte {
	if c.h.Approvals == nil {
		return mcpserve.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, "Internal error: this mcpgateway holds no approvals")
	}
	var r struct {
		Action string `json:"action"`
	}
	approve, reason := false, ""
	switch {
	case errMsg != "":
		reason = "the MCP client answered the elicitation with an error: " + errMsg
	case json.Unmarshal(result, &r) != nil:
		return mcpserve.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, `Invalid params: an elicitation result is an object such as {"action":"accept"}`)
	case r.Action == "accept":
		approve = true
	case r.Action == "decline", r.Action == "cancel":
		reason = "the MCP client's user chose " + r.Action
	default:
		return mcpserve.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, fmt.Sprintf(`Invalid params: the elicitation's action %q is none of "accept", "decline", "cancel"`, strings.ToValidUTF8(r.Action, "")))
	}
	if _, err := c.h.Approvals.Decide(ctx, id, approve, activityCut(reason, approval.MaxReason)); err != nil {
		return mcpserve.ErrorResponse(msg.ID, mcp.INVALID_REQUEST, "Invalid Request: the approval this answers is no longer pending: "+err.Error())
	}
	return nil
}
