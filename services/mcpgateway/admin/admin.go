// Package admin serves AdminService, the registry operations behind /internal/mcp/*.
package admin

import (
	"context"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Service implements AdminService over a Registry. Operations that connect to servers
// (upsert, test, connect, call, …) are not in this build: they answer Unimplemented.
type Service struct {
	mcpgatewayv1.UnimplementedAdminServiceServer
	reg registry.Registry
}

// New returns the admin service.
func New(reg registry.Registry) *Service { return &Service{reg: reg} }

// ListServers lists every registered server; none is connected in this build.
func (s *Service) ListServers(ctx context.Context, _ *mcpgatewayv1.ListServersRequest) (*mcpgatewayv1.ListServersResponse, error) {
	cfgs, err := s.reg.ListServers(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "read registry: %v", err)
	}
	out := &mcpgatewayv1.ListServersResponse{Servers: []*mcpgatewayv1.ServerState{}}
	for _, c := range cfgs {
		st := "disconnected"
		if !c.GetEnabled() {
			st = "disabled"
		}
		out.Servers = append(out.Servers, &mcpgatewayv1.ServerState{
			Id: c.GetId(), Name: c.GetName(), Transport: c.GetTransport(), Command: c.GetCommand(), Args: c.GetArgs(),
			WorkingDir: c.GetWorkingDir(), Env: c.GetEnv(), Url: c.GetUrl(), BearerToken: c.GetBearerToken(),
			AllowInsecureHttp: c.GetAllowInsecureHttp(), Enabled: c.GetEnabled(), TimeoutMs: c.GetTimeoutMs(),
			Status: st, Tools: []*mcpgatewayv1.ToolEntry{},
		})
	}
	return out, nil
}

// ListTools lists the tools of connected servers; none is connected in this build.
func (s *Service) ListTools(context.Context, *mcpgatewayv1.ListToolsRequest) (*mcpgatewayv1.ListToolsResponse, error) {
	return &mcpgatewayv1.ListToolsResponse{Tools: []*mcpgatewayv1.ToolEntry{}}, nil
}
