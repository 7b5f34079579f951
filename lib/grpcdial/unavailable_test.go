package grpcdial_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/grpctest"
	"github.com/zestmcp/zest/lib/logging/logtest"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// failing answers every call with an error: UNAVAILABLE (as a call on a replica that went
// away ends) but for ListModels (NOT_FOUND); Chat first sends one message.
type failing struct {
	inferencev1.UnimplementedInferenceServiceServer
	healthpb.UnimplementedHealthServer
}

func (failing) GenerateImage(context.Context, *inferencev1.GenerateImageRequest) (*inferencev1.GenerateImageResponse, error) {
	return nil, status.Error(codes.Unavailable, "image replica gone")
}

func (failing) ListModels(context.Context, *inferencev1.ListModelsRequest) (*inferencev1.ListModelsResponse, error) {
	return nil, status.Error(codes.NotFound, "no such model")
}

func (failing) Chat(_ *inferencev1.ChatRequest, s grpc.ServerStreamingServer[inferencev1.ChatResponse]) error {
	if err := s.Send(&inferencev1.ChatResponse{}); err != nil {
		return err
	}
	return status.Error(codes.Unavailable, "chat replica gone")
}

func (failing) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return nil, status.Error(codes.Unavailable, "health replica gone")
}

// TestLogUnavailable: a call that fails UNAVAILABLE, unary or a stream, is logged with its
// method and the replica it was sent to; another code and a health check are not.
func TestLogUnavailable(t *testing.T) {
	addr := grpctest.Listen(t, func(g *grpc.Server) {
		inferencev1.RegisterInferenceServiceServer(g, failing{})
		healthpb.RegisterHealthServer(g, failing{})
	})
	var logs logtest.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cc, err := grpcdial.Dial(addr, "", 0, append(grpcdial.LogUnavailable(log), grpc.WithDisableHealthCheck())...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := inferencev1.NewInferenceServiceClient(cc)
	ctx := t.Context()

	if _, err := c.ListModels(ctx, &inferencev1.ListModelsRequest{}); status.Code(err) != codes.NotFound {
		t.Fatalf("ListModels: %v", err)
	}
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("Check: %v", err)
	}
	if logs.String() != "" {
		t.Fatalf("a call that did not fail UNAVAILABLE was logged: %s", logs.String())
	}
	if _, err := c.GenerateImage(ctx, &inferencev1.GenerateImageRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("GenerateImage: %v", err)
	}
	s, err := c.Chat(ctx, &inferencev1.ChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("Chat's second message: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	want := []string{
		"method=/zest.inference.v1.InferenceService/GenerateImage replica=" + addr + ` err="image replica gone"`,
		"method=/zest.inference.v1.InferenceService/Chat replica=" + addr + ` err="chat replica gone"`,
	}
	if len(lines) != len(want) {
		t.Fatalf("logged %d lines, want %d:\n%s", len(lines), len(want), logs.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], "level=WARN") || !strings.Contains(lines[i], w) {
			t.Errorf("line %d = %s\nwant it to hold %s", i, lines[i], w)
		}
	}
}
