package lemonade

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// admin is a ModelAdminServiceClient that records the last load and pulls in given events.
type admin struct {
	inferencev1.ModelAdminServiceClient
	load   *inferencev1.LoadRequest
	events []*inferencev1.PullResponse
}

func (a *admin) Load(_ context.Context, req *inferencev1.LoadRequest, _ ...grpc.CallOption) (*inferencev1.LoadResponse, error) {
	a.load = req
	if req.GetModelName() == "plain" {
		return nil, status.Error(codes.InvalidArgument, `model "plain" is served by an OpenAI-compatible server at http://x, which has no model management`)
	}
	return &inferencev1.LoadResponse{Message: "Loaded model: " + req.GetModelName()}, nil
}

type pullClient struct {
	grpc.ClientStream
	events []*inferencev1.PullResponse
}

func (p *pullClient) Recv() (*inferencev1.PullResponse, error) {
	if len(p.events) == 0 {
		return nil, io.EOF
	}
	e := p.events[0]
	p.events = p.events[1:]
	return e, nil
}
func (p *pullClient) Header() (metadata.MD, error) { return nil, nil }

func (a *admin) Pull(context.Context, *inferencev1.PullRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[inferencev1.PullResponse], error) {
	return &pullClient{events: a.events}, nil
}

func call(name string, args map[string]any) mcp.CallToolRequest {
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	return req
}

func resultText(r *mcp.CallToolResult) string { return r.Content[0].(mcp.TextContent).Text }

// TestModelToolArguments: model_name required and a string, ctx_size passed as a load option,
// an unknown argument refused, an engine's refusal an isError result with its reason.
func TestModelToolArguments(t *testing.T) {
	a := &admin{}
	mt := NewModelTools(a)
	ctx := t.Context()
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{}, "argument model_name is required"},
		{map[string]any{"model_name": 3}, "argument model_name must be a string"},
		{map[string]any{"model_name": "m", "extra": true}, `unknown field "extra"`},
		{map[string]any{"model_name": "plain"}, "load plain failed: model \"plain\" is served by an OpenAI-compatible server"},
	} {
		r, _ := mt.load(ctx, call(LoadModel, c.args))
		if !r.IsError || !strings.Contains(resultText(r), c.want) {
			t.Errorf("%v: %+v, want %q", c.args, r, c.want)
		}
	}
	r, _ := mt.load(ctx, call(LoadModel, map[string]any{"model_name": "m", "ctx_size": 2048}))
	if r.IsError || resultText(r) != "Loaded model: m" || a.load.GetOptions().AsMap()["ctx_size"] != float64(2048) || string(r.RawStructuredContent) != `{"message":"Loaded model: m","status":"success"}` {
		t.Fatalf("load: %+v %v", r, a.load)
	}
}

// TestPullNeedsTheCompleteEvent: a stream that ends without complete is a failure.
func TestPullNeedsTheCompleteEvent(t *testing.T) {
	a := &admin{events: []*inferencev1.PullResponse{{Percent: 50}}}
	mt := NewModelTools(a)
	if r, _ := mt.pull(t.Context(), call(PullModel, map[string]any{"model_name": "m"})); !r.IsError || !strings.Contains(resultText(r), "without completing") {
		t.Fatalf("incomplete pull: %+v", r)
	}
	a.events = []*inferencev1.PullResponse{{Percent: 50}, {Percent: 100, Complete: true, Message: "Installed model: m"}}
	if r, _ := mt.pull(t.Context(), call(PullModel, map[string]any{"model_name": "m"})); r.IsError || resultText(r) != "Installed model: m" {
		t.Fatalf("pull: %+v", r)
	}
}
