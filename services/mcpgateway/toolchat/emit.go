package toolchat

import (
	"strconv"
	"sync"
	"time"

	"github.com/zestmcp/zest/lib/openaichat"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// emitter writes the loop's items in order: the assistant's text as it comes, each tool event,
// then the outcome. The edge renders them as OpenAI chunks or as one completion.
type emitter struct {
	stream    mcpgatewayv1.ChatService_ChatServer
	id, model string
	created   int64
	roleSent  bool
	maxRounds int
	err       error
	// mu orders sends: the calls of a round waiting for approval send their events from their
	// own goroutines.
	mu sync.Mutex
}

// capNote is the text of a chat stopped by the round cap.
func (e *emitter) capNote() string {
	return "[Zest stopped the tool loop: the model was still calling tools after " + strconv.Itoa(e.maxRounds) + " rounds (ZEST_CHAT_MAX_ROUNDS)]"
}

func (e *emitter) send(r *mcpgatewayv1.ChatResponse) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.err = e.stream.Send(r)
	}
}

// content forwards a model chunk's role and text (its tool calls are reported as events).
func (e *emitter) content(ch *inferencev1.ChatResponse) {
	if e.id == "" {
		e.id, e.model, e.created = ch.GetId(), ch.GetModel(), ch.GetCreated()
	}
	d := ch.GetDelta()
	if d.GetContent() == "" && (d.GetRole() == "" || e.roleSent) {
		return
	}
	c := &inferencev1.ChatResponse{Id: e.id, Model: e.model, Created: e.created, Delta: &inferencev1.ChatMessage{Content: d.GetContent()}}
	if !e.roleSent {
		c.Delta.Role, e.roleSent = "assistant", true
	}
	e.send(&mcpgatewayv1.ChatResponse{Kind: &mcpgatewayv1.ChatResponse_Chunk{Chunk: c}})
}

// event sends a tool-loop event.
func (e *emitter) event(ev *mcpgatewayv1.ToolEvent) {
	e.send(&mcpgatewayv1.ChatResponse{Kind: &mcpgatewayv1.ChatResponse_Event{Event: ev}})
}

func (e *emitter) createdNow() int64 {
	if e.created == 0 {
		return time.Now().Unix()
	}
	return e.created
}

// finish ends the chat with its outcome: the final message, the usage of every round, the
// tool calls made and any warnings.
func (e *emitter) finish(c *openaichat.Completion, finish string, usage *inferencev1.Usage, calls []*mcpgatewayv1.ToolCallRecord, warnings []string) error {
	if finish == "" {
		finish = "stop"
	}
	msg := &inferencev1.ChatMessage{Role: "assistant", Content: c.Text()}
	switch finish {
	case "tool_calls": // the client's own tools: hand their calls over
		for i, tc := range c.ToolCalls() {
			call := &inferencev1.ToolCall{Index: int32(i), Id: tc.GetId(), Type: "function", Function: tc.GetFunction()}
			msg.ToolCalls = append(msg.ToolCalls, call)
		}
	case FinishMaxToolRounds:
		e.content(&inferencev1.ChatResponse{Delta: &inferencev1.ChatMessage{Content: e.capNote()}})
		msg.Content = e.capNote()
	}
	e.send(&mcpgatewayv1.ChatResponse{Kind: &mcpgatewayv1.ChatResponse_Done{Done: &mcpgatewayv1.ChatDone{
		Id: e.id, Model: e.model, Created: e.createdNow(), FinishReason: finish, Message: msg,
		Usage: usage, ToolCalls: calls, Warnings: warnings,
	}}})
	return e.err
}
