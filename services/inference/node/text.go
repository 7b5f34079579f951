package node

import (
	"context"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

// textServer serves TextService on the node's engines: a model of an OpenAI-compatible
// engine is relayed there, any other is the built-in engine's.
type textServer struct {
	inferencev1.UnimplementedTextServiceServer
	n *Node
}

// Embeddings embeds the inputs with the model's engine.
func (s textServer) Embeddings(ctx context.Context, req *inferencev1.EmbeddingsRequest) (*inferencev1.EmbeddingsResponse, error) {
	if err := s.n.checkModel(ctx, req.GetModel()); err != nil {
		return nil, err
	}
	if s.n.openai.Has(req.GetModel()) {
		resp, err := s.n.openai.Embeddings(ctx, req)
		return resp, toStatus(err)
	}
	resp, err := s.n.builtin.Embeddings(ctx, req)
	return resp, toStatus(err)
}

// Completions streams a legacy completion from the model's engine.
func (s textServer) Completions(req *inferencev1.CompletionsRequest, stream inferencev1.TextService_CompletionsServer) error {
	if err := s.n.checkModel(stream.Context(), req.GetModel()); err != nil {
		return err
	}
	if s.n.openai.Has(req.GetModel()) {
		return toStatus(s.n.openai.Completions(stream.Context(), req, stream.Send))
	}
	return toStatus(s.n.builtin.Completions(stream.Context(), req, stream.Send))
}

// Responses streams a Responses API answer from the model's engine.
func (s textServer) Responses(req *inferencev1.ResponsesRequest, stream inferencev1.TextService_ResponsesServer) error {
	if err := s.n.checkModel(stream.Context(), req.GetModel()); err != nil {
		return err
	}
	if s.n.openai.Has(req.GetModel()) {
		return toStatus(s.n.openai.Responses(stream.Context(), req, stream.Send))
	}
	return toStatus(s.n.builtin.Responses(stream.Context(), req, stream.Send))
}
