package federate

import (
	"context"
	"encoding/json"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/fanout"
	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"
	"github.com/zestmcp/zest/services/mcpgateway/session"
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
	h.ConnectForStream(ctx, cfg)
	l := fanout.NewListener()
	h.hub.Follow(l, []string{req.ServerID})
	defer h.hub.Follow(l, nil)
	return h.ServeSession(SessionStream{Stream: stream, Listener: l, SessionID: req.SessionID(), Claims: cl, Every: h.listenCheck})
}

// SessionStream is the GET stream of a session on an endpoint that relays servers
// (/mcp/servers/{id}, a preset's), for ServeSession.
type SessionStream struct {
	Stream mcphttp.ListenStream
	// Listener receives the notifications of the servers it follows (fanout.Hub.Follow).
	Listener  *fanout.Listener
	SessionID string
	Claims    session.Claims
	// Every is how often the stream checks that its session was not ended elsewhere, and
	// reads its level again; Wake, if set, rings a check early.
	Every time.Duration
	Wake  <-chan struct{}
	// More, if set, is called at each check with the stream's send: it may change what
	// Listener follows and tell the client so; false or an error ends the stream.
	More func(send func([]byte) error) (bool, error)
}

// ServeSession serves a relayed session's GET stream, the one way both endpoints that relay
// servers do: it opens the stream, then sends what the listener receives, leaving out
// notifications/message below the level the session set (logging/setLevel, on any
// replica), until the client leaves, or the session is ended (on any replica) or expires.
func (h *Handler) ServeSession(s SessionStream) error {
	ctx := s.Stream.Context()
	if err := s.Stream.Open(); err != nil {
		return err
	}
	level := h.level(ctx, s.SessionID)
	return s.Listener.Serve(ctx, fanout.Stream{
		Send:    s.Stream.Message,
		Expires: h.sessions.Expires(s.Claims),
		Every:   s.Every,
		Wake:    s.Wake,
		Check: func() (bool, error) {
			if ended, err := h.store.SessionEnded(ctx, s.SessionID); err == nil && ended {
				return false, nil
			}
			level = h.level(ctx, s.SessionID)
			if s.More != nil {
				return s.More(s.Stream.Message)
			}
			return true, nil
		},
		Pass: func(msg []byte) bool { return !below(msg, level) },
	})
}

// ConnectForStream connects cfg's server in the background when it is not connected on this
// replica: after a restart of mcpgateway an HTTP server's notifications flow only once it is
// connected again, and a GET stream should not wait for the session's next request.
func (h *Handler) ConnectForStream(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) {
	if h.up.State(cfg.GetId()).Connected {
		return
	}
	go func() {
		if err := h.up.Connect(context.WithoutCancel(ctx), cfg); err != nil {
			h.log.DebugContext(ctx, "connecting a server for a GET stream failed", "server", cfg.GetId(), "err", err)
		}
	}()
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
