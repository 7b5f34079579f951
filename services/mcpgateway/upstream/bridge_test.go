package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// mrtrUpstream is a server of 2026-07-28 (mcp-go over Streamable HTTP) whose tools ask for
// input with input_required results: sample (one sampling round; it reports the client
// capabilities it was told), two (an elicitation, then a sampling, then the answer), and
// forever (roots/list in every round; forevers counts its invocations).
func mrtrUpstream(t *testing.T) (*Manager, *mcpgatewayv1.ServerConfig, *atomic.Int64) {
	t.Helper()
	srv := server.NewMCPServer("mrtr-up", "1.0.0", server.WithToolCapabilities(false), server.WithElicitation())
	srv.EnableSampling()
	ask := mcp.CreateMessageParams{Messages: []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("say hi")}}, MaxTokens: 10}
	srv.AddTool(mcp.NewTool("sample"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r := server.SamplingResponse(req.Params.InputResponses, "s"); r != nil {
			return mcp.NewToolResultText("sampled " + sampledText(r) + " state " + req.Params.RequestState), nil
		}
		caps := server.RequestProtocolInfoFromContext(ctx)
		if caps == nil || caps.ClientCapabilities == nil || caps.ClientCapabilities.Sampling == nil {
			return mcp.NewToolResultError("told no sampling capability"), nil
		}
		return server.NewInputRequestBuilder("st-1").Sample("s", ask).ToolResult(), nil
	})
	srv.AddTool(mcp.NewTool("two"), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		switch st := req.Params.RequestState; {
		case st == "":
			return server.NewInputRequestBuilder("r1").Elicit("e", mcp.ElicitationParams{Message: "name?", RequestedSchema: map[string]any{"type": "object"}}).ToolResult(), nil
		case st == "r1":
			e := server.ElicitationResponse(req.Params.InputResponses, "e")
			if e == nil {
				return mcp.NewToolResultError("round 2 without the elicitation"), nil
			}
			content, _ := e.Content.(map[string]any)
			return server.NewInputRequestBuilder(fmt.Sprintf("r2:%v", content["name"])).Sample("s", ask).ToolResult(), nil
		default:
			r := server.SamplingResponse(req.Params.InputResponses, "s")
			if r == nil {
				return mcp.NewToolResultError("round 3 without the sampling"), nil
			}
			return mcp.NewToolResultText(st + " " + sampledText(r)), nil
		}
	})
	forevers := &atomic.Int64{}
	srv.AddTool(mcp.NewTool("forever"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		n := forevers.Add(1)
		return server.NewInputRequestBuilder(fmt.Sprint(n)).Roots("r").ToolResult(), nil
	})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(srv))
	t.Cleanup(hs.Close)
	m := New(nil, nil, nil)
	cfg := httpConfig("mrtr", hs.URL+"/mcp")
	if err := m.Connect(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Disconnect(context.Background(), "mrtr") })
	if inf, err := m.Info(t.Context(), cfg); err != nil || inf.ProtocolVersion != ModernVersion {
		t.Fatalf("the upstream must be driven as 2026-07-28: %+v, %v", inf, err)
	}
	return m, cfg, forevers
}

// fakeClient answers the requests relayed to it as a session-era client would, through
// Manager.Answer, and records their methods.
type fakeClient struct {
	m      *Manager
	mu     sync.Mutex
	asked  []string
	answer func(method string) (json.RawMessage, *RPCError)
}

func (c *fakeClient) hooks(r Relays) Hooks {
	return Hooks{Relays: r, Bridge: true, OnRequest: func(req ServerRequest) {
		c.mu.Lock()
		c.asked = append(c.asked, req.Method)
		c.mu.Unlock()
		res, rpcErr := c.answer(req.Method)
		go func() { _ = c.m.Answer(context.Background(), req.Ref, res, rpcErr) }()
	}}
}

func answers(method string) (json.RawMessage, *RPCError) {
	switch method {
	case MethodSampling:
		return json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}`), nil
	case MethodElicitation:
		return json.RawMessage(`{"action":"accept","content":{"name":"ada"}}`), nil
	}
	return json.RawMessage(`{"roots":[{"uri":"file:///tmp","name":"tmp"}]}`), nil
}

var allRelays = Relays{Sampling: true, Elicitation: true, Roots: true}

// TestBridgeInputRequired: a session-era client's call to a server of 2026-07-28 declares
// the client's capabilities; each input_required result's requests reach the client through
// OnRequest, and the request is retried with its answers and the requestState, over as many
// rounds as the server needs.
func TestBridgeInputRequired(t *testing.T) {
	m, cfg, _ := mrtrUpstream(t)
	c := &fakeClient{m: m, answer: answers}
	res, err := m.CallWith(t.Context(), cfg, "tools/call", json.RawMessage(`{"name":"sample","arguments":{}}`), 0, c.hooks(allRelays))
	if err != nil || !strings.Contains(string(res), "sampled hi state st-1") || strings.Contains(string(res), "input_required") {
		t.Fatalf("one round: %s, %v", res, err)
	}
	res, err = m.CallWith(t.Context(), cfg, "tools/call", json.RawMessage(`{"name":"two","arguments":{}}`), 0, c.hooks(allRelays))
	if err != nil || !strings.Contains(string(res), "r2:ada hi") {
		t.Fatalf("two rounds: %s, %v", res, err)
	}
	if got := strings.Join(c.asked, ","); got != "sampling/createMessage,elicitation/create,sampling/createMessage" {
		t.Errorf("the client was asked %s", got)
	}
	// Without the capability declared, the server is told so (here it answers with a tool error).
	res, err = m.CallWith(t.Context(), cfg, "tools/call", json.RawMessage(`{"name":"sample","arguments":{}}`), 0, c.hooks(Relays{Roots: true}))
	if err != nil || !strings.Contains(string(res), "told no sampling capability") {
		t.Fatalf("capabilities not declared: %s, %v", res, err)
	}
}

// TestBridgeInputRequiredErrors: a request for a capability the client did not declare is
// -32021 with the capability named; a client's error answer fails the request with its
// code; a server that keeps asking fails the request after MaxInputRounds answered rounds;
// a caller that does not bridge (a modern client's) gets input_required as it is.
func TestBridgeInputRequiredErrors(t *testing.T) {
	m, cfg, forevers := mrtrUpstream(t)
	c := &fakeClient{m: m, answer: answers}
	_, err := m.CallWith(t.Context(), cfg, "tools/call", json.RawMessage(`{"name":"two","arguments":{}}`), 0, c.hooks(Relays{Sampling: true}))
	var rpc *RPCError
	if !errors.As(err, &rpc) || rpc.Code != mcp.MISSING_REQUIRED_CLIENT_CAPABILITY || string(rpc.Data) != `{"capability":"elicitation"}` {
		t.Fatalf("undeclared capability: %v", err)
	}
	refusing := &fakeClient{m: m, answer: func(string) (json.RawMessage, *RPCError) {
		return nil, &RPCError{Code: -1, Message: "User rejected sampling request"}
	}}
	_, err = m.CallWith(t.Context(), cfg, "tools/call", json.RawMessage(`{"name":"sample","arguments":{}}`), 0, refusing.hooks(allRelays))
	if !errors.As(err, &rpc) || rpc.Code != -1 || !strings.Contains(rpc.Message, "User rejected sampling request") {
		t.Fatalf("client's error answer: %v", err)
	}
	_, err = m.CallWith(t.Context(), cfg, "tools/call", json.RawMessage(`{"name":"forever","arguments":{}}`), 0, c.hooks(allRelays))
	if !errors.As(err, &rpc) || !strings.Contains(rpc.Message, fmt.Sprintf("after %d rounds", MaxInputRounds)) {
		t.Fatalf("endless rounds: %v", err)
	}
	if n := forevers.Load(); n != MaxInputRounds+1 {
		t.Errorf("the server was asked %d times, want %d (the first request and %d retries)", n, MaxInputRounds+1, MaxInputRounds)
	}
	h := c.hooks(allRelays)
	h.Bridge = false
	res, err := m.CallWith(t.Context(), cfg, "tools/call", json.RawMessage(`{"name":"forever","arguments":{}}`), 0, h)
	if err != nil || !strings.Contains(string(res), `"resultType":"input_required"`) || !strings.Contains(string(res), `"roots/list"`) {
		t.Fatalf("without Bridge the result is the client's to answer: %s, %v", res, err)
	}
}

// sampledText is the text of a sampling result, however mcp-go decoded its content.
func sampledText(r *mcp.CreateMessageResult) string {
	b, _ := json.Marshal(r.Content)
	var c struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(b, &c)
	return c.Text
}
