package node

import (
	"context"
	"errors"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"github.com/zestmcp/zest/services/inference/builtin"
	"github.com/zestmcp/zest/services/inference/openaiengine"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// media serves MediaService: each request goes to the model's engine, as InferenceService's do.
type media struct {
	inferencev1.UnimplementedMediaServiceServer
	n *Node
}

// Speech speaks a text with the model's engine.
func (s media) Speech(ctx context.Context, req *inferencev1.SpeechRequest) (*inferencev1.SpeechResponse, error) {
	return route(s.n, ctx, req.GetModel(), req, s.n.openai.Speech, s.n.builtin.Speech)
}

// StreamSpeech speaks a text with the model's engine, sending the audio as it is made.
func (s media) StreamSpeech(req *inferencev1.StreamSpeechRequest, stream inferencev1.MediaService_StreamSpeechServer) error {
	sr := req.GetSpeech()
	if err := s.n.checkModel(stream.Context(), sr.GetModel()); err != nil {
		return err
	}
	if s.n.openai.Has(sr.GetModel()) {
		return mediaStatus(s.n.openai.StreamSpeech(stream.Context(), sr, stream.Send))
	}
	return mediaStatus(s.n.builtin.StreamSpeech(stream.Context(), sr, stream.Send))
}

// GenerateAudio makes music or sound effects with the model's engine.
func (s media) GenerateAudio(ctx context.Context, req *inferencev1.GenerateAudioRequest) (*inferencev1.GenerateAudioResponse, error) {
	return route(s.n, ctx, req.GetModel(), req, s.n.openai.GenerateAudio, s.n.builtin.GenerateAudio)
}

// EditImage edits an image with the model's engine.
func (s media) EditImage(ctx context.Context, req *inferencev1.EditImageRequest) (*inferencev1.EditImageResponse, error) {
	return route(s.n, ctx, req.GetModel(), req, s.n.openai.EditImage, s.n.builtin.EditImage)
}

// Generate3D reconstructs a mesh with the model's engine.
func (s media) Generate3D(ctx context.Context, req *inferencev1.Generate3DRequest) (*inferencev1.Generate3DResponse, error) {
	return route(s.n, ctx, req.GetModel(), req, s.n.openai.Generate3D, s.n.builtin.Generate3D)
}

// route checks the model and calls the engine that serves it.
func route[Req, Resp any](n *Node, ctx context.Context, model string, req Req,
	relay, local func(context.Context, Req) (Resp, error)) (Resp, error) {
	var zero Resp
	if err := n.checkModel(ctx, model); err != nil {
		return zero, err
	}
	call := local
	if n.openai.Has(model) {
		call = relay
	}
	resp, err := call(ctx, req)
	return resp, mediaStatus(err)
}

// mediaStatus is toStatus, with the field of a *builtin.FieldError carried as a BadRequest
// detail so that the edge names it (OpenAI's "param").
func mediaStatus(err error) error {
	var (
		fe    *builtin.FieldError
		pe    *openaiengine.ParamError
		field string
	)
	switch {
	case errors.As(err, &fe):
		field = fe.Field
	case errors.As(err, &pe) && errors.Is(err, openaiengine.ErrUpstreamRequest):
		field = pe.Param
	default:
		return toStatus(err)
	}
	st, derr := status.New(codes.InvalidArgument, err.Error()).WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: err.Error()}},
	})
	if derr != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return st.Err()
}
