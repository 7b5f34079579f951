// Package configcache keeps the registry's server configs in memory: the hot paths (every
// request of /mcp/servers/{id}, every tool call of the admin API and of the chat loop) read a
// config without a registry read (a bbolt transaction and a protojson decode), and yet meet
// it as last written — its tool filters and enabled flag included.
//
// It is write-through: every write of a server goes through it (mcpgateway holds the
// registry file alone), and it updates memory after the registry under one write lock, so
// that a write and a delete of one server cannot leave memory behind the registry; a fill
// that raced with a write is not kept. ListServers answers from memory too, with the configs
// GetServer hands out, so that the tool catalog tells a changed config by its pointer.
package configcache

import (
	"context"
	"slices"
	"sync"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
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
	// gen counts writes, so that a fill that began before one is dropped.
	gen uint64
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
	err := r.Registry.PutServer(ctx, cfg)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	r.all = nil
	if err == nil {
		r.m[cfg.GetId()] = cfg
	} else {
		delete(r.m, cfg.GetId()) // the registry may or may not hold it: read it again
	}
	return err
}

// DeleteServer removes id from the registry and from memory.
func (r *Registry) DeleteServer(ctx context.Context, id string) error {
	r.write.Lock()
	defer r.write.Unlock()
	err := r.Registry.DeleteServer(ctx, id)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	r.all = nil
	delete(r.m, id)
	return err
}
