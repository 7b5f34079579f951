package openai

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/lib/openaichat"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// toolChatRequest reads a chat completion body that selects MCP providers ("preset",
// "mcp_server_ids"), decoded once by the caller, into ChatService's typed request; the chat's
// own fields are read by openaichat, which ignores Zest's. events is "zest_events": whether a
// stream carries the tool loop's events. Every refusal is a field error naming the field.
func toolChatRequest(raw map[string]any) (req *mcpgatewayv1.ChatRequest, parsed *openaichat.Request, events bool, err error) {
	if events, err = boolField(raw, "zest_events"); err != nil {
		return nil, nil, false, err
	}
	req, parsed, err = toolChatFields(raw)
	return req, parsed, events, err
}

func toolChatFields(raw map[string]any) (*mcpgatewayv1.ChatRequest, *openaichat.Request, error) {
	req := &mcpgatewayv1.ChatRequest{}
	if v := raw["preset"]; v != nil {
		s, ok := v.(string)
		if !ok || s == "" {
			return nil, nil, &openaichat.FieldError{Param: "preset", Message: "preset must be a preset id (a string); GET /internal/mcp/presets lists them"}
		}
		req.Preset = s
	}
	if v := raw["mcp_server_ids"]; v != nil {
		list, ok := v.([]any)
		ids := make([]string, len(list))
		for i, x := range list {
			if ids[i], ok = x.(string); !ok {
				break
			}
		}
		if !ok {
			return nil, nil, &openaichat.FieldError{Param: "mcp_server_ids", Message: `mcp_server_ids must be an array of provider ids (strings): registered server ids, or "lemonade"`}
		}
		req.Providers = &mcpgatewayv1.Providers{Ids: ids}
	}
	parsed, err := openaichat.FromObject(raw)
	if err != nil {
		return nil, nil, err
	}
	req.Chat = parsed.Chat
	return req, parsed, nil
}

// toolChat relays a chat whose tool loop mcpgateway runs: the model's text, each tool call and
// result, and the outcome with zest_tool_calls and zest_warnings — as SSE chunks, or as one
// completion. The tool loop's events (chunks with no choices and a "zest_event" object) are
// sent only when the request asks with "zest_events": true, as Zest's console does: the OpenAI
// SDKs' stream helpers copy every field of a chunk into the completion they build, so an
// OpenAI client would find zest_event in its finalChatCompletion().
func (a *API) toolChat(w http.ResponseWriter, r *http.Request, raw map[string]any) {
	req, parsed, events, err := toolChatRequest(raw)
	if err != nil {
		writeFieldError(w, err)
		return
	}
	stream, err := a.ToolChat.Chat(a.Forward(r), req)
	if err != nil {
		writeStatus(w, err)
		return
	}
	first, err := stream.Recv()
	if err != nil {
		writeStatus(w, err)
		return
	}
	var rd chatRenderer
	if !parsed.Stream {
		for it := first; ; {
			if d := it.GetDone(); d != nil {
				httpguard.WriteJSON(w, http.StatusOK, rd.completion(d))
				return
			}
			rd.note(it)
			if it, err = stream.Recv(); err != nil {
				if errors.Is(err, io.EOF) {
					err = errors.New("the tool loop ended without an outcome")
				}
				writeStatus(w, err)
				return
			}
		}
	}
	sse := startSSE(w)
	for it := first; ; {
		if it.GetEvent() == nil || events {
			b, err := rd.chunk(it, parsed.IncludeUsage)
			if err != nil || !sse.data(b) {
				return
			}
		}
		if it, err = stream.Recv(); err != nil {
			sse.end(err)
			return
		}
	}
}

// chatRenderer renders ChatService items as OpenAI JSON, remembering the completion's id,
// model and creation time from the first model chunk.
type chatRenderer struct {
	id, model string
	created   int64
}

func (rd *chatRenderer) note(it *mcpgatewayv1.ChatResponse) {
	if c := it.GetChunk(); c != nil && rd.id == "" {
		rd.id, rd.model, rd.created = c.GetId(), c.GetModel(), c.GetCreated()
	}
}

func (rd *chatRenderer) createdNow() int64 {
	if rd.created == 0 {
		return time.Now().Unix()
	}
	return rd.created
}

// chunk renders one item as a chat.completion.chunk: a model chunk as the plain chat renders
// it, an event as a chunk with no choices, the outcome as the last chunk (the tool calls
// handed back, the finish reason, zest_tool_calls and zest_warnings).
func (rd *chatRenderer) chunk(it *mcpgatewayv1.ChatResponse, includeUsage bool) ([]byte, error) {
	rd.note(it)
	switch k := it.GetKind().(type) {
	case *mcpgatewayv1.ChatResponse_Chunk:
		return openaichat.Chunk(k.Chunk, false)
	case *mcpgatewayv1.ChatResponse_Event:
		return json.Marshal(map[string]any{"id": rd.id, "object": "chat.completion.chunk", "created": rd.createdNow(), "model": rd.model,
			"choices": []any{}, "zest_event": eventJSON(k.Event)})
	case *mcpgatewayv1.ChatResponse_Done:
		d := k.Done
		m := openaichat.ChunkObject(&inferencev1.ChatResponse{Id: d.GetId(), Model: d.GetModel(), Created: d.GetCreated(),
			Delta: &inferencev1.ChatMessage{ToolCalls: d.GetMessage().GetToolCalls()}, FinishReason: d.GetFinishReason()}, false)
		if includeUsage {
			m["usage"] = openaichat.UsageJSON(d.GetUsage())
		}
		zestFields(m, d)
		return json.Marshal(m)
	}
	return nil, errors.New("an empty item from the tool loop")
}

// completion renders the outcome as a chat.completion (usage always, as the tool loop sums
// every round's).
func (rd *chatRenderer) completion(d *mcpgatewayv1.ChatDone) map[string]any {
	var c openaichat.Completion
	c.Add(&inferencev1.ChatResponse{Id: d.GetId(), Model: d.GetModel(), Created: d.GetCreated(),
		Delta: d.GetMessage(), FinishReason: d.GetFinishReason()})
	m := c.Object()
	m["usage"] = openaichat.UsageJSON(d.GetUsage())
	zestFields(m, d)
	return m
}

// zestFields adds the outcome's own fields: the tool calls the loop made and its warnings.
func zestFields(m map[string]any, d *mcpgatewayv1.ChatDone) {
	m["zest_tool_calls"] = recordsJSON(d.GetToolCalls())
	m["zest_warnings"] = nonNil(d.GetWarnings())
}

func eventJSON(ev *mcpgatewayv1.ToolEvent) map[string]any {
	c := ev.GetCall()
	switch ev.GetType() {
	case "tool_call":
		return map[string]any{"type": "tool_call", "round": c.GetRound(), "id": c.GetId(), "name": c.GetName(),
			"server_id": c.GetServerId(), "arguments": c.GetArguments()}
	case "tool_result":
		m := map[string]any{"type": "tool_result", "round": c.GetRound(), "id": c.GetId(), "name": c.GetName(),
			"server_id": c.GetServerId(), "is_error": c.GetIsError(), "output_bytes": c.GetOutputBytes(),
			"truncated": c.GetTruncated(), "duration_ms": c.GetDurationMs(), "output": c.GetOutputPreview()}
		if a := c.GetApproval(); a != "" {
			m["approval"] = a
		}
		return m
	case "approval_required": // the call waits: POST /internal/mcp/approvals/{approval_id}/approve or /deny
		return map[string]any{"type": "approval_required", "round": c.GetRound(), "id": c.GetId(), "name": c.GetName(),
			"server_id": c.GetServerId(), "arguments": c.GetArguments(), "approval_id": ev.GetApprovalId(),
			"expires": ev.GetApprovalExpires(), "message": ev.GetMessage()}
	}
	return map[string]any{"type": ev.GetType(), "message": ev.GetMessage()}
}

func recordsJSON(recs []*mcpgatewayv1.ToolCallRecord) []map[string]any {
	out := make([]map[string]any, 0, len(recs))
	for _, c := range recs {
		out = append(out, map[string]any{"round": c.GetRound(), "id": c.GetId(), "name": c.GetName(), "server_id": c.GetServerId(),
			"arguments": c.GetArguments(), "is_error": c.GetIsError(), "output_bytes": c.GetOutputBytes(),
			"truncated": c.GetTruncated(), "duration_ms": c.GetDurationMs()})
		if a := c.GetApproval(); a != "" {
			out[len(out)-1]["approval"] = a
		}
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
