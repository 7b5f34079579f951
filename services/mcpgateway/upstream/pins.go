package upstream

import (
	"context"
	"encoding/json"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// Pins decides which of a server's listed tools are served (pins.Gate): Admit returns those
// of tools it serves; complete says tools is the server's whole list, not one page of it.
type Pins interface {
	Admit(ctx context.Context, server string, tools []json.RawMessage, complete bool) []json.RawMessage
}

// PinTools makes p decide which tools of every server are served, on every list the manager
// reads: the complete lists it keeps (Listed, Tools, ListTools: the catalog, the chat loop,
// presets) and the tools/list pages it forwards (Call, CallWith, CallProgress: the
// /mcp/servers/{id} and preset endpoints). Set it before the first connect.
func (m *Manager) PinTools(p Pins) { m.pins.Store(&p) }

// admitFunc leaves out of a complete list the tools that are not served.
type admitFunc func(ctx context.Context, tools []json.RawMessage) []json.RawMessage

// admit is the admitFunc of server id's lists.
func (m *Manager) admit(id string) admitFunc {
	return func(ctx context.Context, tools []json.RawMessage) []json.RawMessage {
		if p := m.pins.Load(); p != nil {
			return (*p).Admit(ctx, id, tools, true)
		}
		return tools
	}
}

// admitPage leaves out of a tools/list result (one page) forwarded to a client the tools
// that are not served, keeping every other member as the server sent it.
func (m *Manager) admitPage(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, method string, res json.RawMessage, err error) (json.RawMessage, error) {
	p := m.pins.Load()
	if err != nil || method != "tools/list" || p == nil {
		return res, err
	}
	var page map[string]json.RawMessage
	var tools []json.RawMessage
	if json.Unmarshal(res, &page) != nil || json.Unmarshal(page["tools"], &tools) != nil {
		return res, nil // not a list: the caller says so
	}
	kept := (*p).Admit(ctx, cfg.GetId(), tools, false)
	if len(kept) == len(tools) {
		return res, nil
	}
	if kept == nil {
		kept = []json.RawMessage{}
	}
	page["tools"], _ = json.Marshal(kept)
	out, merr := json.Marshal(page)
	if merr != nil {
		return res, nil
	}
	return out, nil
}

// toolsListChanged is the notification the clients of a server get when what it serves
// changed without the server saying so (a decision on its held tools).
var toolsListChanged = []byte(`{"jsonrpc":"2.0","method":"` + methodToolsListChanged + `"}`)

// Relist lists the tools of server id again, when it is connected, and tells its clients
// that its list changed: what is served of it changed (a decision on its pinned tools).
func (m *Manager) Relist(ctx context.Context, id string) {
	if s, _ := m.connected(id); s != nil {
		if _, err := m.tools(ctx, id, s, true); err != nil {
			m.log.WarnContext(ctx, "listing a server's tools again after a decision on its pins failed", "server", id, "err", err)
		}
	}
	m.emit(id, toolsListChanged)
}
