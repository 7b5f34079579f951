// Package builtin is the engine that ships with Zest so that a fresh checkout answers with
// nothing else installed. Its models are small deterministic programs, not language models:
// builtin-llm answers from its input (it quotes tool results and calls the function that
// tool_choice names), which makes every path of the suite testable without weights.
package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/zestmcp/zest/lib/openaichat"
	"github.com/zestmcp/zest/lib/tooloutput"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// Model ids of the built-in engine.
const (
	LLM        = "builtin-llm"
	Transcribe = "builtin-transcribe"
	Image      = "builtin-image"
)

// Engine is the built-in engine. The zero value is not ready; use New.
type Engine struct {
	created int64
	models  []*inferencev1.Model
	// tokenInterval paces builtin-llm's stream (WithTokenInterval).
	tokenInterval time.Duration
}

// Option configures an Engine.
type Option func(*Engine)

// WithTokenInterval paces builtin-llm's stream like a real model's, d between tokens (0: as
// fast as it can), for measuring what a relay adds.
func WithTokenInterval(d time.Duration) Option { return func(e *Engine) { e.tokenInterval = d } }

// New returns the built-in engine; created stamps its models.
func New(created time.Time, opts ...Option) *Engine {
	c := created.Unix()
	m := func(id string, t inferencev1.ModelType, desc string, labels ...string) *inferencev1.Model {
		return &inferencev1.Model{
			Id: id, Type: t, State: inferencev1.ModelState_MODEL_STATE_LOADED, Engine: "builtin",
			Labels: append([]string{"builtin"}, labels...), OwnedBy: "zest", Created: c, Description: desc,
		}
	}
	e := &Engine{created: c, models: []*inferencev1.Model{
		m(LLM, inferencev1.ModelType_MODEL_TYPE_LLM,
			"Deterministic built-in test engine, not a language model: answers from its input and calls tools on request.",
			"tool-calling"),
		m(Image, inferencev1.ModelType_MODEL_TYPE_IMAGE,
			"Deterministic built-in image engine: renders a PNG pattern derived from the prompt; edits invert and tint where the mask allows."),
		m(Transcribe, inferencev1.ModelType_MODEL_TYPE_TRANSCRIPTION,
			"Deterministic built-in transcription engine: describes PCM WAV input, does not recognise speech."),
	}}
	e.models = append(e.models, mediaModels(c)...) // speech.go
	e.models = append(e.models, e.TextModels()...)
	for _, o := range opts {
		o(e)
	}
	return e
}

// Models returns the engine's models, all loaded.
func (e *Engine) Models() []*inferencev1.Model { return e.models }

// Chat answers a chat request with builtin-llm, sending one chunk per word and a final chunk
// with the finish reason and usage.
func (e *Engine) Chat(ctx context.Context, req *inferencev1.ChatRequest, send func(*inferencev1.ChatResponse) error) error {
	if req.GetModel() != LLM {
		return fmt.Errorf("%w: %q answers no chat (use %s)", ErrWrongModel, req.GetModel(), LLM)
	}
	if len(req.GetMessages()) == 0 {
		return fmt.Errorf("%w: messages must hold at least one message", ErrBadRequest)
	}
	id := openaichat.NewCompletionID()
	chunk := func(delta *inferencev1.ChatMessage) *inferencev1.ChatResponse {
		return &inferencev1.ChatResponse{Id: id, Model: LLM, Created: time.Now().Unix(), Delta: delta}
	}
	prompt := promptTokens(req)

	fn := namedFunction(req.GetToolChoice())
	if fn == "" {
		fn = mentionedFunction(req)
	}
	if fn != "" {
		args := lastJSONObject(lastUserText(req))
		call := &inferencev1.ToolCall{Index: 0, Id: openaichat.NewToolCallID(), Type: "function",
			Function: &inferencev1.FunctionCall{Name: fn, Arguments: args}}
		last := chunk(&inferencev1.ChatMessage{Role: "assistant", ToolCalls: []*inferencev1.ToolCall{call}})
		last.FinishReason = "tool_calls"
		last.Usage = &inferencev1.Usage{PromptTokens: prompt, CompletionTokens: 1, TotalTokens: prompt + 1}
		return send(last)
	}

	text := cutAtStop(answer(req), req.GetStop())
	words := strings.SplitAfter(text, " ")
	if text == "" {
		words = nil
	}
	limit := len(words)
	finish := "stop"
	if req.MaxTokens != nil && int(req.GetMaxTokens()) < limit {
		limit, finish = max(int(req.GetMaxTokens()), 0), "length"
	}
	if err := send(chunk(&inferencev1.ChatMessage{Role: "assistant"})); err != nil {
		return err
	}
	for i, w := range words[:limit] {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.tokenInterval > 0 && i > 0 {
			t := time.NewTimer(e.tokenInterval)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		if err := send(chunk(&inferencev1.ChatMessage{Content: w})); err != nil {
			return err
		}
	}
	last := chunk(&inferencev1.ChatMessage{})
	last.FinishReason = finish
	last.Usage = &inferencev1.Usage{PromptTokens: prompt, CompletionTokens: int32(limit), TotalTokens: prompt + int32(limit)}
	return send(last)
}

// answer is the text builtin-llm replies with.
func answer(req *inferencev1.ChatRequest) string {
	if tool := answeredTool(req); tool != nil {
		// A real model reads the chat loop's marker around tool output (lib/tooloutput); this
		// echo shows what is inside it.
		text, _ := tooloutput.Unwrap(tool.GetContent())
		return "The tool returned: " + text
	}
	text := lastUserText(req)
	if text == "" {
		return "builtin-llm received no user text."
	}
	return "builtin-llm heard: " + text
}

// answeredTool is the tool result this turn ends with: the last message, or the last one
// before user messages that follow it (a client may add a prompt of its own after the result,
// as Lemonade's GUI does); nil when the turn has none.
func answeredTool(req *inferencev1.ChatRequest) *inferencev1.ChatMessage {
	msgs := req.GetMessages()
	for i := len(msgs) - 1; i >= 0; i-- {
		switch msgs[i].GetRole() {
		case "tool":
			return msgs[i]
		case "user":
			continue
		}
		return nil
	}
	return nil
}

func lastUserText(req *inferencev1.ChatRequest) string {
	msgs := req.GetMessages()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].GetRole() != "user" {
			continue
		}
		if c := msgs[i].GetContent(); c != "" {
			return c
		}
		var parts []string
		for _, p := range msgs[i].GetContentParts().GetValues() {
			if t := p.GetStructValue().GetFields()["text"].GetStringValue(); t != "" {
				parts = append(parts, t)
			}
		}
		return strings.Join(parts, " ")
	}
	return ""
}

// namedFunction returns the function name of a tool_choice {"type":"function","function":{"name":…}}.
func namedFunction(choice *structpb.Value) string {
	s := choice.GetStructValue()
	if s == nil {
		return ""
	}
	return s.GetFields()["function"].GetStructValue().GetFields()["name"].GetStringValue()
}

// mentionedFunction is the rule of tool_choice "auto" (or none given), as clients that run
// their own tool loop send it (Lemonade's GUI passes MCP tools as OpenAI tools): when the last
// message is the user's and names an offered function exactly, that function is called (the
// longest name named wins). After a tool result the model answers in text, so a loop ends.
func mentionedFunction(req *inferencev1.ChatRequest) string {
	msgs := req.GetMessages()
	if len(msgs) == 0 || msgs[len(msgs)-1].GetRole() != "user" || req.GetToolChoice().GetStringValue() == "none" || answeredTool(req) != nil {
		return ""
	}
	text, best := lastUserText(req), ""
	for _, t := range req.GetTools().GetValues() {
		name := t.GetStructValue().GetFields()["function"].GetStructValue().GetFields()["name"].GetStringValue()
		if name != "" && len(name) > len(best) && strings.Contains(text, name) {
			best = name
		}
	}
	return best
}

// lastJSONObject returns the last JSON object embedded in text, or "{}".
func lastJSONObject(text string) string {
	found := "{}"
	for i := 0; i < len(text); i++ {
		if text[i] != '{' {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(text[i:]))
		var obj map[string]any
		if dec.Decode(&obj) == nil {
			b, _ := json.Marshal(obj)
			found = string(b)
			i += int(dec.InputOffset()) - 1
		}
	}
	return found
}

func promptTokens(req *inferencev1.ChatRequest) int32 {
	n := 0
	for _, m := range req.GetMessages() {
		n += len(strings.Fields(m.GetContent()))
	}
	return int32(n)
}
