package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Within a call made for an MCP client, a server request of a kind the client accepts is
// relayed and answered through Manager.Answer; other kinds get no roots or an error that says
// why; an answer nobody waits for is ErrRelayUnknown.
func TestAnswerServerRequestWithinACall(t *testing.T) {
	m := New(nil, nil, nil)
	relayed := make(chan ServerRequest, 1)
	hooks := Hooks{Relays: Relays{Sampling: true}, OnRequest: func(r ServerRequest) { relayed <- r }}
	ctx := context.WithValue(t.Context(), httpRelayKey{}, &httpRelay{hooks: hooks, waiting: &m.waiting})
	ask := func(ctx context.Context, method string) string {
		req := transport.JSONRPCRequest{JSONRPC: "2.0", Method: method, Params: map[string]any{"maxTokens": 5}}
		req.ID = mcp.NewRequestId("srv-1")
		resp, err := answerServerRequest(ctx, req)
		if err != nil || resp == nil {
			t.Fatalf("answer: %v, %v", resp, err)
		}
		b, _ := json.Marshal(resp)
		return string(b)
	}
	if got := ask(ctx, MethodRoots); got != `{"jsonrpc":"2.0","id":"srv-1","result":{"roots":[]}}` {
		t.Fatalf("roots/list not accepted: %s", got)
	}
	if got := ask(ctx, MethodElicitation); !strings.Contains(got, `"code":-32603`) || !strings.Contains(got, "does not accept elicitation/create") {
		t.Fatalf("elicitation not accepted: %s", got)
	}
	done := make(chan string, 1)
	go func() { done <- ask(ctx, MethodSampling) }()
	r := <-relayed
	if r.Method != MethodSampling || !strings.HasPrefix(r.Ref, "h:") || string(r.Params) != `{"maxTokens":5}` {
		t.Fatalf("relayed %+v", r)
	}
	if err := m.Answer(t.Context(), r.Ref, json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"ok"}}`), nil); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got != `{"jsonrpc":"2.0","id":"srv-1","result":{"role":"assistant","content":{"type":"text","text":"ok"}}}` {
		t.Fatalf("the server got %s", got)
	}
	// Spent, unknown, or not a reference at all: nothing waits.
	for _, ref := range []string{r.Ref, "h:0123", "x"} {
		if err := m.Answer(t.Context(), ref, json.RawMessage(`{}`), nil); !errors.Is(err, ErrRelayUnknown) {
			t.Fatalf("answer to %q: %v, want ErrRelayUnknown", ref, err)
		}
	}
	// The client's error reaches the server; a call that ends stops the wait.
	go func() { done <- ask(ctx, MethodSampling) }()
	r = <-relayed
	if err := m.Answer(t.Context(), r.Ref, nil, &RPCError{Code: -1, Message: "User rejected sampling request"}); err != nil {
		t.Fatal(err)
	}
	if got := <-done; !strings.Contains(got, `"code":-1,"message":"User rejected sampling request"`) {
		t.Fatalf("the server got %s", got)
	}
	ended, cancel := context.WithCancel(ctx)
	go func() { done <- ask(ended, MethodSampling) }()
	r = <-relayed
	cancel()
	if got := <-done; !strings.Contains(got, "the call that caused this request ended before its client answered") {
		t.Fatalf("the server got %s", got)
	}
	if err := m.Answer(t.Context(), r.Ref, json.RawMessage(`{}`), nil); !errors.Is(err, ErrRelayUnknown) {
		t.Fatalf("answer after the call ended: %v", err)
	}
}
