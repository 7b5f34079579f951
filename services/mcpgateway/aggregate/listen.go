package aggregate

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/federate"
)

// listenerBuffer is how many notifications wait for one slow GET stream; beyond it the
// newest are dropped for that stream alone (a client that missed a list_changed lists again
// when it next looks).
const listenerBuffer = 256

// hub fans the notifications of each server out to the GET streams of the preset sessions
// that have it as a provider.
type hub struct {
	mu   sync.Mutex
	subs map[string]map[*listener]struct{} // by server id
}

type listener struct {
	ch      chan []byte
	servers []string
}

// follow makes l receive the notifications of servers (and no others).
func (b *hub) follow(l *listener, servers []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range l.servers {
		delete(b.subs[s], l)
		if len(b.subs[s]) == 0 {
			delete(b.subs, s)
		}
	}
	l.servers = servers
	for _, s := range servers {
		if b.subs[s] == nil {
			b.subs[s] = map[*listener]struct{}{}
		}
		b.subs[s][l] = struct{}{}
	}
}

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
	h.hub.mu.Lock()
	defer h.hub.mu.Unlock()
	for l := range h.hub.subs[server] {
		select {
		case l.ch <- msg:
		default:
			h.log.Debug("a GET stream is behind: a notification was dropped for it", "server", server, "method", n.Method)
		}
	}
}

// listChanged are the notifications a session gets when its preset's providers change.
var listChanged = [][]byte{
	[]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`),
	[]byte(`{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}`),
	[]byte(`{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`),
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

// listen serves GET: the session's server-to-client stream. Its first item (no message)
// tells the edge the session is valid; then the notifications of the preset's servers follow
// (list_changed, resources/updated, notifications/message at the session's level or worse)
// until the client leaves, or the session is ended or expires. When the preset's providers
// change, the session is told its lists changed.
func (h *Handler) listen(ep endpoint, sessionID string, stream mcpgatewayv1.McpService_ListenServer) error {
	ctx := stream.Context()
	provs, err := h.providers(ctx, ep)
	if err != nil {
		return rpcError(err)
	}
	cl, err := h.session(ctx, ep, sessionID, "")
	if err != nil {
		return err
	}
	h.connect(ctx, provs)
	l := &listener{ch: make(chan []byte, listenerBuffer)}
	ids := servers(provs)
	h.hub.follow(l, ids)
	defer h.hub.follow(l, nil)
	if err := stream.Send(&mcpgatewayv1.ListenResponse{}); err != nil {
		return err
	}
	var expired <-chan time.Time
	if exp := h.sessions.Expires(cl); !exp.IsZero() {
		t := time.NewTimer(time.Until(exp))
		defer t.Stop()
		expired = t.C
	}
	level := h.fed.Level(ctx, sessionID)
	tick := time.NewTicker(h.ListenCheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-expired:
			return nil
		case <-tick.C:
			if ended, err := h.store.SessionEnded(ctx, sessionID); err == nil && ended {
				return nil
			}
			level = h.fed.Level(ctx, sessionID)
			now, err := h.providers(ctx, ep)
			if err != nil {
				continue // the preset is gone: its next request says so
			}
			if next := servers(now); !slices.Equal(next, ids) || len(now) != len(provs) {
				ids, provs = next, now
				h.hub.follow(l, ids)
				h.connect(ctx, provs)
				for _, m := range listChanged {
					if err := stream.Send(&mcpgatewayv1.ListenResponse{Message: m}); err != nil {
						return err
					}
				}
			}
		case msg := <-l.ch:
			if federate.Below(msg, level) {
				continue
			}
			if err := stream.Send(&mcpgatewayv1.ListenResponse{Message: msg}); err != nil {
				return err
			}
		}
	}
}

// connect connects the servers among provs that are not connected on this replica (after a
// restart, an HTTP server's notifications flow only once it is connected again).
func (h *Handler) connect(ctx context.Context, provs []provider) {
	for _, p := range provs {
		if p.builtin() || h.up.State(p.id).Connected {
			continue
		}
		go func() {
			if err := h.up.Connect(context.WithoutCancel(ctx), p.cfg); err != nil {
				h.log.DebugContext(ctx, "connecting a server for a GET stream failed", "server", p.id, "err", err)
			}
		}()
	}
}
