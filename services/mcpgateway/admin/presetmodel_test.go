package admin

import (
	"context"
	"strings"
	"testing"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// knownModels is the inference service's GetModel over a fixed set of models; down answers
// Unavailable for every model.
type knownModels struct {
	inferencev1.InferenceServiceClient
	ids  []string
	down bool
}

func (k knownModels) GetModel(_ context.Context, req *inferencev1.GetModelRequest, _ ...grpc.CallOption) (*inferencev1.GetModelResponse, error) {
	if k.down {
		return nil, status.Error(codes.Unavailable, "inference down")
	}
	for _, id := range k.ids {
		if id == req.GetId() {
			return &inferencev1.GetModelResponse{}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "model %q is not known", req.GetId())
}

// TestPresetModelIsChecked: a preset naming a model the inference service does not know is
// refused when it is saved, the field named (it was saved, and every chat of it failed); a
// known model, none, or an inference service that cannot answer saves.
func TestPresetModelIsChecked(t *testing.T) {
	s := newService(t, WithModels(knownModels{ids: []string{"builtin-llm"}}))
	ctx := t.Context()
	_, err := s.UpsertPreset(ctx, &mcpgatewayv1.UpsertPresetRequest{Preset: &mcpgatewayv1.PresetInput{Id: proto.String("p"), Model: proto.String("nope-llm")}})
	if status.Code(err) != codes.InvalidArgument || badField(err) != "model" ||
		!strings.Contains(err.Error(), `model "nope-llm" is not known: GET /api/v1/models lists the models`) {
		t.Fatalf("unknown model: %v", err)
	}
	if _, err := s.GetPreset(ctx, &mcpgatewayv1.GetPresetRequest{Id: "p"}); status.Code(err) != codes.NotFound {
		t.Fatalf("a refused preset was saved: %v", err)
	}
	for _, model := range []string{"builtin-llm", ""} {
		if _, err := s.UpsertPreset(ctx, &mcpgatewayv1.UpsertPresetRequest{Preset: &mcpgatewayv1.PresetInput{Id: proto.String("p"), Model: proto.String(model)}}); err != nil {
			t.Fatalf("model %q: %v", model, err)
		}
	}
	down := newService(t, WithModels(knownModels{down: true}))
	if _, err := down.UpsertPreset(ctx, &mcpgatewayv1.UpsertPresetRequest{Preset: &mcpgatewayv1.PresetInput{Id: proto.String("p"), Model: proto.String("any")}}); err != nil {
		t.Fatalf("inference down: %v", err)
	}
}

// badField is the field an error's BadRequest detail names.
func badField(err error) string {
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	return ""
}
