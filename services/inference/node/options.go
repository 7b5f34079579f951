package node

import (
	"context"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// modelOptions serves ModelOptionsService: a model's settings as the model file gives them
// (GET {prefix}models/{id}/options, for Lemonade's GUI).
type modelOptions struct {
	inferencev1.UnimplementedModelOptionsServiceServer
	n *Node
}

// modelFileDefaults are the values modelfile.Parse gives a setting an entry leaves out.
var modelFileDefaults = map[string]any{"type": "llm", "max_concurrency": 8, "timeout": "5m0s"}

// GetModelOptions answers NotFound for an unknown model, as GetModel does; a built-in model
// has no settings (its engine is part of the node).
func (o modelOptions) GetModelOptions(ctx context.Context, req *inferencev1.GetModelOptionsRequest) (*inferencev1.GetModelOptionsResponse, error) {
	m, err := o.n.GetModel(ctx, &inferencev1.GetModelRequest{Id: req.GetId()})
	if err != nil {
		return nil, err
	}
	opts := map[string]any{}
	if c, ok := o.n.openai.Config(req.GetId()); ok {
		urls := make([]any, len(c.BaseURLs))
		for i, u := range c.BaseURLs {
			urls[i] = u
		}
		// The api_key reference is left out: it names a secret's variable, of no use to a GUI.
		opts = map[string]any{"upstream_model": c.UpstreamModel, "type": c.Type, "max_concurrency": c.MaxConcurrency,
			"timeout": c.Timeout.String(), "base_urls": urls}
	}
	options, err := structpb.NewStruct(opts)
	if err != nil {
		return nil, err
	}
	defaults, err := structpb.NewStruct(modelFileDefaults)
	if err != nil {
		return nil, err
	}
	return &inferencev1.GetModelOptionsResponse{Id: m.GetModel().GetId(), Engine: m.GetModel().GetEngine(), Options: options, Defaults: defaults}, nil
}
