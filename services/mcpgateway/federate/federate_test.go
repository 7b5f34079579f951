package federate

import (
	"bytes"
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/lib/keyauth"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve/mcpservetest"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/session"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// upstreamServer is an in-process Streamable HTTP MCP server (mcp-go): tools echo, secret
// and slow (two progress notifications with the caller's token), instructions, logging; no
// prompts.
func upstreamServer(t *testing.T) (*server.MCPServer, string) {
	t.Helper()
	srv := server.NewMCPServer("upstream-under-test", "9.9.9", server.WithToolCapabilities(true), server.WithLogging(),
		server.WithInstructions("use echo to test"))
	srv.AddTool(mcp.NewTool("echo", mcp.WithString("message")), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("echo: " + req.GetString("message", "")), nil
	})
	srv.AddTool(mcp.NewTool("secret"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("the secret"), nil
	})
	srv.AddTool(mcp.NewTool("slow"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
			return mcp.NewToolResultError("no progress token"), nil
		}
		s := server.ServerFromContext(ctx)
		for i := 1; i <= 2; i++ {
			if err := s.SendNotificationToClient(ctx, "notifications/progress",
				map[string]any{"progressToken": req.Params.Meta.ProgressToken, "progress": i, "total": 2}); err != nil {
				return nil, err
			}
		}
		return mcp.NewToolResultText("slow done"), nil
	})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(srv))
	t.Cleanup(hs.Close)
	return srv, hs.URL
}

type fixture struct {
	mcp   *mcpservetest.Client
	codec *session.Codec
	fed   *Handler
}

var testKeys = keyauth.Keys{API: "api-key-0123", Admin: "admin-key-0123"}

// newFixture serves the endpoints of /mcp and /mcp/servers/{id} in-process, with servers "up"
// (filters hide secret), "hidden" (expose false) and "off" (disabled), all at url.
func newFixture(t *testing.T, url string) fixture {
	t.Helper()
	reg, err := registry.Open(filepath.Join(t.TempDir(), "registry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	for _, cfg := range []*mcpgatewayv1.ServerConfig{
		{Id: "up", Transport: "streamable-http", Url: url, Enabled: proto.Bool(true), Expose: proto.Bool(true), TimeoutMs: proto.Int32(5000), ToolsDeny: []string{"secret"}},
		{Id: "hidden", Transport: "streamable-http", Url: url, Enabled: proto.Bool(true), Expose: proto.Bool(false), TimeoutMs: proto.Int32(5000)},
		{Id: "off", Transport: "streamable-http", Url: url, Enabled: proto.Bool(false), Expose: proto.Bool(true), TimeoutMs: proto.Int32(5000)},
		{Id: "small", Transport: "streamable-http", Url: url, Enabled: proto.Bool(true), Expose: proto.Bool(true), TimeoutMs: proto.Int32(5000), MaxOutputBytes: proto.Int32(1024)},
		{Id: "limited", Transport: "streamable-http", Url: url, Enabled: proto.Bool(true), Expose: proto.Bool(true), TimeoutMs: proto.Int32(5000), RateLimit: proto.String("1/h")},
	} {
		if err := reg.PutServer(t.Context(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	codec, err := session.NewCodec(bytes.Repeat([]byte{3}, 32), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	up := upstream.New(nil, nil, nil)
	t.Cleanup(func() { up.Close(context.Background()) })
	srv := mcpserve.NewMCPServer("test")
	tools := toolcall.New(toolcall.Config{}, reg, up, testKeys, toolcall.WithBuiltin(mcpserve.NewBuiltin(srv)))
	fed := New(reg, up, tools, codec, reg, testKeys, nil, WithListenCheck(50*time.Millisecond))
	up.OnNotification(fed.Notify)
	h := mcpserve.NewRoutes(mcpserve.New(srv, codec, reg, tools, nil), mcpserve.WithServers(fed))
	return fixture{mcp: mcpservetest.NewClient(h, nil), codec: codec, fed: fed}
}

var withKey = mcpservetest.WithKey

// exchange posts one body and returns the session id it started (if any) and the messages.
func (f fixture) exchange(ctx context.Context, server, sess, body string) (string, [][]byte, error) {
	return mcpservetest.Exchange(ctx, f.mcp, &mcpservetest.Request{ServerID: server, SessionID: sess, Payload: []byte(body)})
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func (f fixture) open(t *testing.T, ctx context.Context, server string) (string, map[string]any) {
	t.Helper()
	sess, res, err := mcpservetest.Initialize(ctx, f.mcp, &mcpservetest.Request{ServerID: server, Payload: []byte(initialize)})
	if err != nil {
		t.Fatalf("initialize %s: %v", server, err)
	}
	return sess, res
}

func TestInitializeMirrorsTheUpstream(t *testing.T) {
	_, url := upstreamServer(t)
	f := newFixture(t, url)
	ctx := withKey(t.Context(), testKeys.API)
	sess, res := f.open(t, ctx, "up")
	info, _ := res["serverInfo"].(map[string]any)
	caps, _ := res["capabilities"].(map[string]any)
	if res["protocolVersion"] != "2025-06-18" || info["name"] != "upstream-under-test" || info["version"] != "9.9.9" ||
		res["instructions"] != "use echo to test" || caps["tools"] == nil || caps["logging"] == nil || caps["prompts"] != nil {
		t.Fatalf("initialize result %v", res)
	}
	cl, err := f.codec.Parse(sess)
	if err != nil || cl.Server != "up" || cl.ProtocolVersion != "2025-06-18" {
		t.Fatalf("session claims %+v, %v", cl, err)
	}
}

func TestRequests(t *testing.T) {
	_, url := upstreamServer(t)
	f := newFixture(t, url)
	ctx := withKey(t.Context(), testKeys.API)
	sess, _ := f.open(t, ctx, "up")
	for _, c := range []struct {
		name, body string
		want       []string // substrings of the last message
		not        []string
	}{
		{"tools/list is filtered", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, []string{`"id":2`, `"echo"`, `"slow"`}, []string{`"secret"`}},
		{"tools/call forwards", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`, []string{`"id":"a"`, `echo: hi`}, nil},
		{"a filtered tool is unknown", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"secret"}}`, []string{`"code":-32602`, `secret`}, []string{`the secret`}},
		{"tools/call without a name", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{}}`, []string{`"code":-32602`, `params.name`}, nil},
		{"an undeclared capability", `{"jsonrpc":"2.0","id":5,"method":"prompts/list"}`, []string{`"code":-32601`, `prompts/list`}, nil},
		{"a tool the upstream does not list is unknown, in Zest's words", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"nope"}}`,
			[]string{`"id":6`, `"code":-32602`, `"message":"Unknown tool \"nope\": this endpoint has no tool of that name (tools/list lists its tools)"`}, []string{`tool not found`}},
		{"ping is answered here", `{"jsonrpc":"2.0","id":7,"method":"ping"}`, []string{`{"jsonrpc":"2.0","id":7,"result":{}}`}, nil},
		{"setLevel is kept here", `{"jsonrpc":"2.0","id":8,"method":"logging/setLevel","params":{"level":"error"}}`, []string{`"id":8,"result":{}`}, nil},
		{"a bad level", `{"jsonrpc":"2.0","id":9,"method":"logging/setLevel","params":{"level":"loud"}}`, []string{`"code":-32602`}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, msgs, err := f.exchange(ctx, "up", sess, c.body)
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
	if l, _ := registryLevel(t, f, sess); l != "error" {
		t.Errorf("stored level %q, want error", l)
	}
}

func registryLevel(t *testing.T, f fixture, sess string) (string, error) {
	t.Helper()
	return f.fed.store.SessionLogLevel(t.Context(), sess)
}

func TestProgressThroughAnHTTPUpstreamKeepsTheClientsToken(t *testing.T) {
	_, url := upstreamServer(t)
	f := newFixture(t, url)
	ctx := withKey(t.Context(), testKeys.API)
	sess, _ := f.open(t, ctx, "up")
	_, msgs, err := f.exchange(ctx, "up", sess, `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"slow","_meta":{"progressToken":"client-token"}}}`)
	if err == nil {
		err = mcpservetest.ProgressThenResult(msgs, "client-token", `"id":11`, "slow done")
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestAccess(t *testing.T) {
	_, url := upstreamServer(t)
	f := newFixture(t, url)
	api, adm := withKey(t.Context(), testKeys.API), withKey(t.Context(), testKeys.Admin)
	for _, c := range []struct {
		name   string
		ctx    context.Context
		server string
		code   codes.Code
	}{
		{"unknown", api, "nope", codes.NotFound},
		{"disabled", adm, "off", codes.NotFound},
		{"hidden without the admin key", api, "hidden", codes.NotFound},
		{"hidden with the admin key", adm, "hidden", codes.OK},
		{"exposed", api, "up", codes.OK},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := f.exchange(c.ctx, c.server, "", initialize)
			if status.Code(err) != c.code {
				t.Fatalf("code %v (%v), want %v", status.Code(err), err, c.code)
			}
			if c.code == codes.NotFound && !strings.Contains(status.Convert(err).Message(), `"`+c.server+`"`) {
				t.Fatalf("message %q does not name %s", status.Convert(err).Message(), c.server)
			}
		})
	}
	// Sessions are bound: one of /mcp, or of another server, is unknown here; and the reverse.
	own, _ := f.codec.Issue("2025-11-25")
	other, _ := f.codec.IssueFor("2025-11-25", "hidden")
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for name, sess := range map[string]string{"a session of /mcp": own, "a session of another server": other} {
		if _, _, err := f.exchange(api, "up", sess, ping); status.Code(err) != codes.NotFound {
			t.Errorf("%s on up: %v", name, err)
		}
	}
	bound, _ := f.open(t, api, "up")
	if _, _, err := f.exchange(api, "", bound, ping); status.Code(err) != codes.NotFound {
		t.Errorf("a session of up on /mcp: %v", err)
	}
	if err := f.mcp.EndSession(api, &mcpservetest.Request{ServerID: "up", SessionID: bound}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.exchange(api, "up", bound, ping); status.Code(err) != codes.NotFound {
		t.Errorf("an ended session: %v", err)
	}
}

// TestNotificationsReachTheGETStreamsOfTheirServer: Notify fans out to every GET stream of
// the server's sessions (not another server's), keeps only the relayed methods, and leaves
// out log messages below a session's level.
func TestNotificationsReachTheGETStreamsOfTheirServer(t *testing.T) {
	_, url := upstreamServer(t)
	f := newFixture(t, url)
	ctx := withKey(t.Context(), testKeys.Admin)
	listen := func(server, sess string) <-chan string {
		ch, err := mcpservetest.Listen(ctx, f.mcp, &mcpservetest.Request{ServerID: server, SessionID: sess})
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	a, _ := f.open(t, ctx, "up")
	b, _ := f.open(t, ctx, "up")
	h, _ := f.open(t, ctx, "hidden")
	if _, msgs, err := f.exchange(ctx, "up", b, `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"warning"}}`); err != nil || !strings.Contains(string(msgs[0]), "result") {
		t.Fatalf("setLevel: %q %v", msgs, err)
	}
	sa, sb, sh := listen("up", a), listen("up", b), listen("hidden", h)
	f.fed.Notify("up", []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1}}`)) // not relayed
	f.fed.Notify("up", []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"chatter"}}`))
	f.fed.Notify("up", []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
	next := func(ch <-chan string) string {
		select {
		case m := <-ch:
			return m
		case <-time.After(5 * time.Second):
			return "nothing within 5s"
		}
	}
	if m := next(sa); !strings.Contains(m, "chatter") {
		t.Errorf("session a (no level set) got %s first, want the info message", m)
	}
	if m := next(sa); !strings.Contains(m, "list_changed") {
		t.Errorf("session a got %s, want list_changed", m)
	}
	if m := next(sb); !strings.Contains(m, "list_changed") {
		t.Errorf("session b (level warning) got %s first, want list_changed (info left out)", m)
	}
	f.fed.Notify("hidden", []byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"x://1"}}`))
	if m := next(sh); !strings.Contains(m, "resources/updated") {
		t.Errorf("hidden's stream got %s", m)
	}
	// Had up's stream got hidden's notification, it would come before this marker.
	f.fed.Notify("up", []byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"marker://up"}}`))
	if m := next(sa); !strings.Contains(m, "marker://up") {
		t.Errorf("up's stream got %s, want the marker (another server's notification leaked)", m)
	}
	// An ended session's stream ends.
	if err := f.mcp.EndSession(ctx, &mcpservetest.Request{ServerID: "up", SessionID: a}); err != nil {
		t.Fatal(err)
	}
	select {
	case _, open := <-sa:
		for open {
			_, open = <-sa
		}
	case <-time.After(5 * time.Second):
		t.Error("the GET stream of an ended session stayed open")
	}
}
