// Package lemonade is the built-in MCP tool set of /mcp: lemonade_list_models,
// lemonade_chat, lemonade_transcribe_audio, lemonade_generate_image and lemonade_omni, with
// Lemonade's names and arguments. The tools call the inference service over gRPC.
package lemonade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/lib/openaichat"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/grpc/status"
)

// Tool names.
const (
	ListModels      = "lemonade_list_models"
	Chat            = "lemonade_chat"
	TranscribeAudio = "lemonade_transcribe_audio"
	GenerateImage   = "lemonade_generate_image"
	Omni            = "lemonade_omni"
)

// Tools serves the built-in tools.
type Tools struct {
	inference inferencev1.InferenceServiceClient
	dirs      Dirs
	// audioLimit is the largest audio a transcription takes (0: MaxAudioBytes); tests lower it.
	audioLimit int
}

// New returns the tool set backed by an inference client, confined to dirs.
func New(inference inferencev1.InferenceServiceClient, dirs Dirs) *Tools {
	return &Tools{inference: inference, dirs: dirs}
}

func tool(name, title, desc, schema string, readOnly, openWorld bool) mcp.Tool {
	t := mcp.NewToolWithRawSchema(name, desc, json.RawMessage(schema))
	t.Title = title
	t.Annotations = mcp.ToolAnnotation{
		Title: title, ReadOnlyHint: &readOnly, DestructiveHint: mcp.ToBoolPtr(false),
		IdempotentHint: mcp.ToBoolPtr(readOnly), OpenWorldHint: &openWorld,
	}
	return t
}

// Register adds the five tools to s.
func (t *Tools) Register(s *server.MCPServer) {
	s.AddTool(tool(ListModels, "List models",
		"List the models of this server with their type and state (loaded, available, suggested).",
		listModelsSchema, true, false), t.listModels)
	s.AddTool(tool(Chat, "Chat with a model",
		"Run an OpenAI-style chat completion on a local model and return the assistant message.",
		chatSchema, true, false), t.chat)
	s.AddTool(tool(TranscribeAudio, "Transcribe audio",
		"Transcribe an audio file (a path under the allowed audio root, or base64 bytes) with a transcription model.",
		transcribeSchema, true, false), t.transcribe)
	s.AddTool(tool(GenerateImage, "Generate an image",
		"Generate images from a prompt and write them as PNG files inside the image directory.",
		imageSchema, false, false), t.generateImage)
	s.AddTool(tool(Omni, "Chat with an omni model",
		"Chat with a model that takes and produces text, images and audio; media is written inside the image directory.",
		omniSchema, false, false), t.omni)
}

func (t *Tools) listModels(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		IncludeAvailable bool `json:"include_available"`
		IncludeSuggested bool `json:"include_suggested"`
	}
	if err := bindArgs(req, &args); err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	resp, err := t.inference.ListModels(ctx, &inferencev1.ListModelsRequest{
		IncludeAvailable: args.IncludeAvailable, IncludeSuggested: args.IncludeSuggested,
	})
	if err != nil {
		return toolError("list models", err), nil
	}
	type model struct {
		ID          string   `json:"id"`
		Type        string   `json:"type"`
		State       string   `json:"state"`
		Engine      string   `json:"engine"`
		Labels      []string `json:"labels"`
		Description string   `json:"description,omitempty"`
	}
	out := struct {
		Models []model `json:"models"`
	}{Models: []model{}}
	for _, m := range resp.GetModels() {
		out.Models = append(out.Models, model{
			ID: m.GetId(), Type: TypeName(m.GetType()), State: StateName(m.GetState()),
			Engine: m.GetEngine(), Labels: m.GetLabels(), Description: m.GetDescription(),
		})
	}
	// One compact encoding serves as the text and as the structured content (the list is
	// encoded once, and mcp-go splices the raw bytes in).
	b, err := json.Marshal(out)
	if err != nil {
		return toolError("list models", err), nil
	}
	res := mcp.NewToolResultText(string(b))
	res.RawStructuredContent = b
	return res, nil
}

func (t *Tools) chat(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return t.chatAs(ctx, req, inferencev1.ModelType_MODEL_TYPE_LLM)
}

// omni chats with an omni model (text, image and audio parts in the messages). Media an omni
// engine returns besides text is not written yet: the answer is the assistant's text.
func (t *Tools) omni(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := req.GetArguments()
	if d, ok := args["output_dir"].(string); ok && d != "" {
		if _, err := inside(t.dirs.Images, d, "LEMONADE_MCP_IMAGE_DIR"); err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
	}
	return t.chatAs(ctx, req, inferencev1.ModelType_MODEL_TYPE_OMNI)
}

func (t *Tools) chatAs(ctx context.Context, req mcp.CallToolRequest, typ inferencev1.ModelType) (*mcp.CallToolResult, error) {
	// The chat arguments are OpenAI's chat request fields, checked as the REST route checks them.
	args := req.GetArguments()
	creq, err := openaichat.FromMap(args)
	if err == nil {
		err = openaichat.CheckToolChoice(creq)
	}
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	allowDownload, isBool := args["allow_download"].(bool)
	if v, ok := args["allow_download"]; ok && v != nil && !isBool {
		return mcp.NewToolResultError("argument allow_download must be true or false"), nil
	}
	model, miss, err := t.resolveModel(ctx, typ, creq.GetModel(), allowDownload)
	if err != nil {
		return toolError("resolve model", err), nil
	}
	if miss != nil {
		return miss, nil
	}
	creq.Model = model
	started := time.Now()
	stream, err := t.inference.Chat(ctx, creq)
	if err != nil {
		return toolError("chat", err), nil
	}
	var done openaichat.Completion
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return toolError("chat", err), nil
		}
		done.Add(chunk)
	}
	logf(ctx, mcp.LoggingLevelInfo, "chat with %s finished (%s) in %d ms", model, done.FinishReason(), time.Since(started).Milliseconds())
	detail, _ := json.Marshal(map[string]any{"model": model, "finish_reason": done.FinishReason(), "message": done.Message()})
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(done.Text()), mcp.NewTextContent(string(detail))}}, nil
}

// resolveModel applies docs/dev/contracts.md's rule: the named model; else a loaded model of the type;
// else a downloaded one; else nothing, answered with a needs_model result.
func (t *Tools) resolveModel(ctx context.Context, typ inferencev1.ModelType, model string, allowDownload bool) (chosen string, _ *mcp.CallToolResult, _ error) {
	if model != "" {
		return model, nil, nil
	}
	defer func() {
		if chosen != "" {
			logf(ctx, mcp.LoggingLevelDebug, "no model named: using %s model %s", TypeName(typ), chosen)
		}
	}()
	resp, err := t.inference.ListModels(ctx, &inferencev1.ListModelsRequest{IncludeAvailable: true, IncludeSuggested: true})
	if err != nil {
		return "", nil, err
	}
	var available, suggested string
	for _, m := range resp.GetModels() {
		if m.GetType() != typ {
			continue
		}
		switch m.GetState() {
		case inferencev1.ModelState_MODEL_STATE_LOADED:
			return m.GetId(), nil, nil
		case inferencev1.ModelState_MODEL_STATE_AVAILABLE:
			if available == "" {
				available = m.GetId()
			}
		case inferencev1.ModelState_MODEL_STATE_SUGGESTED:
			if suggested == "" {
				suggested = m.GetId()
			}
		}
	}
	if available != "" {
		return available, nil, nil
	}
	if suggested != "" && allowDownload {
		return suggested, nil, nil
	}
	detail, _ := json.Marshal(map[string]any{
		"status": "needs_model", "tool_type": TypeName(typ), "default_model": suggested,
		"retry_with": map[string]any{"model": suggested, "allow_download": true},
	})
	res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{
		mcp.NewTextContent(fmt.Sprintf("No %s model is loaded or downloaded. Retry with allow_download=true to download the default model, or pass model.", TypeName(typ))),
		mcp.NewTextContent(string(detail)),
	}}
	return "", res, nil
}

// bindArgs decodes the tool arguments into v, naming the field on a type error.
func bindArgs(req mcp.CallToolRequest, v any) error { return bindMap(req.GetArguments(), v) }

// bindMap decodes arguments into v, naming the field on a type error.
func bindMap(arguments map[string]any, v any) error {
	raw, err := json.Marshal(arguments)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("argument %s must be a %s, not %s", te.Field, te.Type.Kind(), te.Value)
		}
		return fmt.Errorf("arguments: %v", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// toolError turns a failed inference call into an isError result naming what failed.
func toolError(what string, err error) *mcp.CallToolResult {
	msg := err.Error()
	if st, ok := status.FromError(err); ok {
		msg = st.Message()
	}
	return mcp.NewToolResultError(fmt.Sprintf("%s failed: %s", what, msg))
}

// TypeName is the lowercase name of a model type ("llm", "transcription", "image", "omni").
func TypeName(t inferencev1.ModelType) string {
	return strings.ToLower(strings.TrimPrefix(t.String(), "MODEL_TYPE_"))
}

// StateName is the lowercase name of a model state ("loaded", "available", "suggested").
func StateName(s inferencev1.ModelState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "MODEL_STATE_"))
}
