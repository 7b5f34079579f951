package mcpera

import (
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/services/mcpgateway/jsonrpc"
)

// Subscription is one subscriptions/listen request as an endpoint grants it: the list_changed
// notifications (tools, prompts, resources) that the client asked for and the server
// declares. Resource subscriptions are not offered by any endpoint of mcpgateway (an
// upstream's subscriptions are shared by every client), so none is ever granted.
type Subscription struct {
	id      json.RawMessage
	granted map[string]bool // notification methods
	filter  map[string]any  // the acknowledged notifications member
}

// listChangedKinds are the lists whose changes subscriptions/listen can carry, with the flag
// that asks for each in params.notifications.
var listChangedKinds = []struct{ kind, flag string }{
	{"tools", "toolsListChanged"}, {"prompts", "promptsListChanged"}, {"resources", "resourcesListChanged"},
}

// Subscribe reads what the subscriptions/listen request r (with id) asks for and grants what
// caps (the server's capabilities) declares with listChanged.
func (r Request) Subscribe(id json.RawMessage, caps map[string]any) *Subscription {
	var p struct {
		Notifications map[string]bool `json:"notifications"`
	}
	_ = json.Unmarshal(r.Params, &p)
	s := &Subscription{id: id, granted: map[string]bool{}, filter: map[string]any{}}
	for _, k := range listChangedKinds {
		m, _ := caps[k.kind].(map[string]any)
		if lc, _ := m["listChanged"].(bool); lc && p.Notifications[k.flag] {
			s.granted["notifications/"+k.kind+"/list_changed"] = true
			s.filter[k.flag] = true
		}
	}
	return s
}

// Granted reports whether anything was granted: the stream stays open only then.
func (s *Subscription) Granted() bool { return len(s.granted) > 0 }

func (s *Subscription) tag() map[string]any { return map[string]any{mcp.MetaKeySubscriptionID: s.id} }

// Ack is notifications/subscriptions/acknowledged: the types granted, tagged with the
// subscription id.
func (s *Subscription) Ack() []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": mcp.MethodNotificationSubscriptionsAcknowledged,
		"params": map[string]any{"_meta": s.tag(), "notifications": s.filter}})
	return b
}

// Pass reports whether a server's notification is one the subscription carries.
func (s *Subscription) Pass(msg []byte) bool {
	var n struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(msg, &n) == nil && s.granted[n.Method]
}

// Tag returns a notification the subscription carries as it goes to the client: its params
// are the subscription id alone (a list_changed has nothing else to say).
func (s *Subscription) Tag(msg []byte) []byte {
	var n map[string]json.RawMessage
	if json.Unmarshal(msg, &n) != nil {
		return msg
	}
	n["params"], _ = json.Marshal(map[string]any{"_meta": s.tag()})
	b, err := json.Marshal(n)
	if err != nil {
		return msg
	}
	return b
}

// ListsChanged are the list_changed notifications granted, tagged: what a client is sent when
// the lists the endpoint serves changed by its own doing (a preset's providers or shaping),
// not by a server's notification.
func (s *Subscription) ListsChanged() [][]byte {
	var out [][]byte
	for _, k := range listChangedKinds {
		if m := "notifications/" + k.kind + "/list_changed"; s.granted[m] {
			out = append(out, s.Tag([]byte(`{"jsonrpc":"2.0","method":"`+m+`"}`)))
		}
	}
	return out
}

// Result is the answer that ends the subscription (decorated as every result: see Decorate).
func (s *Subscription) Result(serverInfo any) []byte {
	res, _ := json.Marshal(map[string]any{"_meta": s.tag()})
	return jsonrpc.Result(s.id, Decorate("subscriptions/listen", res, serverInfo))
}

// DecorateResponse applies Decorate to the result of a rendered JSON-RPC response; an error
// response is returned as it is.
func DecorateResponse(method string, resp []byte, serverInfo any) []byte {
	return decorateResponse(method, resp, serverInfo, false)
}

// DecorateResponseAs applies DecorateAs to the result of a rendered JSON-RPC response: the
// endpoint's serverInfo replaces a provider's.
func DecorateResponseAs(method string, resp []byte, serverInfo any) []byte {
	return decorateResponse(method, resp, serverInfo, true)
}

func decorateResponse(method string, resp []byte, serverInfo any, replace bool) []byte {
	var r struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(resp, &r) != nil || len(r.Result) == 0 {
		return resp
	}
	return jsonrpc.Result(r.ID, decorate(method, r.Result, serverInfo, replace))
}
