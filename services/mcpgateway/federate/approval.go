package federate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

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
	case !relays(cl).Elicitation:
		h.log.InfoContext(ctx, "tool call refused", "server", id, "tool", tool, "reason", "approval required, no elicitation")
		return noElicitation(msg.ID, id, tool)
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
	ask, _ := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": h.sessions.SignRelay(sessionID, id, approvalRef+a.GetId()),
		"method": upstream.MethodElicitation, "params": elicitation(a)})
	h.log.InfoContext(ctx, "tool call waits for approval", "server", id, "tool", tool, "approval", a.GetId(), "via", "elicitation")
	out.note(ask)
	d, err := h.Approvals.Wait(ctx, a)
	switch {
	case err != nil && ctx.Err() == nil:
		return mcpserve.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, h.failure(ctx, id, "reading the approval of a tool of", err))
	}
	h.log.InfoContext(ctx, "tool call approval decided", "server", id, "tool", tool, "approval", a.GetId(), "state", d.GetState())
	return h.outcome(msg, d)
}

// elicitation is the elicitation/create params that ask for approval a.
func elicitation(a *mcpgatewayv1.Approval) map[string]any {
	shown := a.GetArguments()
	if len(shown) > 2000 {
		shown = activityCut(shown, 2000) + "…"
	}
	return map[string]any{
		"message": fmt.Sprintf("Zest asks before running a tool that requires approval.\nMCP server: %s\nTool: %s\nArguments: %s\nAccept to run it; decline to refuse. Without an answer by %s it is not run.",
			a.GetServerId(), a.GetTool(), shown, a.GetExpires()),
		"requestedSchema": approvalSchema}
}

// outcome is the answer to a call whose approval d was decided: nil (go on) when approved,
// else an isError result saying why it did not run.
func (h *Handler) outcome(msg mcpserve.Message, d *mcpgatewayv1.Approval) []byte {
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

// noElicitation is the refusal of a call that needs approval from a client that cannot be asked.
func noElicitation(id json.RawMessage, server, tool string) []byte {
	return refused(id, fmt.Sprintf("The tool call was not run: tool %q of MCP server %q requires approval (the server's approval setting), and this MCP client did not declare the elicitation capability, so its user cannot be asked. "+
		"Use an MCP client that supports elicitation, or ask an administrator to run it (the admin API's POST /internal/mcp/servers/%s/tools/call, or a chat, which waits for an administrator's approval).",
		tool, server, server))
}

// approvalKey is the inputRequests key of the approval's elicitation in an input_required
// result (MCP 2026-07-28).
const approvalKey = "zest-approval"

// ModernRelays are the server requests a client of MCP 2026-07-28 accepts, from its request's
// params as it sent them (their _meta clientCapabilities).
func ModernRelays(clientParams json.RawMessage) upstream.Relays { return relaysOfMeta(clientParams) }

// ApproveModern is Approve for a request of MCP 2026-07-28 (no session), whose client accepts
// relays (its _meta clientCapabilities): the first request of a tool that requires approval
// gets an input_required result whose inputRequests ask for it ("zest-approval", an
// elicitation/create) and whose requestState, signed, names the approval (kept in the
// registry, so the retry may reach any replica); the retry's inputResponses decide it. It
// returns the answer to send instead of the call, or nil and the params to forward (the
// retry's without requestState and inputResponses, which were Zest's own).
func (h *Handler) ApproveModern(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, tool, chatName string, relays upstream.Relays, msg mcpserve.Message, params json.RawMessage) ([]byte, json.RawMessage) {
	if !serverconfig.NeedsApproval(cfg, tool) {
		return nil, params
	}
	id := cfg.GetId()
	if h.Approvals == nil {
		return refused(msg.ID, fmt.Sprintf("The tool call was not run: tool %q of MCP server %q requires approval, and this mcpgateway cannot ask for one.", tool, id)), nil
	}
	var p map[string]json.RawMessage
	_ = json.Unmarshal(params, &p)
	var state string
	_ = json.Unmarshal(p["requestState"], &state)
	if strings.HasPrefix(state, session.StatePrefix) {
		st, err := h.sessions.OpenState(state, id, msg.Method, time.Now())
		if err != nil {
			return mcpserve.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, "Invalid params: "+err.Error()), nil
		}
		if approvalID, ok := strings.CutPrefix(st.Call, approvalRef); ok {
			return h.resumeApproval(ctx, id, tool, approvalID, msg, p)
		}
	}
	if !relays.Elicitation {
		h.log.InfoContext(ctx, "tool call refused", "server", id, "tool", tool, "reason", "approval required, no elicitation")
		return noElicitation(msg.ID, id, tool), nil
	}
	args := string(p["arguments"])
	if args == "" || args == "null" {
		args = "{}"
	}
	a, err := h.Approvals.Open(ctx, approval.Request{Server: id, Tool: tool, ChatName: chatName, Arguments: args})
	if errors.Is(err, approval.ErrTooMany) {
		return refused(msg.ID, "The tool call was not run: it needs approval, and "+err.Error()+"."), nil
	}
	if err != nil {
		return mcpserve.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, h.failure(ctx, id, "asking approval for a tool of", err)), nil
	}
	// Nobody waits on this replica: the retry decides (or an administrator, before it).
	h.Approvals.Release(a.GetId())
	exp, _ := time.Parse(time.RFC3339Nano, a.GetExpires())
	st := session.InputState{Server: id, Method: msg.Method, Call: approvalRef + a.GetId(), Refs: map[string]string{approvalKey: approvalRef + a.GetId()}, Expires: exp.Unix()}
	res, _ := json.Marshal(map[string]any{"resultType": mcp.ResultTypeInputRequired, "requestState": h.sessions.SignState(st),
		"inputRequests": map[string]any{approvalKey: map[string]any{"method": upstream.MethodElicitation, "params": elicitation(a)}}})
	h.log.InfoContext(ctx, "tool call asks for approval", "server", id, "tool", tool, "approval", a.GetId(), "via", "input_required")
	return mcpserve.Result(msg.ID, res), nil
}

// resumeApproval decides approval id by the retry's inputResponses (p, its params) and
// answers as Approve does; the approval is forgotten then.
func (h *Handler) resumeApproval(ctx context.Context, server, tool, id string, msg mcpserve.Message, p map[string]json.RawMessage) ([]byte, json.RawMessage) {
	var responses map[string]json.RawMessage
	_ = json.Unmarshal(p["inputResponses"], &responses)
	answer, ok := responses[approvalKey]
	if !ok {
		return mcpserve.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, fmt.Sprintf("Invalid params: inputResponses has no answer to input request %q; answer every request of the input_required result", approvalKey)), nil
	}
	a, err := h.Approvals.Get(ctx, id)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		return mcpserve.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, "Invalid params: requestState names an approval that is no longer kept (decided and forgotten, or expired); send the request again without it"), nil
	case err != nil:
		return mcpserve.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, h.failure(ctx, server, "reading the approval of a tool of", err)), nil
	case a.GetTool() != tool:
		return mcpserve.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, fmt.Sprintf("Invalid params: requestState was issued for tool %q, not %q; send the request again without it", a.GetTool(), tool)), nil
	}
	approve, reason, bad := elicitationAnswer(answer, "")
	if bad != "" {
		return mcpserve.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, "Invalid params: inputResponses."+approvalKey+": "+bad), nil
	}
	d, err := h.Approvals.Decide(ctx, id, approve, reason)
	if err != nil && !errors.Is(err, approval.ErrDecided) { // decided first (an administrator, the expiry): that stands
		return mcpserve.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, h.failure(ctx, server, "deciding the approval of a tool of", err)), nil
	}
	if d.GetState() == registry.ApprovalPending { // past its expiry, undecided
		d.State = registry.ApprovalExpired
	}
	h.Approvals.Forget(ctx, id)
	h.log.InfoContext(ctx, "tool call approval decided", "server", server, "tool", tool, "approval", id, "state", d.GetState())
	if held := h.outcome(msg, d); held != nil {
		return held, nil
	}
	delete(p, "requestState")
	delete(p, "inputResponses")
	fwd, _ := json.Marshal(p)
	return nil, fwd
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
	approve, reason, bad := elicitationAnswer(result, errMsg)
	if bad != "" {
		return mcpserve.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, "Invalid params: "+bad)
	}
	if _, err := c.h.Approvals.Decide(ctx, id, approve, reason); err != nil {
		return mcpserve.ErrorResponse(msg.ID, mcp.INVALID_REQUEST, "Invalid Request: the approval this answers is no longer pending: "+err.Error())
	}
	return nil
}

// elicitationAnswer reads the answer to an approval's elicitation (its result, or the message
// of its error): accept approves; decline, cancel and an error deny, with why. bad says what
// is wrong with a result that is none of these.
func elicitationAnswer(result json.RawMessage, errMsg string) (approve bool, reason, bad string) {
	var r struct {
		Action string `json:"action"`
	}
	switch {
	case errMsg != "":
		reason = "the MCP client answered the elicitation with an error: " + errMsg
	case json.Unmarshal(result, &r) != nil:
		return false, "", `an elicitation result is an object such as {"action":"accept"}`
	case r.Action == "accept":
		return true, "", ""
	case r.Action == "decline", r.Action == "cancel":
		reason = "the MCP client's user chose " + r.Action
	default:
		return false, "", fmt.Sprintf(`the elicitation's action %q is none of "accept", "decline", "cancel"`, strings.ToValidUTF8(r.Action, ""))
	}
	return false, activityCut(reason, approval.MaxReason), ""
}
