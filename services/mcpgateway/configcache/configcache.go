// Package configcache keeps the registry's server configs in memory: the hot paths (every
// request of /mcp/servers/{id}, every tool call of the admin API and of the chat loop) read a
// config without a registry read (a bbolt transaction and a protojson decode), and yet meet
// it as last written — its tool filters and enabled flag included.
//
// It is write-through: every write of a server through this replica goes through it, and it
// updates memory after the registry under one write lock, so that a write and a delete of one
// server cannot leave memory behind the registry; a fill that raced with a write is not kept.
// ListServers answers from memory too, with the configs GetServer hands out, so that the tool
// catalog tells a changed config by its pointer.
//
// With a registry shared by several replicas (registry.Watcher), the writes of the others
// arrive through the watch: Apply puts each in memory, in the store's order, under the same
// rules (a fill that raced with it is not kept), and this replica's own writes coming back
// through the watch (before or after the write returned) change nothing. A write of this
// replica that raced with another change of the same server from the watch is not kept in
// memory (which of the two the registry holds last is the watch's to tell): the next read
// takes it from the registry.
package configcache

import (
	"context"
	"maps"
	"slices"
	"sync"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"google.golang.org/protobuf/proto"
)

// Registry is a registry.Registry whose GetServer answers from memory. The configs it
// returns are shared: callers must not modify them.
type Registry struct {
	registry.Registry

	// write serializes PutServer and DeleteServer with their memory update.
	write sync.Mutex

	mu sync.Mutex
	m  map[string]*mcpgatewayv1.ServerConfig
	// all is every config in id order, as ListServers last read them (nil: read again).
	all []*mcpgatewayv1.ServerConfig
	// gen counts writes and applied changes, so that a fill that began before one is
	// dropped.
	gen uint64
	// writing is the write of this replica under way (nil: none), so that Apply knows it
	// when the watch brings it back before the write returns, and tells the write whether
	// another change overtook it.
	writing *write
}

// write is one write of a server under way: cfg written to id (nil: id deleted).
type write struct {
	id        string
	cfg       *mcpgatewayv1.ServerConfig
	overtaken bool // another change of id came through the watch meanwhile
}

// start records w as the write under way (the caller holds r.write).
func (r *Registry) start(w *write) {
	r.mu.Lock()
	r.writing = w
	r.mu.Unlock()
}

// New returns reg with a config cache in front of it.
func New(reg registry.Registry) *Registry {
	return &Registry{Registry: reg, m: map[string]*mcpgatewayv1.ServerConfig{}}
}

// GetServer returns the config of id, from memory or the registry (registry.ErrNotFound when
// there is none).
func (r *Registry) GetServer(ctx context.Context, id string) (*mcpgatewayv1.ServerConfig, error) {
	r.mu.Lock()
	cfg, gen := r.m[id], r.gen
	r.mu.Unlock()
	if cfg != nil {
		return cfg, nil
	}
	cfg, err := r.Registry.GetServer(ctx, id)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.gen == gen {
		r.m[id] = cfg
	}
	r.mu.Unlock()
	return cfg, nil
}

// ListServers returns every config in id order: from memory once read, and the same configs
// GetServer returns (shared: callers must not modify them), so that a reader can tell a
// changed config by its pointer.
func (r *Registry) ListServers(ctx context.Context) ([]*mcpgatewayv1.ServerConfig, error) {
	r.mu.Lock()
	all, gen := r.all, r.gen
	r.mu.Unlock()
	if all != nil {
		return slices.Clone(all), nil
	}
	cfgs, err := r.Registry.ListServers(ctx)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gen != gen {
		return cfgs, nil // a write came in between: keep nothing of this read
	}
	for i, c := range cfgs {
		if known := r.m[c.GetId()]; known != nil {
			cfgs[i] = known
		} else {
			r.m[c.GetId()] = c
		}
	}
	r.all = cfgs
	return slices.Clone(cfgs), nil
}

// PutServer writes cfg to the registry, then to memory. cfg must not be modified after.
func (r *Registry) PutServer(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) error {
	r.write.Lock()
	defer r.write.Unlock()
	w := &write{id: cfg.GetId(), cfg: cfg}
	r.start(w)
	err := r.Registry.PutServer(ctx, cfg)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writing = nil
	r.gen++
	r.all = nil
	// A change of another replica that came through the watch meanwhile may be younger than
	// this write: which one the registry holds last is not known here.
	if err == nil && !w.overtaken {
		r.m[cfg.GetId()] = cfg
	} else {
		delete(r.m, cfg.GetId()) // the registry may or may not hold it last: read it again
	}
	return err
}

// DeleteServer removes id from the registry and from memory.
func (r *Registry) DeleteServer(ctx context.Context, id string) error {
	r.write.Lock()
	defer r.write.Unlock()
	r.start(&write{id: id})
	err := r.Registry.DeleteServer(ctx, id)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writing = nil
	r.gen++
	r.all = nil
	delete(r.m, id)
	return err
}

// Apply puts a change seen by the registry's watch (registry.Watcher) in memory and returns
// the config memory held for the change's server before it (nil when it held none, and for a
// change of a preset). A server written is kept as the change carries it, unless memory holds
// an equal config (this replica's own write coming back), which it keeps, pointer and all.
// This replica's write coming back before it returned is taken as done: a put returns the
// config written (the change is no news), a delete nil. A Resync drops everything (Drop).
// Like a write, it drops a fill that began before it.
//
// Changes must be applied in the store's order. A fill may have read a config younger than
// a change still on its way through the watch: memory holds the older one until the younger
// change arrives.
func (r *Registry) Apply(c registry.Change) (old *mcpgatewayv1.ServerConfig) {
	switch c.Kind {
	case registry.ServerPut, registry.ServerDeleted:
	case registry.Resync:
		r.Drop()
		return nil
	default:
		return nil // presets are not kept in memory
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	if w := r.writing; w != nil && w.id == c.ID {
		if (c.Kind == registry.ServerDeleted && w.cfg == nil) || (c.Kind == registry.ServerPut && w.cfg != nil && proto.Equal(w.cfg, c.Server)) {
			// Its own write: memory takes it as the write will.
			r.all = nil
			if w.cfg == nil {
				delete(r.m, c.ID)
				return nil
			}
			r.m[c.ID] = w.cfg
			return w.cfg
		}
		w.overtaken = true
	}
	old = r.m[c.ID]
	switch {
	case c.Kind == registry.ServerDeleted || c.Server == nil:
		delete(r.m, c.ID)
	case old != nil && proto.Equal(old, c.Server):
		return old // unchanged: memory, and ListServers' list, stay as they are
	default:
		r.m[c.ID] = c.Server
	}
	r.all = nil
	return old
}

// Drop forgets every config memory holds, so that each is read from the registry again
// (after a Resync: the watch may have missed changes), and returns them, in no order. A fill
// that began before it is dropped.
func (r *Registry) Drop() []*mcpgatewayv1.ServerConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	if r.writing != nil {
		r.writing.overtaken = true
	}
	held := slices.Collect(maps.Values(r.m))
	r.m = map[string]*mcpgatewayv1.ServerConfig{}
	r.all = nil
	return held
}
