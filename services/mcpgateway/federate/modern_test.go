package federate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/lib/waitfor"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve/mcpservetest"
)

const modernMeta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"tok"}`

// TestModernRequests: requests of 2026-07-28 to /mcp/servers/up stand alone (no session),
// are forwarded with the upstream's filters and capabilities applied, and come back with what
// the revision asks of a result; server/discover mirrors the upstream; removed methods and the
// transport checks give the revision's errors with the request's id and HTTP class.
func TestModernRequests(t *testing.T) {
	_, url := upstreamServer(t)
	f := newFixture(t, url)
	ctx := withKey(t.Context(), testKeys.API)
	for _, c := range []struct {
		name, body, method, mcpName string
		want, not                   []string // substrings of the final message
		malformed, notFound         bool
	}{
		{"server/discover mirrors the upstream", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":` + modernMeta + `}}`, "server/discover", "",
			[]string{`"supportedVersions":["2026-07-28"`, `"name":"upstream-under-test"`, `"instructions":"use echo to test"`, `"resultType":"complete"`, `"tools":{`}, nil, false, false},
		{"tools/list is filtered and has cache hints", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":` + modernMeta + `}}`, "tools/list", "",
			[]string{`"id":2`, `"echo"`, `"ttlMs":0`, `"cacheScope":"private"`, `"resultType":"complete"`, `"io.modelcontextprotocol/serverInfo"`}, []string{`"secret"`}, false, false},
		{"tools/call forwards", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"},"_meta":` + modernMeta + `}}`, "tools/call", "echo",
			[]string{`"id":"a"`, `echo: hi`, `"resultType":"complete"`}, nil, false, false},
		{"a filtered tool is unknown", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"secret","_meta":` + modernMeta + `}}`, "tools/call", "secret",
			[]string{`"id":3`, `"code":-32602`}, []string{`the secret`}, true, false},
		{"an undeclared capability is unknown", `{"jsonrpc":"2.0","id":4,"method":"prompts/list","params":{"_meta":` + modernMeta + `}}`, "prompts/list", "",
			[]string{`"id":4`, `"code":-32601`}, nil, false, true},
		{"ping was removed", `{"jsonrpc":"2.0","id":5,"method":"ping","params":{"_meta":` + modernMeta + `}}`, "ping", "",
			[]string{`"id":5`, `"code":-32601`}, nil, false, true},
		{"Mcp-Name must mirror the body", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","_meta":` + modernMeta + `}}`, "tools/call", "other",
			[]string{`"id":6`, `"code":-32020`}, nil, true, false},
		{"subscriptions/listen acknowledges what the upstream can send", `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"promptsListChanged":true},"_meta":` + modernMeta + `}}`, "subscriptions/listen", "",
			[]string{`"id":7`, `"io.modelcontextprotocol/subscriptionId":7`}, nil, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			stream, err := f.mcp.Exchange(ctx, &mcpservetest.Request{ServerID: "up", ProtocolVersion: "2026-07-28",
				McpMethod: c.method, McpName: c.mcpName, SessionID: "", Payload: []byte(c.body)})
			if err != nil {
				t.Fatal(err)
			}
			var last *mcpservetest.Item
			for {
				item, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if item.Session != "" {
					t.Fatal("a session was started for a request of 2026-07-28")
				}
				last = item
			}
			if last == nil || !last.Final || last.Malformed() != c.malformed || last.MethodNotFound() != c.notFound {
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
}

// TestModernParamHeaders: a tool whose input schema annotates an argument with x-mcp-header
// needs the client's Mcp-Param-* header to mirror it (checked by Zest, -32020 otherwise), and
// the upstream of 2026-07-28 gets the header from Zest (mcp-go's server checks it too).
func TestModernParamHeaders(t *testing.T) {
	srv := server.NewMCPServer("headers-up", "1.0.0", server.WithToolCapabilities(false))
	srv.AddTool(mcp.NewToolWithRawSchema("regional", "answers with its region",
		json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("region " + req.GetString("region", "")), nil
		})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(srv))
	t.Cleanup(hs.Close)
	f := newFixture(t, hs.URL)
	ctx := withKey(t.Context(), testKeys.API)
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"regional","arguments":{"region":"eu-west"},"_meta":` + modernMeta + `}}`
	for _, c := range []struct {
		name    string
		headers map[string]string
		want    string
	}{
		{"mirrored", map[string]string{"mcp-param-region": "eu-west"}, "region eu-west"},
		{"missing", nil, `"code":-32020`},
		{"different", map[string]string{"mcp-param-region": "us-east"}, `"code":-32020`},
	} {
		t.Run(c.name, func(t *testing.T) {
			stream, err := f.mcp.Exchange(ctx, &mcpservetest.Request{ServerID: "up", ProtocolVersion: "2026-07-28",
				McpMethod: "tools/call", McpName: "regional", ParamHeaders: c.headers, Payload: []byte(body)})
			if err != nil {
				t.Fatal(err)
			}
			var last []byte
			for {
				item, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				last = item.Message
			}
			if !strings.Contains(string(last), c.want) || !strings.Contains(string(last), `"id":9`) {
				t.Fatalf("answer %s, want %s", last, c.want)
			}
		})
	}
}

// TestModernListenStreams: subscriptions/listen grants the tools list_changed the upstream
// declares, and the upstream's notification reaches the stream tagged with the subscription
// id (its own params replaced); a prompts list_changed (not declared) is not granted.
func TestModernListenStreams(t *testing.T) {
	srv, url := upstreamServer(t)
	f := newFixture(t, url)
	ctx, cancel := context.WithCancel(withKey(t.Context(), testKeys.API))
	defer cancel()
	stream, err := f.mcp.Exchange(ctx, &mcpservetest.Request{ServerID: "up", ProtocolVersion: "2026-07-28", McpMethod: "subscriptions/listen",
		Payload: []byte(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"promptsListChanged":true},"_meta":` + modernMeta + `}}`)})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if a := string(ack.Message); ack.Final || !strings.Contains(a, `"notifications":{"toolsListChanged":true}`) {
		t.Fatalf("acknowledgement %s: want tools only", a)
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
	// The upstream gets tools until a list_changed arrives: Zest's own listen to it (a server
	// of 2026-07-28) opens in the background after it connected.
	late := 0
	waitfor.True(t, 10*time.Second, "a tools/list_changed on the stream", func() bool {
		if len(got) > 0 {
			return true
		}
		srv.AddTool(mcp.NewTool(fmt.Sprintf("late%d", late)), nil)
		late++
		return false
	})
	select {
	case n := <-got:
		if n != `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L"}}}` {
			t.Fatalf("notification %s", n)
		}
	default:
		t.Fatal("no tools/list_changed within 10 s")
	}
}
