package oauthclient

import (
	"context"
	"errors"
	"strings"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Service is UpstreamOAuthService: sign-in to a server, from the console or zestctl, and the
// callback the edge relays.
type Service struct {
	mcpgatewayv1.UnimplementedUpstreamOAuthServiceServer
	signer *Signer
	// publicURL is Zest's address as browsers reach it (ZEST_PUBLIC_URL): the callback of a
	// sign-in that names none.
	publicURL string
	servers   interface {
		GetServer(ctx context.Context, id string) (*mcpgatewayv1.ServerConfig, error)
	}
	who        func(context.Context) string
	noteSignIn func(ctx context.Context, who, upstreamSubject string)
}

// ServiceOption configures a Service.
type ServiceOption func(*Service)

// WithAuditNames names who starts a sign-in (who: as the audit trail names the caller of ctx,
// activity.WhoOf) and tells the audit entry of a finished one who started it and the
// upstream's subject (note: audit.NoteSignIn) — the callback itself carries no key.
func WithAuditNames(who func(context.Context) string, note func(ctx context.Context, who, upstreamSubject string)) ServiceOption {
	return func(s *Service) { s.who, s.noteSignIn = who, note }
}

// NewService serves signer's sign-ins for the servers servers holds; publicURL (may be empty)
// is Zest's address as browsers reach it.
func NewService(signer *Signer, servers interface {
	GetServer(ctx context.Context, id string) (*mcpgatewayv1.ServerConfig, error)
}, publicURL string, opts ...ServiceOption) *Service {
	s := &Service{signer: signer, servers: servers, publicURL: strings.TrimSuffix(publicURL, "/"),
		who: func(context.Context) string { return "" }, noteSignIn: func(context.Context, string, string) {}}
	for _, o := range opts {
		o(s)
	}
	return s
}

func (s *Service) server(ctx context.Context, id string) (*mcpgatewayv1.ServerConfig, error) {
	cfg, err := s.servers.GetServer(ctx, id)
	if errors.Is(err, registry.ErrNotFound) {
		return nil, status.Errorf(codes.NotFound, "server %q is not registered", id)
	}
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return cfg, nil
}

// StartSignIn implements UpstreamOAuthServiceServer.
func (s *Service) StartSignIn(ctx context.Context, req *mcpgatewayv1.StartSignInRequest) (*mcpgatewayv1.StartSignInResponse, error) {
	cfg, err := s.server(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	redirect := req.GetRedirectUri()
	if redirect == "" {
		if s.publicURL == "" {
			return nil, status.Errorf(codes.InvalidArgument, "no redirect_uri, and ZEST_PUBLIC_URL is not set on mcpgateway: send redirect_uri (Zest's https://HOST%s as the browser reaches it), or set ZEST_PUBLIC_URL", CallbackPath)
		}
		redirect = s.publicURL + CallbackPath
	}
	// The sign-in names who started it as the audit trail names them (the key's hash, or
	// oauth:<subject>), for the callback's entry, which comes without a key.
	u, err := s.signer.StartSignIn(ctx, cfg, redirect, s.who(ctx), "")
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return &mcpgatewayv1.StartSignInResponse{AuthorizationUrl: u}, nil
}

// SignOut implements UpstreamOAuthServiceServer.
func (s *Service) SignOut(ctx context.Context, req *mcpgatewayv1.SignOutRequest) (*mcpgatewayv1.SignOutResponse, error) {
	cfg, err := s.server(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	if err := s.signer.Forget(ctx, cfg.GetId()); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &mcpgatewayv1.SignOutResponse{OauthState: s.signer.State(ctx, cfg)}, nil
}

// FinishSignIn implements UpstreamOAuthServiceServer.
func (s *Service) FinishSignIn(ctx context.Context, req *mcpgatewayv1.FinishSignInRequest) (*mcpgatewayv1.FinishSignInResponse, error) {
	cb := Callback{State: req.GetState(), Code: req.GetCode(), Error: req.GetError()}
	if req.Iss != nil {
		cb.Iss = proto.String(req.GetIss())
	}
	id, by, err := s.signer.FinishSignIn(ctx, cb, "")
	if by != "" { // the callback's audit entry names who started the sign-in, refused or not
		s.noteSignIn(ctx, by, "")
	}
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	cfg, err := s.server(ctx, id)
	if err != nil {
		return nil, err
	}
	st := s.signer.State(ctx, cfg)
	s.noteSignIn(ctx, by, st.GetSubject())
	return &mcpgatewayv1.FinishSignInResponse{Id: id, OauthState: st}, nil
}
