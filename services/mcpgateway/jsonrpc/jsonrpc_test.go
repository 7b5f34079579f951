package jsonrpc

import (
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestCheck: each malformed envelope gets one answer naming the member and what it must be,
// a valid id is kept for the answer, and a response passes.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name, msg string
		code      int
		problem   string
		id        string
	}{
		{"a request", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 0, "", "1"},
		{"a response", `{"jsonrpc":"2.0","id":"r","result":{}}`, 0, "", `"r"`},
		{"not JSON", `{`, mcp.PARSE_ERROR, "Parse error: the body is not valid JSON", ""},
		{"not an object", `[1]`, mcp.INVALID_REQUEST, "Invalid Request: a JSON-RPC message must be a JSON object", ""},
		{"a null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, mcp.INVALID_REQUEST, `Invalid Request: "id" must be a string or a number; MCP does not allow null (leave "id" out for a notification)`, ""},
		{"an object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, mcp.INVALID_REQUEST, `Invalid Request: "id" must be a string or a number`, ""},
		{"a method of another type", `{"jsonrpc":"2.0","id":2,"method":3}`, mcp.INVALID_REQUEST, `Invalid Request: "method" must be a string, not a number`, "2"},
		{"no method", `{"jsonrpc":"2.0","id":2}`, mcp.INVALID_REQUEST, `Invalid Request: "method" is required`, "2"},
	} {
		m, code, problem := Check([]byte(c.msg))
		if code != c.code || problem != c.problem || string(m.ID) != c.id {
			t.Errorf("%s: %d %q id %s, want %d %q id %s", c.name, code, problem, m.ID, c.code, c.problem, c.id)
		}
	}
}

func TestAnswers(t *testing.T) {
	for _, c := range []struct{ name, got, want string }{
		{"a result", string(Result([]byte(`7`), []byte(`{}`))), `{"jsonrpc":"2.0","id":7,"result":{}}`},
		{"a result to no id", string(Result(nil, []byte(`{}`))), `{"jsonrpc":"2.0","id":null,"result":{}}`},
		{"an error", string(ErrorResponse([]byte(`"a"`), -32601, "no")), `{"error":{"code":-32601,"message":"no"},"id":"a","jsonrpc":"2.0"}`},
		{"an error with data", string(ErrorResponseData(nil, -32602, "no", map[string]any{"x": 1})), `{"error":{"code":-32602,"data":{"x":1},"message":"no"},"id":null,"jsonrpc":"2.0"}`},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.name, c.got, c.want)
		}
	}
	if _, bad := Params(Message{ID: []byte(`1`), Method: "tools/list", Params: []byte(`[]`)}); string(bad) != `{"error":{"code":-32602,"message":"Invalid params: the params of tools/list must be an object"},"id":1,"jsonrpc":"2.0"}` {
		t.Errorf("Params of an array: %s", bad)
	}
	if p, bad := Params(Message{Params: []byte(`null`)}); p != nil || bad != nil {
		t.Errorf("Params of null: %s %s", p, bad)
	}
}
