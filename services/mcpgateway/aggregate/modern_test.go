package aggregate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/lib/mcptest"
	"github.com/zestmcp/zest/lib/waitfor"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve/mcpservetest"
	"google.golang.org/protobuf/proto"
)

const modernMeta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// modernItems sends one request of 2026-07-28 (no session) and returns every item of the
// answer; it fails the test if a session is started.
func (f fixture) modernItems(t *testing.T, ctx context.Context, preset, method, name, body string) []*mcpservetest.Item {
	t.Helper()
	stream, err := f.mcp.Exchange(ctx, &mcpservetest.Request{PresetID: preset, ProtocolVersion: "2026-07-28",
		McpMethod: method, McpName: name, Payload: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	var items []*mcpservetest.Item
	for {
		item, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return items
		}
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if item.Session != "" {
			t.Fatalf("%s: a session was started for a request of 2026-07-28", body)
		}
		items = append(items, item)
	}
}

// TestModernRequests: a preset serves 2026-07-28 without sessions: server/discover unites the
// providers as initialize does, lists and calls are routed by chat_name and URI as in a
// session, every result carries what the revision asks (resultType, serverInfo, cache hints
// on lists and reads), and the revision's errors keep the request's id and HTTP class.
func TestModernRequests(t *testing.T) {
	f := newFixture(t, "")
	ctx := withKey(t.Context(), testKeys.API)
	req := func(id, method, params string) string {
		if params == "" {
			params = `{"_meta":` + modernMeta + `}`
		} else {
			params = strings.Replace(params, "{", `{"_meta":`+modernMeta+`,`, 1)
		}
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + strings.Replace(params, "{", `{"_meta":`+modernMeta+`,`, 1) + `}`
	}
	for _, c := range []struct {
		name, method, mcpName, body string
		want, not                   []string
		malformed, notFound         bool
	}{
		{"server/discover unites the providers", "server/discover", "", req("1", "server/discover", ""),
			[]string{`"supportedVersions":["2026-07-28"`, `"name":"zest-preset-all"`, `"tools":{"listChanged":true}`, `"prompts":{`, `"resources":{"listChanged":true}`, `"completions":{}`, `the beta server`, `"resultType":"complete"`}, []string{`hidden`, `subscribe`}, false, false},
		{"tools/list by chat_name with cache hints", "tools/list", "", req("2", "tools/list", ""),
			[]string{`"id":2`, `"lemonade_echo"`, `"mcp_alpha__echo"`, `"mcp_beta__`, `"ttlMs":0`, `"cacheScope":"private"`, `"resultType":"complete"`, `"io.modelcontextprotocol/serverInfo":{"name":"zest-preset-all"`}, []string{`"mcp_alpha__secret"`, `mcp_hidden`}, false, false},
		{"tools/call of a server's tool", "tools/call", "mcp_alpha__echo", req(`"a"`, "tools/call", `{"name":"mcp_alpha__echo","arguments":{"message":"hi"}}`),
			[]string{`"id":"a"`, `alpha echo: hi`, `"resultType":"complete"`}, nil, false, false},
		{"tools/call of a built-in tool", "tools/call", "lemonade_echo", req("3", "tools/call", `{"name":"lemonade_echo","arguments":{"message":"hi"}}`),
			[]string{`"id":3`, `builtin echo: hi`, `"resultType":"complete"`}, nil, false, false},
		{"a filtered tool is unknown", "tools/call", "mcp_alpha__secret", req("4", "tools/call", `{"name":"mcp_alpha__secret"}`),
			[]string{`"id":4`, `"code":-32602`, `Unknown tool`}, []string{`the secret`}, true, false},
		{"prompts/get by chat_name", "prompts/get", "mcp_beta__greet", req("5", "prompts/get", `{"name":"mcp_beta__greet","arguments":{"who":"you"}}`),
			[]string{`"id":5`, `beta greets you`, `"resultType":"complete"`}, nil, false, false},
		{"resources/read by URI, with cache hints", "resources/read", "alpha://doc", req("6", "resources/read", `{"uri":"alpha://doc"}`),
			[]string{`"id":6`, `doc of alpha`, `"ttlMs"`, `"cacheScope"`}, nil, false, false},
		{"resources/templates/list", "resources/templates/list", "", req("7", "resources/templates/list", ""),
			[]string{`"id":7`, `alpha://items/{id}`, `beta://items/{id}`, `"ttlMs"`}, nil, false, false},
		{"completion/complete by a prompt's chat_name", "completion/complete", "", req("8", "completion/complete", `{"ref":{"type":"ref/prompt","name":"mcp_alpha__greet"},"argument":{"name":"who","value":""}}`),
			[]string{`"id":8`, `alpha-greet-who`}, nil, false, false},
		{"ping was removed", "ping", "", req("9", "ping", ""), []string{`"id":9`, `"code":-32601`}, nil, false, true},
		{"logging/setLevel was removed", "logging/setLevel", "", req("10", "logging/setLevel", `{"level":"debug"}`), []string{`"id":10`, `"code":-32601`}, nil, false, true},
		{"resources/subscribe was removed", "resources/subscribe", "", req("11", "resources/subscribe", `{"uri":"alpha://doc"}`), []string{`"id":11`, `"code":-32601`}, nil, false, true},
		{"an unknown method", "nope/nothing", "", req("12", "nope/nothing", ""), []string{`"id":12`, `"code":-32601`}, nil, false, true},
		{"initialize was removed", "initialize", "", req("13", "initialize", ""), []string{`"id":13`, `"code":-32601`}, nil, false, true},
		{"Mcp-Method must mirror the body", "tools/call", "", req("14", "tools/list", ""), []string{`"id":14`, `"code":-32020`}, nil, true, false},
		{"Mcp-Name must mirror the body", "tools/call", "mcp_alpha__slow", req("15", "tools/call", `{"name":"mcp_alpha__echo"}`), []string{`"id":15`, `"code":-32020`}, nil, true, false},
		{"_meta must name the version", "tools/list", "", `{"jsonrpc":"2.0","id":16,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}}`,
			[]string{`"id":16`, `"code":-32602`}, nil, true, false},
		{"the client's capabilities are required", "tools/list", "", `{"jsonrpc":"2.0","id":17,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			[]string{`"id":17`, `"code":-32602`, `clientCapabilities`}, nil, true, false},
		{"subscriptions/listen with nothing asked ends at once", "subscriptions/listen", "", req("18", "subscriptions/listen", `{"notifications":{}}`),
			[]string{`"id":18`, `"io.modelcontextprotocol/subscriptionId":18`, `"resultType":"complete"`}, nil, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			items := f.modernItems(t, ctx, "all", c.method, c.mcpName, c.body)
			last := items[len(items)-1]
			if !last.Final || last.Malformed() != c.malformed || last.MethodNotFound() != c.notFound {
				t.Fatalf("final item %+v, want malformed %v, method_not_found %v", last, c.malformed, c.notFound)
			}
			msg := string(last.Message)
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("answer %s lacks %s", msg, w)
				}
			}
			for _, w := range c.not {
				if strings.Contains(msg, w) {
					t.Errorf("answer %s holds %s", msg, w)
				}
			}
		})
	}
	// Notifications before the answer: a provider's progress with the client's token, and a
	// built-in tool's log lines at or above the _meta logLevel (none without one).
	for _, c := range []struct {
		name, meta string
		want       []string
	}{
		// mcp-go's server (alpha) writes notifications from a goroutine of their own, so its
		// last progress may come after its result, and is then dropped: one at least precedes.
		{"progress of a provider", `"progressToken":"p1"`, []string{`"progressToken":"p1"`, `alpha slow done`}},
		{"a log line at the level asked", `"io.modelcontextprotocol/logLevel":"debug"`, []string{`"notifications/message"`, `logged`}},
		{"no log line without a level", ``, []string{`logged`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tool := "lemonade_log"
			if strings.Contains(c.name, "progress") {
				tool = "mcp_alpha__slow"
			}
			meta := strings.TrimSuffix(modernMeta, "}")
			if c.meta != "" {
				meta += "," + c.meta
			}
			items := f.modernItems(t, ctx, "all", "tools/call", tool, `{"jsonrpc":"2.0","id":"n","method":"tools/call","params":{"name":"`+tool+`","_meta":`+meta+`}}}`)
			if len(items) > len(c.want) && strings.Contains(c.name, "progress") {
				items = append(items[:1], items[len(items)-1]) // the second progress, when it came in time
			}
			if len(items) != len(c.want) {
				t.Fatalf("%d items %v, want %d", len(items), items, len(c.want))
			}
			for i, w := range c.want {
				if !strings.Contains(string(items[i].Message), w) || items[i].Final != (i == len(items)-1) {
					t.Errorf("item %d: %s (final %v), want %s", i, items[i].Message, items[i].Final, w)
				}
			}
		})
	}

	// A notification is accepted and answered with nothing (HTTP 202).
	if items := f.modernItems(t, ctx, "all", "notifications/cancelled", "", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"_meta":`+modernMeta+`}}`); len(items) != 0 {
		t.Errorf("a notification was answered: %v", items)
	}
	// A session-era request beside it still needs its session.
	if _, _, err := f.exchange(ctx, "all", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); err == nil {
		t.Error("a session-era request without a session was served")
	}
}

// TestModernOnMCP: /mcp with ZEST_MCP_PRESET serves the preset's providers in 2026-07-28 too.
func TestModernOnMCP(t *testing.T) {
	f := newFixture(t, "all")
	ctx := withKey(t.Context(), testKeys.API)
	for _, c := range []struct{ method, name, body, want string }{
		{"server/discover", "", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":` + modernMeta + `}}`, `"name":"zest-preset-all"`},
		{"tools/call", "mcp_beta__echo", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp_beta__echo","arguments":{"message":"yo"},"_meta":` + modernMeta + `}}`, `beta echo: yo`},
	} {
		items := f.modernItems(t, ctx, "", c.method, c.name, c.body)
		if msg := string(items[len(items)-1].Message); !strings.Contains(msg, c.want) || !strings.Contains(msg, `"resultType":"complete"`) {
			t.Errorf("%s on /mcp: %s", c.method, msg)
		}
	}
}

// TestModernListen: subscriptions/listen grants the list_changed notifications the preset
// declares, streams a provider's tagged with the subscription id, and stays open until the
// client goes away.
func TestModernListen(t *testing.T) {
	f := newFixture(t, "")
	ctx, cancel := context.WithCancel(withKey(t.Context(), testKeys.API))
	defer cancel()
	stream, err := f.mcp.Exchange(ctx, &mcpservetest.Request{PresetID: "all", ProtocolVersion: "2026-07-28", McpMethod: "subscriptions/listen",
		Payload: []byte(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"resourcesSubscribe":["alpha://doc"]},"_meta":` + modernMeta + `}}`)})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if a := string(ack.Message); ack.Final || !strings.Contains(a, `"notifications/subscriptions/acknowledged"`) ||
		!strings.Contains(a, `"notifications":{"toolsListChanged":true}`) || !strings.Contains(a, `"io.modelcontextprotocol/subscriptionId":"L"`) {
		t.Fatalf("acknowledgement %s", a)
	}
	// alpha gets new tools until its list_changed reaches the stream: Zest's own
	// subscriptions/listen to alpha (a 2026-07-28 upstream) opens in the background after it
	// connected, and a change before it is open reaches nobody.
	got := make(chan string, 1)
	go func() {
		item, err := stream.Recv()
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(item.Message)
	}()
	late := 0
	waitfor.True(t, 10*time.Second, "a tools/list_changed on the stream", func() bool {
		f.alpha.AddTool(mcp.NewTool(fmt.Sprintf("late%d", late)), nil)
		late++
		return len(got) > 0
	})
	select {
	case n := <-got:
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Meta map[string]any `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(n), &msg) != nil || msg.Method != "notifications/tools/list_changed" || msg.Params.Meta["io.modelcontextprotocol/subscriptionId"] != "L" {
			t.Fatalf("notification %s", n)
		}
	default:
		t.Fatal("no tools/list_changed within 10 s")
	}
}

// TestModernBridgesProviderRequests: a session-era provider's request during a modern
// client's call through a preset ends the request with an input_required result (the call
// parks, as on /mcp/servers/{id}), whose signed requestState names the provider; the retry
// with the client's answer resumes the call there. The state is refused for another
// provider, and a client that did not declare the capability is asked nothing.
func TestModernBridgesProviderRequests(t *testing.T) {
	f := newFixture(t, "")
	// asker and other are session-era servers (alpha is of 2026-07-28: its rounds are its
	// client's).
	for _, id := range []string{"asker", "other"} {
		u := mcptest.Start(t, mcptest.Options{Ask: true})
		if err := f.reg.PutServer(t.Context(), &mcpgatewayv1.ServerConfig{Id: id, Transport: "streamable-http", Url: u.URL, Enabled: proto.Bool(true), Expose: proto.Bool(true), TimeoutMs: proto.Int32(5000)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.reg.PutPreset(t.Context(), &mcpgatewayv1.Preset{Id: "asks", McpServerIds: []string{"lemonade", "alpha", "asker", "other"}}); err != nil {
		t.Fatal(err)
	}
	ctx := withKey(t.Context(), testKeys.API)
	meta := func(caps string) string {
		return `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}`
	}
	ask := `"name":"mcp_asker__ask","arguments":{"method":"sampling/createMessage","params":{"maxTokens":3}}`
	final := func(items []*mcpservetest.Item) map[string]any {
		t.Helper()
		last := items[len(items)-1]
		var r struct {
			Result map[string]any `json:"result"`
		}
		if !last.Final || json.Unmarshal(last.Message, &r) != nil || r.Result == nil {
			t.Fatalf("final item %+v", last)
		}
		return r.Result
	}

	first := final(f.modernItems(t, ctx, "asks", "tools/call", "mcp_asker__ask",
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+ask+`,"_meta":`+meta(`{"sampling":{}}`)+`}}`))
	state, _ := first["requestState"].(string)
	reqs, _ := first["inputRequests"].(map[string]any)
	asked, _ := reqs["zest-1"].(map[string]any)
	if first["resultType"] != "input_required" || !strings.HasPrefix(state, "zs.") || len(reqs) != 1 || asked["method"] != "sampling/createMessage" {
		t.Fatalf("first round: %v", first)
	}
	st, err := f.codec.OpenState(state, "asker", "tools/call", time.Now())
	if err != nil {
		t.Fatalf("the requestState does not name the provider: %v", err)
	}
	if st.Call == "" {
		t.Fatalf("the requestState names no call: %+v", st)
	}

	retry := func(id, name, args string) map[string]any {
		return final(f.modernItems(t, ctx, "asks", "tools/call", name,
			`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"`+name+`",`+args+`"requestState":"`+state+
				`","inputResponses":{"zest-1":{"role":"assistant","content":{"type":"text","text":"preset answer"},"model":"m"}},"_meta":`+meta(`{"sampling":{}}`)+`}}`))
	}
	// Routed to another provider, the state is refused, and the parked call still waits.
	var bad struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	items := f.modernItems(t, ctx, "asks", "tools/call", "mcp_other__echo",
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp_other__echo","arguments":{"text":"x"},"requestState":"`+state+`","inputResponses":{"zest-1":{}},"_meta":`+meta(`{"sampling":{}}`)+`}}`)
	if json.Unmarshal(items[len(items)-1].Message, &bad) != nil || bad.Error.Code != mcp.INVALID_PARAMS || !strings.Contains(bad.Error.Message, `MCP server "asker"`) {
		t.Fatalf("the state routed to another provider: %s", items[len(items)-1].Message)
	}
	done := retry("3", "mcp_asker__ask", `"arguments":{"method":"sampling/createMessage","params":{"maxTokens":3}},`)
	content, _ := done["content"].([]any)
	text := ""
	if len(content) == 1 {
		text, _ = content[0].(map[string]any)["text"].(string)
	}
	if done["resultType"] != "complete" || !strings.Contains(text, "preset answer") {
		t.Fatalf("the retry: %v", done)
	}
	// The call is spent: the same state again names no waiting call.
	items = f.modernItems(t, ctx, "asks", "tools/call", "mcp_asker__ask",
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{`+ask+`,"requestState":"`+state+`","inputResponses":{"zest-1":{}},"_meta":`+meta(`{"sampling":{}}`)+`}}`)
	if json.Unmarshal(items[len(items)-1].Message, &bad) != nil || bad.Error.Code != mcp.INVALID_PARAMS || !strings.Contains(bad.Error.Message, "no longer waits") {
		t.Fatalf("a spent state: %s", items[len(items)-1].Message)
	}

	// Without the capability the provider's request is answered for the client, which is
	// asked nothing.
	none := final(f.modernItems(t, ctx, "asks", "tools/call", "mcp_asker__ask",
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{`+ask+`,"_meta":`+meta(`{}`)+`}}`))
	if none["resultType"] != "complete" || none["inputRequests"] != nil {
		t.Fatalf("a client without sampling: %v", none)
	}
}
