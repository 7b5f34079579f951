// Package jsonrpc is the JSON-RPC 2.0 envelope of MCP as every endpoint of mcpgateway reads
// and writes it: the members routing needs, decoded once and checked with one answer per
// malformed message (Check), and the answers rendered (Result, ErrorResponse). It sits below
// the era rules (mcpera) and the endpoints, and imports nothing of Zest's MCP packages.
//
// Each malformed message gets one answer, whose message names the member that is wrong and
// says what it must be, and Go's decoder text (type and struct names, "json: cannot unmarshal
// …") stays out of what clients read.
package jsonrpc

import (
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/lib/jsonerr"
)

// Message is what routing needs of one JSON-RPC message, and its params as sent (nil when
// absent): Check decodes them once, and they are handed on (Params).
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// IsRequest reports whether the message is a request (a method and an id).
func (m Message) IsRequest() bool { return m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null" }

// Check decodes the members routing needs and says what is wrong with them, as the error
// message of a -32600 (or -32700 when the bytes are not JSON at all; "" when nothing is).
// m.ID is kept only when it is a valid id, so that an error answer can name the request it
// answers.
func Check(msg []byte) (m Message, code int, problem string) {
	err := json.Unmarshal(msg, &m)
	switch {
	case err != nil && !json.Valid(msg):
		return Message{}, mcp.PARSE_ERROR, "Parse error: the body is not valid JSON"
	case len(msg) == 0 || msg[0] != '{':
		return Message{}, mcp.INVALID_REQUEST, "Invalid Request: a JSON-RPC message must be a JSON object"
	}
	if idProblem := checkID(m.ID); idProblem != "" {
		m.ID = nil
		return m, mcp.INVALID_REQUEST, idProblem
	}
	if err != nil {
		if field, want, got, ok := jsonerr.TypeError(err); ok && field != "" {
			return m, mcp.INVALID_REQUEST, fmt.Sprintf("Invalid Request: %q must be %s, not %s", field, want, got)
		}
		return m, mcp.INVALID_REQUEST, "Invalid Request: the message is not a JSON-RPC request, notification or response"
	}
	if m.Method == "" && !isResponse(msg) {
		return m, mcp.INVALID_REQUEST, `Invalid Request: "method" is required`
	}
	return m, 0, ""
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

// Params returns the params of a request (nil when absent or null), or the error response
// for params that are not an object. They were decoded with the message (Check).
func Params(m Message) (json.RawMessage, []byte) {
	params := m.Params
	if len(params) > 0 && params[0] != '{' && string(params) != "null" {
		return nil, ErrorResponse(m.ID, mcp.INVALID_PARAMS, "Invalid params: the params of "+m.Method+" must be an object")
	}
	if string(params) == "null" {
		params = nil
	}
	return params, nil
}

// Result renders a JSON-RPC result answer to id (null when id is empty). Both are valid JSON
// already: appended, not encoded again, as a list result can be large.
func Result(id, res json.RawMessage) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	out := make([]byte, 0, len(id)+len(res)+32)
	out = append(append(append(out, `{"jsonrpc":"2.0","id":`...), id...), `,"result":`...)
	return append(append(out, res...), '}')
}

// ErrorResponse renders a JSON-RPC error answer to id (null when id is empty).
func ErrorResponse(id json.RawMessage, code int, message string) []byte {
	return ErrorResponseData(id, code, message, nil)
}

// ErrorResponseData is ErrorResponse with the error's data member (left out when nil).
func ErrorResponseData(id json.RawMessage, code int, message string, data any) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	e := map[string]any{"code": code, "message": message}
	if data != nil {
		e["data"] = data
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": e})
	return b
}
