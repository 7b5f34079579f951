package stdio

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
)

// relayed records the requests a call's hooks received and answers them as told.
type relayed struct {
	mu      sync.Mutex
	methods []string
	params  []string
	replies []Reply
	answer  func(method string, reply Reply) // nil: keep the reply for later
}

func (r *relayed) hooks(accept ...string) Hooks {
	return Hooks{
		Accepts: func(m string) bool { return strings.Contains(strings.Join(accept, " "), m) },
		OnRequest: func(method string, params json.RawMessage, reply Reply) {
			r.mu.Lock()
			r.methods, r.params, r.replies = append(r.methods, method), append(r.params, string(params)), append(r.replies, reply)
			answer := r.answer
			r.mu.Unlock()
			if answer != nil {
				answer(method, reply)
			}
		},
	}
}

func (r *relayed) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.replies)
}

func askTool(method string, n int) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"name": "ask", "arguments": map[string]any{"method": method, "n": n}})
	return b
}

func toolText(t *testing.T, res json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(res, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("result %s: %v", res, err)
	}
	return r.Content[0].Text
}

func TestRelayToTheOneCallInFlight(t *testing.T) {
	c := start(t, nil)
	r := &relayed{answer: func(method string, reply Reply) {
		if !reply(json.RawMessage(`{"model":"m","role":"assistant","content":{"type":"text","text":"hi from the client"}}`), nil) {
			t.Error("the first reply was refused")
		}
		if reply(json.RawMessage(`{}`), nil) {
			t.Error("a second reply was accepted")
		}
	}}
	res, err := c.CallWith(t.Context(), "tools/call", askTool(MethodSampling, 1), r.hooks(MethodSampling))
	if err != nil {
		t.Fatal(err)
	}
	if got := toolText(t, res); !strings.Contains(got, "hi from the client") {
		t.Fatalf("the child got %s", got)
	}
	if r.count() != 1 || r.methods[0] != MethodSampling || !strings.Contains(r.params[0], `"asked":"sampling/createMessage"`) {
		t.Fatalf("relayed %v %v", r.methods, r.params)
	}
	// An error of the client reaches the child as a JSON-RPC error.
	r.answer = func(_ string, reply Reply) {
		reply(nil, &RPCError{Code: -1, Message: "User rejected sampling request"})
	}
	res, err = c.CallWith(t.Context(), "tools/call", askTool(MethodElicitation, 1), r.hooks(MethodSampling, MethodElicitation))
	if err != nil || !strings.Contains(toolText(t, res), "User rejected sampling request") {
		t.Fatalf("error answer: %s %v", res, err)
	}
	// A kind the caller does not accept is answered by the tool host.
	res, err = c.CallWith(t.Context(), "tools/call", askTool(MethodRoots, 1), r.hooks(MethodSampling))
	if err != nil || !strings.Contains(toolText(t, res), `"roots":[]`) || r.count() != 2 {
		t.Fatalf("roots not accepted: %s %v (relayed %d)", res, err, r.count())
	}
	if c.Relays() != 0 {
		t.Fatalf("%d relays left", c.Relays())
	}
}

func TestRelayNotAttributableWithTwoCallsInFlight(t *testing.T) {
	c := start(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	other := &relayed{}
	go c.CallWith(ctx, "tools/call", json.RawMessage(`{"name":"hang"}`), other.hooks(MethodSampling)) // cancelled below
	waitfor.True(t, 10*time.Second, "1 call in flight", func() bool { return c.InFlight() == 1 })
	r := &relayed{}
	res, err := c.CallWith(t.Context(), "tools/call", askTool(MethodSampling, 1), r.hooks(MethodSampling))
	if err != nil {
		t.Fatal(err)
	}
	if got := toolText(t, res); !strings.Contains(got, "cannot be attributed to one client: 2 calls are in flight") {
		t.Fatalf("the child got %s", got)
	}
	if r.count() != 0 || other.count() != 0 {
		t.Fatalf("relayed to %d and %d callers", r.count(), other.count())
	}
	// Once the other call is given up on, it still counts until the child answers it.
	cancel()
	waitfor.True(t, 10*time.Second, "no call in flight", func() bool { return c.InFlight() == 0 })
	res, err = c.CallWith(t.Context(), "tools/call", askTool(MethodSampling, 1), r.hooks(MethodSampling))
	if err != nil || !strings.Contains(toolText(t, res), "2 calls are in flight") || r.count() != 0 {
		t.Fatalf("after a cancelled call: %s %v (relayed %d)", res, err, r.count())
	}
}

func TestRelayEndsWithItsCall(t *testing.T) {
	c := start(t, nil)
	r := &relayed{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := c.CallWith(ctx, "tools/call", askTool(MethodSampling, 1), r.hooks(MethodSampling))
		done <- err
	}()
	waitfor.True(t, 10*time.Second, "1 request relayed", func() bool { return r.count() == 1 })
	if c.Relays() != 1 {
		t.Fatalf("relays = %d, want 1", c.Relays())
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if c.Relays() != 0 {
		t.Fatalf("relays = %d after the call ended", c.Relays())
	}
	if r.replies[0](json.RawMessage(`{}`), nil) {
		t.Fatal("a reply after the call ended was accepted")
	}
}

func TestRelayLimit(t *testing.T) {
	c := start(t, func(o *Options) { o.MaxRelays = 2 })
	r := &relayed{}
	done := make(chan string, 1)
	go func() {
		res, err := c.CallWith(t.Context(), "tools/call", askTool(MethodSampling, 3), r.hooks(MethodSampling))
		if err != nil {
			done <- err.Error()
			return
		}
		done <- string(res)
	}()
	waitfor.True(t, 10*time.Second, "2 requests relayed", func() bool { return r.count() == 2 })
	// The third request is refused at once, naming the limit, while the two relayed ones wait.
	// Answering them before the refusal was seen would make room for the third (it failed so
	// under load: the third was relayed, and never answered).
	waitfor.True(t, 10*time.Second, "1 request refused", func() bool { return c.RelaysOverLimit() == 1 })
	r.mu.Lock()
	replies := slices.Clone(r.replies)
	r.mu.Unlock()
	for _, reply := range replies {
		reply(json.RawMessage(`{"ok":true}`), nil)
	}
	got := <-done
	if strings.Count(got, `\"ok\":true`) != 2 || !strings.Contains(got, "tool host limit 2, toolhost-max-relays") {
		t.Fatalf("the child got %s", got)
	}
}
