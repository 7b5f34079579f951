package lemonade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// Model management tools, as Lemonade's GUI names them (lemonade_load_model, …): they call
// ModelAdminService, which loads, unloads, downloads and deletes models on the engines that
// can (the built-in engine, Lemonade and Ollama engines) and says why when one cannot.
const (
	LoadModel   = "lemonade_load_model"
	UnloadModel = "lemonade_unload_model"
	PullModel   = "lemonade_pull_model"
	DeleteModel = "lemonade_delete_model"
)

const modelNameProp = `"model_name": {"type": "string", "minLength": 1, "description": "Model id, as lemonade_list_models lists it (include_suggested for models not downloaded)."}`

const loadModelSchema = `{"type": "object", "required": ["model_name"], "properties": {` + modelNameProp + `,
    "ctx_size": {"type": "integer", "minimum": -1, "description": "Context size for engines that take one (a Lemonade engine); -1: automatic."}},
  "additionalProperties": false}`

const unloadModelSchema = `{"type": "object", "properties": {
    "model_name": {"type": "string", "description": "Model id; omitted: every loaded model whose engine can unload it."}},
  "additionalProperties": false}`

const pullModelSchema = `{"type": "object", "required": ["model_name"], "properties": {` + modelNameProp + `},
  "additionalProperties": false}`

const deleteModelSchema = pullModelSchema

// ModelTools serves the model management tools.
type ModelTools struct {
	models inferencev1.ModelAdminServiceClient
}

// NewModelTools returns the tools backed by a ModelAdminService client.
func NewModelTools(models inferencev1.ModelAdminServiceClient) *ModelTools {
	return &ModelTools{models: models}
}

func annotated(name, title, desc, schema string, destructive, idempotent bool) mcp.Tool {
	t := mcp.NewToolWithRawSchema(name, desc, json.RawMessage(schema))
	t.Title = title
	t.Annotations = mcp.ToolAnnotation{Title: title, ReadOnlyHint: mcp.ToBoolPtr(false), DestructiveHint: &destructive,
		IdempotentHint: &idempotent, OpenWorldHint: mcp.ToBoolPtr(false)}
	return t
}

// Register adds the four tools to s.
func (t *ModelTools) Register(s *server.MCPServer) {
	s.AddTool(annotated(LoadModel, "Load a model",
		"Load a model into its engine's memory (downloading it first if needed), so that requests to it answer at once.",
		loadModelSchema, false, true), t.load)
	s.AddTool(annotated(UnloadModel, "Unload a model",
		"Unload a model from its engine's memory (it stays downloaded); without model_name, every loaded model.",
		unloadModelSchema, false, true), t.unload)
	pull := annotated(PullModel, "Download a model",
		"Download a model to its engine's storage; progress is sent as notifications/progress when the call has a progress token.",
		pullModelSchema, false, true)
	pull.Annotations.OpenWorldHint = mcp.ToBoolPtr(true) // a Lemonade or Ollama engine downloads from the internet
	s.AddTool(pull, t.pull)
	s.AddTool(annotated(DeleteModel, "Delete a model",
		"Delete a downloaded model from its engine's storage (unloading it first); pull downloads it again.",
		deleteModelSchema, true, true), t.delete)
}

type modelArgs struct {
	ModelName string   `json:"model_name"`
	CtxSize   *float64 `json:"ctx_size"`
}

func (t *ModelTools) args(req mcp.CallToolRequest, needName bool) (modelArgs, *mcp.CallToolResult) {
	var a modelArgs
	if err := bindArgs(req, &a); err != nil {
		return a, mcp.NewToolResultError(err.Error())
	}
	if needName && a.ModelName == "" {
		return a, mcp.NewToolResultError("argument model_name is required: the model id, as lemonade_list_models lists it")
	}
	return a, nil
}

// done is a tool's result: the text, and Lemonade's {"status","message"} as structured content.
func done(msg string, extra map[string]any) *mcp.CallToolResult {
	out := map[string]any{"status": "success", "message": msg}
	for k, v := range extra {
		out[k] = v
	}
	b, _ := json.Marshal(out)
	res := mcp.NewToolResultText(msg)
	res.RawStructuredContent = b
	return res
}

func (t *ModelTools) load(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	a, bad := t.args(req, true)
	if bad != nil {
		return bad, nil
	}
	var opts *structpb.Struct
	if a.CtxSize != nil {
		opts = &structpb.Struct{Fields: map[string]*structpb.Value{"ctx_size": structpb.NewNumberValue(*a.CtxSize)}}
	}
	resp, err := t.models.Load(ctx, &inferencev1.LoadRequest{ModelName: a.ModelName, Options: opts})
	if err != nil {
		return toolError("load "+a.ModelName, err), nil
	}
	return done(resp.GetMessage(), nil), nil
}

func (t *ModelTools) unload(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	a, bad := t.args(req, false)
	if bad != nil {
		return bad, nil
	}
	if a.CtxSize != nil {
		return mcp.NewToolResultError("argument ctx_size is not taken by unload"), nil
	}
	resp, err := t.models.Unload(ctx, &inferencev1.UnloadRequest{ModelName: a.ModelName})
	if err != nil {
		return toolError("unload", err), nil
	}
	names := resp.GetModelNames()
	if names == nil {
		names = []string{}
	}
	return done(resp.GetMessage(), map[string]any{"model_names": names}), nil
}

func (t *ModelTools) delete(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	a, bad := t.args(req, true)
	if bad != nil {
		return bad, nil
	}
	if a.CtxSize != nil {
		return mcp.NewToolResultError("argument ctx_size is not taken by delete"), nil
	}
	resp, err := t.models.Delete(ctx, &inferencev1.DeleteRequest{ModelName: a.ModelName})
	if err != nil {
		return toolError("delete "+a.ModelName, err), nil
	}
	return done(resp.GetMessage(), nil), nil
}

// pull streams the engine's progress as notifications/progress (percent of 100) when the
// caller sent a progress token; a cancelled call (notifications/cancelled) cancels ctx, which
// ends the gRPC stream and the engine's download request.
func (t *ModelTools) pull(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	a, bad := t.args(req, true)
	if bad != nil {
		return bad, nil
	}
	if a.CtxSize != nil {
		return mcp.NewToolResultError("argument ctx_size is not taken by pull"), nil
	}
	stream, err := t.models.Pull(ctx, &inferencev1.PullRequest{ModelName: a.ModelName})
	if err != nil {
		return toolError("pull "+a.ModelName, err), nil
	}
	var last *inferencev1.PullResponse
	events := 0
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return toolError("pull "+a.ModelName, err), nil
		}
		last = ev
		events++
		msg := ev.GetMessage()
		if ev.GetFile() != "" {
			msg = fmt.Sprintf("%s %s", ev.GetFile(), msg)
		}
		progress(ctx, req, ev.GetPercent(), 100, msg)
	}
	if last == nil || !last.GetComplete() {
		return mcp.NewToolResultError("pull " + a.ModelName + " failed: the engine ended without completing the download"), nil
	}
	return done(last.GetMessage(), map[string]any{"progress_events": events}), nil
}
