package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/services/mcpgateway/jsonrpc"
	"github.com/zestmcp/zest/services/mcpgateway/oauthclient"
	"github.com/zestmcp/zest/services/mcpgateway/pins"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"github.com/zestmcp/zest/services/mcpgateway/session"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
)

// Builtin is the built-in tools as an in-process upstream of the tool-call pipeline
// (toolcall.Builtin): a tools/call goes to mark3labs/mcp-go's MCPServer as a message, and its
// CallToolResult comes back as JSON, the same bytes /mcp answers. The tools' notifications
// (progress, log messages) go to the MCP session the context carries (WithSession, or /mcp's
// own), and nowhere in a chat. mcp-go's in-process client transport would decode and encode
// each result once more, and talk to a session of its own, not the caller's: it is not used.
type Builtin struct{ srv *server.MCPServer }

// NewBuiltin serves srv's tools to the pipeline.
func NewBuiltin(srv *server.MCPServer) *Builtin { return &Builtin{srv: srv} }

var _ toolcall.Builtin = (*Builtin)(nil)

// IsBuiltin reports whether name is a built-in tool.
func (b *Builtin) IsBuiltin(name string) bool { return b.srv.GetTool(name) != nil }

// CallBuiltin runs one tools/call of a built-in tool (its params) and returns its result, or
// the JSON-RPC error mcp-go answered as a *upstream.RPCError (with the member a malformed
// params names, as /mcp words it).
func (b *Builtin) CallBuiltin(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	id, _ := ctx.Value(requestIDKey{}).(json.RawMessage)
	if len(id) == 0 {
		id = json.RawMessage(`0`)
	}
	msg := make([]byte, 0, len(params)+len(id)+64)
	msg = append(append(append(msg, `{"jsonrpc":"2.0","id":`...), id...), `,"method":"tools/call"`...)
	if len(params) > 0 {
		msg = append(append(msg, `,"params":`...), params...)
	}
	msg = append(msg, '}')
	resp := b.srv.HandleMessage(ctx, msg)
	var decodeErr error
	if s, ok := server.ClientSessionFromContext(ctx).(*clientSession); ok {
		decodeErr = s.takeDecodeErr()
	}
	switch r := clarify(string(mcp.MethodToolsCall), resp, decodeErr).(type) {
	case mcp.JSONRPCError:
		if r.Error.Code == mcp.INVALID_PARAMS && strings.HasSuffix(r.Error.Message, ": "+server.ErrToolNotFound.Error()) {
			// mcp-go's "tool 'x' not found: tool not found": one sentence, as every endpoint says it.
			var p struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(params, &p)
			return nil, &upstream.RPCError{Code: mcp.INVALID_PARAMS, Message: UnknownToolMessage(p.Name)}
		}
		e := &upstream.RPCError{Code: r.Error.Code, Message: r.Error.Message}
		if r.Error.Data != nil {
			e.Data, _ = json.Marshal(r.Error.Data)
		}
		return nil, e
	case mcp.JSONRPCResponse:
		if res := callToolResult(r.Result); res != nil {
			return res.MarshalJSON()
		}
		return json.Marshal(r.Result)
	}
	return nil, errors.New("the built-in tools gave no answer")
}

// requestIDKey carries the JSON-RPC id of the client's tools/call to CallBuiltin, so that
// mcp-go knows the call by it: the session's notifications/cancelled naming it cancels it.
type requestIDKey struct{}

// callToolResult is a response's result as mcp-go's CallToolResult, when it is one.
func callToolResult(result any) *mcp.CallToolResult {
	switch v := result.(type) {
	case *mcp.CallToolResult:
		return v
	case mcp.CallToolResult:
		return &v
	}
	return nil
}

// WithSession returns ctx carrying the MCP session sessionID (with claims cl) of another
// endpoint (a preset's "lemonade" provider): the built-in tools' notifications go to send as
// they come, filtered by the session's log level, as /mcp sends them. Call end when the call
// returns: it flushes the notifications still queued and says whether one could not be sent.
func (h *Handler) WithSession(ctx context.Context, sessionID string, cl session.Claims, send func([]byte) error) (context.Context, func() error) {
	sess := h.newSession(ctx, sessionID, cl)
	r := &relay{notes: sess.notes, send: send, stop: make(chan struct{})}
	sess.setRelay(r)
	return h.srv.WithContext(ctx, sess), func() error {
		sess.setRelay(nil)
		return r.end()
	}
}

// ToolRefusal renders a tools/call the pipeline refused (err) with the client's id, as every
// MCP endpoint answers it: a tool the caller may not see (a filtered tool, a server it may
// not reach) is an unknown tool (-32602, named as the client called it); an approval that was
// not given is a result with isError true that says why, and a retry that answers another
// call's approval is -32602; a held tool (its definition changed since it was pinned) is a
// result with isError true that names it and how an administrator accepts it; a server's
// limits are its JSON-RPC error (-32029). ok is false
// for any other error: the endpoint words it (a timeout, a failure, a cancellation).
func ToolRefusal(id json.RawMessage, name string, err error) (answer []byte, ok bool) {
	var unknown *toolcall.UnknownServerError
	var filtered *serverconfig.ToolFilteredError
	var approval *toolcall.ApprovalError
	var limited *toolcall.LimitError
	var held *pins.HeldError
	var onBehalf *oauthclient.OnBehalfError
	switch {
	case errors.As(err, &filtered), errors.As(err, &unknown),
		errors.As(err, &held) && held.State == pins.StateUnlisted: // a name no list showed the client
		return UnknownTool(id, name), true
	case errors.As(err, &held):
		return IsErrorResult(id, held.Error()), true
	case errors.As(err, &onBehalf): // a caller by key of a server called on behalf of each caller
		return IsErrorResult(id, onBehalf.Error()), true
	case errors.As(err, &approval):
		if approval.State == toolcall.ApprovalMismatch || approval.State == toolcall.ApprovalNotAsked {
			return jsonrpc.ErrorResponse(id, mcp.INVALID_PARAMS, "Invalid params: "+approval.Text), true
		}
		return IsErrorResult(id, approval.Text), true
	case errors.As(err, &limited):
		var rpcErr *upstream.RPCError
		_ = limited.As(&rpcErr)
		return RPCErrorResponse(id, rpcErr), true
	}
	return nil, false
}

// UnknownTool is every MCP endpoint's answer to a tools/call of a tool it does not serve to
// the caller (-32602, UnknownToolMessage).
func UnknownTool(id json.RawMessage, name string) []byte {
	return jsonrpc.ErrorResponse(id, mcp.INVALID_PARAMS, UnknownToolMessage(name))
}

// UnknownToolMessage says that the endpoint has no tool name (as the client called it) and
// where its tools are listed: one sentence, whichever endpoint or server found it unknown.
func UnknownToolMessage(name string) string {
	return fmt.Sprintf("Unknown tool %q: this endpoint has no tool of that name (tools/list lists its tools)", name)
}

// IsErrorResult is a tools/call result with isError true and text.
func IsErrorResult(id json.RawMessage, text string) []byte {
	res, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}, "isError": true})
	return jsonrpc.Result(id, res)
}

// RPCErrorResponse renders a server's JSON-RPC error with the client's id, as it was.
func RPCErrorResponse(id json.RawMessage, e *upstream.RPCError) []byte {
	body := map[string]any{"code": e.Code, "message": e.Message}
	if d := e.Data; len(d) > 0 && string(d) != "null" && json.Valid(d) {
		body["data"] = json.RawMessage(d)
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": body})
	return b
}
