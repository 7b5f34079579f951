// Package lemonade is the built-in MCP tool set of /mcp: Lemonade's six tools
// (lemonade_list_models, lemonade_chat, lemonade_transcribe_audio, lemonade_generate_image,
// lemonade_omni, lemonade_docs) with the names, arguments and result shapes of Lemonade's
// docs/api/mcp.md (testdata/lemonade-mcp-tools.json holds them), and Zest's model and media
// tools. The tools call the inference service over gRPC.
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
	"google.golang.org/protobuf/proto"
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
	// admin pulls the model a tool chose with allow_download (nil: nothing is pulled, the
	// engine fetches the model on first use).
	admin inferencev1.ModelAdminServiceClient
	dirs  Dirs
	// audioLimit is the largest audio a transcription takes (0: MaxAudioBytes); tests lower it.
	audioLimit int
}

// New returns the tool set backed by an inference client (and a model admin client that pulls
// a default model for allow_download), confined to dirs.
func New(inference inferencev1.InferenceServiceClient, admin inferencev1.ModelAdminServiceClient, dirs Dirs) *Tools {
	return &Tools{inference: inference, admin: admin, dirs: dirs}
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

// Register adds Lemonade's six tools to s.
func (t *Tools) Register(s *server.MCPServer) {
	s.AddTool(tool(ListModels, "List models",
		"List the models of this server: {loaded, available, suggested_to_pull, recommended_chat_model} as JSON after a summary. Call this first if you do not know the exact model name.",
		listModelsSchema, true, false), t.listModels)
	s.AddTool(tool(Chat, "Chat with a model",
		"Chat completion on a local LLM (OpenAI chat messages). model is optional: omitted, a loaded LLM, else a downloaded one; with neither, pass model or allow_download: true. Thinking is off unless chat_template_kwargs.enable_thinking is true.",
		chatSchema, true, false), t.chat)
	s.AddTool(tool(TranscribeAudio, "Transcribe audio",
		"Transcribe an audio file (a path under the allowed audio root, or base64 bytes) with a transcription model: the transcript, then the full response as JSON.",
		transcribeSchema, true, false), t.transcribe)
	s.AddTool(tool(GenerateImage, "Generate an image",
		"Generate images from a prompt. With output_path (one image) or output_dir the PNGs are written inside the image directory and their paths returned; without, the images are returned inline.",
		imageSchema, false, false), t.generateImage)
	s.AddTool(tool(Omni, "Chat with an omni model",
		"Chat with a model that takes and produces text, images and audio; media is written inside the image directory.",
		omniSchema, false, false), t.omni)
	s.AddTool(tool(Docs, "Read the API docs",
		"Read this server's own API reference, bundled with it (so it describes the version running and works offline). Call with no arguments to list the pages, then pass page (an id from the list) to read one as Markdown.",
		docsSchema, true, false), t.docs)
}

// listModels answers Lemonade's shape: a summary text, then {loaded, available,
// suggested_to_pull, recommended_chat_model} as JSON text (also the structured content).
// include_available and include_suggested default to true, as Lemonade's do.
func (t *Tools) listModels(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		IncludeAvailable *bool `json:"include_available"`
		IncludeSuggested *bool `json:"include_suggested"`
	}
	if err := bindArgs(req, &args); err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	withAvailable := args.IncludeAvailable == nil || *args.IncludeAvailable
	withSuggested := args.IncludeSuggested == nil || *args.IncludeSuggested
	resp, err := t.inference.ListModels(ctx, &inferencev1.ListModelsRequest{
		IncludeAvailable: withAvailable, IncludeSuggested: withSuggested,
	})
	if err != nil {
		return toolError("list models", err), nil
	}
	b, summary, err := modelList(resp.GetModels())
	if err != nil {
		return toolError("list models", err), nil
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(summary), mcp.NewTextContent(string(b))}}
	res.RawStructuredContent = b
	return res, nil
}

// listedModel is one model of lemonade_list_models, with Lemonade's field names (recipe is
// the engine that serves it).
type listedModel struct {
	ModelName   string   `json:"model_name"`
	Type        string   `json:"type"`
	Recipe      string   `json:"recipe"`
	Labels      []string `json:"labels"`
	Downloaded  *bool    `json:"downloaded,omitempty"`
	Suggested   *bool    `json:"suggested,omitempty"`
	Description string   `json:"description,omitempty"`
}

// modelList sorts models into Lemonade's lists and words the summary: the first loaded LLM
// is the recommended chat model, else the last loaded model of any type.
func modelList(models []*inferencev1.Model) (encoded []byte, summary string, _ error) {
	out := struct {
		Loaded      []listedModel `json:"loaded"`
		Available   []listedModel `json:"available"`
		Suggested   []listedModel `json:"suggested_to_pull"`
		Recommended string        `json:"recommended_chat_model"`
	}{Loaded: []listedModel{}, Available: []listedModel{}, Suggested: []listedModel{}}
	for _, m := range models {
		e := listedModel{ModelName: m.GetId(), Type: TypeName(m.GetType()), Recipe: m.GetEngine(), Labels: m.GetLabels(), Description: m.GetDescription()}
		if e.Labels == nil {
			e.Labels = []string{}
		}
		switch m.GetState() {
		case inferencev1.ModelState_MODEL_STATE_LOADED:
			out.Loaded = append(out.Loaded, e)
			if out.Recommended == "" && m.GetType() == inferencev1.ModelType_MODEL_TYPE_LLM {
				out.Recommended = e.ModelName
			}
		case inferencev1.ModelState_MODEL_STATE_AVAILABLE:
			e.Downloaded, e.Suggested = mcp.ToBoolPtr(true), mcp.ToBoolPtr(false)
			out.Available = append(out.Available, e)
		case inferencev1.ModelState_MODEL_STATE_SUGGESTED:
			out.Suggested = append(out.Suggested, e)
		}
	}
	if out.Recommended == "" && len(out.Loaded) > 0 {
		out.Recommended = out.Loaded[len(out.Loaded)-1].ModelName
	}
	var sb strings.Builder
	if len(out.Loaded) == 0 {
		sb.WriteString("No models are currently loaded. ")
	} else {
		sb.WriteString("Loaded models: ")
		for i, m := range out.Loaded {
			if i > 0 {
				sb.WriteString(", ")
			}
			fmt.Fprintf(&sb, "%s (%s)", m.ModelName, m.Type)
		}
		sb.WriteString(". ")
	}
	switch {
	case out.Recommended != "":
		fmt.Fprintf(&sb, "Use `%s` for chat unless the user asks otherwise.", out.Recommended)
	case len(out.Suggested) > 0:
		names := make([]string, len(out.Suggested))
		for i, m := range out.Suggested {
			names[i] = m.ModelName
		}
		fmt.Fprintf(&sb, "No loaded LLM. Suggested models to pull: %s.", strings.Join(names, ", "))
	}
	b, err := json.Marshal(out)
	return b, strings.TrimSpace(sb.String()), err
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

// enableThinking is the chat template argument that turns a reasoning model's thinking on.
const enableThinking = "enable_thinking"

// chatAs runs a chat on a model of type typ and answers as Lemonade's lemonade_chat does: the
// assistant's text (its reasoning when the text is empty), then "tool_calls: <json>" when the
// model called tools. lemonade_chat turns thinking off unless chat_template_kwargs asks for it.
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
	if _, set := creq.GetChatTemplateKwargs().GetFields()[enableThinking]; typ == inferencev1.ModelType_MODEL_TYPE_LLM && !set {
		creq.EnableThinking = proto.Bool(false) // a Lemonade engine gets it as chat_template_kwargs
	}
	model, miss, err := t.resolveModel(ctx, req, typ, creq.GetModel(), allowDownload)
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
	progress(ctx, req, 0, 0, "chatting with "+model)
	chunks := 0
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return toolError("chat", err), nil
		}
		done.Add(chunk)
		if chunks++; chunks%ChatProgressChunks == 0 {
			progress(ctx, req, float64(chunks), 0, "")
		}
	}
	progress(ctx, req, float64(chunks), float64(chunks), "answered by "+model)
	logf(ctx, mcp.LoggingLevelInfo, "chat with %s finished (%s) in %d ms", model, done.FinishReason(), time.Since(started).Milliseconds())
	text := done.Text()
	if text == "" {
		text = done.Reasoning()
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(text)}}
	if calls := done.ToolCalls(); len(calls) > 0 {
		b, err := json.Marshal(openaichat.ToolCallsJSON(calls, false))
		if err != nil {
			return toolError("chat", err), nil
		}
		res.Content = append(res.Content, mcp.NewTextContent("tool_calls: "+string(b)))
	}
	return res, nil
}

// resolveModel applies docs/dev/contracts.md's rule: the named model; else a loaded model of the type;
// else a downloaded one; else nothing, answered with a needs_model result.
func (t *Tools) resolveModel(ctx context.Context, req mcp.CallToolRequest, typ inferencev1.ModelType, model string, allowDownload bool) (chosen string, _ *mcp.CallToolResult, _ error) {
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
		if err := t.pullDefault(ctx, req, suggested); err != nil {
			return "", nil, err
		}
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
