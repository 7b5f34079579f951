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

// The checks here give each malformed message one answer, whose message names the member
// that is wrong and says what it must be, and keep Go's decoder text (type and struct names,
// "json: cannot unmarshal …") out of what clients read.

// checkEnvelope decodes the members routing needs and says what is wrong with them, as the
// error message of a -32600 (or -32700 when the bytes are not JSON at all). env.ID is kept
// only when it is a valid id, so that an error answer can name the request it answers.
func checkEnvelope(msg []byte) (env envelope, code int, problem string) {
	err := json.Unmarshal(msg, &env)
	switch {
	case err != nil && !json.Valid(msg):
		return envelope{}, mcp.PARSE_ERROR, "Parse error: the body is not valid JSON"
	case len(msg) == 0 || msg[0] != '{':
		return envelope{}, mcp.INVALID_REQUEST, "Invalid Request: a JSON-RPC message must be a JSON object"
	}
	if idProblem := checkID(env.ID); idProblem != "" {
		env.ID = nil
		return env, mcp.INVALID_REQUEST, idProblem
	}
	if err != nil {
		if field, want, got, ok := jsonerr.TypeError(err); ok && field != "" {
			return env, mcp.INVALID_REQUEST, fmt.Sprintf("Invalid Request: %q must be %s, not %s", field, want, got)
		}
		return env, mcp.INVALID_REQUEST, "Invalid Request: the message is not a JSON-RPC request, notification or response"
	}
	if env.Method == "" && !isResponse(msg) {
		return env, mcp.INVALID_REQUEST, `Invalid Request: "method" is required`
	}
	return env, 0, ""
}

// checkID says what is wrong with a message's id ("" when it is absent or valid): MCP ids
// are strings or numbers, never null.
func checkID(id json.RawMessage) string {
	if len(id) == 0 {
		return ""
	}
	switch id[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return ""
	case 'n':
		return `Invalid Request: "id" must be a string or a number; MCP does not allow null (leave "id" out for a notification)`
	}
	return `Invalid Request: "id" must be a string or a number`
}

// isResponse reports whether msg is a client's response to a server request (it carries
// "result" or "error" and no "method").
func isResponse(msg []byte) bool {
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	return json.Unmarshal(msg, &r) == nil && (len(r.Result) > 0 || len(r.Error) > 0)
}

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

// Message is what routing needs of one JSON-RPC message, and its params as sent (nil when
// absent): CheckMessage decodes them once, and they are handed on (Params).
type Message struct {
	JSONRPC string
	ID      json.RawMessage
	Method  string
	Params  json.RawMessage
}

// IsRequest reports whether the message is a request (a method and an id).
func (m Message) IsRequest() bool { return envelope(m).isRequest() }

// CheckMessage is the envelope check of /mcp for other endpoints of the same transport: the
// message's routing members, and the JSON-RPC error code and message of what is wrong with it
// ("" when nothing is).
func CheckMessage(msg []byte) (Message, int, string) {
	env, code, problem := checkEnvelope(msg)
	return Message(env), code, problem
}

// CheckInitializeParams says what is wrong with the params of an initialize request ("" when
// nothing is), as /mcp answers it.
func CheckInitializeParams(msg []byte) string { return checkInitializeParams(msg) }

// ErrorResponse renders a JSON-RPC error answer to id (null when id is empty).
func ErrorResponse(id json.RawMessage, code int, message string) []byte {
	return errorResponse(id, code, message)
}

// Result renders a JSON-RPC result answer to id.
func Result(id, res json.RawMessage) []byte { return result(id, res) }

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

// Params returns the params of a request (nil when absent or null), or the error response
// for params that are not an object. They were decoded with the message (CheckMessage).
func Params(m Message) (json.RawMessage, []byte) {
	params := m.Params
	if len(params) > 0 && params[0] != '{' && string(params) != "null" {
		return nil, errorResponse(m.ID, mcp.INVALID_PARAMS, "Invalid params: the params of "+m.Method+" must be an object")
	}
	if string(params) == "null" {
		params = nil
	}
	return params, nil
}
