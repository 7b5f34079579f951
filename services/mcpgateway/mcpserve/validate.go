package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/lib/jsonerr"
	"github.com/zestmcp/zest/services/mcpgateway/mcpera"
)

// The checks of the JSON-RPC jsonrpc.Message are package jsonrpc's; those here are /mcp's own (the
// params of initialize, mcp-go's decoding errors), with the same care: one answer per
// malformed message, naming the member that is wrong, no decoder text.

// checkInitializeParams says what is wrong with the params of an initialize request ("" when
// nothing is): the specification requires protocolVersion, capabilities and clientInfo.
func checkInitializeParams(msg []byte) string {
	const want = "initialize requires params {protocolVersion, capabilities, clientInfo}"
	var req struct {
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(msg, &req) != nil || len(req.Params) == 0 || string(req.Params) == "null" {
		return "Invalid params: " + want
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(req.Params, &p) != nil {
		return "Invalid params: params must be an object; " + want
	}
	for _, f := range []struct{ name, kind string }{
		{"protocolVersion", "a string such as \"2025-11-25\""},
		{"capabilities", "an object"},
		{"clientInfo", "an object {name, version}"},
	} {
		v, ok := p[f.name]
		if !ok || string(v) == "null" {
			return "Invalid params: params." + f.name + " is required (" + f.kind + ")"
		}
		first := v[0]
		if (f.name == "protocolVersion" && first != '"') || (f.name != "protocolVersion" && first != '{') {
			return "Invalid params: params." + f.name + " must be " + f.kind
		}
	}
	return ""
}

// onError is mcp-go's OnError hook: it keeps the decoding error mcp-go met in one request's
// params on the session (takeDecodeErr), so that the answer can name the member instead of
// quoting Go.
func onError(ctx context.Context, _ any, _ mcp.MCPMethod, _ any, err error) {
	var u *server.UnparsableMessageError
	if !errors.As(err, &u) {
		return
	}
	if s, ok := server.ClientSessionFromContext(ctx).(*clientSession); ok {
		s.mu.Lock()
		s.decodeErr = u.Unwrap()
		s.mu.Unlock()
	}
}

func (s *clientSession) takeDecodeErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.decodeErr
	s.decodeErr = nil
	return err
}

// clarify rewrites mcp-go's answers to malformed params: -32602 with a message that names
// the member (mcp-go answers -32600 and quotes Go's decoder), and says what tools/call
// without a name lacks.
func clarify(method string, resp mcp.JSONRPCMessage, decodeErr error) mcp.JSONRPCMessage {
	e, ok := resp.(mcp.JSONRPCError)
	if !ok {
		return resp
	}
	switch {
	case decodeErr != nil || (e.Error.Code == mcp.INVALID_REQUEST && strings.HasPrefix(e.Error.Message, "unparsable ")):
		e.Error = mcp.JSONRPCErrorDetails{Code: mcp.INVALID_PARAMS, Message: paramsMessage(method, decodeErr)}
	case e.Error.Code == mcp.PARSE_ERROR && e.Error.Message == "Failed to parse notification":
		e.Error = mcp.JSONRPCErrorDetails{Code: mcp.INVALID_PARAMS, Message: "Invalid params: the params of " + method + " must be an object"}
	case method == string(mcp.MethodToolsCall) && e.Error.Code == mcp.INVALID_PARAMS && strings.HasPrefix(e.Error.Message, "tool '' not found"):
		e.Error = mcp.JSONRPCErrorDetails{Code: mcp.INVALID_PARAMS, Message: "Invalid params: tools/call requires params.name, the name of a tool from tools/list"}
	case method == string(mcp.MethodSetLogLevel) && e.Error.Code == mcp.INVALID_PARAMS && strings.HasPrefix(e.Error.Message, "invalid logging level"):
		e.Error = mcp.JSONRPCErrorDetails{Code: mcp.INVALID_PARAMS,
			Message: "Invalid params: params.level must be one of debug, info, notice, warning, error, critical, alert, emergency"}
	default:
		return resp
	}
	return e
}

// paramsMessage says which member of params has the wrong type.
func paramsMessage(method string, err error) string {
	if field, want, got, ok := jsonerr.TypeError(err); ok {
		return fmt.Sprintf("Invalid params: %s must be %s, not %s", memberPath(field), want, got)
	}
	return "Invalid params: the params of " + method + " do not match the method's schema"
}

// memberPath turns a decoder's field path ("PaginatedRequest.params.cursor") into the JSON
// member path the client sent ("params.cursor").
func memberPath(field string) string {
	parts := strings.Split(field, ".")
	for i, p := range parts {
		if p == "params" {
			return strings.Join(parts[i:], ".")
		}
	}
	return parts[len(parts)-1]
}

// CheckInitializeParams says what is wrong with the params of an initialize request ("" when
// nothing is), as /mcp answers it.
func CheckInitializeParams(msg []byte) string { return checkInitializeParams(msg) }

// Negotiate is the version an initialize request gets, as /mcp answers it: the client's when
// it is served, else the newest served.
func Negotiate(initialize []byte) string {
	var p struct {
		Params struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"params"`
	}
	_ = json.Unmarshal(initialize, &p)
	if slices.Contains(mcpera.Versions, p.Params.ProtocolVersion) {
		return p.Params.ProtocolVersion
	}
	return mcpera.Versions[0]
}
