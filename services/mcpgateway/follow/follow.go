// Package follow keeps one mcpgateway replica in step with the registry's servers and
// presets: its upstream connections (a connection its server's new config does not ask for is
// closed, a deleted server's is forgotten), the sessions that use a changed server or preset
// (told their lists changed) and, for what another replica wrote, its config cache.
//
// A change written through this replica's admin API and one seen by the registry's watch take
// the same path, Replica.Changed, so that a change has the same effects on every replica,
// whichever wrote it. Follow runs the watch (registry.Watcher: a registry shared by replicas)
// for the life of the server.
package follow

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"google.golang.org/protobuf/proto"
)

// ToolsListChanged is what the sessions of a changed server are told: its tools, as its
// filters show them, may be others now.
var ToolsListChanged = []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)

// Upstreams are the replica's connections to the servers (upstream.Manager).
type Upstreams interface {
	// Config is the config id's open connection (or connect in progress) was opened with.
	Config(id string) *mcpgatewayv1.ServerConfig
	// Configs is Config of every server with one.
	Configs() map[string]*mcpgatewayv1.ServerConfig
	Disconnect(ctx context.Context, id string) error
	Forget(ctx context.Context, id string)
}

// Cache is the replica's config cache (configcache.Registry).
type Cache interface {
	Apply(c registry.Change) *mcpgatewayv1.ServerConfig
	Drop() []*mcpgatewayv1.ServerConfig
	GetServer(ctx context.Context, id string) (*mcpgatewayv1.ServerConfig, error)
}

// Presets are told of changes that may change what a preset serves (aggregate.Handler).
type Presets interface {
	// PresetChanged: preset id was written or deleted ("": every preset may have changed).
	PresetChanged(id string)
	// ServerChanged: server id was written or deleted.
	ServerChanged(id string)
}

// Replica applies changes of servers and presets to one replica's live state.
type Replica struct {
	up  Upstreams
	log *slog.Logger
	// notify, when set, hands a notification to the GET streams of the sessions that use a
	// server on this replica (WithNotify).
	notify func(server string, msg []byte)
	// presets, when set, is told of every change (WithPresets).
	presets Presets
	// timeout bounds the I/O of reacting to one change of the watch (closing a connection).
	timeout time.Duration
	// backoff is the first wait before the watch starts again after it failed; it doubles
	// up to maxBackoff (WithBackoff).
	backoff, maxBackoff time.Duration
}

// Option configures a Replica.
type Option func(*Replica)

// WithNotify hands each notification for the sessions that use a server on this replica
// (notifications/tools/list_changed when its config changed) to notify: federate's and
// aggregate's Notify.
func WithNotify(notify func(server string, msg []byte)) Option {
	return func(r *Replica) { r.notify = notify }
}

// WithPresets tells p of every change (the preset endpoints).
func WithPresets(p Presets) Option { return func(r *Replica) { r.presets = p } }

// WithBackoff sets the first wait before the watch starts again after it failed, which doubles
// up to max (defaults DefaultBackoff and DefaultMaxBackoff).
func WithBackoff(first, max time.Duration) Option {
	return func(r *Replica) { r.backoff, r.maxBackoff = first, max }
}

// Defaults of a Replica.
const (
	DefaultTimeout    = 10 * time.Second
	DefaultBackoff    = 100 * time.Millisecond
	DefaultMaxBackoff = 2 * time.Second
)

// New returns the replica's follower of changes, which closes and forgets connections of up.
func New(up Upstreams, log *slog.Logger, opts ...Option) *Replica {
	if log == nil {
		log = slog.Default()
	}
	r := &Replica{up: up, log: log, timeout: DefaultTimeout, backoff: DefaultBackoff, maxBackoff: DefaultMaxBackoff}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Changed makes the replica's live state agree with change c, which its config cache holds
// already (written through it, or applied from the watch); old is the config of c's server
// that the change replaced (nil when unknown). A server written: its connection is closed
// when it was opened with a config whose connection differs (serverconfig.SameConnection; it
// reconnects on next use), and unless old equals the new config, the sessions that use it are
// told its tools changed. A server deleted: its connection is forgotten and its sessions told.
// Presets hears of both, and of every preset change. A Resync is Resync's.
func (r *Replica) Changed(ctx context.Context, c registry.Change, old *mcpgatewayv1.ServerConfig) {
	switch c.Kind {
	case registry.ServerPut:
		if cur := r.up.Config(c.ID); cur != nil && !serverconfig.SameConnection(cur, c.Server) {
			if err := r.up.Disconnect(ctx, c.ID); err != nil {
				r.log.WarnContext(ctx, "closing the connection of a reconfigured server failed", "server", c.ID, "err", err)
			}
		}
		if old != nil && proto.Equal(old, c.Server) {
			return // this replica's own write, seen again by the watch
		}
		r.serverChanged(c.ID)
	case registry.ServerDeleted:
		known := old != nil || r.up.Config(c.ID) != nil
		r.up.Forget(ctx, c.ID)
		if known {
			r.serverChanged(c.ID)
		}
	case registry.PresetPut, registry.PresetDeleted:
		if r.presets != nil {
			r.presets.PresetChanged(c.ID)
		}
	}
}

func (r *Replica) serverChanged(id string) {
	if r.notify != nil {
		r.notify(id, ToolsListChanged)
	}
	if r.presets != nil {
		r.presets.ServerChanged(id)
	}
}

// Resync makes the live state agree with the registry after changes may have been missed
// (registry.Resync; the cache has dropped held, the configs it held): every server that was
// held or has a connection is read again and taken as changed, and every preset too.
func (r *Replica) Resync(ctx context.Context, cache Cache, held []*mcpgatewayv1.ServerConfig) {
	olds := r.up.Configs()
	for _, cfg := range held {
		olds[cfg.GetId()] = cfg // what the sessions were shown: the cache's config
	}
	for id, old := range olds {
		cfg, err := cache.GetServer(ctx, id)
		switch {
		case errors.Is(err, registry.ErrNotFound):
			r.Changed(ctx, registry.Change{Kind: registry.ServerDeleted, ID: id}, old)
		case err != nil:
			// The registry cannot be read: the connection stays; the next Resync (the watch
			// fails too) tries again.
			r.log.WarnContext(ctx, "reading a server again after the registry's watch missed changes failed", "server", id, "err", err)
		default:
			r.Changed(ctx, registry.Change{Kind: registry.ServerPut, ID: id, Server: cfg}, old)
		}
	}
	if r.presets != nil {
		r.presets.PresetChanged("")
	}
}

// Follow runs w's watch until ctx is done, and returns then. Each change reaches the cache at
// once (Apply, or Drop for a Resync), then Changed or Resync, in the store's order, on a
// goroutine of their own (closing a connection waits for I/O; the watch must not). A watch
// that ends before ctx is done is logged and started again after a backoff, with a Resync
// (changes may have been missed meanwhile); the replica goes on serving from what it holds.
func (r *Replica) Follow(ctx context.Context, w registry.Watcher, cache Cache) {
	q := newQueue()
	worked := make(chan struct{})
	go func() { defer close(worked); r.work(ctx, q, cache) }()
	defer func() { <-worked }()
	apply := func(c registry.Change) {
		it := item{c: c}
		if c.Kind == registry.Resync {
			it.held = cache.Drop()
		} else {
			it.old = cache.Apply(c)
		}
		q.put(it)
	}
	wait := r.backoff
	for first := true; ; first = false {
		if !first {
			// Changes may have been missed since the last watch ended.
			apply(registry.Change{Kind: registry.Resync})
		}
		began := time.Now()
		err := w.Watch(ctx, apply)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("the watch ended without an error")
		}
		if time.Since(began) > 10*r.maxBackoff {
			wait = r.backoff // it had been watching well: a new failure starts the backoff over
		}
		r.log.WarnContext(ctx, "the registry's watch failed: this replica serves what it holds and watches again", "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, r.maxBackoff)
	}
}

// work reacts to the changes of q in order until ctx is done.
func (r *Replica) work(ctx context.Context, q *queue, cache Cache) {
	for {
		it, ok := q.take(ctx)
		if !ok {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, r.timeout)
		if it.c.Kind == registry.Resync {
			r.Resync(cctx, cache, it.held)
		} else {
			r.Changed(cctx, it.c, it.old)
		}
		cancel()
	}
}

// item is one change of the watch, with what the cache held before it.
type item struct {
	c    registry.Change
	old  *mcpgatewayv1.ServerConfig
	held []*mcpgatewayv1.ServerConfig
}

// queue holds the changes the watch delivered until work reacts to them: unbounded, so that
// the watch never waits (changes are registry writes: few).
type queue struct {
	mu    sync.Mutex
	items []item
	ready chan struct{} // holds a token while items is not empty
}

func newQueue() *queue { return &queue{ready: make(chan struct{}, 1)} }

func (q *queue) put(it item) {
	q.mu.Lock()
	q.items = append(q.items, it)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *queue) take(ctx context.Context) (item, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			it := q.items[0]
			q.items[0] = item{}
			q.items = q.items[1:]
			q.mu.Unlock()
			return it, true
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return item{}, false
		case <-q.ready:
		}
	}
}
