package upstream

import (
	"context"
	"sync"
	"time"
)

// The order of a stdio server's notifications and answers. A notification of a stdio server
// belongs to no call (a log message, a resource update): it comes through the tool host's
// Watch stream (watch.go) and goes to the OnNotification function, which hands it to the
// sessions' GET streams. A call's answer comes on the call's own gRPC stream. The two
// streams are not ordered: under load an answer could reach the MCP client well before the
// log messages the server wrote before it. So the tool host numbers each server's
// notifications (WatchResponse.seq) and says in each answer how far they had come when the
// child's answer was read (CallResponse.notification_seq); a caller that relays both to one
// client (Hooks.Ordered) gets the answer once this replica's Watch relay of that tool host has
// passed those notifications on, or after NotificationWait, whichever comes first. An HTTP
// server's notifications on a call's own response stream need none of this: mcp-go's
// transport reads that stream in order and hands each notification on before it reads the
// answer.

// NotificationWait bounds how long an answer of a stdio server waits for this replica's Watch
// relay to pass on the notifications its server wrote before it (Hooks.Ordered): the Watch
// stream lags only under load, and a notification the tool host dropped for a watcher too far
// behind never comes.
const NotificationWait = time.Second

// relayed records how far this replica has passed on each stdio server's notifications, by
// tool host, while that tool host's Watch stream is open.
type relayed struct {
	mu    sync.Mutex
	hosts map[string]*hostRelay // by tool host address
}

// hostRelay is one Watch stream's record: the seq of each server's last notification passed
// on (or the stream's published count).
type hostRelay struct {
	seq map[string]uint64
	// wake is closed when a seq moves or the stream ends (nil while nobody waits).
	wake chan struct{}
}

// open starts the record of a Watch stream of the tool host at addr, which it replaces.
func (r *relayed) open(addr string) *hostRelay {
	hr := &hostRelay{seq: map[string]uint64{}}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hosts == nil {
		r.hosts = map[string]*hostRelay{}
	}
	if old := r.hosts[addr]; old != nil {
		old.ring()
	}
	r.hosts[addr] = hr
	return hr
}

// close ends the record hr of a Watch stream of addr: the answers waiting for it go on.
func (r *relayed) close(addr string, hr *hostRelay) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hosts[addr] == hr {
		delete(r.hosts, addr)
	}
	hr.ring()
}

// passed records that the notifications of server id up to seq were passed on (0: nothing).
func (r *relayed) passed(hr *hostRelay, id string, seq uint64) {
	if seq == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq > hr.seq[id] {
		hr.seq[id] = seq
		hr.ring()
	}
}

// ring wakes the waiters of hr (under relayed.mu).
func (hr *hostRelay) ring() {
	if hr.wake != nil {
		close(hr.wake)
		hr.wake = nil
	}
}

// wait waits until the notifications of server id up to seq on the tool host at addr were
// passed on, at most limit. It reports false when it stopped for another reason: the limit
// passed, ctx ended, or the tool host's Watch stream is not open or ended meanwhile (a
// stream that is down relays nothing: there is nothing to wait for).
func (r *relayed) wait(ctx context.Context, addr, id string, seq uint64, limit time.Duration) bool {
	r.mu.Lock()
	hr := r.hosts[addr]
	if hr == nil || hr.seq[id] >= seq {
		r.mu.Unlock()
		return hr != nil
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	for {
		if hr.wake == nil {
			hr.wake = make(chan struct{})
		}
		wake := hr.wake
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return false
		case <-wake:
		}
		r.mu.Lock()
		switch {
		case r.hosts[addr] != hr:
			r.mu.Unlock()
			return false
		case hr.seq[id] >= seq:
			r.mu.Unlock()
			return true
		}
	}
}
