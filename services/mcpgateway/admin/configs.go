package admin

import (
	"context"
	"sync"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
)

// configs keeps the registry's server configs in memory for tools/call, the hot path, so
// that a call needs no registry read and yet meets the config as last written — its tool
// filters included. Every write of a server goes through this service (mcpgateway holds the
// registry file alone), which updates the cache after the registry; a fill that raced with a
// write is not kept.
type configs struct {
	reg registry.Registry

	mu sync.Mutex
	m  map[string]*mcpgatewayv1.ServerConfig
	// gen counts writes, so that a fill that began before one is dropped.
	gen uint64
}

func newConfigs(reg registry.Registry) *configs {
	return &configs{reg: reg, m: map[string]*mcpgatewayv1.ServerConfig{}}
}

// get returns the config of id, from memory or the registry (registry.ErrNotFound when
// there is none). The config must not be modified.
func (c *configs) get(ctx context.Context, id string) (*mcpgatewayv1.ServerConfig, error) {
	c.mu.Lock()
	cfg, gen := c.m[id], c.gen
	c.mu.Unlock()
	if cfg != nil {
		return cfg, nil
	}
	cfg, err := c.reg.GetServer(ctx, id)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.gen == gen {
		c.m[id] = cfg
	}
	c.mu.Unlock()
	return cfg, nil
}

// put records cfg, just written to the registry.
func (c *configs) put(cfg *mcpgatewayv1.ServerConfig) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.m[cfg.GetId()] = cfg
}

// drop forgets id, just deleted from the registry.
func (c *configs) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	delete(c.m, id)
}
