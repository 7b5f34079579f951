package upstream

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"github.com/zestmcp/zest/services/mcpgateway/toolhosts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Backoff of FollowToolHost between broken Watch streams.
const (
	watchBackoffMin = 100 * time.Millisecond
	watchBackoffMax = 5 * time.Second
	// watchHealthy is how long a stream must have lived for the backoff to start over.
	watchHealthy = 10 * time.Second
)

// FollowToolHost follows the tool hosts until ctx ends. It follows every tool host's Watch
// stream (one per tool host, started when one appears, stopped when its address goes): when
// a stdio server connected here says its tools changed (notifications/tools/list_changed,
// after which the tool host has listed them again), or its child becomes ready again after a
// restart, the server's tools are read again from the tool host. A broken stream is opened
// again with backoff; each time it opens, the tools of every stdio server connected there
// are read again, since notifications may have been missed while it was down.
//
// And when the healthy tool hosts change, every connected stdio server whose placement
// changed moves at once: it connects on its new tool host (EnsureStarted there) and is
// stopped on the old one when that one is still healthy (Manager.retire); one that no tool
// host can run now is disconnected, and its next use waits for one.
func (m *Manager) FollowToolHost(ctx context.Context) {
	followers := map[string]context.CancelFunc{} // by address
	var wg sync.WaitGroup
	defer func() {
		for _, stop := range followers {
			stop()
		}
		wg.Wait()
	}()
	for {
		changed := m.hosts.Changed()
		live := map[string]bool{}
		for _, h := range m.hosts.Members() {
			live[h.Addr] = true
			if followers[h.Addr] == nil {
				fctx, stop := context.WithCancel(ctx)
				followers[h.Addr] = stop
				wg.Add(1)
				go func() { defer wg.Done(); m.follow(fctx, h) }()
			}
		}
		for a, stop := range followers {
			if !live[a] {
				stop()
				delete(followers, a)
			}
		}
		m.rebalance(ctx)
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// follow follows the Watch stream of one tool host until ctx ends.
func (m *Manager) follow(ctx context.Context, h toolhosts.Host) {
	backoff := watchBackoffMin
	for failures := 0; ; failures++ {
		began := time.Now()
		err := m.watch(ctx, h)
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) >= watchHealthy {
			backoff, failures = watchBackoffMin, 0
		}
		level := slog.LevelWarn // the first failure of a run; the rest are debug
		switch {
		case failures > 0:
			level = slog.LevelDebug
		case status.Code(err) == codes.Unavailable: // the tool host is restarting: expected
			level = slog.LevelInfo
		}
		m.log.Log(ctx, level, "the tool host's watch stream broke; opening it again", "tool_host", h.String(), "err", err, "backoff", backoff.String())
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, watchBackoffMax)
	}
}

// watch runs one Watch stream of the tool host at h.Addr until it breaks.
func (m *Manager) watch(ctx context.Context, h toolhosts.Host) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := h.Client.Watch(ctx, &toolhostv1.WatchRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	// The tool host sends the headers once it has registered the watcher: from then on no
	// event is missed, so the resync below covers everything before.
	if _, err := stream.Header(); err != nil {
		return err
	}
	rel := m.relayed.open(h.Addr)
	defer m.relayed.close(h.Addr, rel)
	m.resyncStdio(h.Addr)
	for {
		ev, err := stream.Recv()
		if err != nil {
			return err
		}
		m.onToolHostEvent(h.Addr, ev)
		// Passed on: the answers that wait for it go (Hooks.Ordered, order.go).
		m.relayed.passed(rel, ev.GetId(), max(ev.GetSeq(), ev.GetPublished()))
	}
}

// onToolHostEvent acts on one event of the tool host at addr. Notifications pass on whatever
// tool host sent them (a server runs on one, but for a moment while it moves); a connected
// server's tools are read again only from the tool host it is connected on.
func (m *Manager) onToolHostEvent(addr string, ev *toolhostv1.WatchResponse) {
	if n := ev.GetNotification(); n != nil {
		m.emit(ev.GetId(), n)
	}
	s, _ := m.connected(ev.GetId())
	stdio, ok := s.(*stdioSession)
	if !ok || !m.on(stdio, addr) {
		return
	}
	switch {
	case ev.GetStatus() != nil:
		if ev.GetStatus().GetState() == toolhostv1.ServerState_SERVER_STATE_READY {
			stdio.listChanged() // a restarted child may have other tools
		}
	case ev.GetNotification() != nil:
		var note struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(ev.GetNotification(), &note) == nil && note.Method == methodToolsListChanged {
			stdio.listChanged()
		}
	}
}

// on reports whether s runs on the tool host at addr. The members of a Fixed pool (tests,
// one tool host dialed by its caller) are all one.
func (m *Manager) on(s *stdioSession, addr string) bool { return s.host.Addr == addr }

// resyncStdio reads again the tools of every stdio server connected on the tool host at addr.
func (m *Manager) resyncStdio(addr string) {
	for _, c := range m.all() {
		c.mu.Lock()
		s, ok := c.sess.(*stdioSession)
		c.mu.Unlock()
		if ok && m.on(s, addr) {
			s.listChanged()
		}
	}
}

// all returns every connection state.
func (m *Manager) all() map[string]*conn {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]*conn, len(m.conns))
	for id, c := range m.conns {
		out[id] = c
	}
	return out
}

// rebalance moves every connected stdio server whose placement changed, and connects again
// those that lost their tool host when none could take them (FollowToolHost).
func (m *Manager) rebalance(ctx context.Context) {
	for id, c := range m.all() {
		c.mu.Lock()
		st, ok := c.sess.(*stdioSession)
		cfg, homeless := c.cfg, c.homeless && c.sess == nil && c.pending == nil
		c.mu.Unlock()
		if homeless {
			if h, err := m.hosts.Placement(id, cfg.GetToolHost()); err == nil {
				c.mu.Lock()
				if c.homeless && c.sess == nil && c.pending == nil {
					m.log.InfoContext(ctx, "a tool host can run the stdio server again: connecting it", "server", id, "tool_host", h.String())
					m.start(ctx, c, cfg, h)
				}
				c.mu.Unlock()
			}
			continue
		}
		if !ok {
			continue
		}
		h, err := m.hosts.Placement(id, cfg.GetToolHost())
		if err == nil && sameHost(h, st.host) {
			continue
		}
		c.mu.Lock()
		if c.sess != st { // reconnected meanwhile
			c.mu.Unlock()
			continue
		}
		if err != nil {
			// No tool host can run it now (the one it ran on is gone: so are its children).
			c.sess, c.lastErr, c.homeless = nil, err.Error(), true
			c.mu.Unlock()
			m.log.WarnContext(ctx, "a stdio server lost its tool host and no other can run it", "server", id, "tool_host", st.host.String(), "err", err)
			continue
		}
		m.log.InfoContext(ctx, "moving a stdio server to another tool host", "server", id, "from", st.host.String(), "to", h.String())
		m.start(ctx, c, cfg, h)
		c.mu.Unlock()
	}
}
