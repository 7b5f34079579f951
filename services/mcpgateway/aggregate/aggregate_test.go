package aggregate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/lib/grpctest"
	"github.com/zestmcp/zest/lib/keyauth"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/activity"
	"github.com/zestmcp/zest/services/mcpgateway/catalog"
	"github.com/zestmcp/zest/services/mcpgateway/federate"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve/mcpservetest"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/session"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"github.com/zestmcp/zest/services/mcpgateway/toolsearch"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// upstreamServer is an in-process Streamable HTTP MCP server named name: tools echo and
// secret, a prompt "greet", a resource <name>://doc, a template <name>://items/{id}, and
// (when paged) tools listed two per page.
func upstreamServer(t testing.TB, name string, paged bool) (*server.MCPServer, string) {
	t.Helper()
	opts := []server.ServerOption{server.WithToolCapabilities(true), server.WithPromptCapabilities(true),
		server.WithResourceCapabilities(true, true), server.WithLogging(), server.WithInstructions("the " + name + " server"),
		server.WithCompletions(), server.WithPromptCompletionProvider(completer(name)), server.WithResourceCompletionProvider(completer(name))}
	if paged {
		opts = append(opts, server.WithPaginationLimit(2))
	}
	srv := server.NewMCPServer(name+"-server", "1.0.0", opts...)
	srv.AddTool(mcp.NewTool("echo", mcp.WithString("message")), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(name + " echo: " + req.GetString("message", "")), nil
	})
	srv.AddTool(mcp.NewTool("secret"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("the secret of " + name), nil
	})
	srv.AddTool(mcp.NewTool("slow"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
			return mcp.NewToolResultError("no progress token"), nil
		}
		for i := 1; i <= 2; i++ {
			if err := server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/progress",
				map[string]any{"progressToken": req.Params.Meta.ProgressToken, "progress": i, "total": 2}); err != nil {
				return nil, err
			}
		}
		return mcp.NewToolResultText(name + " slow done"), nil
	})
	if paged {
		for i := range 3 {
			srv.AddTool(mcp.NewTool(fmt.Sprintf("extra%d", i)), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("extra"), nil
			})
		}
	}
	srv.AddPrompt(mcp.NewPrompt("greet", mcp.WithArgument("who")), func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return mcp.NewGetPromptResult("greeting", []mcp.PromptMessage{mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(name+" greets "+req.Params.Arguments["who"]))}), nil
	})
	srv.AddResource(mcp.NewResource(name+"://doc", "doc"), func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, Text: "doc of " + name}}, nil
	})
	srv.AddResourceTemplate(mcp.NewResourceTemplate(name+"://items/{id}", "item"), func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, Text: "item of " + name}}, nil
	})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(srv))
	t.Cleanup(hs.Close)
	return srv, hs.URL
}

// completer completes every argument with <server>-<prompt or template>-<argument>.
type completer string

func (c completer) CompletePromptArgument(_ context.Context, prompt string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	return &mcp.Completion{Values: []string{string(c) + "-" + prompt + "-" + arg.Name}}, nil
}

func (c completer) CompleteResourceArgument(_ context.Context, uri string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	return &mcp.Completion{Values: []string{string(c) + "-" + uri + "-" + arg.Name}}, nil
}

var testKeys = keyauth.Keys{API: "api-key-0123", Admin: "admin-key-0123"}

type fixture struct {
	mcp   mcpgatewayv1.McpServiceClient
	reg   *registry.Bolt
	codec *session.Codec
	agg   *Handler
	alpha *server.MCPServer
	// waiting receives when the built-in tool lemonade_wait begins; it runs until cancelled.
	waiting chan struct{}
	// activity is the ring every path records its tool calls in, as in mcpgateway.
	activity *activity.Log
	// search is the tool-search index of preset "search" (tool_search on).
	search *toolsearch.Shared
	// versions counts the catalog's versions the index was asked for.
	versions *catalogVersions
}

// catalogVersions is the catalog, counting the snapshots (versions) it gave.
type catalogVersions struct {
	cat  *catalog.Catalog
	mu   sync.Mutex
	seen map[*catalog.Snapshot]bool
}

func (v *catalogVersions) Snapshot(ctx context.Context) (*catalog.Snapshot, error) {
	s, err := v.cat.Snapshot(ctx)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seen[s] = true
	return s, err
}

// count is the number of versions given so far.
func (v *catalogVersions) count() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return int64(len(v.seen))
}

// newFixture serves McpService with servers alpha (secret denied), beta (tools paged),
// hidden (expose false, at alpha's URL), off (disabled) and down (nothing listens), the
// built-in tool lemonade_echo, and presets: "all" (lemonade, alpha, beta, hidden), "two"
// (alpha, down), "off" (off). /mcp serves preset ownPreset when it is not "". The handler
// checks its GET streams every 50 ms unless opts say otherwise.
func newFixture(t testing.TB, ownPreset string, opts ...Option) fixture {
	t.Helper()
	alpha, alphaURL := upstreamServer(t, "alpha", false)
	_, betaURL := upstreamServer(t, "beta", true)
	// many declares prompts only: a server without tools is a provider too.
	many := server.NewMCPServer("many", "1", server.WithPromptCapabilities(false), server.WithPaginationLimit(1))
	for i := range maxPages + 1 {
		many.AddPrompt(mcp.NewPrompt(fmt.Sprintf("p %03d", i)), func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return mcp.NewGetPromptResult("found", []mcp.PromptMessage{mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("found"))}), nil
		})
	}
	manyHTTP := httptest.NewServer(server.NewStreamableHTTPServer(many))
	t.Cleanup(manyHTTP.Close)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + lis.Addr().String() + "/mcp"
	lis.Close()
	reg, err := registry.Open(filepath.Join(t.TempDir(), "registry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	for _, cfg := range []*mcpgatewayv1.ServerConfig{
		{Id: "alpha", Transport: "streamable-http", Url: alphaURL, Enabled: proto.Bool(true), Expose: proto.Bool(true), TimeoutMs: proto.Int32(5000), ToolsDeny: []string{"secret"}},
		{Id: "beta", Transport: "streamable-http", Url: betaURL, Enabled: proto.Bool(true), Expose: proto.Bool(true), TimeoutMs: proto.Int32(5000)},
		{Id: "hidden", Transport: "streamable-http", Url: alphaURL, Enabled: proto.Bool(true), Expose: proto.Bool(false), TimeoutMs: proto.Int32(5000)},
		{Id: "off", Transport: "streamable-http", Url: alphaURL, Enabled: proto.Bool(false), Expose: proto.Bool(true), TimeoutMs: proto.Int32(5000)},
		{Id: "down", Transport: "streamable-http", Url: downURL, Enabled: proto.Bool(true), Expose: proto.Bool(true), TimeoutMs: proto.Int32(2000)},
		{Id: "many", Transport: "streamable-http", Url: manyHTTP.URL, Enabled: proto.Bool(true), Expose: proto.Bool(true), TimeoutMs: proto.Int32(5000)},
	} {
		if err := reg.PutServer(t.Context(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*mcpgatewayv1.Preset{
		{Id: "all", McpServerIds: []string{"lemonade", "alpha", "beta", "hidden"}},
		{Id: "two", McpServerIds: []string{"alpha", "down"}},
		{Id: "off", McpServerIds: []string{"off"}},
		{Id: "many", McpServerIds: []string{"many"}},
		{Id: "search", McpServerIds: []string{"lemonade", "alpha", "beta", "hidden"}, ToolSearch: true},
	} {
		if err := reg.PutPreset(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	codec, err := session.NewCodec(bytes.Repeat([]byte{5}, 32), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	up := upstream.New(nil, nil, nil)
	t.Cleanup(func() { up.Close(context.Background()) })
	srv := mcpserve.NewMCPServer("test")
	srv.AddTool(mcp.NewTool("lemonade_echo", mcp.WithString("message")), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("builtin echo: " + req.GetString("message", "")), nil
	})
	srv.AddTool(mcp.NewTool("lemonade_log"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		n := mcp.NewLoggingMessageNotification(mcp.LoggingLevelInfo, "lemonade", "an info line")
		if err := server.ServerFromContext(ctx).SendLogMessageToClient(ctx, n); err != nil {
			return nil, err
		}
		return mcp.NewToolResultText("logged"), nil
	})
	waiting := make(chan struct{}, 1)
	srv.AddTool(mcp.NewTool("lemonade_wait"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		waiting <- struct{}{}
		<-ctx.Done()
		return mcp.NewToolResultText("stopped"), nil
	})
	calls, _ := activity.New(activity.DefaultSize, false)
	tools := toolcall.New(toolcall.Config{}, reg, up, testKeys, toolcall.WithBuiltin(mcpserve.NewBuiltin(srv)), toolcall.WithActivity(calls))
	builtin := mcpserve.New(srv, codec, reg, tools, nil)
	fed := federate.New(reg, up, tools, codec, reg, testKeys, nil)
	builtinTools, err := builtin.BuiltinTools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	versions := &catalogVersions{cat: catalog.New(reg, up, nil), seen: map[*catalog.Snapshot]bool{}}
	search := toolsearch.NewShared(versions, toolsearch.OwnNames("lemonade", builtinTools))
	agg := New(reg, up, tools, builtin, fed, codec, reg, testKeys, nil, append([]Option{WithListenCheck(50 * time.Millisecond), WithToolSearch(search)}, opts...)...)
	up.OnNotification(func(id string, msg []byte) { fed.Notify(id, msg); agg.Notify(id, msg) })
	var own mcpserve.Federation = builtin
	if ownPreset != "" {
		own = agg.ForMCP(ownPreset)
	}
	h := mcpserve.NewRoutes(own, mcpserve.WithServers(fed), mcpserve.WithPresets(agg))
	cc := grpctest.Loopback(t, func(s *grpc.Server) { mcpgatewayv1.RegisterMcpServiceServer(s, h) }, activity.NewCallers(testKeys).ServerOptions()...)
	return fixture{mcp: mcpgatewayv1.NewMcpServiceClient(cc), reg: reg, codec: codec, agg: agg, alpha: alpha, waiting: waiting, activity: calls, search: search, versions: versions}
}

var withKey = mcpservetest.WithKey

// exchange posts one body to preset (or /mcp when "") and returns the session id it started
// and the messages.
func (f fixture) exchange(ctx context.Context, preset, sess, body string) (string, [][]byte, error) {
	return mcpservetest.Exchange(ctx, f.mcp, &mcpgatewayv1.ExchangeRequest{PresetId: preset, SessionId: sess, Payload: []byte(body)})
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func (f fixture) open(t *testing.T, ctx context.Context, preset string) (string, map[string]any) {
	t.Helper()
	sess, res, err := mcpservetest.Initialize(ctx, f.mcp, &mcpgatewayv1.ExchangeRequest{PresetId: preset, Payload: []byte(initialize)})
	if err != nil {
		t.Fatalf("initialize %s: %v", preset, err)
	}
	return sess, res
}

// result sends one request and decodes its result (failing on an error answer).
func (f fixture) result(t *testing.T, ctx context.Context, preset, sess, body string) map[string]any {
	t.Helper()
	_, msgs, err := f.exchange(ctx, preset, sess, body)
	if err != nil || len(msgs) == 0 {
		t.Fatalf("%s: %q %v", body, msgs, err)
	}
	var resp struct {
		Result map[string]any `json:"result"`
		Error  any            `json:"error"`
	}
	if err := json.Unmarshal(msgs[len(msgs)-1], &resp); err != nil || resp.Result == nil {
		t.Fatalf("%s answered %s", body, msgs[len(msgs)-1])
	}
	return resp.Result
}

func names(items any, key string) []string {
	var out []string
	for _, it := range items.([]any) {
		out = append(out, it.(map[string]any)[key].(string))
	}
	slices.Sort(out)
	return out
}

// listAll follows nextCursor and returns every item's key.
func (f fixture) listAll(t *testing.T, ctx context.Context, preset, sess, method, member, key string) ([]string, int) {
	t.Helper()
	var out []string
	cursor, pages := "", 0
	for {
		params := "{}"
		if cursor != "" {
			params = fmt.Sprintf(`{"cursor":%q}`, cursor)
		}
		res := f.result(t, ctx, preset, sess, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":%q,"params":%s}`, method, params))
		pages++
		out = append(out, names(res[member], key)...)
		next, _ := res["nextCursor"].(string)
		if next == "" {
			slices.Sort(out)
			return out, pages
		}
		cursor = next
	}
}

func TestInitializeUnitesTheProviders(t *testing.T) {
	f := newFixture(t, "")
	ctx := withKey(t.Context(), testKeys.API)
	sess, res := f.open(t, ctx, "all")
	info, _ := res["serverInfo"].(map[string]any)
	caps, _ := res["capabilities"].(map[string]any)
	instr, _ := res["instructions"].(string)
	if info["name"] != "zest-preset-all" || res["protocolVersion"] != "2025-11-25" {
		t.Errorf("serverInfo %v, version %v", info, res["protocolVersion"])
	}
	for _, c := range []string{"tools", "prompts", "resources", "logging", "completions"} {
		if caps[c] == nil {
			t.Errorf("capabilities %v lack %s", caps, c)
		}
	}
	if r, _ := caps["resources"].(map[string]any); r["subscribe"] != true || r["listChanged"] != true {
		t.Errorf("resources capability %v", r)
	}
	if !strings.Contains(instr, `"alpha"`) || !strings.Contains(instr, "the beta server") || !strings.Contains(instr, `"lemonade"`) || strings.Contains(instr, "hidden") {
		t.Errorf("instructions %q: want alpha, beta and lemonade named, hidden not (an API key)", instr)
	}
	if cl, err := f.codec.Parse(sess); err != nil || cl.Server != "preset:all" {
		t.Errorf("claims %+v %v", cl, err)
	}
}

// TestListsNameAndFilter: tools and prompts under chat_name (the built-in tools under their
// own), the same tool name of two servers kept apart, filters applied, hidden servers
// invisible without the admin key, resources with their URIs, and one provider's pages
// followed through the preset's cursor.
func TestListsNameAndFilter(t *testing.T) {
	f := newFixture(t, "")
	api, adm := withKey(t.Context(), testKeys.API), withKey(t.Context(), testKeys.Admin)
	sess, _ := f.open(t, api, "all")
	tools, pages := f.listAll(t, api, "all", sess, "tools/list", "tools", "name")
	want := []string{"lemonade_echo", "lemonade_log", "lemonade_wait", "mcp_alpha__echo", "mcp_alpha__slow", "mcp_beta__echo", "mcp_beta__extra0", "mcp_beta__extra1", "mcp_beta__extra2", "mcp_beta__secret", "mcp_beta__slow"}
	if !slices.Equal(tools, want) {
		t.Errorf("tools %v, want %v", tools, want)
	}
	if pages < 2 {
		t.Errorf("%d pages: beta lists two tools a page, so its cursor must show through", pages)
	}
	prompts, _ := f.listAll(t, api, "all", sess, "prompts/list", "prompts", "name")
	if !slices.Equal(prompts, []string{"mcp_alpha__greet", "mcp_beta__greet"}) {
		t.Errorf("prompts %v", prompts)
	}
	res, _ := f.listAll(t, api, "all", sess, "resources/list", "resources", "uri")
	if !slices.Equal(res, []string{"alpha://doc", "beta://doc"}) {
		t.Errorf("resources %v", res)
	}
	tmpl, _ := f.listAll(t, api, "all", sess, "resources/templates/list", "resourceTemplates", "uriTemplate")
	if !slices.Equal(tmpl, []string{"alpha://items/{id}", "beta://items/{id}"}) {
		t.Errorf("templates %v", tmpl)
	}
	// With the admin key, the hidden server is a provider (its secret is not filtered).
	asess, _ := f.open(t, adm, "all")
	tools, _ = f.listAll(t, adm, "all", asess, "tools/list", "tools", "name")
	if !slices.Contains(tools, "mcp_hidden__echo") || !slices.Contains(tools, "mcp_hidden__secret") || slices.Contains(tools, "mcp_alpha__secret") {
		t.Errorf("admin tools %v", tools)
	}
	// alpha://doc is listed by alpha and by hidden (the same server): alpha, first in the
	// preset, owns it, however the concurrent reads end.
	for range 5 {
		f.listAll(t, adm, "all", asess, "resources/list", "resources", "uri")
		if id, _ := f.agg.owners.get("all", "uri\nalpha://doc"); id != "alpha" {
			t.Fatalf("alpha://doc is owned by %q, want alpha (first in the preset)", id)
		}
	}
	// A cursor not issued here is refused with a message that says what to send.
	_, msgs, _ := f.exchange(api, "all", sess, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"bm9wZQ"}}`)
	if len(msgs) != 1 || !strings.Contains(string(msgs[0]), "-32602") || !strings.Contains(string(msgs[0]), "nextCursor") {
		t.Errorf("a foreign cursor: %q", msgs)
	}
}

func TestRequestsReachTheirOwner(t *testing.T) {
	f := newFixture(t, "")
	api := withKey(t.Context(), testKeys.API)
	sess, _ := f.open(t, api, "all")
	for _, c := range []struct {
		name, body string
		want, not  []string
	}{
		{"alpha's tool", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"mcp_alpha__echo","arguments":{"message":"hi"}}}`, []string{`"id":"a"`, "alpha echo: hi"}, nil},
		{"beta's tool of the same name", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp_beta__echo","arguments":{"message":"hi"}}}`, []string{"beta echo: hi"}, nil},
		{"a built-in tool", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"lemonade_echo","arguments":{"message":"hi"}}}`, []string{"builtin echo: hi"}, nil},
		{"a filtered tool is unknown", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"mcp_alpha__secret"}}`, []string{"-32602", "Unknown tool"}, []string{"the secret"}},
		{"a hidden server's tool is unknown", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"mcp_hidden__echo"}}`, []string{"-32602", "Unknown tool"}, []string{"echo:"}},
		{"a tool by its own name is unknown", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo"}}`, []string{"-32602", "Unknown tool"}, nil},
		{"a prompt", `{"jsonrpc":"2.0","id":7,"method":"prompts/get","params":{"name":"mcp_beta__greet","arguments":{"who":"you"}}}`, []string{"beta greets you"}, nil},
		{"a resource", `{"jsonrpc":"2.0","id":8,"method":"resources/read","params":{"uri":"beta://doc"}}`, []string{"doc of beta"}, nil},
		{"a templated resource", `{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"alpha://items/7"}}`, []string{"item of alpha"}, nil},
		{"a resource nobody has", `{"jsonrpc":"2.0","id":10,"method":"resources/read","params":{"uri":"gamma://doc"}}`, []string{"-32002", "gamma://doc"}, nil},
		// Routed to alpha, which answers it (mcp-go's server speaks 2026-07-28, which has no
		// resources/subscribe: -32601 from it, as on /mcp/servers/alpha).
		{"subscribe", `{"jsonrpc":"2.0","id":11,"method":"resources/subscribe","params":{"uri":"alpha://doc"}}`, []string{`"id":11`}, []string{"-32002", "no provider"}},
		{"a prompt's completion", `{"jsonrpc":"2.0","id":15,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"mcp_beta__greet"},"argument":{"name":"who","value":"y"}}}`, []string{"beta-greet-who"}, nil},
		{"a template's completion", `{"jsonrpc":"2.0","id":16,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"alpha://items/{id}"},"argument":{"name":"id","value":"1"}}}`, []string{"alpha-alpha://items/{id}-id"}, nil},
		// A name that spells its server goes there with the server's own name: the server answers.
		{"a prompt the server may not have", `{"jsonrpc":"2.0","id":17,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"mcp_beta__nope"},"argument":{"name":"who","value":"y"}}}`, []string{"beta-nope-who"}, nil},
		{"a prompt of no provider", `{"jsonrpc":"2.0","id":18,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"mcp_gamma__greet"},"argument":{"name":"who","value":"y"}}}`, []string{"-32602", "Unknown prompt"}, nil},
		{"ping", `{"jsonrpc":"2.0","id":12,"method":"ping"}`, []string{`"id":12,"result":{}`}, nil},
		{"setLevel", `{"jsonrpc":"2.0","id":13,"method":"logging/setLevel","params":{"level":"error"}}`, []string{`"id":13,"result":{}`}, nil},
		{"an unknown method", `{"jsonrpc":"2.0","id":14,"method":"sampling/createMessage"}`, []string{"-32601"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, msgs, err := f.exchange(api, "all", sess, c.body)
			if err != nil || len(msgs) == 0 {
				t.Fatalf("%q, %v", msgs, err)
			}
			last := string(msgs[len(msgs)-1])
			for _, w := range c.want {
				if !strings.Contains(last, w) {
					t.Errorf("answer %s lacks %s", last, w)
				}
			}
			for _, w := range c.not {
				if strings.Contains(last, w) {
					t.Errorf("answer %s holds %s", last, w)
				}
			}
		})
	}
}

// TestADownProviderIsLeftOut: the others serve; the list names it in _meta only.
func TestADownProviderIsLeftOut(t *testing.T) {
	f := newFixture(t, "")
	api := withKey(t.Context(), testKeys.API)
	sess, res := f.open(t, api, "two")
	if instr, _ := res["instructions"].(string); !strings.Contains(instr, `"down" (unavailable`) {
		t.Errorf("instructions %q do not say down is unavailable", instr)
	}
	tools := f.result(t, api, "two", sess, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if got := names(tools["tools"], "name"); !slices.Equal(got, []string{"mcp_alpha__echo", "mcp_alpha__slow"}) {
		t.Errorf("tools %v", got)
	}
	meta, _ := tools["_meta"].(map[string]any)
	if u, _ := meta[MetaUnavailable].([]any); len(u) != 1 || u[0] != "down" {
		t.Errorf("_meta %v: want %s [down]", tools["_meta"], MetaUnavailable)
	}
	_, msgs, _ := f.exchange(api, "two", sess, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mcp_down__echo"}}`)
	if last := string(msgs[len(msgs)-1]); !strings.Contains(last, "-32603") || !strings.Contains(last, "incident") {
		t.Errorf("a down provider's tool, with an API key: %s (want the failure behind an incident id)", last)
	}
}

func TestAccessAndSessions(t *testing.T) {
	f := newFixture(t, "")
	api := withKey(t.Context(), testKeys.API)
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	if _, _, err := f.exchange(api, "nope", "", initialize); status.Code(err) != codes.NotFound || !strings.Contains(status.Convert(err).Message(), `"nope"`) {
		t.Errorf("an unknown preset: %v", err)
	}
	sess, _ := f.open(t, api, "all")
	other, _ := f.open(t, api, "two")
	mcpSess, _ := f.codec.Issue("2025-11-25")
	server, _ := f.codec.IssueFor("2025-11-25", "alpha")
	for name, c := range map[string]struct{ preset, sess string }{
		"another preset's session": {"all", other}, "a session of /mcp": {"all", mcpSess},
		"a server's session": {"all", server}, "a preset's session on /mcp": {"", sess},
	} {
		if _, _, err := f.exchange(api, c.preset, c.sess, ping); status.Code(err) != codes.NotFound {
			t.Errorf("%s: %v, want NotFound", name, err)
		}
	}
	if _, err := f.mcp.EndSession(api, &mcpgatewayv1.EndSessionRequest{PresetId: "all", SessionId: sess}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.exchange(api, "all", sess, ping); status.Code(err) != codes.NotFound {
		t.Errorf("an ended session: %v", err)
	}
	// A preset deleted while its sessions live: they are 404 from then on.
	live, _ := f.open(t, api, "two")
	if err := f.reg.DeletePreset(t.Context(), "two"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.exchange(api, "two", live, ping); status.Code(err) != codes.NotFound {
		t.Errorf("a session of a deleted preset: %v", err)
	}
	// A preset whose only server is disabled serves nothing, and says so.
	_, res := f.open(t, api, "off")
	if instr, _ := res["instructions"].(string); !strings.Contains(instr, "no provider") {
		t.Errorf("instructions %q", instr)
	}
}

// TestListChangedReachesThePresetsStreams: a provider's list_changed reaches the GET stream
// of a session of a preset that has it, not of one that does not; a change of the preset's
// providers is announced too.
func TestListChangedReachesThePresetsStreams(t *testing.T) {
	f := newFixture(t, "")
	ctx := withKey(t.Context(), testKeys.API)
	listen := func(preset, sess string) <-chan string {
		ch, err := mcpservetest.Listen(ctx, f.mcp, &mcpgatewayv1.ListenRequest{PresetId: preset, SessionId: sess})
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	next := func(ch <-chan string) string {
		select {
		case m := <-ch:
			return m
		case <-time.After(5 * time.Second):
			return "nothing within 5s"
		}
	}
	all, _ := f.open(t, ctx, "all")
	off, _ := f.open(t, ctx, "off")
	sa, so := listen("all", all), listen("off", off)
	f.agg.Notify("beta", []byte(`{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}`))
	if m := next(sa); !strings.Contains(m, "prompts/list_changed") {
		t.Errorf("all's stream got %s", m)
	}
	// A real upstream's change: alpha gets a tool, and says so on its own stream.
	f.alpha.AddTool(mcp.NewTool("late"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("late"), nil
	})
	if m := next(sa); !strings.Contains(m, "tools/list_changed") {
		t.Errorf("after alpha's new tool, all's stream got %s", m)
	}
	// The preset changes: its sessions are told all three lists may have changed.
	if err := f.reg.PutPreset(t.Context(), &mcpgatewayv1.Preset{Id: "off", McpServerIds: []string{"alpha"}}); err != nil {
		t.Fatal(err)
	}
	got := []string{next(so), next(so), next(so)}
	if !strings.Contains(strings.Join(got, " "), "resources/list_changed") {
		t.Errorf("off's stream after the preset changed: %q", got)
	}
}

// TestMCPServesAPreset: ZEST_MCP_PRESET makes /mcp the preset's endpoint, with sessions of
// its own; a missing preset is an error that says what to do.
func TestMCPServesAPreset(t *testing.T) {
	f := newFixture(t, "two")
	api := withKey(t.Context(), testKeys.API)
	sess, res := f.open(t, api, "")
	if info, _ := res["serverInfo"].(map[string]any); info["name"] != "zest-preset-two" {
		t.Errorf("serverInfo %v", res["serverInfo"])
	}
	tools := f.result(t, api, "", sess, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if got := names(tools["tools"], "name"); !slices.Equal(got, []string{"mcp_alpha__echo", "mcp_alpha__slow"}) {
		t.Errorf("tools of /mcp %v", got)
	}
	if _, _, err := f.exchange(api, "two", sess, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); status.Code(err) != codes.NotFound {
		t.Errorf("a session of /mcp on /mcp/presets/two: %v", err)
	}
	// The preset deleted later: /mcp's sessions are told, on every request.
	if err := f.reg.DeletePreset(t.Context(), "two"); err != nil {
		t.Fatal(err)
	}
	if _, msgs, err := f.exchange(api, "", sess, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); err != nil || len(msgs) != 1 || !strings.Contains(string(msgs[0]), "ZEST_MCP_PRESET") {
		t.Errorf("/mcp after its preset was deleted: %q %v", msgs, err)
	}
	// Internal: the operator's to fix, answered 500 with the message (httpstatus).
	if stream, err := f.mcp.Listen(api, &mcpgatewayv1.ListenRequest{SessionId: sess}); err == nil {
		if _, err := stream.Recv(); status.Code(err) != codes.Internal || !strings.Contains(status.Convert(err).Message(), "ZEST_MCP_PRESET") {
			t.Errorf("GET /mcp after its preset was deleted: %v", err)
		}
	}
	g := newFixture(t, "missing")
	_, msgs, err := g.exchange(api, "", "", initialize)
	if err != nil || len(msgs) != 1 || !strings.Contains(string(msgs[0]), "ZEST_MCP_PRESET") || !strings.Contains(string(msgs[0]), "-32603") {
		t.Errorf("initialize of /mcp with a missing preset: %q %v", msgs, err)
	}
}

func TestMatches(t *testing.T) {
	for _, c := range []struct {
		tmpl, uri string
		want      bool
	}{
		{"test://template/{id}/data", "test://template/7/data", true},
		{"test://template/{id}/data", "test://template/7/8/data", false},
		{"file:///{+path}", "file:///a/b/c.txt", true},
		{"x://items{?page,size}", "x://items?page=2", true},
		{"x://items{?page,size}", "x://items", true},
		{"x://a.b/{id}", "x://aXb/1", false},
		{"x://fixed", "x://fixed", true},
	} {
		if got := Matches(c.tmpl, c.uri); got != c.want {
			t.Errorf("Matches(%q, %q) = %v", c.tmpl, c.uri, got)
		}
	}
}

// TestNameLookupReadsAtMostMaxPages: a chat_name that does not spell its server's name is
// looked for in that server's list, up to maxPages pages (one prompt a page here).
func TestNameLookupReadsAtMostMaxPages(t *testing.T) {
	f := newFixture(t, "")
	api := withKey(t.Context(), testKeys.API)
	sess, _ := f.open(t, api, "many")
	get := func(name string) string {
		_, msgs, err := f.exchange(api, "many", sess, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":%q}}`, catalog.ChatName("many", name)))
		if err != nil || len(msgs) == 0 {
			t.Fatalf("%q %v", msgs, err)
		}
		return string(msgs[len(msgs)-1])
	}
	if got := get("p 000"); !strings.Contains(got, "found") {
		t.Errorf("the first page's prompt: %s", got)
	}
	if got := get(fmt.Sprintf("p %03d", maxPages-1)); !strings.Contains(got, "found") {
		t.Errorf("page %d's prompt: %s", maxPages, got)
	}
	if got := get(fmt.Sprintf("p %03d", maxPages)); !strings.Contains(got, "Unknown prompt") {
		t.Errorf("page %d's prompt: %s, want Unknown prompt (beyond the limit)", maxPages+1, got)
	}
}

func TestOwnersAreBounded(t *testing.T) {
	o := owners{m: map[string]string{}}
	for i := range maxOwners {
		o.put("p", fmt.Sprint(i), "a")
	}
	if id, ok := o.get("p", "0"); len(o.m) != maxOwners || !ok || id != "a" {
		t.Fatalf("%d owners, first %q %v", len(o.m), id, ok)
	}
	o.put("p", "one more", "b")
	if _, ok := o.get("p", "0"); len(o.m) != 1 || ok {
		t.Fatalf("past the limit: %d owners, first still there %v", len(o.m), ok)
	}
	if id, _ := o.get("p", "one more"); id != "b" {
		t.Fatalf("the newest owner %q", id)
	}
}

// TestCancellingABuiltinTool: notifications/cancelled stops a built-in tool's call, which then
// gets no answer.
func TestCancellingABuiltinTool(t *testing.T) {
	f := newFixture(t, "")
	api := withKey(t.Context(), testKeys.API)
	sess, _ := f.open(t, api, "all")
	type answer struct {
		msgs [][]byte
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		_, msgs, err := f.exchange(api, "all", sess, `{"jsonrpc":"2.0","id":"w","method":"tools/call","params":{"name":"lemonade_wait"}}`)
		done <- answer{msgs, err}
	}()
	<-f.waiting
	if _, msgs, err := f.exchange(api, "all", sess, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"w"}}`); err != nil || len(msgs) != 0 {
		t.Fatalf("notifications/cancelled: %q %v", msgs, err)
	}
	if a := <-done; a.err != nil || len(a.msgs) != 0 {
		t.Fatalf("the cancelled call answered %q %v, want nothing", a.msgs, a.err)
	}
}

// TestBatch: a 2025-03-26 session's batch is answered item by item; other sessions' are refused.
func TestBatch(t *testing.T) {
	f := newFixture(t, "")
	api := withKey(t.Context(), testKeys.API)
	sess, _, err := f.exchange(api, "all", "", strings.Replace(initialize, "2025-11-25", "2025-03-26", 1))
	if err != nil || sess == "" {
		t.Fatal(err)
	}
	_, msgs, err := f.exchange(api, "all", sess, `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp_beta__echo","arguments":{"message":"b"}}}]`)
	var answers []map[string]any
	if err != nil || len(msgs) != 1 || json.Unmarshal(msgs[0], &answers) != nil || len(answers) != 2 || !strings.Contains(string(msgs[0]), "beta echo: b") {
		t.Fatalf("batch: %q %v", msgs, err)
	}
	other, _ := f.open(t, api, "all")
	if _, msgs, _ := f.exchange(api, "all", other, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`); len(msgs) != 1 || !strings.Contains(string(msgs[0]), "2025-03-26") {
		t.Fatalf("a batch in a 2025-11-25 session: %q", msgs)
	}
}

// TestProgressKeepsTheClientsToken: a provider's progress reaches the client on the POST's
// stream, with the client's own token, before the answer. (mcp-go's HTTP transport hands a
// notification to its handler on its own goroutine, so one that comes just before the answer
// may lose the race and be dropped, as on /mcp/servers/{id}: at least one must arrive.)
func TestProgressKeepsTheClientsToken(t *testing.T) {
	f := newFixture(t, "")
	api := withKey(t.Context(), testKeys.API)
	sess, _ := f.open(t, api, "all")
	_, msgs, err := f.exchange(api, "all", sess, `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"mcp_beta__slow","_meta":{"progressToken":"client-token"}}}`)
	if err == nil {
		err = mcpservetest.ProgressThenResult(msgs, "client-token", `"id":11`, "beta slow done")
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestClientResponses: a response to nothing Zest sent is accepted and dropped; one that
// carries a relay id this session was not given is refused, saying so.
func TestClientResponses(t *testing.T) {
	f := newFixture(t, "")
	api := withKey(t.Context(), testKeys.API)
	sess, _ := f.open(t, api, "all")
	if _, msgs, err := f.exchange(api, "all", sess, `{"jsonrpc":"2.0","id":5,"result":{}}`); err != nil || len(msgs) != 0 {
		t.Errorf("a plain response: %q %v", msgs, err)
	}
	forged := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":{}}`, session.RelayPrefix+"forged")
	if _, msgs, err := f.exchange(api, "all", sess, forged); err != nil || len(msgs) != 1 || !strings.Contains(string(msgs[0]), "answers no request sent to this session") {
		t.Errorf("a forged relay answer: %q %v", msgs, err)
	}
}

// TestChangedWakesTheStreams: PresetChanged and ServerChanged (a preset or a server written
// through any replica) make the GET streams read their presets at once, not at their next listen check: a session
// whose preset's providers changed is told its lists changed.
func TestChangedWakesTheStreams(t *testing.T) {
	f := newFixture(t, "", WithListenCheck(time.Hour))
	ctx := withKey(t.Context(), testKeys.API)
	off, _ := f.open(t, ctx, "off")
	so, err := mcpservetest.Listen(ctx, f.mcp, &mcpgatewayv1.ListenRequest{PresetId: "off", SessionId: off})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.reg.PutPreset(t.Context(), &mcpgatewayv1.Preset{Id: "off", McpServerIds: []string{"alpha"}}); err != nil {
		t.Fatal(err)
	}
	told := func(what string, change func()) {
		t.Helper()
		began := time.Now()
		change()
		select {
		case m := <-so:
			if !strings.Contains(m, "list_changed") {
				t.Fatalf("off's stream got %s", m)
			}
			for len(so) > 0 { // the three lists
				<-so
			}
			t.Logf("list_changed %v after %s", time.Since(began), what)
		case <-time.After(time.Second):
			t.Fatalf("no list_changed within 1 s of %s", what)
		}
	}
	told("PresetChanged", func() { f.agg.PresetChanged("off") })
	// alpha is disabled: the preset serves nothing any more.
	alpha, err := f.reg.GetServer(t.Context(), "alpha")
	if err != nil {
		t.Fatal(err)
	}
	alpha = proto.CloneOf(alpha)
	alpha.Enabled = proto.Bool(false)
	if err := f.reg.PutServer(t.Context(), alpha); err != nil {
		t.Fatal(err)
	}
	told("ServerChanged", func() { f.agg.ServerChanged("alpha") })
}

// PresetChanged forgets the URI owners recorded for the preset (all of them for "").
func TestOwnersDrop(t *testing.T) {
	var o owners
	o.m = map[string]string{}
	o.put("p", "uri\nx://a", "alpha")
	o.put("q", "uri\nx://a", "beta")
	o.put("pp", "uri\nx://a", "beta")
	p := "p"
	o.drop(&p)
	if _, ok := o.get("p", "uri\nx://a"); ok {
		t.Fatal("p's owner was kept")
	}
	if _, ok := o.get("pp", "uri\nx://a"); !ok {
		t.Fatal("pp's owner was dropped with p's")
	}
	o.drop(nil)
	if len(o.m) != 0 {
		t.Fatalf("drop(nil) left %v", o.m)
	}
}
