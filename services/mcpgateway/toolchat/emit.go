package toolchat

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/zestmcp/zest/lib/openaichat"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// emitter writes the loop's output: chunks for streaming clients, one completion otherwise.
type emitter struct {
	stream       mcpgatewayv1.ChatService_ChatServer
	streaming    bool
	includeUsage bool
	id, model    string
	created      int64
	roleSent     bool
	maxRounds    int
	err          error
}

// capNote is the text of a chat stopped by the round cap.
func (e *emitter) capNote() string {
	return "[Zest stopped the tool loop: the model was still calling tools after " + strconv.Itoa(e.maxRounds) + " rounds (ZEST_CHAT_MAX_ROUNDS)]"
}

func (e *emitter) send(r *mcpgatewayv1.ChatResponse) {
	if e.err == nil {
		e.err = e.stream.Send(r)
	}
}

func (e *emitter) chunk(m map[string]any) {
	b, _ := json.Marshal(m)
	e.send(&mcpgatewayv1.ChatResponse{Kind: &mcpgatewayv1.ChatResponse_Chunk{Chunk: b}})
}

// content forwards a model chunk's role and text (its tool calls are reported as events).
func (e *emitter) content(ch *inferencev1.ChatResponse) {
	if e.id == "" {
		e.id, e.model, e.created = ch.GetId(), ch.GetModel(), ch.GetCreated()
	}
	if !e.streaming {
		return
	}
	d := ch.GetDelta()
	if d.GetContent() == "" && (d.GetRole() == "" || e.roleSent) {
		return
	}
	c := &inferencev1.ChatResponse{Id: e.id, Model: e.model, Created: e.created, Delta: &inferencev1.ChatMessage{Content: d.GetContent()}}
	if !e.roleSent {
		c.Delta.Role, e.roleSent = "assistant", true
	}
	b, err := openaichat.Chunk(c, false)
	if err == nil {
		e.send(&mcpgatewayv1.ChatResponse{Kind: &mcpgatewayv1.ChatResponse_Chunk{Chunk: b}})
	}
}

// event sends a tool-loop event: a chunk with no choices and a "zest_event" object.
func (e *emitter) event(ev map[string]any) {
	if !e.streaming {
		return
	}
	e.chunk(map[string]any{"id": e.id, "object": "chat.completion.chunk", "created": e.createdNow(), "model": e.model,
		"choices": []any{}, "zest_event": ev})
}

func (e *emitter) createdNow() int64 {
	if e.created == 0 {
		return time.Now().Unix()
	}
	return e.created
}

// finish ends the chat: the last chunk (streaming) or the completion carries the summary of
// the tool calls made and any warnings.
func (e *emitter) finish(c *openaichat.Completion, finish string, usage *inferencev1.Usage, calls []CallRecord, warnings []string) error {
	if calls == nil {
		calls = []CallRecord{}
	}
	if warnings == nil {
		warnings = []string{}
	}
	if e.streaming {
		if finish == FinishMaxToolRounds {
			e.content(&inferencev1.ChatResponse{Delta: &inferencev1.ChatMessage{Content: e.capNote()}})
		}
		m := map[string]any{"id": e.id, "object": "chat.completion.chunk", "created": e.createdNow(), "model": e.model,
			"choices":         []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}},
			"zest_tool_calls": calls, "zest_warnings": warnings}
		if finish == "tool_calls" { // the client's own tools: hand their calls over
			m["choices"] = []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": toolCalls(c.ToolCalls())}, "finish_reason": finish}}
		}
		if e.includeUsage {
			m["usage"] = map[string]any{"prompt_tokens": usage.GetPromptTokens(), "completion_tokens": usage.GetCompletionTokens(), "total_tokens": usage.GetTotalTokens()}
		}
		e.chunk(m)
		return e.err
	}
	msg := c.Message()
	if finish != "tool_calls" {
		delete(msg, "tool_calls")
		if msg["content"] == nil {
			msg["content"] = ""
		}
	}
	if finish == FinishMaxToolRounds {
		msg["content"] = e.capNote()
	}
	b, _ := json.Marshal(map[string]any{
		"id": e.id, "object": "chat.completion", "created": e.createdNow(), "model": e.model,
		"choices":         []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":           map[string]any{"prompt_tokens": usage.GetPromptTokens(), "completion_tokens": usage.GetCompletionTokens(), "total_tokens": usage.GetTotalTokens()},
		"zest_tool_calls": calls, "zest_warnings": warnings,
	})
	e.send(&mcpgatewayv1.ChatResponse{Kind: &mcpgatewayv1.ChatResponse_Completion{Completion: b}})
	return e.err
}

func toolCalls(calls []*inferencev1.ToolCall) []map[string]any {
	out := make([]map[string]any, 0, len(calls))
	for i, c := range calls {
		out = append(out, map[string]any{"index": i, "id": c.GetId(), "type": "function",
			"function": map[string]any{"name": c.GetFunction().GetName(), "arguments": c.GetFunction().GetArguments()}})
	}
	return out
}
