package aggregate

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/zestmcp/zest/services/mcpgateway/fanout"
	"github.com/zestmcp/zest/services/mcpgateway/federate"
	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"
	"github.com/zestmcp/zest/services/mcpgateway/toolshape"
)

// Notify hands one notification of server to the GET streams of the preset sessions that
// use it on this replica (upstream.Manager.OnNotification, beside federate's). It never
// blocks.
func (h *Handler) Notify(server string, msg []byte) {
	var n struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(msg, &n) != nil || !federate.Relayed(n.Method) {
		return
	}
	if h.hub.Publish(server, msg) > 0 {
		h.log.Debug("a GET stream is behind: a notification was dropped for it", "server", server, "method", n.Method)
	}
}

// PresetChanged is told that preset id was written or deleted, through any replica ("":
// every preset may have changed, after the registry's watch missed changes). It forgets which
// provider listed the URIs of the preset, and wakes the GET streams to read their presets
// again at once: those whose providers changed are told their lists changed, as the listen check
// would tell them later.
func (h *Handler) PresetChanged(id string) {
	if id == "" {
		h.owners.drop(nil)
	} else {
		h.owners.drop(&id)
	}
	h.bell.Ring()
}

// ServerChanged is told that a server was written or deleted, through any replica: the
// presets that name it may now serve it otherwise (enabled, exposed, gone), so the GET
// streams read their presets again at once, as for PresetChanged.
func (h *Handler) ServerChanged(string) { h.bell.Ring() }

// listChanged are the notifications a session gets when its preset's providers change.
var listChanged = [][]byte{
	[]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`),
	[]byte(`{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}`),
	[]byte(`{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`),
}

// sameShape reports whether two reads of a preset's providers shape its tools alike.
func sameShape(a, b []provider) bool {
	var sa, sb *toolshape.Shape
	if len(a) > 0 {
		sa = a[0].shape
	}
	if len(b) > 0 {
		sb = b[0].shape
	}
	return toolshape.Equal(sa, sb)
}

// reread reads the preset's providers again and reports whether what it serves changed since
// provs (with ids, their servers) were read: other providers, or the tools shaped otherwise;
// if so, provs and ids become the new read. A preset gone is no change: the client's next
// request says so. Both streams of a preset ask it (a session's GET, subscriptions/listen).
func (h *Handler) reread(ctx context.Context, ep endpoint, provs *[]provider, ids *[]string) bool {
	now, err := h.providers(ctx, ep)
	if err != nil {
		return false
	}
	next := servers(now)
	if slices.Equal(next, *ids) && len(now) == len(*provs) && sameShape(now, *provs) {
		return false
	}
	*provs, *ids = now, next
	return true
}

// servers are the ids of the registered servers among provs.
func servers(provs []provider) []string {
	var out []string
	for _, p := range provs {
		if !p.builtin() {
			out = append(out, p.id)
		}
	}
	return out
}

// listen serves GET: the session's server-to-client stream, opened once the session is found
// valid; then the notifications of the preset's servers follow
// (list_changed, resources/updated, notifications/message at the session's level or worse)
// until the client leaves, or the session is ended or expires. When the preset's providers
// change, the session is told its lists changed.
func (h *Handler) listen(ep endpoint, sessionID string, stream mcphttp.ListenStream) error {
	ctx := stream.Context()
	// Woken from before the preset is read: a change after the read rings.
	wake, stop := h.bell.Listen()
	defer stop()
	provs, err := h.providers(ctx, ep)
	if err != nil {
		return rpcError(err)
	}
	cl, err := h.session(ctx, ep, sessionID, "")
	if err != nil {
		return err
	}
	h.connect(ctx, provs)
	l := fanout.NewListener()
	ids := servers(provs)
	h.hub.Follow(l, ids)
	defer h.hub.Follow(l, nil)
	// The stream of /mcp/servers/{id}, and what a preset adds: its providers read again.
	return h.fed.ServeSession(federate.SessionStream{Stream: stream, Listener: l, SessionID: sessionID, Claims: cl,
		Every: h.listenCheck, Wake: wake, More: func(send func([]byte) error) (bool, error) {
			if h.reread(ctx, ep, &provs, &ids) {
				h.hub.Follow(l, ids)
				h.connect(ctx, provs)
				for _, m := range listChanged {
					if err := send(m); err != nil {
						return false, err
					}
				}
			}
			return true, nil
		}})
}

// connect connects the servers among provs that are not connected on this replica (after a
// restart, an HTTP server's notifications flow only once it is connected again).
func (h *Handler) connect(ctx context.Context, provs []provider) {
	for _, p := range provs {
		if !p.builtin() {
			h.fed.ConnectForStream(ctx, p.cfg)
		}
	}
}
