package upstream

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
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

// FollowToolHost follows the tool host's Watch stream until ctx ends, one stream per
// manager: when a stdio server connected here says its tools changed
// (notifications/tools/list_changed, after which the tool host has listed them again), or
// its child becomes ready again after a restart, the server's tools are read again from the
// tool host. A broken stream is opened again with backoff; each time it opens, the tools of
// every connected stdio server are read again, since notifications may have been missed
// while it was down.
func (m *Manager) FollowToolHost(ctx context.Context) {
	backoff := watchBackoffMin
	for failures := 0; ; failures++ {
		began := time.Now()
		err := m.watch(ctx)
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
		m.log.Log(ctx, level, "the tool host's watch stream broke; opening it again", "err", err, "backoff", backoff.String())
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

// watch runs one Watch stream until it breaks.
func (m *Manager) watch(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := m.toolhost.Watch(ctx, &toolhostv1.WatchRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	// The tool host sends the headers once it has registered the watcher: from then on no
	// event is missed, so the resync below covers everything before.
	if _, err := stream.Header(); err != nil {
		return err
	}
	m.resyncStdio()
	for {
		ev, err := stream.Recv()
		if err != nil {
			return err
		}
		m.onToolHostEvent(ev)
	}
}

// onToolHostEvent acts on one event of the tool host.
func (m *Manager) onToolHostEvent(ev *toolhostv1.WatchResponse) {
	if n := ev.GetNotification(); n != nil {
		m.emit(ev.GetId(), n)
	}
	s, _ := m.connected(ev.GetId())
	stdio, ok := s.(*stdioSession)
	if !ok {
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

// resyncStdio reads the tools of every connected stdio server again.
func (m *Manager) resyncStdio() {
	m.mu.Lock()
	conns := make([]*conn, 0, len(m.conns))
	for _, c := range m.conns {
		conns = append(conns, c)
	}
	m.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		s, ok := c.sess.(*stdioSession)
		c.mu.Unlock()
		if ok {
			s.listChanged()
		}
	}
}
