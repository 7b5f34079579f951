package federate

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// listenerBuffer is how many notifications wait for one slow GET stream; beyond it the
// newest are dropped for that stream alone (MCP notifications are hints: a client that missed
// a list_changed lists again when it next looks).
const listenerBuffer = 256

// hub fans the notifications of each server out to the GET streams of its sessions.
type hub struct {
	mu   sync.Mutex
	subs map[string]map[*listener]struct{}
}

type listener struct {
	ch chan []byte
}

func (b *hub) add(server string) *listener {
	l := &listener{ch: make(chan []byte, listenerBuffer)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subs[server] == nil {
		b.subs[server] = map[*listener]struct{}{}
	}
	b.subs[server][l] = struct{}{}
	return l
}

func (b *hub) remove(server string, l *listener) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.subs[server], l)
	if len(b.subs[server]) == 0 {
		delete(b.subs, server)
	}
}

// relayed are the notifications a server's sessions get on their GET streams; progress goes
// to the call that asked for it, and a server's notifications/cancelled is about requests
// it was sent by Zest, not by the client.
var relayed = map[string]bool{
	"notifications/tools/list_changed":     true,
	"notifications/resources/list_changed": true,
	"notifications/prompts/list_changed":   true,
	"notifications/resources/updated":      true,
	"notifications/message":                true,
}

// Notify hands one notification of server to the GET streams of its sessions on this replica
// (upstream.Manager.OnNotification). It never blocks.
func (h *Handler) Notify(server string, msg []byte) {
	var n struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(msg, &n) != nil || !relayed[n.Method] {
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

// Listen serves GET /mcp/servers/{id}: the session's server-to-client stream. Its first item
// (no message) tells the edge the session is valid; then the server's notifications follow
// until the client leaves, or the session is ended or expires. notifications/message below
// the level the session set with logging/setLevel is left out.
func (h *Handler) Listen(req *mcpgatewayv1.ListenRequest, stream mcpgatewayv1.McpService_ListenServer) error {
	ctx := stream.Context()
	cfg, err := h.server(ctx, req.GetServerId())
	if err != nil {
		return err
	}
	cl, err := h.session(ctx, req.GetSessionId(), req.GetServerId())
	if err != nil {
		return err
	}
	if !h.up.State(cfg.GetId()).Connected {
		// After a restart of mcpgateway an HTTP upstream's notifications flow only once it is
		// connected again: connect it now rather than at the session's next request.
		go func() {
			if err := h.up.Connect(context.WithoutCancel(ctx), cfg); err != nil {
				h.log.DebugContext(ctx, "connecting a server for a GET stream failed", "server", cfg.GetId(), "err", err)
			}
		}()
	}
	l := h.hub.add(req.GetServerId())
	defer h.hub.remove(req.GetServerId(), l)
	if err := stream.Send(&mcpgatewayv1.ListenResponse{}); err != nil {
		return err
	}
	var expired <-chan time.Time
	if exp := h.sessions.Expires(cl); !exp.IsZero() {
		t := time.NewTimer(time.Until(exp))
		defer t.Stop()
		expired = t.C
	}
	level := h.level(ctx, req.GetSessionId())
	tick := time.NewTicker(h.ListenCheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-expired:
			return nil
		case <-tick.C:
			if ended, err := h.store.SessionEnded(ctx, req.GetSessionId()); err == nil && ended {
				return nil
			}
			level = h.level(ctx, req.GetSessionId())
		case msg := <-l.ch:
			if below(msg, level) {
				continue
			}
			if err := stream.Send(&mcpgatewayv1.ListenResponse{Message: msg}); err != nil {
				return err
			}
		}
	}
}

// level is the rank of the level the session set (-1: none set, everything passes).
func (h *Handler) level(ctx context.Context, sessionID string) int {
	l, err := h.store.SessionLogLevel(ctx, sessionID)
	if err != nil || l == "" {
		return -1
	}
	return levelRank(l)
}

// below reports whether msg is a notifications/message less severe than level.
func below(msg []byte, level int) bool {
	if level <= 0 {
		return false
	}
	var n struct {
		Method string `json:"method"`
		Params struct {
			Level string `json:"level"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &n) != nil || n.Method != "notifications/message" {
		return false
	}
	r := levelRank(n.Params.Level)
	return r >= 0 && r < level
}
