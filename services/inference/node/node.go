// Package node is the inference service as a library: it serves InferenceService over gRPC
// and routes each model to its engine. cmd/zest-inference runs it; tests embed it.
package node

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"time"

	"github.com/zestmcp/zest/lib/grpcserve"
	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/listen"
	"github.com/zestmcp/zest/lib/metrics"
	"github.com/zestmcp/zest/lib/service"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"github.com/zestmcp/zest/services/inference/builtin"
	"github.com/zestmcp/zest/services/inference/modelfile"
	"github.com/zestmcp/zest/services/inference/openaiengine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Config is the inference node's configuration; flag names map to ZEST_* variables.
type Config struct {
	service.Common
	// Addr is the gRPC listen address (ZEST_INFERENCE_ADDR).
	Addr string
	// BuiltinTokenInterval paces builtin-llm's stream (ZEST_BUILTIN_TOKEN_INTERVAL; 0: no pause).
	BuiltinTokenInterval time.Duration
	// ModelsFile maps model ids to OpenAI-compatible engines (ZEST_MODELS_FILE; empty: built-in models only).
	ModelsFile string
	// Keys guard the gRPC API (LEMONADE_API_KEY, LEMONADE_ADMIN_API_KEY).
	Keys keyauth.Keys
	// MetricsAddr serves GET /metrics (ZEST_INFERENCE_METRICS_ADDR; "off": none).
	MetricsAddr string
}

// DefaultMetricsAddr is where the node serves GET /metrics unless ZEST_INFERENCE_METRICS_ADDR
// says otherwise.
const DefaultMetricsAddr = "127.0.0.1:13320"

// DefaultConfig binds loopback only.
func DefaultConfig() Config {
	return Config{Common: service.DefaultCommon(), Addr: "127.0.0.1:13310", Keys: keyauth.FromEnv(nil), MetricsAddr: DefaultMetricsAddr}
}

// RegisterFlags adds the node's flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Common.RegisterFlags(fs)
	fs.StringVar(&c.Addr, "inference-addr", c.Addr, "gRPC listen address of the inference node")
	fs.DurationVar(&c.BuiltinTokenInterval, "builtin-token-interval", c.BuiltinTokenInterval, "pause between builtin-llm's streamed tokens, to behave like a real model in benchmarks (0: none)")
	fs.StringVar(&c.MetricsAddr, "inference-metrics-addr", c.MetricsAddr, `serve Prometheus metrics at GET /metrics on this address ("off": none)`)
	fs.StringVar(&c.ModelsFile, "models-file", c.ModelsFile, "YAML/JSON file mapping model ids to OpenAI-compatible engines (see deploy/models.example.yaml)")
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	if err := c.ValidateCommon(); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("inference-addr %q: want host:port, e.g. 127.0.0.1:13310", c.Addr)
	}
	return errors.Join(metrics.ValidateAddr("inference-metrics-addr", c.MetricsAddr, c.MetricsPublic),
		metrics.ValidateApart("inference-metrics-addr", c.MetricsAddr, "inference-addr", c.Addr))
}

// Shared returns the common settings.
func (c *Config) Shared() *service.Common { return &c.Common }

// Node serves the inference API.
type Node struct {
	inferencev1.UnimplementedInferenceServiceServer
	cfg     Config
	log     *slog.Logger
	builtin *builtin.Engine
	openai  *openaiengine.Engine
	srv     *grpcserve.Server
	models  *admin // ModelAdminService and model state (admin.go)
}

// New builds a node; log nil means slog.Default().
func New(cfg Config, log *slog.Logger) (*Node, error) {
	if log == nil {
		log = slog.Default()
	}
	f := &modelfile.File{HealthInterval: 5 * time.Second}
	if cfg.ModelsFile != "" {
		var err error
		if f, err = modelfile.Load(cfg.ModelsFile); err != nil {
			return nil, err
		}
	}
	oe, err := openaiengine.New(f, nil, log)
	if err != nil {
		return nil, err
	}
	be := builtin.New(time.Now(), builtin.WithTokenInterval(cfg.BuiltinTokenInterval))
	n := &Node{cfg: cfg, log: log, builtin: be, openai: oe}
	n.srv = grpcserve.New(grpcserve.Options{Guard: keyauth.Guard{Keys: cfg.Keys}, Logger: log, DrainTimeout: cfg.DrainTimeout, MaxMessageBytes: cfg.GRPCMaxMessageBytes})
	n.srv.RegisterService(&inferencev1.InferenceService_ServiceDesc, n)
	n.srv.RegisterService(&inferencev1.ModelOptionsService_ServiceDesc, modelOptions{n: n})
	n.models = newAdmin(n)
	n.srv.RegisterService(&inferencev1.ModelAdminService_ServiceDesc, n.models)
	n.srv.RegisterService(&inferencev1.MediaService_ServiceDesc, media{n: n}) // media.go
	n.srv.RegisterService(&inferencev1.TextService_ServiceDesc, textServer{n: n})
	return n, nil
}

// Run listens on cfg.Addr and serves until ctx is done.
func (n *Node) Run(ctx context.Context) error {
	lis, err := listen.TCP(n.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", n.cfg.Addr, err)
	}
	return n.Serve(ctx, lis)
}

// Serve serves on lis until ctx is done, probing engine replicas meanwhile.
func (n *Node) Serve(ctx context.Context, lis net.Listener) error {
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go n.openai.Run(pctx)
	return n.srv.Serve(ctx, lis)
}

// all is every model: built-in ones, then the engines'.
func (n *Node) all() []*inferencev1.Model {
	return n.models.overlay(append(append([]*inferencev1.Model{}, n.builtin.Models()...), n.openai.Models()...))
}

// ListModels lists every model with its state; available and suggested ones on request.
func (n *Node) ListModels(_ context.Context, req *inferencev1.ListModelsRequest) (*inferencev1.ListModelsResponse, error) {
	var out []*inferencev1.Model
	for _, m := range n.all() {
		switch m.GetState() {
		case inferencev1.ModelState_MODEL_STATE_AVAILABLE:
			if !req.GetIncludeAvailable() {
				continue
			}
		case inferencev1.ModelState_MODEL_STATE_SUGGESTED:
			if !req.GetIncludeSuggested() {
				continue
			}
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetId() < out[j].GetId() })
	return &inferencev1.ListModelsResponse{Models: out}, nil
}

// GetModel describes one model.
func (n *Node) GetModel(_ context.Context, req *inferencev1.GetModelRequest) (*inferencev1.GetModelResponse, error) {
	for _, m := range n.all() {
		if m.GetId() == req.GetId() {
			return &inferencev1.GetModelResponse{Model: m}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "model %q is not known; GET /api/v1/models lists the models", req.GetId())
}

// Chat streams a chat completion from the model's engine.
func (n *Node) Chat(req *inferencev1.ChatRequest, stream inferencev1.InferenceService_ChatServer) error {
	if err := n.checkModel(stream.Context(), req.GetModel()); err != nil {
		return err
	}
	send := n.models.observe(stream.Send) // for GET stats
	if n.openai.Has(req.GetModel()) {
		return toStatus(n.openai.Chat(stream.Context(), req, send))
	}
	return toStatus(n.builtin.Chat(stream.Context(), req, send))
}

// Transcribe turns audio into text with the model's engine.
func (n *Node) Transcribe(ctx context.Context, req *inferencev1.TranscribeRequest) (*inferencev1.TranscribeResponse, error) {
	if err := n.checkModel(ctx, req.GetModel()); err != nil {
		return nil, err
	}
	if n.openai.Has(req.GetModel()) {
		resp, err := n.openai.Transcribe(ctx, req)
		return resp, toStatus(err)
	}
	resp, err := n.builtin.Transcribe(ctx, req)
	return resp, toStatus(err)
}

// GenerateImage draws images with the model's engine.
func (n *Node) GenerateImage(ctx context.Context, req *inferencev1.GenerateImageRequest) (*inferencev1.GenerateImageResponse, error) {
	if err := n.checkModel(ctx, req.GetModel()); err != nil {
		return nil, err
	}
	if n.openai.Has(req.GetModel()) {
		resp, err := n.openai.GenerateImage(ctx, req)
		return resp, toStatus(err)
	}
	resp, err := n.builtin.GenerateImage(ctx, req)
	return resp, toStatus(err)
}

// ListReplicas reports every engine replica.
func (n *Node) ListReplicas(context.Context, *inferencev1.ListReplicasRequest) (*inferencev1.ListReplicasResponse, error) {
	out := &inferencev1.ListReplicasResponse{}
	for _, r := range n.openai.Health() {
		out.Replicas = append(out.Replicas, &inferencev1.Replica{Model: r.Model, BaseUrl: r.BaseURL, Healthy: r.Healthy, InFlight: r.InFlight, LastError: r.LastError})
	}
	return out, nil
}

func (n *Node) checkModel(ctx context.Context, id string) error {
	if id == "" {
		return status.Error(codes.InvalidArgument, "model is required; GET /api/v1/models lists the models")
	}
	_, err := n.GetModel(ctx, &inferencev1.GetModelRequest{Id: id})
	if err == nil {
		n.models.touch(id) // a request loads the model, as lemond's do
	}
	return err
}

// toStatus maps engine errors to gRPC codes, in one place.
func toStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, builtin.ErrWrongModel), errors.Is(err, builtin.ErrBadRequest), errors.Is(err, builtin.ErrUnsupportedAudio),
		errors.Is(err, builtin.ErrMalformedAudio):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, openaiengine.ErrUpstreamRequest):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, openaiengine.ErrNoReplica):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, openaiengine.ErrUpstream):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Internal, err.Error())
}
