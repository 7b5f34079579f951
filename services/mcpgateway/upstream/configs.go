package upstream

import mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"

// Config returns the config of id's open connection or connect in progress (nil: neither),
// so that a replica that learns of a new config of id can tell whether the connection it
// holds is still the one the config asks for (serverconfig.SameConnection).
func (m *Manager) Config(id string) *mcpgatewayv1.ServerConfig {
	c := m.lookup(id)
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil && c.pending == nil {
		return nil
	}
	return c.cfg
}

// Configs returns Config of every server with an open connection or a connect in progress,
// by id.
func (m *Manager) Configs() map[string]*mcpgatewayv1.ServerConfig {
	m.mu.Lock()
	ids := make([]string, 0, len(m.conns))
	for id := range m.conns {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	out := make(map[string]*mcpgatewayv1.ServerConfig, len(ids))
	for _, id := range ids {
		if cfg := m.Config(id); cfg != nil {
			out[id] = cfg
		}
	}
	return out
}
