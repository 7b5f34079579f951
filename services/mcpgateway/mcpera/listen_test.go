package mcpera

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSubscription: what a subscriptions/listen grants is what the client asked for and the
// server declares with listChanged; only those notifications pass, tagged with the id.
func TestSubscription(t *testing.T) {
	caps := map[string]any{"tools": map[string]any{"listChanged": true}, "prompts": map[string]any{}, "resources": map[string]any{"listChanged": true, "subscribe": true}}
	r := Classify("2026-07-28", []byte(`{"jsonrpc":"2.0","id":"s","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["x://y"]}}}`))
	sub := r.Subscribe(json.RawMessage(`"s"`), caps)
	if !sub.Granted() {
		t.Fatal("nothing granted")
	}
	if ack := string(sub.Ack()); !strings.Contains(ack, `"notifications":{"toolsListChanged":true}`) || !strings.Contains(ack, `"io.modelcontextprotocol/subscriptionId":"s"`) {
		t.Errorf("ack %s: want tools only (prompts do not declare listChanged, resources were not asked)", ack)
	}
	for msg, pass := range map[string]bool{
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`:     true,
		`{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}`:   false,
		`{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`: false,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`:    false,
	} {
		if sub.Pass([]byte(msg)) != pass {
			t.Errorf("Pass(%s) = %v", msg, !pass)
		}
	}
	if got := string(sub.Tag([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))); got != `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"s"}}}` {
		t.Errorf("Tag = %s", got)
	}
	if got := sub.ListsChanged(); len(got) != 1 || string(got[0]) != `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"s"}}}` {
		t.Errorf("ListsChanged = %q: want the granted tools/list_changed alone, tagged", got)
	}
	if res := string(sub.Result(map[string]any{"name": "z"})); !strings.Contains(res, `"id":"s"`) || !strings.Contains(res, `"resultType":"complete"`) || !strings.Contains(res, `"io.modelcontextprotocol/serverInfo":{"name":"z"}`) {
		t.Errorf("Result = %s", res)
	}
	if none := r.Subscribe(json.RawMessage(`1`), nil); none.Granted() {
		t.Error("granted without capabilities")
	}
}

func TestDecorateResponse(t *testing.T) {
	var noInfo map[string]any
	for _, c := range []struct{ name, resp, want string }{
		{"a list gets cache hints", `{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}`, `{"jsonrpc":"2.0","id":3,"result":{"cacheScope":"private","resultType":"complete","tools":[],"ttlMs":0}}`},
		{"an error is kept", `{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"x"}}`, `{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"x"}}`},
	} {
		if got := string(DecorateResponse("tools/list", []byte(c.resp), noInfo)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// TestDecorateResponseAs: an endpoint that speaks for others (a preset) names itself in every
// result, in place of the serverInfo a provider put there; DecorateResponse keeps the
// provider's.
func TestDecorateResponseAs(t *testing.T) {
	preset := map[string]any{"name": "zest-preset-p", "version": "1"}
	resp := `{"jsonrpc":"2.0","id":3,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"provider","version":"9"},"x":1},"content":[],"resultType":"complete"}}`
	want := `{"jsonrpc":"2.0","id":3,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"zest-preset-p","version":"1"},"x":1},"content":[],"resultType":"complete"}}`
	if got := string(DecorateResponseAs("tools/call", []byte(resp), preset)); got != want {
		t.Errorf("DecorateResponseAs: %s, want %s", got, want)
	}
	kept := `{"jsonrpc":"2.0","id":3,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"provider","version":"9"},"x":1},"content":[],"resultType":"complete"}}`
	if got := string(DecorateResponse("tools/call", []byte(resp), preset)); got != kept {
		t.Errorf("DecorateResponse: %s, want %s", got, kept)
	}
}
