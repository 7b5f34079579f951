package mcpserve

import (
	"context"
	"net/http"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Routes is the mcphttp.Endpoint of the three MCP endpoints, each served by a mcphttp.Endpoint: a request
// that names a registered server (ServerID: /mcp/servers/{id}) by the servers', one that names
// a preset (PresetID: /mcp/presets/{id}) by the presets', the others (/mcp) by the one New
// was given: the built-in tools (Handler), or a preset's (ZEST_MCP_PRESET).
type Routes struct {
	mcp, servers, presets mcphttp.Endpoint
}

// RouteOption adds an endpoint to Routes.
type RouteOption func(*Routes)

// WithServers serves /mcp/servers/{id} (without it, those requests are NotFound).
func WithServers(f mcphttp.Endpoint) RouteOption { return func(r *Routes) { r.servers = f } }

// WithPresets serves /mcp/presets/{id} (without it, those requests are NotFound).
func WithPresets(f mcphttp.Endpoint) RouteOption { return func(r *Routes) { r.presets = f } }

// NewRoutes serves /mcp with mcp, and the other endpoints opts add.
func NewRoutes(mcp mcphttp.Endpoint, opts ...RouteOption) *Routes {
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
func (r *Routes) route(serverID, presetID string) (mcphttp.Endpoint, error) {
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

// Exchange answers one POST of an endpoint.
func (r *Routes) Exchange(req *mcphttp.Request, out mcphttp.ExchangeStream) error {
	f, err := r.route(req.ServerID, req.PresetID)
	if err != nil {
		return err
	}
	return f.Exchange(req, out)
}

// Listen serves the GET stream of an endpoint's session.
func (r *Routes) Listen(req *mcphttp.Request, out mcphttp.ListenStream) error {
	f, err := r.route(req.ServerID, req.PresetID)
	if err != nil {
		return err
	}
	return f.Listen(req, out)
}

// EndSession serves DELETE of an endpoint's session.
func (r *Routes) EndSession(ctx context.Context, req *mcphttp.Request) error {
	f, err := r.route(req.ServerID, req.PresetID)
	if err != nil {
		return err
	}
	return f.EndSession(ctx, req)
}

// Service is McpService over gRPC, for the programs that end a session from outside (zestctl
// sessions end): the transport calls Routes itself.
func (r *Routes) Service() mcpgatewayv1.McpServiceServer { return service{r: r} }

type service struct {
	mcpgatewayv1.UnimplementedMcpServiceServer
	r *Routes
}

// EndSession ends a session as DELETE does.
func (s service) EndSession(ctx context.Context, req *mcpgatewayv1.EndSessionRequest) (*mcpgatewayv1.EndSessionResponse, error) {
	err := s.r.EndSession(ctx, &mcphttp.Request{Header: http.Header{mcphttp.HeaderSession: {req.GetSessionId()}}, ServerID: req.GetServerId(), PresetID: req.GetPresetId()})
	if err != nil {
		return nil, err
	}
	return &mcpgatewayv1.EndSessionResponse{}, nil
}
