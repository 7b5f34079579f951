package federate

import (
	"context"
	"time"

	"github.com/zestmcp/zest/services/mcpgateway/fanout"
	"github.com/zestmcp/zest/services/mcpgateway/mcpera"
)

// Subscription is one subscriptions/listen of MCP 2026-07-28 on an endpoint that relays
// servers (/mcp/servers/{id}, a preset's), for ServeSubscription.
type Subscription struct {
	Out *Output
	Sub *mcpera.Subscription
	// Hub is the endpoint's: the one its Notify publishes the servers' notifications to.
	Hub *fanout.Hub
	// Servers are the ids of the servers whose notifications the subscription carries.
	Servers []string
	// Every is how often the stream runs More; Wake, if set, rings it early.
	Every time.Duration
	Wake  <-chan struct{}
	// More, if set, reads again what the endpoint serves: the servers to follow now, and
	// whether its lists changed (the client is sent the granted list_changed notifications).
	// It runs once before the stream waits too: what it compares to was read before Wake
	// listened.
	More func() (servers []string, changed bool)
	// ServerInfo is the endpoint's, for the result that ends the subscription.
	ServerInfo any
}

// ServeSubscription serves a subscriptions/listen, the one way both endpoints that relay
// servers do: it acknowledges what was granted (mcpera.Subscription), then streams the
// notifications of those types of s.Servers, tagged with the subscription id, and the
// list_changed that More reports, until the client goes away. Nothing granted: the
// acknowledgement and the result come at once.
func (h *Handler) ServeSubscription(ctx context.Context, s Subscription) error {
	send := s.Out.message
	if !s.Sub.Granted() {
		if err := send(s.Sub.Ack()); err != nil {
			return err
		}
		return s.Out.modern(s.Sub.Result(s.ServerInfo))
	}
	l := fanout.NewListener()
	s.Hub.Follow(l, s.Servers)
	defer s.Hub.Follow(l, nil)
	if err := send(s.Sub.Ack()); err != nil {
		return err
	}
	check := func() (bool, error) {
		if s.More == nil {
			return true, nil
		}
		ids, changed := s.More()
		if !changed {
			return true, nil
		}
		s.Hub.Follow(l, ids)
		for _, m := range s.Sub.ListsChanged() {
			if err := send(m); err != nil {
				return false, err
			}
		}
		return true, nil
	}
	if on, err := check(); !on || err != nil {
		return err
	}
	err := l.Serve(ctx, fanout.Stream{
		Send:  func(msg []byte) error { return send(s.Sub.Tag(msg)) },
		Every: s.Every,
		Wake:  s.Wake,
		Check: check,
		Pass:  s.Sub.Pass,
	})
	if err != nil || ctx.Err() != nil {
		return err // the client went away: nobody reads the result
	}
	return s.Out.modern(s.Sub.Result(s.ServerInfo))
}
