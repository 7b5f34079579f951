package lemonade

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// models is an InferenceServiceClient that lists a fixed set of models.
type models struct {
	inferencev1.InferenceServiceClient
	list []*inferencev1.Model
}

func (m models) ListModels(context.Context, *inferencev1.ListModelsRequest, ...grpc.CallOption) (*inferencev1.ListModelsResponse, error) {
	return &inferencev1.ListModelsResponse{Models: m.list}, nil
}

func model(id string, typ inferencev1.ModelType, st inferencev1.ModelState) *inferencev1.Model {
	return &inferencev1.Model{Id: id, Type: typ, State: st}
}

const (
	llm       = inferencev1.ModelType_MODEL_TYPE_LLM
	img       = inferencev1.ModelType_MODEL_TYPE_IMAGE
	loaded    = inferencev1.ModelState_MODEL_STATE_LOADED
	available = inferencev1.ModelState_MODEL_STATE_AVAILABLE
	suggested = inferencev1.ModelState_MODEL_STATE_SUGGESTED
)

func TestResolveModel(t *testing.T) {
	cases := []struct {
		name     string
		list     []*inferencev1.Model
		model    string
		download bool
		want     string
		needs    bool
	}{
		{"named model wins", []*inferencev1.Model{model("a", llm, loaded)}, "x", false, "x", false},
		{"loaded before available", []*inferencev1.Model{model("av", llm, available), model("ld", llm, loaded)}, "", false, "ld", false},
		{"available when none loaded", []*inferencev1.Model{model("av", llm, available), model("sg", llm, suggested)}, "", false, "av", false},
		{"wrong type ignored", []*inferencev1.Model{model("im", img, loaded), model("av", llm, available)}, "", false, "av", false},
		{"suggested only with allow_download", []*inferencev1.Model{model("sg", llm, suggested)}, "", true, "sg", false},
		{"needs_model otherwise", []*inferencev1.Model{model("sg", llm, suggested)}, "", false, "", true},
		{"needs_model with nothing", nil, "", false, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tools := New(models{list: c.list}, nil, Dirs{})
			got, miss, err := tools.resolveModel(t.Context(), mcp.CallToolRequest{}, llm, c.model, c.download)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want || (miss != nil) != c.needs {
				t.Fatalf("got %q, needs_model=%v; want %q, %v", got, miss != nil, c.want, c.needs)
			}
			if miss == nil {
				return
			}
			if !miss.IsError || len(miss.Content) != 2 {
				t.Fatalf("needs_model result = %+v", miss)
			}
			var detail map[string]any
			if err := json.Unmarshal([]byte(miss.Content[1].(mcp.TextContent).Text), &detail); err != nil {
				t.Fatal(err)
			}
			retry := detail["retry_with"].(map[string]any)
			if detail["status"] != "needs_model" || detail["tool_type"] != "llm" || retry["allow_download"] != true {
				t.Fatalf("detail = %v", detail)
			}
		})
	}
}

func TestBindArgsNamesTheField(t *testing.T) {
	var args struct {
		IncludeAvailable bool `json:"include_available"`
	}
	req := mcp.CallToolRequest{}
	req.Params.Arguments = map[string]any{"include_available": "yes"}
	err := bindArgs(req, &args)
	if err == nil || !strings.Contains(err.Error(), "include_available") {
		t.Fatalf("err = %v", err)
	}
	req.Params.Arguments = map[string]any{"surprise": true}
	if err := bindArgs(req, &args); err == nil || !strings.Contains(err.Error(), "surprise") {
		t.Fatalf("unknown field: %v", err)
	}
}

func TestOmniWithoutAnOmniModelAsksForOne(t *testing.T) {
	tools := New(models{list: []*inferencev1.Model{model("chat", llm, loaded)}}, nil, Dirs{Images: t.TempDir()})
	req := mcp.CallToolRequest{}
	req.Params.Arguments = map[string]any{"messages": []any{map[string]any{"role": "user", "content": "describe"}}}
	res, _ := tools.omni(t.Context(), req)
	if !res.IsError || len(res.Content) != 2 || !strings.Contains(res.Content[1].(mcp.TextContent).Text, `"tool_type":"omni"`) {
		t.Fatalf("result %+v", res)
	}
	req.Params.Arguments = map[string]any{"output_dir": "../out", "messages": []any{map[string]any{"role": "user", "content": "x"}}}
	if res, _ := tools.omni(t.Context(), req); !res.IsError || !strings.Contains(res.Content[0].(mcp.TextContent).Text, "LEMONADE_MCP_IMAGE_DIR") {
		t.Fatalf("output_dir escape: %+v", res)
	}
}

// chatModel is an InferenceServiceClient with one chat model that records its requests.
type chatModel struct {
	models
	got *inferencev1.ChatRequest
}

func (c *chatModel) Chat(_ context.Context, r *inferencev1.ChatRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[inferencev1.ChatResponse], error) {
	c.got = r
	return nil, status.Error(codes.Unavailable, "no engine in this test")
}

// TestChatArgumentsAreChecked: lemonade_chat checks its arguments as the REST route does,
// naming the field, and no decoder text reaches the client.
func TestChatArgumentsAreChecked(t *testing.T) {
	m := &chatModel{models: models{list: []*inferencev1.Model{model("chat", llm, loaded)}}}
	tools := New(m, nil, Dirs{})
	msgs := []any{map[string]any{"role": "user", "content": "x"}}
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{}, "messages is required"},
		{map[string]any{"messages": msgs, "temperature": "hot"}, "temperature must be a number, not a string"},
		{map[string]any{"messages": msgs, "temperature": 3.0}, "temperature must be between 0 and 2"},
		{map[string]any{"messages": msgs, "max_tokens": 0.0}, "max_tokens must be between 1"},
		{map[string]any{"messages": []any{map[string]any{"role": "robot"}}}, `messages[0].role "robot" is not a role`},
		{map[string]any{"messages": []any{map[string]any{"role": "tool", "content": "1"}}}, "tool message without tool_call_id"},
		{map[string]any{"messages": msgs, "tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "f"}}}, "no tools"},
		{map[string]any{"messages": msgs, "model": 5.0}, "model must be a string, not a number"},
		{map[string]any{"messages": msgs, "allow_download": "yes"}, "allow_download must be true or false"},
	} {
		res, _ := tools.chat(t.Context(), callArgs(c.args))
		if got := text(res); !res.IsError || !strings.Contains(got, c.want) || strings.Contains(got, "proto:") || strings.Contains(got, "json:") {
			t.Errorf("%v: %q, want %q", c.args, got, c.want)
		}
	}
	if m.got != nil {
		t.Fatalf("a refused chat reached inference: %v", m.got)
	}
	res, _ := tools.chat(t.Context(), callArgs(map[string]any{"messages": []any{map[string]any{"role": "developer", "content": "d"}, msgs[0]}, "max_tokens": 4.0, "stop": "END"}))
	if m.got == nil || m.got.GetModel() != "chat" || m.got.GetMessages()[0].GetRole() != "system" || m.got.GetMaxTokens() != 4 || m.got.GetStop()[0] != "END" {
		t.Fatalf("sent %v (%s)", m.got, text(res))
	}
}
