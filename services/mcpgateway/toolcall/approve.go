package toolcall

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/approval"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
)

// Approvals. A call of a tool that needs approval (serverconfig.NeedsApproval) waits for a
// person's decision before the limits and the dispatch. The approval records the server, the
// tool and a hash of the call's canonical arguments (ArgumentsHash), so that it covers that
// call only. Who decides is the server's approval_by:
//
//   - "admin" (the default): only the admin key decides (the console, zestctl,
//     POST /internal/mcp/approvals/{id}/approve). The call is held on every path: the chat tells
//     its client with an event, an MCP client sees its request wait, the admin API's call waits.
//   - "client": an MCP client's user decides through elicitation (the session era: on the
//     call's stream, and the call waits for the answer) or input_required (2026-07-28: the
//     request ends, and the retry carries the answer and the approval it answers). A retry whose
//     server, tool or arguments differ from the approval's is refused. A client without
//     elicitation is refused at once. Chats and the admin API have no client to ask: their
//     calls wait for an administrator.

// Approver is how an entry point involves its caller in an approval.
type Approver interface {
	// Held tells the caller that the call waits for an administrator's decision on a (the
	// chat's approval_required event). It must not block.
	Held(ctx context.Context, a *mcpgatewayv1.Approval)
}

// ClientAsker is an Approver whose caller is an MCP client, which may decide itself when the
// server's approval_by is "client".
type ClientAsker interface {
	Approver
	// ClientCanDecide reports whether the client can be asked (it declared elicitation).
	ClientCanDecide() bool
	// AskClient asks the client to decide a. It returns the answer that ends the request now
	// (an input_required result: the retry decides), or nil when it asked on the call's
	// stream and the client's answer, POSTed later, decides while the call waits.
	AskClient(ctx context.Context, a *mcpgatewayv1.Approval) []byte
}

// approve is the approval link: nil, nil when the call may go on; an answer to end the
// request with now; or why it must not run.
func (p *Pipeline) approve(ctx context.Context, c *Call, cfg *mcpgatewayv1.ServerConfig) (json.RawMessage, error) {
	if !serverconfig.NeedsApproval(cfg, c.Tool) {
		return nil, nil
	}
	id, tool := cfg.GetId(), c.Tool
	args := Arguments(c.Params)
	sum := ArgumentsHash(args)
	if c.Retry != nil && c.Retry.Approval != "" {
		return nil, p.resumeApproval(ctx, c, cfg, sum)
	}
	if p.gate == nil {
		return nil, &ApprovalError{State: ApprovalUnavailable,
			Text: fmt.Sprintf("The tool call was not run: tool %q of MCP server %q requires approval, and this mcpgateway cannot ask for one.", tool, id)}
	}
	by := serverconfig.ApprovalBy(cfg)
	asker, _ := c.Approver.(ClientAsker)
	byClient := by == serverconfig.ApprovalByClient && asker != nil
	if byClient && !asker.ClientCanDecide() {
		p.log.InfoContext(ctx, "tool call refused", "server", id, "tool", tool, "reason", "approval by the client, which has no elicitation")
		return nil, &ApprovalError{State: ApprovalNoClient, Text: fmt.Sprintf("The tool call was not run: tool %q of MCP server %q requires approval by the MCP client's user (the server's approval_by), "+
			"and this MCP client did not declare the elicitation capability, so its user cannot be asked. Use an MCP client that supports elicitation, "+
			"or ask an administrator to run it (POST /internal/mcp/servers/%s/tools/call, or a chat).", tool, id, id)}
	}
	decider := serverconfig.ApprovalByAdmin
	if byClient {
		decider = serverconfig.ApprovalByClient
	}
	a, err := p.gate.Open(ctx, approval.Request{Server: id, Tool: tool, ChatName: c.ChatName, Arguments: string(args), ArgumentsHash: sum,
		Preset: c.Preset, CallID: c.CallID, By: decider})
	if errors.Is(err, approval.ErrTooMany) {
		return nil, &ApprovalError{State: ApprovalTooMany, Text: "The tool call was not run: it needs approval, and " + err.Error() + "."}
	}
	if err != nil {
		return nil, fmt.Errorf("asking approval for a tool of %q: %w", id, err)
	}
	if byClient {
		if answer := asker.AskClient(ctx, a); answer != nil {
			p.gate.Release(a.GetId()) // nobody waits here: the retry decides
			p.log.InfoContext(ctx, "tool call asks the client for approval", "server", id, "tool", tool, "approval", a.GetId(), "via", "input_required")
			return answer, nil
		}
		p.log.InfoContext(ctx, "tool call waits for approval", "server", id, "tool", tool, "approval", a.GetId(), "by", decider)
	} else {
		p.log.InfoContext(ctx, "tool call waits for approval", "server", id, "tool", tool, "approval", a.GetId(), "by", decider)
		if c.Approver != nil {
			c.Approver.Held(ctx, a)
		}
	}
	d, err := p.gate.Wait(ctx, a)
	if err != nil {
		return nil, fmt.Errorf("reading the approval of a tool of %q: %w", id, err)
	}
	p.log.InfoContext(ctx, "tool call approval decided", "server", id, "tool", tool, "approval", a.GetId(), "state", d.GetState(), "by", d.GetDecidedBy())
	return nil, p.decided(d)
}

// resumeApproval decides, by a client's retry, the approval its requestState named: only one
// a client decides, given for this server, tool and arguments (sum).
func (p *Pipeline) resumeApproval(ctx context.Context, c *Call, cfg *mcpgatewayv1.ServerConfig, sum string) error {
	id := c.Retry.Approval
	if p.gate == nil {
		return &ApprovalError{State: ApprovalUnavailable, Approval: id, Text: "The tool call was not run: this mcpgateway holds no approvals."}
	}
	a, err := p.gate.Get(ctx, id)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		return &ApprovalError{State: ApprovalNotAsked, Approval: id,
			Text: "requestState names an approval that is no longer kept (decided and forgotten, or expired); send the request again without it"}
	case err != nil:
		return fmt.Errorf("reading the approval of a tool of %q: %w", cfg.GetId(), err)
	case a.GetServerId() != cfg.GetId() || a.GetTool() != c.Tool || a.GetArgumentsSha256() != sum:
		p.log.WarnContext(ctx, "tool call refused", "server", cfg.GetId(), "tool", c.Tool, "approval", id, "reason", "a retry for another call than the approval's")
		return &ApprovalError{State: ApprovalMismatch, Approval: id,
			Text: fmt.Sprintf("requestState was issued for a call of tool %q with other arguments: an approval covers the call it showed, with its arguments, only; send the request again without it", a.GetTool())}
	case a.GetApprovalBy() != serverconfig.ApprovalByClient:
		return &ApprovalError{State: ApprovalNotAsked, Approval: id,
			Text: "requestState names an approval that an administrator decides, not the client; send the request again without it"}
	}
	approve, reason, bad := ElicitationDecision(c.Retry.Answer, "")
	if bad != "" {
		return &ApprovalError{State: ApprovalMismatch, Approval: id, Text: "the answer to the approval's input request: " + bad}
	}
	d, err := p.DecideByClient(ctx, id, approve, reason)
	if err != nil && !errors.Is(err, approval.ErrDecided) { // decided first (an administrator, the expiry): that stands
		return fmt.Errorf("deciding the approval of a tool of %q: %w", cfg.GetId(), err)
	}
	if d.GetState() == registry.ApprovalPending { // past its expiry, undecided
		d.State = registry.ApprovalExpired
	}
	p.gate.Forget(ctx, id)
	p.log.InfoContext(ctx, "tool call approval decided", "server", cfg.GetId(), "tool", c.Tool, "approval", id, "state", d.GetState())
	return p.decided(d)
}

// DecideByClient decides approval id as an MCP client's user answered it (its elicitation's
// answer, or a retry's), and records the decision in the audit trail.
func (p *Pipeline) DecideByClient(ctx context.Context, id string, approve bool, reason string) (*mcpgatewayv1.Approval, error) {
	began := time.Now()
	d, err := p.gate.Decide(ctx, id, approve, reason)
	action := "client_deny_tool_call"
	if approve {
		action = "client_approve_tool_call"
	}
	p.audit.Admin(ctx, action, id, d.GetServerId(), err, time.Since(began), nil)
	return d, err
}

// decided is nil for an approved call, else why it was not run.
func (p *Pipeline) decided(d *mcpgatewayv1.Approval) error {
	e := &ApprovalError{State: d.GetState(), Approval: d.GetId()}
	switch d.GetState() {
	case registry.ApprovalApproved:
		return nil
	case registry.ApprovalDenied:
		if d.GetApprovalBy() == serverconfig.ApprovalByClient {
			e.Text = fmt.Sprintf("The tool call was not run: it was declined (approval_denied%s).", because(d.GetReason()))
		} else {
			e.Text = fmt.Sprintf("The tool call was not run: an administrator denied it (approval_denied)%s. Do not call it again with the same arguments; tell the user.", because(d.GetReason()))
		}
	case registry.ApprovalExpired:
		e.Text = fmt.Sprintf("The tool call was not run: nobody approved it within %v (approval_expired; ZEST_APPROVAL_TIMEOUT).", p.gate.Timeout())
	case registry.ApprovalWithdrawn:
		e.Text = "The tool call was not run: the request ended before a decision (approval withdrawn)."
	default:
		e.Text = "The tool call was not run: " + d.GetReason() + " (approval " + d.GetState() + ")."
	}
	return e
}

func because(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}

// Arguments are the arguments of tools/call params as JSON text ({} when absent or null).
func Arguments(params json.RawMessage) json.RawMessage {
	var p struct {
		Arguments json.RawMessage `json:"arguments"`
	}
	_ = json.Unmarshal(params, &p)
	if a := bytes.TrimSpace(p.Arguments); len(a) > 0 && string(a) != "null" {
		return a
	}
	return json.RawMessage(`{}`)
}

// ArgumentsHash is the hex SHA-256 of arguments in canonical JSON: members sorted by key, no
// white space, numbers and strings as the client wrote them. Two calls with the same
// arguments in another order or spacing hash alike; any other difference does not.
func ArgumentsHash(args json.RawMessage) string {
	canon := args
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) == nil {
		if b, err := json.Marshal(v); err == nil { // encoding/json sorts map keys
			canon = b
		}
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

// ElicitationDecision reads a client's answer to an approval's elicitation (its result, or
// the message of its error): accept approves; decline, cancel and an error deny, with why. bad
// says what is wrong with a result that is none of these.
func ElicitationDecision(result json.RawMessage, errMsg string) (approve bool, reason, bad string) {
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
	if len(reason) > approval.MaxReason {
		reason = reason[:approval.MaxReason]
		reason = strings.ToValidUTF8(reason, "")
	}
	return false, reason, ""
}
