package aggregate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/catalog"
	"github.com/zestmcp/zest/services/mcpgateway/federate"
	"github.com/zestmcp/zest/services/mcpgateway/jsonrpc"
	"github.com/zestmcp/zest/services/mcpgateway/mcpera"
	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"github.com/zestmcp/zest/services/mcpgateway/session"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"github.com/zestmcp/zest/services/mcpgateway/toolsearch"
	"github.com/zestmcp/zest/services/mcpgateway/toolshape"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
)

// call is one message of a session of a preset endpoint.
type call struct {
	h         *Handler
	ep        endpoint
	provs     []provider
	sessionID string
	claims    session.Claims
	out       *federate.Output
	// modern is the request of 2026-07-28 this call answers (nil in a session), and req its
	// exchange (its Mcp-Param-* headers).
	modern *mcpera.Request
	req    *mcphttp.Request
}

// resourceNotFound is MCP's error code for a resource no provider has.
const resourceNotFound = -32002

// dispatch answers one message: the response to a request, nil for a notification or a
// client's response, or an error response for a message that cannot be accepted.
func (c *call) dispatch(ctx context.Context, payload []byte, msg jsonrpc.Message) []byte {
	if msg.JSONRPC != mcp.JSONRPC_VERSION {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_REQUEST, `Invalid Request: "jsonrpc" must be "2.0"`)
	}
	if !msg.IsRequest() {
		switch msg.Method {
		case "notifications/cancelled":
			c.h.fed.Cancel(c.sessionID, payload) // forwarded calls and built-in ones alike
		case "": // the client's answer to a server's request relayed to it
			return c.h.fed.AnswerRelay(ctx, c.serverConfigs(), c.sessionID, c.claims, payload, msg)
		}
		return nil // notifications/initialized, roots/list_changed: accepted
	}
	params, bad := jsonrpc.Params(msg)
	if bad != nil {
		return bad
	}
	switch msg.Method {
	case "ping":
		return jsonrpc.Result(msg.ID, json.RawMessage(`{}`))
	case "logging/setLevel":
		return c.h.fed.SetLevel(ctx, c.sessionID, c.claims, msg.ID, params)
	case "tools/list":
		if c.toolSearch(ctx) {
			return c.listMeta(msg, params)
		}
		return c.list(ctx, msg, params, toolsList)
	case "prompts/list":
		return c.list(ctx, msg, params, promptsList)
	case "resources/list":
		return c.list(ctx, msg, params, resourcesList)
	case "resources/templates/list":
		return c.list(ctx, msg, params, templatesList)
	case "tools/call":
		return c.callTool(ctx, msg, params)
	case "prompts/get":
		return c.getPrompt(ctx, msg, params)
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		return c.resource(ctx, msg, params)
	case "completion/complete":
		return c.complete(ctx, msg, params)
	}
	return jsonrpc.ErrorResponse(msg.ID, mcp.METHOD_NOT_FOUND, "Method not found: "+msg.Method)
}

// serverConfigs are the configs of the preset's servers.
func (c *call) serverConfigs() []*mcpgatewayv1.ServerConfig {
	var out []*mcpgatewayv1.ServerConfig
	for _, p := range c.provs {
		if !p.builtin() {
			out = append(out, p.cfg)
		}
	}
	return out
}

// forward sends one request to one provider's server, as /mcp/servers/{id} does
// (federate.Handler.Forward: progress, the server's own requests relayed to the client,
// cancellation, timeout, failures hidden from non-admins; for a modern client,
// federate.Handler.ForwardModern: a session-era provider's requests become input_required
// results). Every request that reaches a provider for the client passes here.
func (c *call) forward(ctx context.Context, p provider, msg jsonrpc.Message, params json.RawMessage) []byte {
	inf, err := c.h.up.Info(ctx, p.cfg)
	if err != nil {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, c.h.fed.Failure(ctx, p.id, "connecting", err))
	}
	if !federate.Declares(inf.Capabilities, msg.Method) {
		return jsonrpc.ErrorResponse(msg.ID, mcp.METHOD_NOT_FOUND, fmt.Sprintf("Method not found: %s (MCP server %q does not declare it in its capabilities)", msg.Method, p.id))
	}
	if c.modern != nil && !mcp.IsModernProtocol(inf.ProtocolVersion) {
		// A retry with the requestState of a call parked on this provider resumes it (a
		// state of another provider or method is refused); a modern provider's rounds are
		// its client's, the state its own.
		if resp, ok := c.h.fed.ResumeModern(ctx, p.cfg, c.out, msg, c.modern.Params); ok {
			return resp
		}
	}
	params = c.modernParams(inf.ProtocolVersion, params)
	if c.modern != nil {
		return c.h.fed.ForwardModern(ctx, p.cfg, c.out, msg, params, c.modern.Params)
	}
	return c.h.fed.Forward(ctx, p.cfg, c.sessionID, c.claims, c.out, msg, params)
}

// callTool runs a tool by the name tools/list gave it through the tool-call pipeline: a
// built-in tool in process, a server's tool on its server under its own name (federate's
// CallTool, as /mcp/servers/{id} calls it). A preset with tool_search serves its meta-tools
// here too (callMeta); its tools stay callable by name.
func (c *call) callTool(ctx context.Context, msg jsonrpc.Message, params json.RawMessage) []byte {
	var p struct {
		Name *string `json:"name"`
	}
	if json.Unmarshal(params, &p) != nil || p.Name == nil {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, "Invalid params: tools/call requires params.name, the name of a tool from tools/list")
	}
	if toolsearch.IsMeta(*p.Name) && c.toolSearch(ctx) {
		return c.callMeta(ctx, msg, *p.Name, params)
	}
	return c.invokeTool(ctx, msg, params, toolcall.EntryPreset)
}

// invokeTool runs the tool params name through the pipeline as a call of entry.
func (c *call) invokeTool(ctx context.Context, msg jsonrpc.Message, params json.RawMessage, entry toolcall.Entry) []byte {
	var p struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(params, &p)
	name := p.Name
	unknown := mcpserve.UnknownTool(msg.ID, name)
	chat, params, refused := c.unshape(msg, name, params)
	if refused != nil {
		return refused
	}
	if chat == "" {
		return unknown
	}
	if c.isBuiltinTool(ctx, chat) {
		return c.callBuiltin(ctx, msg, chat, name, params, entry)
	}
	pr, orig, ok := c.resolveTool(ctx, chat)
	if !ok {
		return unknown
	}
	if entry == toolcall.EntryPreset { // call_tool's headers are those of call_tool, which has no x-mcp-header
		if bad := c.checkParamHeaders(ctx, pr, orig, msg.ID); bad != nil {
			return bad
		}
	}
	params, err := rename(params, "name", orig)
	if err != nil {
		return unknown
	}
	inf, err := c.h.up.Info(ctx, pr.cfg)
	if err != nil {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, c.h.fed.Failure(ctx, pr.id, "connecting", err))
	}
	if !federate.Declares(inf.Capabilities, msg.Method) {
		return jsonrpc.ErrorResponse(msg.ID, mcp.METHOD_NOT_FOUND, fmt.Sprintf("Method not found: %s (MCP server %q does not declare it in its capabilities)", msg.Method, pr.id))
	}
	tc := federate.ToolCall{Entry: entry, Server: pr.cfg, Tool: orig, Name: name, Preset: c.ep.preset,
		Params: c.modernParams(inf.ProtocolVersion, params)}
	if c.modern != nil {
		tc.Modern, tc.ClientParams = true, c.modern.Params
	}
	return c.h.fed.CallTool(ctx, c.sessionID, c.claims, c.out, msg, tc)
}

// shape is the preset's tool shaping (every provider carries the same).
func (c *call) shape() *toolshape.Shape {
	if len(c.provs) == 0 {
		return nil
	}
	return c.provs[0].shape
}

// unshape maps a tools/call of the tool the client named back to the tool's chat_name, the
// preset's fixed and default arguments merged into params (toolshape.Shape.Call). chat is ""
// when the preset serves no such tool (hidden, or the old name of a renamed tool); refused is
// the answer to a call that sets a fixed argument to another value: a tool execution error,
// which the model can read and correct, as MCP asks of invalid arguments.
func (c *call) unshape(msg jsonrpc.Message, name string, params json.RawMessage) (chat string, out json.RawMessage, refused []byte) {
	s := c.shape()
	if s == nil {
		return name, params, nil
	}
	var whole map[string]json.RawMessage
	if json.Unmarshal(params, &whole) != nil || whole == nil {
		return "", nil, nil
	}
	chat, args, ok, err := s.Call(name, whole["arguments"])
	if !ok {
		return "", nil, nil
	}
	if err != nil {
		res, _ := json.Marshal(mcp.NewToolResultError(err.Error()))
		return "", nil, jsonrpc.Result(msg.ID, res)
	}
	if len(args) > 0 {
		whole["arguments"] = args
	}
	whole["name"], _ = json.Marshal(chat)
	out, _ = json.Marshal(whole)
	return chat, out, nil
}

// callBuiltin runs the built-in tool tool (called by name) through the tool-call pipeline,
// its notifications on the session's stream as /mcp sends them; notifications/cancelled
// stops it.
func (c *call) callBuiltin(ctx context.Context, msg jsonrpc.Message, tool, name string, params json.RawMessage, entry toolcall.Entry) []byte {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer c.h.fed.Track(c.sessionID, msg.ID, cancel)()
	sctx, end := c.h.builtin.WithSession(ctx, c.sessionID, c.claims, func(n []byte) error { c.out.Note(n); return c.out.Err() })
	tc := &toolcall.Call{Entry: entry, Server: serverconfig.LemonadeProvider, Tool: tool, Preset: c.ep.preset, Params: params}
	if name != tool {
		tc.ChatName = name
	}
	res, err := c.h.tools.Invoke(sctx, tc)
	if endErr := end(); endErr != nil && err == nil {
		err = endErr
	}
	var rpcErr *upstream.RPCError
	switch {
	case federate.Cancelled(context.Cause(ctx)):
		return nil // cancelled by the client: no answer (MCP's cancellation)
	case err == nil:
		return jsonrpc.Result(msg.ID, res)
	case errors.As(err, &rpcErr):
		return mcpserve.RPCErrorResponse(msg.ID, rpcErr)
	}
	if refused, ok := mcpserve.ToolRefusal(msg.ID, name, err); ok {
		return refused
	}
	return jsonrpc.ErrorResponse(msg.ID, mcp.INTERNAL_ERROR, "Internal error: "+err.Error())
}

// isBuiltinTool reports whether name is a built-in tool and the preset has the built-in
// provider.
func (c *call) isBuiltinTool(ctx context.Context, name string) bool {
	for _, p := range c.provs {
		if p.builtin() {
			return slices.Contains(c.h.builtinNames(ctx), name)
		}
	}
	return false
}

// byChatName finds the server provider and original name behind a chat_name: at once when
// the name is mcp_<server>__<name> as catalog.ChatName spells it (and ends in no hash), else
// among names (the provider's listed names, read by list).
func (c *call) byChatName(ctx context.Context, chat string, list func(context.Context, provider) ([]string, error)) (provider, string, bool) {
	for _, p := range c.provs {
		if p.builtin() {
			continue
		}
		if rest, ok := strings.CutPrefix(chat, "mcp_"+p.id+"__"); ok && !hashed(rest) && catalog.ChatName(p.id, rest) == chat {
			return p, rest, true
		}
	}
	for _, p := range c.provs {
		if p.builtin() || !strings.HasPrefix(chat, "mcp_") {
			continue
		}
		names, err := list(ctx, p) // what was read before a failure is searched too
		if err != nil {
			c.h.log.DebugContext(ctx, "looking up a name in a provider's list", "server", p.id, "err", err)
		}
		for _, n := range names {
			if catalog.ChatName(p.id, n) == chat {
				return p, n, true
			}
		}
	}
	return provider{}, "", false
}

// hashed reports whether a chat_name's tail ends as ChatName's hash suffix does (_ and 16
// hex digits): then it may be the name of another tool, cleaned, with its hash, and only the
// server's list tells.
func hashed(rest string) bool {
	if len(rest) < 17 || rest[len(rest)-17] != '_' {
		return false
	}
	for _, r := range rest[len(rest)-16:] {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

// resolveTool finds a server's tool by its chat_name (the manager's tool list, read again
// once when the name is not in it).
func (c *call) resolveTool(ctx context.Context, chat string) (provider, string, bool) {
	return c.byChatName(ctx, chat, func(ctx context.Context, p provider) ([]string, error) {
		for _, refresh := range []bool{false, true} {
			raws, err := c.h.up.ListTools(ctx, p.cfg, refresh)
			if err != nil {
				return nil, err
			}
			names := itemNames(raws, "name")
			for _, n := range names {
				if catalog.ChatName(p.id, n) == chat {
					return names, nil
				}
			}
		}
		return nil, nil
	})
}

// getPrompt gets a server's prompt by its chat_name.
func (c *call) getPrompt(ctx context.Context, msg jsonrpc.Message, params json.RawMessage) []byte {
	var p struct {
		Name *string `json:"name"`
	}
	if json.Unmarshal(params, &p) != nil || p.Name == nil {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, "Invalid params: prompts/get requires params.name, the name of a prompt from prompts/list")
	}
	pr, orig, ok := c.resolvePrompt(ctx, *p.Name)
	if !ok {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, fmt.Sprintf("Unknown prompt: %q", *p.Name))
	}
	params, err := rename(params, "name", orig)
	if err != nil {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, "Invalid params: params must be an object")
	}
	return c.forward(ctx, pr, msg, params)
}

func (c *call) resolvePrompt(ctx context.Context, chat string) (provider, string, bool) {
	return c.byChatName(ctx, chat, func(ctx context.Context, p provider) ([]string, error) {
		items, err := c.all(ctx, p, promptsList)
		return itemNames(items, "name"), err
	})
}

// resource routes resources/read, subscribe and unsubscribe by params.uri.
func (c *call) resource(ctx context.Context, msg jsonrpc.Message, params json.RawMessage) []byte {
	var p struct {
		URI *string `json:"uri"`
	}
	if json.Unmarshal(params, &p) != nil || p.URI == nil {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, "Invalid params: "+msg.Method+" requires params.uri, a URI from resources/list or of a resource template")
	}
	pr, ok := c.owner(ctx, *p.URI)
	if !ok {
		return jsonrpc.ErrorResponse(msg.ID, resourceNotFound, fmt.Sprintf("Resource not found: no provider of preset %q lists %q or has a template for it", c.ep.preset, *p.URI))
	}
	return c.forward(ctx, pr, msg, params)
}

// complete routes completion/complete by its ref: a prompt by its chat_name (renamed for the
// server), a resource template by the provider that lists it.
func (c *call) complete(ctx context.Context, msg jsonrpc.Message, params json.RawMessage) []byte {
	var p struct {
		Ref struct {
			Type string `json:"type"`
			Name string `json:"name"`
			URI  string `json:"uri"`
		} `json:"ref"`
	}
	if json.Unmarshal(params, &p) != nil {
		return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, "Invalid params: completion/complete requires params.ref and params.argument")
	}
	switch p.Ref.Type {
	case "ref/prompt":
		pr, orig, ok := c.resolvePrompt(ctx, p.Ref.Name)
		if !ok {
			return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, fmt.Sprintf("Unknown prompt: %q", p.Ref.Name))
		}
		var whole map[string]json.RawMessage
		_ = json.Unmarshal(params, &whole)
		ref, err := rename(whole["ref"], "name", orig)
		if err != nil {
			return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, "Invalid params: params.ref must be an object")
		}
		whole["ref"] = ref
		b, _ := json.Marshal(whole)
		return c.forward(ctx, pr, msg, b)
	case "ref/resource":
		pr, ok := c.templateOwner(ctx, p.Ref.URI)
		if !ok {
			return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, fmt.Sprintf("Invalid params: no provider of preset %q has the resource template %q", c.ep.preset, p.Ref.URI))
		}
		return c.forward(ctx, pr, msg, params)
	}
	return jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_PARAMS, `Invalid params: params.ref.type must be "ref/prompt" or "ref/resource"`)
}

// rename returns the object obj with member key set to value (its other members unchanged).
func rename(obj json.RawMessage, key, value string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil || m == nil {
		return nil, errors.New("not an object")
	}
	v, _ := json.Marshal(value)
	m[key] = v
	return json.Marshal(m)
}

// itemNames reads member key (a string) of each item.
func itemNames(items []json.RawMessage, key string) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		var m map[string]json.RawMessage
		var s string
		if json.Unmarshal(it, &m) == nil && json.Unmarshal(m[key], &s) == nil {
			out = append(out, s)
		}
	}
	return out
}
