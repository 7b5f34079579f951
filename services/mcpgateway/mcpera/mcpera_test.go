package mcpera

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestClassify(t *testing.T) {
	const meta26 = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	for _, c := range []struct {
		name, header, body string
		modern             bool
		meta               string
	}{
		{"session era, no header", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false, ""},
		{"session era header", "2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false, ""},
		{"modern by header alone", "2026-07-28", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, true, ""},
		{"modern by _meta alone", "", meta26, true, "2026-07-28"},
		{"modern by both", "2026-07-28", meta26, true, "2026-07-28"},
		{"a later revision is modern", "2027-01-01", `{"jsonrpc":"2.0","id":1,"method":"x"}`, true, ""},
		{"an older _meta version is the session era", "", `{"jsonrpc":"2.0","id":1,"method":"x","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`, false, "2025-11-25"},
		{"a batch is the session era", "", `[` + meta26 + `]`, false, ""},
		{"the key outside _meta is not a version", "", `{"jsonrpc":"2.0","id":1,"method":"x","params":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Classify(c.header, []byte(c.body))
			if r.Modern != c.modern || r.MetaVersion != c.meta {
				t.Fatalf("Classify = modern %v meta %q, want %v %q", r.Modern, r.MetaVersion, c.modern, c.meta)
			}
		})
	}
}

func TestCheckKeepsTheID(t *testing.T) {
	r := Classify("2026-07-28", []byte(`{"jsonrpc":"2.0","id":"abc","method":"tools/list","params":{}}`))
	got := r.Check(http.Header{"Mcp-Method": {"tools/list"}}, json.RawMessage(`"abc"`), "tools/list", []string{Version})
	var e struct {
		ID    string
		Error struct{ Code int }
	}
	if json.Unmarshal(got, &e) != nil || e.ID != "abc" || e.Error.Code != -32602 {
		t.Fatalf("Check = %s", got)
	}
	if s := Status(got); s != http.StatusBadRequest {
		t.Fatalf("Status = %d, want 400", s)
	}
	if s := Status([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"x"}}`)); s != http.StatusNotFound {
		t.Fatalf("Status of -32601 = %d, want 404", s)
	}
	if s := Status([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"x"}}`)); s != http.StatusOK {
		t.Fatalf("Status of -32603 = %d, want 200 (an internal error is HTTP 200)", s)
	}
}

func TestDecorate(t *testing.T) {
	info := map[string]any{"name": "up", "version": "1"}
	for _, c := range []struct{ method, in, want string }{
		{"tools/list", `{"tools":[]}`, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up","version":"1"}},"cacheScope":"private","resultType":"complete","tools":[],"ttlMs":0}`},
		{"tools/call", `{"content":[],"_meta":{"x":1}}`, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up","version":"1"},"x":1},"content":[],"resultType":"complete"}`},
		{"tools/call", `{"resultType":"input_required","ttlMs":5}`, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up","version":"1"}},"resultType":"input_required","ttlMs":5}`},
		{"resources/read", `{"contents":[],"ttlMs":60000,"cacheScope":"public"}`, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up","version":"1"}},"cacheScope":"public","contents":[],"resultType":"complete","ttlMs":60000}`},
		{"tools/call", `[1]`, `[1]`},
	} {
		if got := Decorate(c.method, json.RawMessage(c.in), info); string(got) != c.want {
			t.Errorf("Decorate(%s, %s) = %s, want %s", c.method, c.in, got, c.want)
		}
	}
}

func TestStripMeta(t *testing.T) {
	for in, want := range map[string]string{
		`{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p"}}`: `{"_meta":{"progressToken":"p"},"name":"x"}`,
		`{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/logLevel":"info"}}`:                           `{"name":"x"}`,
		`{"name":"x"}`: `{"name":"x"}`,
	} {
		if got := StripMeta(json.RawMessage(in)); string(got) != want {
			t.Errorf("StripMeta(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestOf: the era of a request and, in the session era only, the refusal of a version header
// not served; the one check the three endpoints each made.
func TestOf(t *testing.T) {
	for _, c := range []struct {
		header  string
		modern  bool
		refused bool
	}{
		{"", false, false},
		{"2025-06-18", false, false},
		{"2024-10-01", false, true},
		{Version, true, false},
		{"2027-01-01", true, false}, // a later revision is modern: its own checks refuse it
	} {
		req := &mcphttp.Request{Header: http.Header{}, Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)}
		if c.header != "" {
			req.Header.Set(mcphttp.HeaderProtocol, c.header)
		}
		r, err := Of(req)
		if r.Modern != c.modern || (err != nil) != c.refused {
			t.Errorf("header %q: modern %v, err %v", c.header, r.Modern, err)
		}
		if c.refused && (status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "send one of")) {
			t.Errorf("header %q: %v, want InvalidArgument naming the versions served", c.header, err)
		}
	}
}

// TestAdmit: what every endpoint checks first of a 2026-07-28 request, in order: the
// envelope, a posted response, the jsonrpc member, the era's checks, the removed methods; a
// notification and a request that pass get no answer.
func TestAdmit(t *testing.T) {
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for _, c := range []struct{ name, method, body, want string }{
		{"not JSON", "", `{`, `{"error":{"code":-32700,"message":"Parse error: the body is not valid JSON"},"id":null,"jsonrpc":"2.0"}`},
		{"a response", "", `{"jsonrpc":"2.0","id":4,"result":{}}`, `"code":-32600,"message":"Invalid Request: in protocol 2026-07-28 a server sends no requests`},
		{"another jsonrpc", "tools/list", `{"jsonrpc":"1.0","id":4,"method":"tools/list","params":{` + meta + `}}`, `{"error":{"code":-32600,"message":"Invalid Request: \"jsonrpc\" must be \"2.0\""},"id":4,"jsonrpc":"2.0"}`},
		{"no capabilities", "tools/list", `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, `"code":-32602`},
		{"a removed method", "ping", `{"jsonrpc":"2.0","id":4,"method":"ping","params":{` + meta + `}}`, `{"error":{"code":-32601,"message":"Method not found: ping was removed in protocol 2026-07-28"},"id":4,"jsonrpc":"2.0"}`},
		{"a notification", "notifications/cancelled", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,` + meta + `}}`, ""},
		{"a request", "tools/list", `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{` + meta + `}}`, ""},
	} {
		h := http.Header{}
		h.Set("Mcp-Protocol-Version", "2026-07-28")
		if c.method != "" {
			h.Set("Mcp-Method", c.method)
		}
		req := &mcphttp.Request{Header: h, Body: []byte(c.body)}
		msg, bad := Admit(req, Classify("2026-07-28", req.Body))
		switch {
		case c.want == "" && bad != nil:
			t.Errorf("%s: refused with %s", c.name, bad)
		case c.want != "" && !strings.Contains(string(bad), c.want):
			t.Errorf("%s: %s, want %s", c.name, bad, c.want)
		case c.want == "" && msg.Method != c.method:
			t.Errorf("%s: the message's method is %q", c.name, msg.Method)
		}
	}
}

// TestDiscover: server/discover names the versions served, the capabilities (an empty object
// for none), the instructions only when there are some, and the serverInfo.
func TestDiscover(t *testing.T) {
	got, err := Discover(json.RawMessage(`"d"`), nil, "", map[string]any{"name": "s"})
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		ID     string `json:"id"`
		Result struct {
			Versions     []string       `json:"supportedVersions"`
			Capabilities map[string]any `json:"capabilities"`
			Instructions *string        `json:"instructions"`
			Meta         map[string]any `json:"_meta"`
		} `json:"result"`
	}
	if err := json.Unmarshal(got, &res); err != nil {
		t.Fatal(err)
	}
	if res.ID != "d" || len(res.Result.Versions) == 0 || res.Result.Capabilities == nil || res.Result.Instructions != nil ||
		res.Result.Meta["io.modelcontextprotocol/serverInfo"].(map[string]any)["name"] != "s" {
		t.Errorf("Discover = %s", got)
	}
	if got, _ := Discover(json.RawMessage(`1`), map[string]any{"tools": map[string]any{}}, "Use it.", nil); !strings.Contains(string(got), `"instructions":"Use it."`) {
		t.Errorf("Discover with instructions = %s", got)
	}
}

// TestParamsFor: a modern server gets the client's _meta as it came, a session-era one none
// of the revision's members.
func TestParamsFor(t *testing.T) {
	params := json.RawMessage(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":1},"x":1}`)
	if got := ParamsFor("2026-07-28", params); string(got) != string(params) {
		t.Errorf("modern: %s", got)
	}
	if got := string(ParamsFor("2025-11-25", params)); strings.Contains(got, "io.modelcontextprotocol/") || !strings.Contains(got, `"progressToken":1`) {
		t.Errorf("session era: %s", got)
	}
}
