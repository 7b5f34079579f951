package builtin

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"time"

	"github.com/zestmcp/zest/lib/openaichat"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// Embed is the built-in embedding model's id.
const Embed = "builtin-embed"

// Limits of builtin-embed.
const (
	DefaultEmbeddingDimensions = 384
	MaxEmbeddingDimensions     = 4096
	MaxEmbeddingInputs         = 2048
	// MaxEmbeddingFloats caps inputs × dimensions of one request (16 MiB of float32s), so that
	// the answer fits in one gRPC message whatever the edge's body limit lets in.
	MaxEmbeddingFloats = 1 << 22
)

// embedModel is builtin-embed's entry of the model list: of type embedding (so that nothing
// picks it as a chat model) and labelled "embeddings", as Lemonade labels its embedding models.
func (e *Engine) embedModel() *inferencev1.Model {
	return &inferencev1.Model{
		Id: Embed, Type: inferencev1.ModelType_MODEL_TYPE_EMBEDDING, State: inferencev1.ModelState_MODEL_STATE_LOADED, Engine: "builtin",
		Labels: []string{"builtin", "embeddings"}, OwnedBy: "zest", Created: e.created,
		Description: "Deterministic built-in embedding engine, not semantic: unit vectors of hashed character trigrams and words (equal texts give equal vectors, texts sharing words are near).",
	}
}

// TextModels are the models of the text routes besides builtin-llm (which serves completions
// and responses too): builtin-embed.
func (e *Engine) TextModels() []*inferencev1.Model { return []*inferencev1.Model{e.embedModel()} }

// Embeddings embeds each input with builtin-embed: signed feature hashing of the lower-cased
// text's character trigrams and words into the asked number of dimensions, then scaled to
// unit length. It is a test engine: vectors are repeatable and texts sharing words are near,
// but it knows no meaning.
func (e *Engine) Embeddings(ctx context.Context, req *inferencev1.EmbeddingsRequest) (*inferencev1.EmbeddingsResponse, error) {
	if req.GetModel() != Embed {
		return nil, fmt.Errorf("%w: %q makes no embeddings (use %s)", ErrWrongModel, req.GetModel(), Embed)
	}
	in := req.GetInput()
	if len(in) == 0 || len(in) > MaxEmbeddingInputs {
		return nil, fmt.Errorf("%w: input holds %d texts: send 1 to %d", ErrBadRequest, len(in), MaxEmbeddingInputs)
	}
	dims := int(req.GetDimensions())
	if dims == 0 {
		dims = DefaultEmbeddingDimensions
	}
	if dims < 1 || dims > MaxEmbeddingDimensions {
		return nil, fmt.Errorf("%w: dimensions %d: ask for 1 to %d", ErrBadRequest, dims, MaxEmbeddingDimensions)
	}
	if len(in)*dims > MaxEmbeddingFloats {
		return nil, fmt.Errorf("%w: %d inputs of %d dimensions make %d floats, over the %d of one request: send fewer inputs or ask for fewer dimensions",
			ErrBadRequest, len(in), dims, len(in)*dims, MaxEmbeddingFloats)
	}
	out := &inferencev1.EmbeddingsResponse{}
	tokens := 0
	for i, text := range in {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if text == "" {
			return nil, fmt.Errorf("%w: input[%d] is empty: send text to embed", ErrBadRequest, i)
		}
		out.Data = append(out.Data, &inferencev1.Embedding{Vector: embed(text, dims)})
		tokens += max(len(strings.Fields(text)), 1)
	}
	out.Usage = &inferencev1.Usage{PromptTokens: int32(tokens), TotalTokens: int32(tokens)}
	return out, nil
}

// embed hashes text into a unit vector of dims float32s.
func embed(text string, dims int) []float32 {
	v := make([]float64, dims)
	add := func(feature string) {
		h := fnv.New64a()
		h.Write([]byte(feature))
		x := h.Sum64()
		sign := 1.0
		if x>>63 == 1 {
			sign = -1
		}
		// A weight from other bits of the hash makes two features in one bucket unlikely to cancel.
		v[int(x%uint64(dims))] += sign * (0.5 + float64((x>>32)&0xffff)/0xffff)
	}
	lower := strings.ToLower(text)
	for _, w := range strings.Fields(lower) {
		add("w:" + w)
	}
	runes := []rune(" " + lower + " ")
	for i := 0; i+3 <= len(runes); i++ {
		add("c:" + string(runes[i:i+3]))
	}
	var norm float64
	for _, x := range v {
		norm += x * x
	}
	out := make([]float32, dims)
	if norm == 0 { // every feature cancelled out: still a unit vector, still repeatable
		out[0] = 1
		return out
	}
	norm = math.Sqrt(norm)
	for i, x := range v {
		out[i] = float32(x / norm)
	}
	return out
}

// pause waits the token interval (WithTokenInterval) before every token but the first, like a model producing them.
func (e *Engine) pause(ctx context.Context, i int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.tokenInterval <= 0 || i == 0 {
		return nil
	}
	t := time.NewTimer(e.tokenInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// cutAtStop is text up to the first of the stop sequences it holds, as an engine stops there
// (chat and completions alike).
func cutAtStop(text string, stops []string) string {
	for _, s := range stops {
		if at := strings.Index(text, s); s != "" && at >= 0 {
			text = text[:at]
		}
	}
	return text
}

// Completions answers a legacy completion with builtin-llm: each prompt's completion is
// "builtin-llm heard: " and the prompt, cut at the first stop sequence and at max_tokens words,
// streamed one word per chunk; a last chunk carries the usage.
func (e *Engine) Completions(ctx context.Context, req *inferencev1.CompletionsRequest, send func(*inferencev1.CompletionsResponse) error) error {
	if req.GetModel() != LLM {
		return fmt.Errorf("%w: %q answers no completions (use %s)", ErrWrongModel, req.GetModel(), LLM)
	}
	if len(req.GetPrompt()) == 0 {
		return fmt.Errorf("%w: prompt must hold at least one prompt", ErrBadRequest)
	}
	chunk := func(c ...*inferencev1.CompletionChoice) *inferencev1.CompletionsResponse {
		return &inferencev1.CompletionsResponse{Model: LLM, Created: time.Now().Unix(), Choices: c}
	}
	var prompt, completion int32
	for i, p := range req.GetPrompt() {
		prompt += int32(len(strings.Fields(p)))
		text := "builtin-llm heard: " + p
		if p == "" {
			text = "builtin-llm received no prompt."
		}
		finish := "stop"
		text = cutAtStop(text, req.GetStop())
		words := strings.SplitAfter(text, " ")
		if text == "" {
			words = nil
		}
		if req.MaxTokens != nil && int(req.GetMaxTokens()) < len(words) {
			words, finish = words[:max(req.GetMaxTokens(), 0)], "length"
		}
		for j, w := range words {
			if err := e.pause(ctx, j); err != nil {
				return err
			}
			if err := send(chunk(&inferencev1.CompletionChoice{Index: int32(i), Text: w})); err != nil {
				return err
			}
		}
		completion += int32(len(words))
		if err := send(chunk(&inferencev1.CompletionChoice{Index: int32(i), FinishReason: finish})); err != nil {
			return err
		}
	}
	last := chunk()
	last.Usage = &inferencev1.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
	return send(last)
}

// Responses answers an OpenAI Responses request with builtin-llm as Chat does: a function
// call with the last JSON object of the last user text when tool_choice names a function,
// else "The tool returned: …" after a function_call_output, else "builtin-llm heard: …".
func (e *Engine) Responses(ctx context.Context, req *inferencev1.ResponsesRequest, send func(*inferencev1.ResponsesResponse) error) error {
	if req.GetModel() != LLM {
		return fmt.Errorf("%w: %q answers no responses (use %s)", ErrWrongModel, req.GetModel(), LLM)
	}
	items, userText, err := responseInput(req.GetInput())
	if err != nil {
		return err
	}
	piece := func() *inferencev1.ResponsesResponse {
		return &inferencev1.ResponsesResponse{Model: LLM, Created: time.Now().Unix()}
	}
	prompt := int32(len(strings.Fields(req.GetInstructions())))
	for _, it := range items {
		prompt += int32(len(strings.Fields(it)))
	}
	if fn := choiceName(req.GetToolChoice()); fn != "" {
		p := piece()
		p.FunctionCall = &inferencev1.ResponsesFunctionCall{Index: 0, CallId: openaichat.NewToolCallID(), Name: fn, ArgumentsDelta: lastJSONObject(userText)}
		if err := send(p); err != nil {
			return err
		}
		end := piece()
		end.Status, end.Usage = "completed", &inferencev1.Usage{PromptTokens: prompt, CompletionTokens: 1, TotalTokens: prompt + 1}
		return send(end)
	}
	text := "builtin-llm heard: " + userText
	if last := req.GetInput().GetListValue().GetValues(); len(last) > 0 {
		if o := last[len(last)-1].GetStructValue().GetFields(); o["type"].GetStringValue() == "function_call_output" {
			text = "The tool returned: " + outputText(o["output"])
		}
	}
	if text == "builtin-llm heard: " {
		text = "builtin-llm received no user text."
	}
	words := strings.SplitAfter(text, " ")
	end := piece()
	end.Status = "completed"
	if req.MaxOutputTokens != nil && int(req.GetMaxOutputTokens()) < len(words) {
		words = words[:max(req.GetMaxOutputTokens(), 0)]
		end.Status, end.IncompleteReason = "incomplete", "max_output_tokens"
	}
	for i, w := range words {
		if err := e.pause(ctx, i); err != nil {
			return err
		}
		p := piece()
		p.TextDelta = w
		if err := send(p); err != nil {
			return err
		}
	}
	n := int32(len(words))
	end.Usage = &inferencev1.Usage{PromptTokens: prompt, CompletionTokens: n, TotalTokens: prompt + n}
	return send(end)
}

// responseInput reads a Responses input (a string, or items) into the texts of its items and
// the text of the last user message.
func responseInput(in *structpb.Value) (texts []string, lastUser string, err error) {
	if s, ok := in.GetKind().(*structpb.Value_StringValue); ok {
		return []string{s.StringValue}, s.StringValue, nil
	}
	list := in.GetListValue()
	if list == nil || len(list.GetValues()) == 0 {
		return nil, "", fmt.Errorf("%w: input must be a string or a non-empty array of input items", ErrBadRequest)
	}
	for _, v := range list.GetValues() {
		f := v.GetStructValue().GetFields()
		var t string
		switch f["type"].GetStringValue() {
		case "function_call_output":
			t = outputText(f["output"])
		case "function_call":
			t = f["arguments"].GetStringValue()
		default: // a message, with or without "type":"message"
			t = contentText(f["content"])
			if f["role"].GetStringValue() == "user" {
				lastUser = t
			}
		}
		texts = append(texts, t)
	}
	return texts, lastUser, nil
}

// contentText is a message content's text: a string, or the text of its input_text/output_text parts.
func contentText(c *structpb.Value) string {
	if s, ok := c.GetKind().(*structpb.Value_StringValue); ok {
		return s.StringValue
	}
	var parts []string
	for _, p := range c.GetListValue().GetValues() {
		if t := p.GetStructValue().GetFields()["text"].GetStringValue(); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, " ")
}

// outputText is a function_call_output's output: a string, or the text of its parts.
func outputText(o *structpb.Value) string { return contentText(o) }

// choiceName returns the function a Responses tool_choice names: {"type":"function","name":…}
// (the chat shape {"function":{"name":…}} is read too).
func choiceName(choice *structpb.Value) string {
	if n := choice.GetStructValue().GetFields()["name"].GetStringValue(); n != "" {
		return n
	}
	return namedFunction(choice)
}
