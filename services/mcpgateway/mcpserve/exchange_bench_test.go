package mcpserve

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/keyauth"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"github.com/zestmcp/zest/services/mcpgateway/lemonade"
	"github.com/zestmcp/zest/services/mcpgateway/mcpserve/mcpservetest"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/session"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"google.golang.org/grpc"
)

// models answers ListModels in process, as the built-in engines' node would.
type models struct {
	inferencev1.InferenceServiceClient
}

func (models) ListModels(context.Context, *inferencev1.ListModelsRequest, ...grpc.CallOption) (*inferencev1.ListModelsResponse, error) {
	return &inferencev1.ListModelsResponse{Models: []*inferencev1.Model{
		{Id: "builtin-image", Type: inferencev1.ModelType_MODEL_TYPE_IMAGE, State: inferencev1.ModelState_MODEL_STATE_LOADED, Engine: "builtin", Labels: []string{"image"}, Description: "Built-in image engine"},
		{Id: "builtin-llm", Type: inferencev1.ModelType_MODEL_TYPE_LLM, State: inferencev1.ModelState_MODEL_STATE_LOADED, Engine: "builtin", Labels: []string{"tool-calling", "reasoning"}, Description: "Built-in chat engine"},
		{Id: "builtin-transcribe", Type: inferencev1.ModelType_MODEL_TYPE_TRANSCRIPTION, State: inferencev1.ModelState_MODEL_STATE_LOADED, Engine: "builtin", Labels: []string{"audio"}, Description: "Built-in transcription engine"},
	}}, nil
}

// BenchmarkExchange is mcpgateway's own work on one POST /mcp body, without any transport:
// the session check, mcp-go, the tool, the encoding (go test -bench Exchange ./mcpserve/).
func BenchmarkExchange(b *testing.B) {
	srv := NewMCPServer("bench")
	lemonade.New(models{}, nil, lemonade.Dirs{Images: b.TempDir(), Audio: b.TempDir()}).Register(srv)
	codec, _ := session.NewCodec(bytes.Repeat([]byte{1}, 32), time.Hour)
	reg, err := registry.Open(filepath.Join(b.TempDir(), "registry.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	h := New(srv, codec, reg, toolcall.New(toolcall.Config{}, reg, nil, keyauth.Keys{}, toolcall.WithBuiltin(NewBuiltin(srv))), nil)
	sid, _ := codec.Issue("2025-11-25")
	for _, tc := range []struct{ name, body string }{
		{"tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		{"tools/call lemonade_list_models", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lemonade_list_models","arguments":{}}}`},
	} {
		req := (&mcpservetest.Request{SessionID: sid, Payload: []byte(tc.body)}).HTTP()
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := h.Exchange(req, discard{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// discard is an exchange's stream that keeps nothing: the endpoint's own work is measured,
// without a transport.
type discard struct{}

func (discard) Context() context.Context     { return context.Background() }
func (discard) Session(string, string) error { return nil }
func (discard) Message([]byte) error         { return nil }
func (discard) Final([]byte, int) error      { return nil }
