package federate

import (
	"context"
	"encoding/json"

	"github.com/zestmcp/zest/services/mcpgateway/fanout"
	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"
)

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
	if h.hub.Publish(server, msg) > 0 {
		h.log.Debug("a GET stream is behind: a notification was dropped for it", "server", server, "method", n.Method)
	}
}

// Listen serves GET /mcp/servers/{id}: the session's server-to-client stream, opened once the
// session is found valid; then the server's notifications follow
// until the client leaves, or the session is ended or expires. notifications/message below
// the level the session set with logging/setLevel is left out.
func (h *Handler) Listen(req *mcphttp.Request, stream mcphttp.ListenStream) error {
	ctx := stream.Context()
	cfg, err := h.server(ctx, req.ServerID)
	if err != nil {
		return err
	}
	cl, err := h.session(ctx, req.SessionID(), req.ServerID)
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
	l := fanout.NewListener()
	h.hub.Follow(l, []string{req.ServerID})
	defer h.hub.Follow(l, nil)
	if err := stream.Open(); err != nil {
		return err
	}
	level := h.level(ctx, req.SessionID())
	return l.Serve(ctx, fanout.Stream{
		Send:    stream.Message,
		Expires: h.sessions.Expires(cl),
		Every:   h.listenCheck,
		Check: func() (bool, error) {
			if ended, err := h.store.SessionEnded(ctx, req.SessionID()); err == nil && ended {
				return false, nil
			}
			level = h.level(ctx, req.SessionID())
			return true, nil
		},
		Pass: func(msg []byte) bool { return !below(msg, level) },
	})
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
