// Package openaichat converts between OpenAI's chat completion JSON and the inference
// contract, for every service that speaks OpenAI chat (the edge's REST API, mcpgateway's
// lemonade_chat tool).
package openaichat

import (
	"encoding/json"
	"strings"

	"github.com/zestmcp/zest/lib/jsonerr"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

// Request is a parsed chat request: the contract message plus the fields the transport uses.
type Request struct {
	Chat *inferencev1.ChatRequest
	// Stream asks for server-sent events.
	Stream bool
	// IncludeUsage asks for a last chunk with usage (stream_options.include_usage).
	IncludeUsage bool
}

// ParseObject checks an OpenAI chat completion request decoded by DecodeObject (see
// FromObject); model is required. Every refusal is a *FieldError naming the field.
func ParseObject(raw map[string]any) (*Request, error) {
	r, err := FromObject(raw)
	if err != nil {
		return nil, err
	}
	if r.Chat.GetModel() == "" {
		return nil, fieldErr("model", "model is required; GET /api/v1/models lists the models")
	}
	return r, nil
}

// FromObject reads and checks a chat request decoded by DecodeObject like ParseObject,
// without requiring a model (a tool-loop chat may take it from a preset): stream and
// stream_options here, the chat's fields by FromMap. Fields it does not know are ignored.
func FromObject(raw map[string]any) (*Request, error) {
	var err error
	r := &Request{}
	if v, ok := present(raw, "stream"); ok {
		b, isBool := v.(bool)
		if !isBool {
			return nil, fieldErr("stream", "stream must be true or false, not %s", jsonerr.KindOf(v))
		}
		r.Stream = b
	}
	if v, ok := present(raw, "stream_options"); ok {
		so, isObj := v.(map[string]any)
		if !isObj {
			return nil, mustBe("stream_options", "an object", v)
		}
		if u, ok := present(so, "include_usage"); ok {
			b, isBool := u.(bool)
			if !isBool {
				return nil, fieldErr("stream_options.include_usage", "stream_options.include_usage must be true or false, not %s", jsonerr.KindOf(u))
			}
			r.IncludeUsage = b
		}
	}
	if r.Chat, err = FromMap(raw); err != nil {
		return nil, err
	}
	return r, nil
}

// ToolCallsJSON renders tool calls as OpenAI does; withIndex adds each call's index, which
// streamed deltas carry and a completion's message does not.
func ToolCallsJSON(calls []*inferencev1.ToolCall, withIndex bool) []map[string]any {
	out := make([]map[string]any, 0, len(calls))
	for _, c := range calls {
		m := map[string]any{"id": c.GetId(), "type": "function",
			"function": map[string]any{"name": c.GetFunction().GetName(), "arguments": c.GetFunction().GetArguments()}}
		if withIndex {
			m["index"] = c.GetIndex()
		}
		out = append(out, m)
	}
	return out
}

// UsageJSON renders token usage as OpenAI does (zeros for nil).
func UsageJSON(u *inferencev1.Usage) map[string]any {
	return map[string]any{"prompt_tokens": u.GetPromptTokens(), "completion_tokens": u.GetCompletionTokens(), "total_tokens": u.GetTotalTokens()}
}

// Chunk renders one streamed chunk (object chat.completion.chunk).
func Chunk(c *inferencev1.ChatResponse, includeUsage bool) ([]byte, error) {
	return json.Marshal(ChunkObject(c, includeUsage))
}

// ChunkObject is Chunk's object before encoding, for callers that add fields of their own:
// finish_reason is null until the chunk that ends the choice; usage is there when asked for
// and the chunk has it.
func ChunkObject(c *inferencev1.ChatResponse, includeUsage bool) map[string]any {
	delta := map[string]any{}
	if r := c.GetDelta().GetRole(); r != "" {
		delta["role"] = r
	}
	if t := c.GetDelta().GetContent(); t != "" {
		delta["content"] = t
	}
	if t := c.GetDelta().GetReasoningContent(); t != "" {
		delta["reasoning_content"] = t
	}
	if calls := c.GetDelta().GetToolCalls(); len(calls) > 0 {
		delta["tool_calls"] = ToolCallsJSON(calls, true)
	}
	var finish any
	if f := c.GetFinishReason(); f != "" {
		finish = f
	}
	m := map[string]any{
		"id": c.GetId(), "object": "chat.completion.chunk", "created": c.GetCreated(), "model": c.GetModel(),
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	}
	if includeUsage && c.GetUsage() != nil {
		m["usage"] = UsageJSON(c.GetUsage())
	}
	return m
}

// Completion collects streamed chunks into one chat.completion.
type Completion struct {
	id, model string
	created   int64
	content   strings.Builder
	reasoning strings.Builder
	calls     []*inferencev1.ToolCall
	finish    string
	usage     *inferencev1.Usage
}

// Add folds one chunk in.
func (c *Completion) Add(ch *inferencev1.ChatResponse) {
	c.id, c.model, c.created = ch.GetId(), ch.GetModel(), ch.GetCreated()
	c.content.WriteString(ch.GetDelta().GetContent())
	c.reasoning.WriteString(ch.GetDelta().GetReasoningContent())
	c.calls = append(c.calls, ch.GetDelta().GetToolCalls()...)
	if f := ch.GetFinishReason(); f != "" {
		c.finish = f
	}
	if u := ch.GetUsage(); u != nil {
		c.usage = u
	}
}

// Text is the assistant text so far.
func (c *Completion) Text() string { return c.content.String() }

// Reasoning is the reasoning text so far (a reasoning model's thinking, apart from Text).
func (c *Completion) Reasoning() string { return c.reasoning.String() }

// ToolCalls are the tool calls so far.
func (c *Completion) ToolCalls() []*inferencev1.ToolCall { return c.calls }

// FinishReason is the finish reason of the last chunk.
func (c *Completion) FinishReason() string { return c.finish }

// Message is the assistant message, as OpenAI renders it.
func (c *Completion) Message() map[string]any {
	msg := map[string]any{"role": "assistant", "content": c.content.String()}
	if len(c.calls) > 0 {
		msg["tool_calls"] = ToolCallsJSON(c.calls, false)
		if c.content.Len() == 0 {
			msg["content"] = nil
		}
	}
	if c.reasoning.Len() > 0 {
		msg["reasoning_content"] = c.reasoning.String()
	}
	return msg
}

// JSON renders the chat.completion object.
func (c *Completion) JSON() ([]byte, error) { return json.Marshal(c.Object()) }

// Object is JSON's object before encoding, for callers that add fields of their own:
// finish_reason is "stop" when no chunk gave one; usage is there when a chunk had it.
func (c *Completion) Object() map[string]any {
	finish := c.finish
	if finish == "" {
		finish = "stop"
	}
	m := map[string]any{
		"id": c.id, "object": "chat.completion", "created": c.created, "model": c.model,
		"choices": []any{map[string]any{"index": 0, "message": c.Message(), "finish_reason": finish}},
	}
	if c.usage != nil {
		m["usage"] = UsageJSON(c.usage)
	}
	return m
}
