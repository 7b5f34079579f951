package aggregate

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve/mcpservetest"
	"github.com/zestmcp/zest/services/mcpgateway/toolsearch"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// shapedPreset is preset "shaped": alpha and the built-in tools, alpha's echo served as "say"
// (message defaulted to "hi"), its slow tool hidden, the built-in echo as "builtin_say" with
// its message fixed.
func (f fixture) shapedPreset(t *testing.T) {
	t.Helper()
	p := &mcpgatewayv1.Preset{Id: "shaped", McpServerIds: []string{"lemonade", "alpha"}, Tools: []*mcpgatewayv1.PresetTool{
		{Tool: "mcp_alpha__echo", Name: "say", Description: "Say something back.", Arguments: &mcpgatewayv1.PresetToolArguments{
			Defaults: map[string]*structpb.Value{"message": structpb.NewStringValue("hi")}}},
		{Tool: "mcp_alpha__slow", Hidden: true},
		{Tool: "lemonade_echo", Name: "builtin_say", Arguments: &mcpgatewayv1.PresetToolArguments{
			Fixed: map[string]*structpb.Value{"message": structpb.NewStringValue("from the preset")}}},
	}}
	if err := f.reg.PutPreset(t.Context(), p); err != nil {
		t.Fatal(err)
	}
}

// TestShapedTools: a preset lists its tools shaped (renamed, described anew, hidden, fixed
// arguments out of the schema, defaulted ones marked), and a call of a shaped name reaches the
// tool itself with the arguments merged, recorded under the real tool and the name used; the
// old name of a renamed tool and a hidden tool are unknown; a call that sets a fixed argument
// to another value is a tool error naming it.
func TestShapedTools(t *testing.T) {
	f := newFixture(t, "")
	f.shapedPreset(t)
	ctx := withKey(t.Context(), testKeys.API)
	sess, init := f.open(t, ctx, "shaped")
	if instr, _ := init["instructions"].(string); !strings.Contains(instr, "The preset renames, describes or hides some tools") {
		t.Errorf("instructions %q do not say the tools are shaped", instr)
	}
	res := f.result(t, ctx, "shaped", sess, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if got := names(res["tools"], "name"); !slices.Equal(got, []string{"builtin_say", "lemonade_log", "lemonade_wait", "say"}) {
		t.Fatalf("tools = %q", got)
	}
	byName := map[string]map[string]any{}
	for _, it := range res["tools"].([]any) {
		byName[it.(map[string]any)["name"].(string)] = it.(map[string]any)
	}
	say, builtin := byName["say"], byName["builtin_say"]
	if say["description"] != "Say something back." || say["inputSchema"].(map[string]any)["properties"].(map[string]any)["message"].(map[string]any)["default"] != "hi" {
		t.Errorf("say = %v", say)
	}
	if props, _ := builtin["inputSchema"].(map[string]any)["properties"].(map[string]any); props["message"] != nil {
		t.Errorf("builtin_say's schema shows its fixed argument: %v", builtin)
	}
	text := func(body string) (string, bool) {
		t.Helper()
		r := f.result(t, ctx, "shaped", sess, body)
		b, _ := json.Marshal(r["content"])
		return string(b), r["isError"] == true
	}
	for _, c := range []struct {
		body, want string
		isErr      bool
	}{
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"say","arguments":{}}}`, "alpha echo: hi", false},
		{`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"say","arguments":{"message":"yo"}}}`, "alpha echo: yo", false},
		{`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"builtin_say"}}`, "builtin echo: from the preset", false},
		{`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"builtin_say","arguments":{"message":"other"}}}`, `argument \"message\" of tool \"builtin_say\" is set by this preset: leave it out of the call`, true},
	} {
		if got, isErr := text(c.body); !strings.Contains(got, c.want) || isErr != c.isErr {
			t.Errorf("%s: %s (isError %v), want %q", c.body, got, isErr, c.want)
		}
	}
	for _, name := range []string{"mcp_alpha__echo", "mcp_alpha__slow", "lemonade_echo"} {
		_, msgs, err := f.exchange(ctx, "shaped", sess, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"`+name+`","arguments":{}}}`)
		if err != nil || len(msgs) == 0 || !strings.Contains(string(msgs[len(msgs)-1]), `Unknown tool \"`+name+`\"`) {
			t.Errorf("%s: %q %v, want an unknown tool", name, msgs, err)
		}
	}
	// 2026-07-28, without a session: the same list.
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	items := f.modernItems(t, ctx, "shaped", "tools/list", "", `{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{`+meta+`}}`)
	var modern struct {
		Result map[string]any `json:"result"`
	}
	if len(items) == 0 || json.Unmarshal(items[len(items)-1].Message, &modern) != nil || modern.Result["tools"] == nil {
		t.Fatalf("2026-07-28 tools/list: %+v", items)
	}
	if got := names(modern.Result["tools"], "name"); !slices.Equal(got, []string{"builtin_say", "lemonade_log", "lemonade_wait", "say"}) {
		t.Errorf("2026-07-28 tools = %q", got)
	}
	calls, _ := f.activity.List(0, 0)
	type rec struct{ server, tool, chat, preset string }
	want := []rec{{"lemonade", "lemonade_echo", "builtin_say", "shaped"}, {"alpha", "echo", "say", "shaped"}, {"alpha", "echo", "say", "shaped"}}
	if len(calls) != len(want) {
		t.Fatalf("%d calls recorded, want %d: %+v", len(calls), len(want), calls)
	}
	for i, w := range want {
		if got := (rec{calls[i].Server, calls[i].Tool, calls[i].ChatName, calls[i].Preset}); got != w {
			t.Errorf("record %d: %+v, want %+v", i, got, w)
		}
	}
}

// TestShapeChangeAnnounced: a change of the preset's tools alone (its providers the same) tells
// its sessions' GET streams that the tools changed: a client lists the new names. Before, only
// a change of providers was announced.
func TestShapeChangeAnnounced(t *testing.T) {
	f := newFixture(t, "")
	f.shapedPreset(t)
	ctx := withKey(t.Context(), testKeys.API)
	sess, _ := f.open(t, ctx, "shaped")
	ch, err := mcpservetest.Listen(ctx, f.mcp, &mcpservetest.Request{PresetID: "shaped", SessionID: sess})
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.reg.GetPreset(t.Context(), "shaped")
	if err != nil {
		t.Fatal(err)
	}
	p = proto.CloneOf(p)
	p.Tools[0].Name = "speak"
	if err := f.reg.PutPreset(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	f.agg.PresetChanged("shaped")
	select {
	case m := <-ch:
		if !strings.Contains(m, "list_changed") {
			t.Fatalf("the stream got %s", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no list_changed within 5 s of the preset's change")
	}
}

// TestShapedToolSearch: a preset with both tool_search and shaping answers search_tools with
// its tools shaped — a hidden tool is never found, a renamed one is found by its new name,
// described anew, its fixed argument out of the schema — and call_tool maps the new name
// back, the fixed argument applied; the hidden tool and the renamed one's old name are
// unknown to call_tool, as to tools/call. The index stays the shared one.
func TestShapedToolSearch(t *testing.T) {
	f := newFixture(t, "")
	p := &mcpgatewayv1.Preset{Id: "shapedsearch", McpServerIds: []string{"lemonade", "alpha", "beta"}, ToolSearch: true, Tools: []*mcpgatewayv1.PresetTool{
		{Tool: "mcp_alpha__echo", Name: "say", Description: "Say something back.", Arguments: &mcpgatewayv1.PresetToolArguments{
			Fixed: map[string]*structpb.Value{"message": structpb.NewStringValue("from the preset")}}},
		{Tool: "mcp_beta__echo", Hidden: true},
	}}
	if err := f.reg.PutPreset(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	ctx := withKey(t.Context(), testKeys.API)
	sess, _ := f.open(t, ctx, "shapedsearch")
	call := func(name, args string) (string, bool) {
		t.Helper()
		r := f.result(t, ctx, "shapedsearch", sess, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"`+name+`","arguments":`+args+`}}`)
		content, _ := r["content"].([]any)
		if len(content) == 0 {
			t.Fatalf("%s %s: no content: %v", name, args, r)
		}
		text, _ := content[0].(map[string]any)["text"].(string)
		return text, r["isError"] == true
	}
	text, isErr := call("search_tools", `{"query":"echo a message back","limit":10}`)
	if isErr {
		t.Fatalf("search_tools: %s", text)
	}
	var res struct {
		Tools []toolsearch.Found `json:"tools"`
	}
	if err := json.Unmarshal([]byte(text), &res); err != nil {
		t.Fatalf("search_tools answered %s: %v", text, err)
	}
	byName := map[string]toolsearch.Found{}
	for _, fd := range res.Tools {
		byName[fd.Name] = fd
	}
	for _, gone := range []string{"mcp_alpha__echo", "mcp_beta__echo"} {
		if _, ok := byName[gone]; ok {
			t.Errorf("search_tools found %s, which the preset renames or hides: %s", gone, text)
		}
	}
	say, ok := byName["say"]
	if !ok || byName["lemonade_echo"].Name == "" {
		t.Fatalf("search_tools found %s, want say (alpha's echo renamed) and lemonade_echo", text)
	}
	if props, _ := say.InputSchema["properties"].(map[string]any); say.Description != "Say something back." || say.Server != "alpha" || props["message"] != nil {
		t.Errorf("say found as %+v, want its new description and no fixed message in its schema", say)
	}
	if text, isErr := call("call_tool", `{"name":"say"}`); isErr || text != "alpha echo: from the preset" {
		t.Errorf("call_tool say: %q (isError %v), want alpha's echo with the fixed message", text, isErr)
	}
	if text, isErr := call("call_tool", `{"name":"say","arguments":{"message":"other"}}`); !isErr || !strings.Contains(text, `argument "message" of tool "say" is set by this preset`) {
		t.Errorf("call_tool say with another message: %q (isError %v)", text, isErr)
	}
	for _, name := range []string{"mcp_alpha__echo", "mcp_beta__echo"} {
		_, msgs, err := f.exchange(ctx, "shapedsearch", sess, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"call_tool","arguments":{"name":"`+name+`"}}}`)
		if err != nil || len(msgs) == 0 || !strings.Contains(string(msgs[len(msgs)-1]), `Unknown tool \"`+name+`\"`) {
			t.Errorf("call_tool %s: %q %v, want an unknown tool", name, msgs, err)
		}
	}
	calls, _ := f.activity.List(0, 0)
	if len(calls) != 1 || calls[0].Server != "alpha" || calls[0].Tool != "echo" || calls[0].ChatName != "say" {
		t.Errorf("the activity has %+v, want one call of alpha's echo, named say", calls)
	}
}

// TestShapeChangeAnnouncedModern: the same for a 2026-07-28 client: a change of the preset's
// tools alone reaches its subscriptions/listen stream as a tools/list_changed tagged with the
// subscription id. Before, the modern stream compared the providers only, not their shaping.
func TestShapeChangeAnnouncedModern(t *testing.T) {
	f := newFixture(t, "")
	f.shapedPreset(t)
	ctx, cancel := context.WithCancel(withKey(t.Context(), testKeys.API))
	defer cancel()
	stream, err := f.mcp.Exchange(ctx, &mcpservetest.Request{PresetID: "shaped", ProtocolVersion: "2026-07-28", McpMethod: "subscriptions/listen",
		Payload: []byte(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":` + modernMeta + `}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if ack, err := stream.Recv(); err != nil || !strings.Contains(string(ack.Message), `"notifications":{"toolsListChanged":true}`) {
		t.Fatalf("acknowledgement %v, %v", ack, err)
	}
	got := make(chan string, 1)
	go func() {
		item, err := stream.Recv()
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(item.Message)
	}()
	p, err := f.reg.GetPreset(t.Context(), "shaped")
	if err != nil {
		t.Fatal(err)
	}
	p = proto.CloneOf(p)
	p.Tools[0].Name = "speak"
	if err := f.reg.PutPreset(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	f.agg.PresetChanged("shaped")
	select {
	case m := <-got:
		if !strings.Contains(m, `"method":"notifications/tools/list_changed"`) || !strings.Contains(m, `"io.modelcontextprotocol/subscriptionId":"L"`) {
			t.Fatalf("the stream got %s", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no tools/list_changed within 5 s of the preset's change")
	}
}
