package upstream

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/mcptest"
	"github.com/zestmcp/zest/lib/waitfor"
)

// TestParkHTTPCall: a session-era HTTP server's request during a call with Hooks.Park ends the
// call with *InputRequiredError while the call waits parked in this replica; Resume with the
// answer gives the server's answer. A spent call, and one asked of another replica, are
// ErrRelayUnknown; a park that passes cancels the call.
func TestParkHTTPCall(t *testing.T) {
	u := mcptest.Start(t, mcptest.Options{Ask: true})
	m := New(nil, nil, nil)
	cfg := httpConfig("legacy", u.URL)
	if err := m.Connect(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Disconnect(t.Context(), "legacy") })
	hooks := Hooks{Relays: Relays{Sampling: true}, Park: time.Minute}
	params := json.RawMessage(`{"name":"ask","arguments":{"method":"sampling/createMessage","params":{"maxTokens":3}}}`)
	_, err := m.DispatchToolCall(t.Context(), cfg, params, 0, hooks)
	var asked *InputRequiredError
	if !errors.As(err, &asked) || len(asked.Requests) != 1 || asked.Requests[0].Method != MethodSampling || !strings.HasPrefix(asked.Call, "h:") {
		t.Fatalf("want the server's request as InputRequiredError: %v", err)
	}
	if m.Parked() != 1 {
		t.Fatalf("%d calls parked, want 1", m.Parked())
	}
	other := New(nil, nil, nil)
	answer := []ClientAnswer{{Ref: asked.Requests[0].Ref, Result: json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"parked answer"},"model":"m"}`)}}
	if _, err := other.ResumeToolCall(t.Context(), cfg, asked.Call, answer, hooks); !errors.Is(err, ErrRelayUnknown) || !strings.Contains(err.Error(), "on this mcpgateway replica") {
		t.Fatalf("resumed on another replica: %v", err)
	}
	res, err := m.ResumeToolCall(t.Context(), cfg, asked.Call, answer, hooks)
	if err != nil || !strings.Contains(string(res), "parked answer") {
		t.Fatalf("resumed: %s, %v", res, err)
	}
	if _, err := m.ResumeToolCall(t.Context(), cfg, asked.Call, answer, hooks); !errors.Is(err, ErrRelayUnknown) || m.Parked() != 0 {
		t.Fatalf("a spent call: %v (%d parked)", err, m.Parked())
	}

	hooks.Park = time.Millisecond
	_, err = m.DispatchToolCall(t.Context(), cfg, params, 0, hooks)
	if !errors.As(err, &asked) {
		t.Fatal(err)
	}
	waitfor.True(t, 10*time.Second, "the park to pass", func() bool { return m.Parked() == 0 })
	if _, err := m.ResumeToolCall(t.Context(), cfg, asked.Call, answer, hooks); !errors.Is(err, ErrRelayUnknown) {
		t.Fatalf("a call whose park passed: %v", err)
	}
}
