package node

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"github.com/zestmcp/zest/services/inference/builtin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func newNode(t *testing.T, modelFile string) *Node {
	t.Helper()
	cfg := DefaultConfig()
	if modelFile != "" {
		p := filepath.Join(t.TempDir(), "models.yaml")
		if err := os.WriteFile(p, []byte(modelFile), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg.ModelsFile = p
	}
	n, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func stateOf(t *testing.T, n *Node, id string) inferencev1.ModelState {
	t.Helper()
	m, err := n.GetModel(t.Context(), &inferencev1.GetModelRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	return m.GetModel().GetState()
}

// pullStream collects a Pull's messages.
type pullStream struct {
	grpc.ServerStream
	ctx  context.Context
	msgs []*inferencev1.PullResponse
}

func (p *pullStream) Context() context.Context { return p.ctx }
func (p *pullStream) Send(m *inferencev1.PullResponse) error {
	p.msgs = append(p.msgs, m)
	return nil
}

// TestBuiltinLifecycle: load, unload, delete and pull change a built-in model's state at once;
// a request loads it again; the loaded list follows.
func TestBuiltinLifecycle(t *testing.T) {
	n, ctx := newNode(t, ""), t.Context()
	if _, err := n.models.Unload(ctx, &inferencev1.UnloadRequest{ModelName: builtin.LLM}); err != nil {
		t.Fatal(err)
	}
	if s := stateOf(t, n, builtin.LLM); s != inferencev1.ModelState_MODEL_STATE_AVAILABLE {
		t.Fatalf("after unload: %v", s)
	}
	if _, err := n.models.Delete(ctx, &inferencev1.DeleteRequest{ModelName: builtin.LLM}); err != nil {
		t.Fatal(err)
	}
	if s := stateOf(t, n, builtin.LLM); s != inferencev1.ModelState_MODEL_STATE_SUGGESTED {
		t.Fatalf("after delete: %v", s)
	}
	ps := &pullStream{ctx: ctx}
	if err := n.models.Pull(&inferencev1.PullRequest{ModelName: builtin.LLM}, ps); err != nil {
		t.Fatal(err)
	}
	if len(ps.msgs) != 2 || !ps.msgs[1].GetComplete() || ps.msgs[1].GetMessage() != "Installed model: builtin-llm" {
		t.Fatalf("pull messages: %v", ps.msgs)
	}
	if s := stateOf(t, n, builtin.LLM); s != inferencev1.ModelState_MODEL_STATE_AVAILABLE {
		t.Fatalf("after pull: %v", s)
	}
	lm, _ := n.models.LoadedModels(ctx, &inferencev1.LoadedModelsRequest{})
	for _, m := range lm.GetModels() {
		if m.GetModelName() == builtin.LLM {
			t.Fatal("an unloaded model is listed as loaded")
		}
	}
	if err := n.checkModel(ctx, builtin.LLM); err != nil { // a request
		t.Fatal(err)
	}
	lm, _ = n.models.LoadedModels(ctx, &inferencev1.LoadedModelsRequest{})
	if lm.GetModelLoaded() != builtin.LLM || lm.GetModels()[0].GetType() != "llm" || lm.GetVersion() != Version {
		t.Fatalf("after a request: %v", lm)
	}
	if _, err := n.models.Unload(ctx, &inferencev1.UnloadRequest{}); err != nil {
		t.Fatal(err)
	}
	if lm, _ := n.models.LoadedModels(ctx, &inferencev1.LoadedModelsRequest{}); len(lm.GetModels()) != 0 {
		t.Fatalf("unload of everything left %v", lm.GetModels())
	}
}

// TestManagementErrors: each refusal has its code and says what to do.
func TestManagementErrors(t *testing.T) {
	n := newNode(t, "models:\n  - id: plain\n    base_urls: [http://127.0.0.1:9/v1]\n")
	ctx := t.Context()
	for _, c := range []struct {
		name string
		err  error
		code codes.Code
		want string
	}{
		{"no name", func() error { _, err := n.models.Load(ctx, &inferencev1.LoadRequest{}); return err }(), codes.InvalidArgument, "model_name is required"},
		{"unknown", func() error {
			_, err := n.models.Delete(ctx, &inferencev1.DeleteRequest{ModelName: "nope"})
			return err
		}(), codes.NotFound, `"nope" is not known`},
		{"plain engine", func() error { _, err := n.models.Load(ctx, &inferencev1.LoadRequest{ModelName: "plain"}); return err }(), codes.InvalidArgument, "no model management: load it there"},
	} {
		st := status.Convert(c.err)
		if st.Code() != c.code || !strings.Contains(st.Message(), c.want) {
			t.Errorf("%s: %v %q, want %v with %q", c.name, st.Code(), st.Message(), c.code, c.want)
		}
	}
}

// TestCapabilityLabels: each type gets Lemonade's deployment label unless the model file
// declared one; omni models are chat with vision and chat-transcription.
func TestCapabilityLabels(t *testing.T) {
	for _, c := range []struct {
		t    inferencev1.ModelType
		in   []string
		want []string
	}{
		{inferencev1.ModelType_MODEL_TYPE_LLM, []string{"builtin", "tool-calling"}, []string{"builtin", "tool-calling", "chat"}},
		{inferencev1.ModelType_MODEL_TYPE_IMAGE, nil, []string{"image"}},
		{inferencev1.ModelType_MODEL_TYPE_TRANSCRIPTION, nil, []string{"transcription"}},
		{inferencev1.ModelType_MODEL_TYPE_OMNI, nil, []string{"chat", "vision", "chat-transcription"}},
		{inferencev1.ModelType_MODEL_TYPE_LLM, []string{"embeddings"}, []string{"embeddings"}},
	} {
		if got := CapabilityLabels(c.t, c.in); !slices.Equal(got, c.want) {
			t.Errorf("%v %v: %v, want %v", c.t, c.in, got, c.want)
		}
	}
	if loadedType([]string{"chat"}) != "llm" || loadedType([]string{"3d"}) != "mesh" || loadedType([]string{"embeddings"}) != "embedding" {
		t.Error("lemond's loaded types")
	}
}

// TestStatsObserveAChat: the last chat's usage, times and the totals.
func TestStatsObserveAChat(t *testing.T) {
	n := newNode(t, "")
	for range 2 {
		send := n.models.observe(func(*inferencev1.ChatResponse) error { return nil })
		req := &inferencev1.ChatRequest{Model: builtin.LLM, Messages: []*inferencev1.ChatMessage{{Role: "user", Content: "one two three"}}}
		if err := n.builtin.Chat(t.Context(), req, send); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := n.models.Stats(t.Context(), &inferencev1.StatsRequest{})
	if s.GetOutputTokens() != 5 || s.GetInputTokens() != 3 || s.GetRequestCountTotal() != 2 || s.GetOutputTokensTotal() != 10 ||
		len(s.GetDecodeTokenTimes()) != 4 || s.GetTimeToFirstToken() < 0 {
		t.Fatalf("stats: %v", s)
	}
}

// TestSystemInfo: the host is described and the recipes name the engine kinds in use.
func TestSystemInfo(t *testing.T) {
	n := newNode(t, "models:\n  - id: l\n    engine_kind: lemonade\n    base_urls: [http://127.0.0.1:9/api/v1]\n")
	s, _ := n.models.SystemInfo(t.Context(), &inferencev1.SystemInfoRequest{})
	var names []string
	for _, r := range s.GetRecipes() {
		names = append(names, r.GetName())
	}
	if s.GetCpuThreads() < 1 || s.GetProcessor() == "" || s.GetOsVersion() == "" || !slices.Equal(names, []string{"builtin", "lemonade"}) {
		t.Fatalf("system info: %v", s)
	}
}

// TestPin: Pin marks a known model, LoadedModels shows the mark, unpinning clears it; an
// unknown model is NotFound, a missing name InvalidArgument.
func TestPin(t *testing.T) {
	n := newNode(t, "")
	ctx := t.Context()
	pinnedOf := func() bool {
		lm, _ := n.models.LoadedModels(ctx, &inferencev1.LoadedModelsRequest{})
		for _, m := range lm.GetModels() {
			if m.GetModelName() == builtin.LLM {
				return m.GetPinned()
			}
		}
		t.Fatalf("%s not loaded: %v", builtin.LLM, lm)
		return false
	}
	if pinnedOf() {
		t.Fatal("pinned before any pin")
	}
	r, err := n.models.Pin(ctx, &inferencev1.PinRequest{ModelName: builtin.LLM, Pinned: true})
	if err != nil || r.GetModelName() != builtin.LLM || !r.GetPinned() || !pinnedOf() {
		t.Fatalf("pin: %v %v, listed pinned %v", r, err, pinnedOf())
	}
	if _, err := n.models.Pin(ctx, &inferencev1.PinRequest{ModelName: builtin.LLM}); err != nil || pinnedOf() {
		t.Fatalf("unpin: %v, listed pinned %v", err, pinnedOf())
	}
	if _, err := n.models.Pin(ctx, &inferencev1.PinRequest{ModelName: "nope", Pinned: true}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown model: %v", err)
	}
	if _, err := n.models.Pin(ctx, &inferencev1.PinRequest{Pinned: true}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("no model: %v", err)
	}
}
