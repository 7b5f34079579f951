package mcpserve

import (
	"context"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Routes is McpService for the three MCP endpoints, each served by a Federation: a request
// that names a registered server (server_id: /mcp/servers/{id}) by the servers', one that names
// a preset (preset_id: /mcp/presets/{id}) by the presets', the others (/mcp) by the one New
// was given: the built-in tools (Handler), or a preset's (ZEST_MCP_PRESET).
type Routes struct {
	mcpgatewayv1.UnimplementedMcpServiceServer
	mcp, servers, presets Federation
}

// RouteOption adds an endpoint to Routes.
type RouteOption func(*Routes)

// WithServers serves /mcp/servers/{id} (without it, those requests are NotFound).
func WithServers(f Federation) RouteOption { return func(r *Routes) { r.servers = f } }

// WithPresets serves /mcp/presets/{id} (without it, those requests are NotFound).
func WithPresets(f Federation) RouteOption { return func(r *Routes) { r.presets = f } }

// NewRoutes serves /mcp with mcp, and the other endpoints opts add.
func NewRoutes(mcp Federation, opts ...RouteOption) *Routes {
	r := &Routes{mcp: mcp}
	for _, o := range opts {
		o(r)
	}
	return r
}

// errNoFederation answers a request for a server when no servers are served.
var errNoFederation = status.Error(codes.NotFound, "this mcpgateway serves no registered servers at /mcp/servers/{id}")

// errNoPresets answers a request for a preset when no presets are served.
var errNoPresets = status.Error(codes.NotFound, "this mcpgateway serves no presets at /mcp/presets/{id}")

// route is who serves a request, or why none does.
func (r *Routes) route(serverID, presetID string) (Federation, error) {
	switch {
	case serverID != "":
		if r.servers == nil {
			return nil, errNoFederation
		}
		return r.servers, nil
	case presetID != "":
		if r.presets == nil {
			return nil, errNoPresets
		}
		return r.presets, nil
	}
	return r.mcp, nil
}

// Exchange answers one POST body of an endpoint.
func (r *Routes) Exchange(req *mcpgatewayv1.ExchangeRequest, stream mcpgatewayv1.McpService_ExchangeServer) error {
	f, err := r.route(req.GetServerId(), req.GetPresetId())
	if err != nil {
		return err
	}
	return f.Exchange(req, stream)
}

// Listen serves the GET stream of an endpoint's session.
func (r *Routes) Listen(req *mcpgatewayv1.ListenRequest, stream mcpgatewayv1.McpService_ListenServer) error {
	f, err := r.route(req.GetServerId(), req.GetPresetId())
	if err != nil {
		return err
	}
	return f.Listen(req, stream)
}

// EndSession serves DELETE of an endpoint's session.
func (r *Routes) EndSession(ctx context.Context, req *mcpgatewayv1.EndSessionRequest) (*mcpgatewayv1.EndSessionResponse, error) {
	f, err := r.route(req.GetServerId(), req.GetPresetId())
	if err != nil {
		return nil, err
	}
	return f.EndSession(ctx, req)
}
