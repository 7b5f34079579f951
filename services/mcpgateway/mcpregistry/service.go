package mcpregistry

import (
	"context"
	"errors"
	"log/slog"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Service is RegistryService: the registry read for the console and zestctl, each answer
// with its install plan. It saves nothing.
type Service struct {
	mcpgatewayv1.UnimplementedRegistryServiceServer
	client *Client
	log    *slog.Logger
}

// NewService serves RegistryService from client; log nil is slog.Default().
func NewService(client *Client, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{client: client, log: log}
}

// SearchRegistry answers one page of the registry's latest versions, each planned.
func (s *Service) SearchRegistry(ctx context.Context, req *mcpgatewayv1.SearchRegistryRequest) (*mcpgatewayv1.SearchRegistryResponse, error) {
	page, err := s.client.Search(ctx, req.GetSearch(), req.GetCursor(), int(req.GetLimit()))
	if err != nil {
		return nil, s.toStatus(err)
	}
	out := &mcpgatewayv1.SearchRegistryResponse{NextCursor: page.Metadata.NextCursor, RegistryUrl: s.client.URL()}
	for _, e := range page.Servers {
		out.Servers = append(out.Servers, planned(e))
	}
	return out, nil
}

// PlanInstall answers one version of a server, planned.
func (s *Service) PlanInstall(ctx context.Context, req *mcpgatewayv1.PlanInstallRequest) (*mcpgatewayv1.PlanInstallResponse, error) {
	e, err := s.client.Get(ctx, req.GetName(), req.GetVersion())
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &mcpgatewayv1.PlanInstallResponse{Server: planned(e)}, nil
}

// planned is e with its plan, or with why it has none.
func planned(e Entry) *mcpgatewayv1.RegistryServer {
	rs, err := Plan(e)
	if err != nil {
		rs.Refused = err.Error()
	}
	return rs
}

// toStatus maps the package's errors to gRPC codes, in one place.
func (s *Service) toStatus(err error) error {
	code := codes.Internal
	switch {
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, ErrBadRequest):
		code = codes.InvalidArgument
	case errors.Is(err, ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrBadAnswer):
		code = codes.Unavailable
	}
	if code == codes.Unavailable || code == codes.Internal {
		s.log.Warn("MCP Registry request failed", "registry", s.client.URL(), "err", err)
	}
	return status.Error(code, err.Error())
}
