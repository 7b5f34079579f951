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
	"github.com/zestmcp/zest/services/mcpgateway/jsonrpc"
	"github.com/zestmcp/zest/services/mcpgateway/mcpera"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve"
	"github.com/zestmcp/zest/services/mcpgateway/session"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
)

// ToolCall is one tools/call of an MCP client of a registered server, as /mcp/servers/{id}
// and /mcp/presets/{id} hand it to the tool-call pipeline (CallTool).
type ToolCall struct {
	Entry  toolcall.Entry
	Server *mcpgatewayv1.ServerConfig
	// Tool is the tool's own name on the server; Name is the one the client called (a
	// preset's chat_name).
	Tool, Name string
	Preset     string
	// Params are the params as the server gets them: their name is Tool, and a session-era
	// server's carry none of MCP 2026-07-28's _meta members.
	Params json.RawMessage
	// Modern marks a request of MCP 2026-07-28; ClientParams are its params as the client
	// sent them (its _meta capabilities, requestState and inputResponses).
	Modern       bool
	ClientParams json.RawMessage
}

// CallTool runs tc for the client of session sessionID (with claims cl; "" for a modern
// request) through the tool-call pipeline and renders the answer with the client's id. What
// this transport adds to the pipeline is here: the call's progress and the server's requests
// relayed to the client (hooks), approvals asked of the client (approver), a modern client's
// retry that answers an input_required result (an approval, or a call parked on the server's
// request), cancellation by notifications/cancelled, and the words of every refusal. nil: the
// client cancelled the call (MCP's cancellation: no answer).
func (h *Handler) CallTool(ctx context.Context, sessionID string, cl session.Claims, out *Output, msg jsonrpc.Message, tc ToolCall) []byte {
	c := &call{h: h, cfg: tc.Server, sessionID: sessionID, claims: cl, out: out, modern: tc.Modern}
	params := tc.Params
	var retry *toolcall.Retry
	if tc.Modern {
		c.modernRelays = relaysOfMeta(tc.ClientParams)
		var bad []byte
		if retry, params, bad = c.retryOf(msg, tc.ClientParams, params); bad != nil {
			return bad
		}
	}
	if string(params) == "null" {
		params = nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	key, entry := c.sessionID+"\n"+string(msg.ID), &inflight{cancel: cancel}
	h.inflight.Store(key, entry)
	defer h.inflight.CompareAndDelete(key, entry)
	chat := ""
	if tc.Name != tc.Tool {
		chat = tc.Name
	}
	res, err := h.tools.Invoke(ctx, &toolcall.Call{Entry: tc.Entry, Server: tc.Server.GetId(), Tool: tc.Tool, ChatName: chat, Preset: tc.Preset,
		Params: params, Hooks: c.hooks(params), Approver: &approver{c: c, msg: msg, progressToken: progressToken(params)}, Retry: retry})
	switch {
	case err != nil && errors.Is(context.Cause(ctx), errCancelled):
		return nil // whatever the upstream path made of the cancellation
	case errors.Is(err, upstream.ErrRelayUnknown):
		return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, "Invalid params: requestState names a call that no longer waits ("+err.Error()+"); send the request again without it")
	}
	if refused, ok := mcpserve.ToolRefusal(msg.ID, tc.Name, err); ok {
		return refused
	}
	if h.unlisted(ctx, tc, err) {
		return mcpserve.UnknownTool(msg.ID, tc.Name)
	}
	return c.answer(ctx, msg, res, err)
}

// unlisted reports whether err is the server's refusal of a tool it does not list (-32602, a
// tools/list fetched again finds no tool of that name): the client then gets the words every
// endpoint has for an unknown tool, not the server's own (mcp-go's "tool 'x' not found: tool
// not found"). Only the error path asks the server for its list.
func (h *Handler) unlisted(ctx context.Context, tc ToolCall, err error) bool {
	var rpcErr *upstream.RPCError
	if !errors.As(err, &rpcErr) || rpcErr.Code != mcp.INVALID_PARAMS {
		return false
	}
	tools, lerr := h.up.ListTools(ctx, tc.Server, true)
	return lerr == nil && mcpera.Tool(tools, tc.Tool) == nil
}

// retryOf reads a modern client's retry from its params as it sent them (clientParams): a
// requestState Zest signed for this server and method names the approval it answers, or the
// parked call it resumes, and inputResponses carry the answers. It returns the retry (nil for
// a first request), the params to send on (without Zest's own requestState and
// inputResponses), or the answer that refuses a retry that cannot be taken.
func (c *call) retryOf(msg jsonrpc.Message, clientParams, params json.RawMessage) (*toolcall.Retry, json.RawMessage, []byte) {
	var p struct {
		RequestState   *string         `json:"requestState"`
		InputResponses json.RawMessage `json:"inputResponses"`
	}
	if json.Unmarshal(clientParams, &p) != nil {
		return nil, params, nil
	}
	// inputResponses, when present, is an object of results: anything else is a protocol
	// error, whatever the state (a session-era server would never see it).
	var responses map[string]json.RawMessage
	if len(p.InputResponses) > 0 {
		bad := json.Unmarshal(p.InputResponses, &responses) != nil || responses == nil
		for _, v := range responses {
			bad = bad || len(v) == 0 || v[0] != '{'
		}
		if bad {
			return nil, nil, jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, "Invalid params: inputResponses must be an object whose members are the client's results (objects), by the keys of inputRequests")
		}
	}
	if p.RequestState == nil || !strings.HasPrefix(*p.RequestState, session.StatePrefix) {
		return nil, params, nil // none, or the server's own (a server of 2026-07-28 asks its client itself)
	}
	st, err := c.h.sessions.OpenState(*p.RequestState, c.cfg.GetId(), msg.Method, time.Now())
	if err != nil {
		return nil, nil, jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, "Invalid params: "+err.Error())
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(params, &fields) == nil {
		delete(fields, "requestState")
		delete(fields, "inputResponses")
		params, _ = json.Marshal(fields)
	}
	if id, ok := strings.CutPrefix(st.Call, approvalRef); ok {
		answer, ok := responses[approvalKey]
		if !ok {
			return nil, nil, jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, fmt.Sprintf("Invalid params: inputResponses has no answer to input request %q; answer every request of the input_required result", approvalKey))
		}
		return &toolcall.Retry{Approval: id, Answer: answer}, params, nil
	}
	r := &toolcall.Retry{Parked: st.Call}
	for key, ref := range st.Refs {
		a, ok := responses[key]
		if !ok {
			return nil, nil, jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, fmt.Sprintf("Invalid params: inputResponses has no answer to input request %q; answer every request of the input_required result", key))
		}
		r.Answers = append(r.Answers, upstream.ClientAnswer{Ref: ref, Result: a})
	}
	return r, params, nil
}

// progressToken is params' _meta.progressToken (nil when the client asked for no progress).
func progressToken(params json.RawMessage) json.RawMessage {
	if !hasProgressToken(params) {
		return nil
	}
	var p struct {
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	return p.Meta.ProgressToken
}
