package federate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/jsonrpc"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"github.com/zestmcp/zest/services/mcpgateway/session"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
)

// call is one message of a session of /mcp/servers/{id}.
type call struct {
	h         *Handler
	cfg       *mcpgatewayv1.ServerConfig
	sessionID string
	claims    session.Claims
	out       *output
	// modern is set for a request of MCP 2026-07-28 (no session), whose client accepts
	// modernRelays (its _meta clientCapabilities); clientParams are its params as the client
	// sent them (a retry's requestState and inputResponses).
	modern       bool
	modernRelays upstream.Relays
	clientParams json.RawMessage
}

// capability names the capability a method needs of the upstream (and, for subscriptions,
// the flag inside it); methods not listed are forwarded as they are and answered by the
// upstream.
var capability = map[string][2]string{
	"tools/list": {"tools"}, "tools/call": {"tools"},
	"resources/list": {"resources"}, "resources/templates/list": {"resources"}, "resources/read": {"resources"},
	"resources/subscribe": {"resources", "subscribe"}, "resources/unsubscribe": {"resources", "subscribe"},
	"prompts/list": {"prompts"}, "prompts/get": {"prompts"},
	"completion/complete": {"completions"},
	"logging/setLevel":    {"logging"},
}

// declares reports whether the upstream's capabilities allow method.
func declares(caps map[string]any, method string) bool {
	need, ok := capability[method]
	if !ok {
		return true
	}
	c, ok := caps[need[0]]
	if !ok || c == nil {
		return false
	}
	if need[1] == "" {
		return true
	}
	m, _ := c.(map[string]any)
	flag, _ := m[need[1]].(bool)
	return flag
}

// logLevels are MCP's logging levels, least severe first.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// dispatch answers one message: the response to a request, nil for a notification or a
// client's response (accepted, HTTP 202), or an error response for a message that cannot be
// accepted.
func (c *call) dispatch(ctx context.Context, payload []byte, msg jsonrpc.Message) []byte {
	if msg.JSONRPC != mcp.JSONRPC_VERSION {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_REQUEST, `Invalid Request: "jsonrpc" must be "2.0"`)
	}
	if !msg.IsRequest() {
		switch {
		case msg.Method == "notifications/cancelled":
			c.cancelled(payload)
		case msg.Method == "":
			return c.clientAnswer(ctx, payload, msg)
		}
		// notifications/initialized and roots/list_changed are accepted and go no further.
		return nil
	}
	params, bad := jsonrpc.Params(msg)
	if bad != nil {
		return bad
	}
	switch msg.Method {
	case "ping":
		return jsonrpc.Result(msg.ID, json.RawMessage(`{}`))
	case "server/discover": // protocol 2026-07-28 is a later slice: its probe is unknown, as on /mcp
		return jsonrpc.ErrorResponse(msg.ID, mcp.METHOD_NOT_FOUND, "Method not found: server/discover")
	}
	// Connected on demand (not yet on this replica, after a restart, or reconfigured).
	inf, err := c.h.up.Info(ctx, c.cfg)
	if err != nil {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, c.h.failure(ctx, c.cfg.GetId(), "connecting", err))
	}
	if !declares(inf.Capabilities, msg.Method) {
		return jsonrpc.ErrorResponse(msg.ID, mcp.METHOD_NOT_FOUND, fmt.Sprintf("Method not found: %s (MCP server %q does not declare it in its capabilities)", msg.Method, c.cfg.GetId()))
	}
	switch msg.Method {
	case "logging/setLevel":
		return c.setLevel(ctx, msg.ID, params)
	case "tools/call":
		var p struct {
			Name *string `json:"name"`
		}
		if json.Unmarshal(params, &p) != nil || p.Name == nil {
			return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, "Invalid params: tools/call requires params.name, the name of a tool from tools/list")
		}
		return c.h.CallTool(ctx, c.sessionID, c.claims, c.out, msg, ToolCall{Entry: toolcall.EntryServer, Server: c.cfg, Tool: *p.Name, Name: *p.Name,
			Params: params, Modern: c.modern, ClientParams: c.clientParams})
	case "tools/list":
		res, err := c.forward(ctx, msg, params)
		if err == nil {
			res = filterTools(c.cfg, res)
		}
		return c.answer(ctx, msg, res, err)
	}
	res, err := c.forward(ctx, msg, params)
	return c.answer(ctx, msg, res, err)
}

// forward sends the request to the upstream with its params unchanged, bounded by the
// server's timeout and cancellable by notifications/cancelled. A request that asks for
// progress gets its notifications relayed before the answer, with the client's own token,
// and the server's requests the client accepts (relay.go) come on the same stream.
func (c *call) forward(ctx context.Context, msg jsonrpc.Message, params json.RawMessage) (json.RawMessage, error) {
	if string(params) == "null" {
		params = nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	key, entry := c.sessionID+"\n"+string(msg.ID), &inflight{cancel: cancel}
	c.h.inflight.Store(key, entry)
	defer c.h.inflight.CompareAndDelete(key, entry)
	res, err := c.h.up.CallWith(ctx, c.cfg, msg.Method, params, 0, c.hooks(params))
	if err != nil && errors.Is(context.Cause(ctx), errCancelled) {
		return nil, errCancelled // whatever the upstream path made of the cancellation
	}
	return res, err
}

// errCancelled is the cause of a request the client cancelled.
var errCancelled = errors.New("cancelled by the client (notifications/cancelled)")

// cancelled cancels the forwarded request a notifications/cancelled names (the tool host then
// tells a stdio server, and an HTTP server is told by mcpgateway).
func (c *call) cancelled(payload []byte) {
	var n struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(payload, &n) != nil || len(n.Params.RequestID) == 0 {
		return
	}
	var id bytes.Buffer
	if json.Compact(&id, n.Params.RequestID) != nil {
		return
	}
	if f, ok := c.h.inflight.Load(c.sessionID + "\n" + id.String()); ok {
		f.(*inflight).cancel(errCancelled)
	}
}

// inflight is a forwarded request that notifications/cancelled may cancel.
type inflight struct{ cancel context.CancelCauseFunc }

// answer renders the upstream's answer with the client's id: its result, its JSON-RPC error
// as it was, or an error of Zest's own when no answer came.
func (c *call) answer(ctx context.Context, msg jsonrpc.Message, res json.RawMessage, err error) []byte {
	var rpcErr *upstream.RPCError
	var asked *upstream.InputRequiredError
	switch {
	case errors.As(err, &asked):
		return c.inputRequired(msg, asked)
	case err == nil:
		if len(res) == 0 {
			res = json.RawMessage(`{}`)
		}
		return jsonrpc.Result(msg.ID, res)
	case errors.As(err, &rpcErr):
		e := map[string]any{"code": rpcErr.Code, "message": rpcErr.Message}
		if d := bytes.TrimSpace(rpcErr.Data); len(d) > 0 && string(d) != "null" && json.Valid(d) {
			e["data"] = json.RawMessage(d)
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": e})
		return b
	case errors.Is(err, errCancelled):
		return nil // the client cancelled: no answer is sent (MCP's cancellation)
	case upstream.Outcome(res, err) == upstream.OutcomeTimeout:
		return jsonrpc.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, fmt.Sprintf("Request timed out: MCP server %q did not answer %s within %d ms (its timeout_ms)",
			c.cfg.GetId(), msg.Method, timeoutMs(c.cfg)))
	}
	return jsonrpc.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, c.h.failure(ctx, c.cfg.GetId(), msg.Method+" of", err))
}

func timeoutMs(cfg *mcpgatewayv1.ServerConfig) int32 {
	if ms := cfg.GetTimeoutMs(); ms > 0 {
		return ms
	}
	return serverconfig.DefaultTimeoutMs
}

// setLevel keeps the session's logging level (its GET stream gets notifications/message of
// that level and worse); the upstream, shared by every session, is not asked.
func (c *call) setLevel(ctx context.Context, id json.RawMessage, params json.RawMessage) []byte {
	var p struct {
		Level string `json:"level"`
	}
	_ = json.Unmarshal(params, &p)
	if levelRank(p.Level) < 0 {
		return jsonrpc.ErrorResponse(id, mcp.INVALID_PARAMS, "Invalid params: params.level must be one of "+strings.Join(logLevels, ", "))
	}
	if err := c.h.store.SetSessionLogLevel(ctx, c.sessionID, p.Level, c.h.expires(c.claims)); err != nil {
		c.h.log.ErrorContext(ctx, "storing a session's log level", "err", err)
		return jsonrpc.ErrorResponse(id, mcp.INTERNAL_ERROR, "Internal error: the log level could not be stored: "+err.Error())
	}
	return jsonrpc.Result(id, json.RawMessage(`{}`))
}

func levelRank(level string) int {
	for i, l := range logLevels {
		if l == level {
			return i
		}
	}
	return -1
}

// hasProgressToken reports whether params carry _meta.progressToken.
func hasProgressToken(params json.RawMessage) bool {
	if !bytes.Contains(params, []byte(`"progressToken"`)) {
		return false
	}
	var p struct {
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	return json.Unmarshal(params, &p) == nil && len(p.Meta.ProgressToken) > 0 && string(p.Meta.ProgressToken) != "null"
}

// filterTools removes the tools the server's filters hide from a tools/list result, keeping
// every other member (nextCursor included) as the upstream sent it.
func filterTools(cfg *mcpgatewayv1.ServerConfig, res json.RawMessage) json.RawMessage {
	if len(cfg.GetToolsAllow())+len(cfg.GetToolsDeny()) == 0 {
		return res
	}
	var page map[string]json.RawMessage
	var tools []json.RawMessage
	if json.Unmarshal(res, &page) != nil || json.Unmarshal(page["tools"], &tools) != nil {
		return res
	}
	kept := tools[:0]
	for _, t := range tools {
		var named struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(t, &named) == nil && serverconfig.Exposed(cfg, named.Name) {
			kept = append(kept, t)
		}
	}
	page["tools"], _ = json.Marshal(kept)
	out, err := json.Marshal(page)
	if err != nil {
		return res
	}
	return out
}
