package toolcall

import (
	"context"
	"errors"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"google.golang.org/protobuf/proto"
)

// builtinConfig stands for the built-in provider in the chain: enabled, exposed, with no
// filters, approvals or limits of its own; its output is held to the operator's default.
var builtinConfig = &mcpgatewayv1.ServerConfig{Id: serverconfig.LemonadeProvider, Name: serverconfig.LemonadeProvider, Enabled: proto.Bool(true), Expose: proto.Bool(true)}

// servesBuiltin reports whether entry serves the built-in tools: /mcp, presets (their
// call_tool too) and chats have them as a provider; the admin API and /mcp/servers/{id}
// serve registered servers only.
func servesBuiltin(e Entry) bool {
	return e == EntryMCP || e == EntryPreset || e == EntryChat || e == EntrySearch
}

// resolve is the chain's first link: the config of the call's server, when its caller may
// reach it through the call's entry point.
func (p *Pipeline) resolve(ctx context.Context, c *Call) (*mcpgatewayv1.ServerConfig, error) {
	if c.Server == serverconfig.LemonadeProvider && servesBuiltin(c.Entry) {
		if p.builtin == nil {
			return nil, &UnknownServerError{ID: c.Server}
		}
		return builtinConfig, nil
	}
	return p.Resolve(ctx, c.Entry, c.Server)
}

// Resolve returns the config of server id when the caller of ctx may reach it through entry
// (Visible), and otherwise an *UnknownServerError that says the same of a server that is not
// registered, disabled or hidden: no answer tells them apart. Every path that names a server
// for a caller (a call, a tools/list, a chat's or a preset's providers) asks here.
func (p *Pipeline) Resolve(ctx context.Context, entry Entry, id string) (*mcpgatewayv1.ServerConfig, error) {
	cfg, err := p.servers.GetServer(ctx, id)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		return nil, &UnknownServerError{ID: id}
	case err != nil:
		return nil, err
	case !Visible(cfg, entry, p.keys.CallerIsAdmin(ctx)):
		return nil, &UnknownServerError{ID: id}
	}
	return cfg, nil
}

// Visible is the one rule of who sees a registered server: the admin API (admin key only)
// sees every one (a disabled one then fails at connect, saying so); every other path serves
// enabled servers only, and a server with expose false to administrators only. For any other
// caller a hidden server does not exist.
func Visible(cfg *mcpgatewayv1.ServerConfig, entry Entry, admin bool) bool {
	if entry == EntryAdmin {
		return true
	}
	return cfg.GetEnabled() && (cfg.GetExpose() || admin)
}
