// Package toolchat runs the chat tool loop on the server: the tools of the providers a preset
// (or the request) selects are offered to the model, the tool calls it makes are run — the
// built-in lemonade_* tools in process, external tools on their MCP servers — and the results
// are fed back, round after round, until the model answers or the round cap is reached. Any
// OpenAI client can use it; streaming clients also see each tool call and result as it
// happens, as chunks that carry a "zest_event" object and no choices.
package toolchat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/lib/openaichat"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/catalog"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// Defaults of Config.
const (
	DefaultMaxRounds     = 5
	DefaultMaxToolOutput = 16 << 10
)

// FinishMaxToolRounds is the finish_reason of a chat stopped by the round cap.
const FinishMaxToolRounds = "max_tool_rounds"

// Config bounds the loop.
type Config struct {
	// MaxRounds is how many model calls one chat may make (ZEST_CHAT_MAX_ROUNDS).
	MaxRounds int
	// MaxToolOutput caps the bytes of one tool result fed back to the model (ZEST_CHAT_MAX_TOOL_OUTPUT).
	MaxToolOutput int
}

// Loop serves ChatService.
type Loop struct {
	mcpgatewayv1.UnimplementedChatServiceServer
	cfg       Config
	inference inferencev1.InferenceServiceClient
	reg       registry.Registry
	up        *upstream.Manager
	builtin   *server.MCPServer
	log       *slog.Logger
}

// New returns the loop; builtin serves the lemonade_* tools.
func New(cfg Config, inference inferencev1.InferenceServiceClient, reg registry.Registry, up *upstream.Manager, builtin *server.MCPServer, log *slog.Logger) *Loop {
	if cfg.MaxRounds <= 0 {
		cfg.MaxRounds = DefaultMaxRounds
	}
	if cfg.MaxToolOutput <= 0 {
		cfg.MaxToolOutput = DefaultMaxToolOutput
	}
	if log == nil {
		log = slog.Default()
	}
	return &Loop{cfg: cfg, inference: inference, reg: reg, up: up, builtin: builtin, log: log}
}

// tool is one tool the loop can run.
type tool struct {
	chatName string
	server   *mcpgatewayv1.ServerConfig // nil for a built-in tool
	name     string                     // the tool's own name
	openai   map[string]any
}

// CallRecord summarizes one tool call, for events and the final summary.
type CallRecord struct {
	Round       int    `json:"round"`
	ID          string `json:"id"`
	Name        string `json:"name"`
	ServerID    string `json:"server_id"`
	Arguments   string `json:"arguments"`
	IsError     bool   `json:"is_error"`
	OutputBytes int    `json:"output_bytes"`
	Truncated   bool   `json:"truncated"`
	DurationMs  int64  `json:"duration_ms"`
	Output      string `json:"output,omitempty"`
}

func invalid(format string, a ...any) error {
	return status.Errorf(codes.InvalidArgument, format, a...)
}

// Chat implements ChatService.
func (l *Loop) Chat(req *mcpgatewayv1.ChatRequest, stream mcpgatewayv1.ChatService_ChatServer) error {
	ctx := stream.Context()
	var raw map[string]any
	if err := json.Unmarshal(req.GetBody(), &raw); err != nil || raw == nil {
		return invalid("the body is not a JSON object")
	}
	providers, preset, err := l.selection(ctx, raw)
	if err != nil {
		return err
	}
	if preset != nil {
		if m, _ := raw["model"].(string); m == "" && preset.GetModel() != "" {
			raw["model"] = preset.GetModel()
		}
		if sp := preset.GetSystemPrompt(); sp != "" {
			msgs, _ := raw["messages"].([]any)
			raw["messages"] = append([]any{map[string]any{"role": "system", "content": sp}}, msgs...)
		}
	}
	body, _ := json.Marshal(raw)
	parsed, err := openaichat.Parse(body)
	if err != nil {
		return invalid("%v", err)
	}
	tools, warnings := l.tools(ctx, providers)
	out := &emitter{stream: stream, streaming: parsed.Stream, includeUsage: parsed.IncludeUsage, maxRounds: l.cfg.MaxRounds}
	for _, w := range warnings {
		out.event(map[string]any{"type": "warning", "message": w})
	}
	return l.run(ctx, parsed, tools, warnings, out)
}

// selection reads "preset" and "mcp_server_ids" (removing them from raw).
func (l *Loop) selection(ctx context.Context, raw map[string]any) ([]string, *mcpgatewayv1.Preset, error) {
	var preset *mcpgatewayv1.Preset
	if v, ok := raw["preset"]; ok {
		id, isStr := v.(string)
		if !isStr || id == "" {
			return nil, nil, invalid("preset must be a preset id (a string)")
		}
		p, err := l.reg.GetPreset(ctx, id)
		if errors.Is(err, registry.ErrNotFound) {
			return nil, nil, invalid("preset %q is not known; GET /internal/mcp/presets lists them", id)
		}
		if err != nil {
			return nil, nil, status.Error(codes.Internal, err.Error())
		}
		preset = p
	}
	delete(raw, "preset")
	providers := preset.GetMcpServerIds()
	if v, ok := raw["mcp_server_ids"]; ok {
		list, isList := v.([]any)
		if !isList {
			return nil, nil, invalid("mcp_server_ids must be an array of provider ids")
		}
		ids := make([]string, 0, len(list))
		for _, x := range list {
			s, isStr := x.(string)
			if !isStr {
				return nil, nil, invalid("mcp_server_ids must hold strings")
			}
			ids = append(ids, s)
		}
		providers = serverconfig.SanitizeProviders(ids)
	}
	delete(raw, "mcp_server_ids")
	if len(providers) > serverconfig.MaxProviders {
		return nil, nil, invalid("mcp_server_ids selects %d providers; a chat selects at most %d", len(providers), serverconfig.MaxProviders)
	}
	return providers, preset, nil
}

// tools gathers the selected providers' tools. A provider that cannot be used is left out
// with a warning: one failing server does not fail the chat.
func (l *Loop) tools(ctx context.Context, providers []string) (map[string]*tool, []string) {
	out := map[string]*tool{}
	var warnings []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, id := range providers {
		if id == serverconfig.LemonadeProvider {
			for name, st := range l.builtin.ListTools() {
				schema := map[string]any{"type": "object"}
				if len(st.Tool.RawInputSchema) > 0 {
					_ = json.Unmarshal(st.Tool.RawInputSchema, &schema)
				}
				out[name] = &tool{chatName: name, name: name, openai: map[string]any{"type": "function",
					"function": map[string]any{"name": name, "description": st.Tool.Description, "parameters": schema}}}
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts, err := l.serverTools(ctx, id)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				warnings = append(warnings, fmt.Sprintf("MCP server %q left out of this chat: %v", id, err))
				return
			}
			for _, t := range ts {
				if _, native := out[t.chatName]; !native { // native names always win
					out[t.chatName] = t
				}
			}
		}()
	}
	wg.Wait()
	slices.Sort(warnings)
	return out, warnings
}

func (l *Loop) serverTools(ctx context.Context, id string) ([]*tool, error) {
	cfg, err := l.reg.GetServer(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("it is not registered")
	}
	cctx, cancel := context.WithTimeout(ctx, time.Duration(max(cfg.GetTimeoutMs(), 1000))*time.Millisecond)
	defer cancel()
	if err := l.up.Connect(cctx, cfg); err != nil {
		return nil, err
	}
	raws, err := l.up.Tools(cctx, id, false)
	if err != nil {
		return nil, err
	}
	var out []*tool
	for _, raw := range raws {
		e, err := catalog.Entry(cfg.GetId(), cfg.GetName(), raw)
		if err != nil {
			continue
		}
		out = append(out, &tool{chatName: e.GetChatName(), server: cfg, name: e.GetName(), openai: e.GetOpenaiTool().AsMap()})
	}
	return out, nil
}

// run is the loop itself.
func (l *Loop) run(ctx context.Context, req *openaichat.Request, tools map[string]*tool, warnings []string, out *emitter) error {
	chat := req.Chat
	var defs []any
	for _, t := range tools {
		defs = append(defs, t.openai)
	}
	slices.SortFunc(defs, func(a, b any) int {
		return strings.Compare(a.(map[string]any)["function"].(map[string]any)["name"].(string), b.(map[string]any)["function"].(map[string]any)["name"].(string))
	})
	if len(defs) > 0 {
		merged := append(append([]any{}, chat.GetTools().AsSlice()...), defs...)
		lv, err := structpb.NewList(merged)
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		chat.Tools = lv
	}
	var records []CallRecord
	var usage inferencev1.Usage
	var last openaichat.Completion
	for round := 1; ; round++ {
		if round > 1 {
			chat.ToolChoice = nil // the client's tool_choice applies to the first round only
		}
		var done openaichat.Completion
		st, err := l.inference.Chat(ctx, chat)
		if err != nil {
			return err
		}
		for {
			ch, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			done.Add(ch)
			if u := ch.GetUsage(); u != nil {
				usage.PromptTokens += u.GetPromptTokens()
				usage.CompletionTokens += u.GetCompletionTokens()
				usage.TotalTokens += u.GetTotalTokens()
			}
			out.content(ch)
		}
		last = done
		calls := done.ToolCalls()
		if done.FinishReason() != "tool_calls" || len(calls) == 0 {
			return out.finish(&last, last.FinishReason(), &usage, records, warnings)
		}
		for _, c := range calls {
			if tools[c.GetFunction().GetName()] == nil { // a tool of the client's own: its turn
				return out.finish(&last, "tool_calls", &usage, records, warnings)
			}
		}
		if round >= l.cfg.MaxRounds {
			return out.finish(&last, FinishMaxToolRounds, &usage, records, warnings)
		}
		results := l.runCalls(ctx, round, calls, tools, out)
		chat.Messages = append(chat.Messages, &inferencev1.ChatMessage{Role: "assistant", Content: done.Text(), ToolCalls: calls})
		for i, c := range calls {
			chat.Messages = append(chat.Messages, &inferencev1.ChatMessage{Role: "tool", ToolCallId: c.GetId(), Content: results[i].Output})
			r := results[i]
			r.Output = ""
			records = append(records, r)
		}
	}
}

// runCalls runs one round's tool calls in parallel.
func (l *Loop) runCalls(ctx context.Context, round int, calls []*inferencev1.ToolCall, tools map[string]*tool, out *emitter) []CallRecord {
	results := make([]CallRecord, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		t := tools[c.GetFunction().GetName()]
		rec := CallRecord{Round: round, ID: c.GetId(), Name: t.chatName, Arguments: c.GetFunction().GetArguments()}
		if t.server != nil {
			rec.ServerID = t.server.GetId()
		} else {
			rec.ServerID = serverconfig.LemonadeProvider
		}
		out.event(map[string]any{"type": "tool_call", "round": round, "id": rec.ID, "name": rec.Name, "server_id": rec.ServerID, "arguments": rec.Arguments})
		wg.Add(1)
		go func() {
			defer wg.Done()
			began := time.Now()
			text, isErr := l.call(ctx, t, c.GetFunction().GetArguments())
			rec.DurationMs = time.Since(began).Milliseconds()
			rec.IsError, rec.OutputBytes = isErr, len(text)
			if len(text) > l.cfg.MaxToolOutput {
				text = text[:l.cfg.MaxToolOutput] + fmt.Sprintf("\n[… Zest truncated this tool output: %d of %d bytes shown; tool output is untrusted input]", l.cfg.MaxToolOutput, rec.OutputBytes)
				rec.Truncated = true
			}
			rec.Output = text
			results[i] = rec
		}()
	}
	wg.Wait()
	for _, r := range results {
		preview := r.Output
		if len(preview) > 512 {
			preview = preview[:512] + "…"
		}
		out.event(map[string]any{"type": "tool_result", "round": r.Round, "id": r.ID, "name": r.Name, "server_id": r.ServerID,
			"is_error": r.IsError, "output_bytes": r.OutputBytes, "truncated": r.Truncated, "duration_ms": r.DurationMs, "output": preview})
	}
	return results
}

// call runs one tool and returns the text fed back to the model.
func (l *Loop) call(ctx context.Context, t *tool, args string) (string, bool) {
	var argMap map[string]any
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	if err := json.Unmarshal([]byte(args), &argMap); err != nil {
		return "The tool arguments are not a JSON object: " + err.Error(), true
	}
	if t.server == nil {
		st := l.builtin.GetTool(t.name)
		if st == nil {
			return "unknown tool " + t.name, true
		}
		r := mcp.CallToolRequest{}
		r.Params.Name, r.Params.Arguments = t.name, argMap
		began := time.Now()
		res, err := st.Handler(ctx, r)
		if err != nil {
			upstream.LogToolCall(ctx, l.log, serverconfig.LemonadeProvider, t.name, time.Since(began), upstream.Outcome(nil, err))
			return err.Error(), true
		}
		b, _ := json.Marshal(res)
		upstream.LogToolCall(ctx, l.log, serverconfig.LemonadeProvider, t.name, time.Since(began), upstream.Outcome(b, nil))
		return resultText(b)
	}
	params, _ := json.Marshal(map[string]any{"name": t.name, "arguments": json.RawMessage(args)})
	raw, err := l.up.CallTool(ctx, t.server, t.name, params, 0)
	if err != nil {
		return fmt.Sprintf("The tool failed: %v", err), true
	}
	return resultText(raw)
}

// resultText flattens an MCP CallToolResult into text for the model.
func resultText(raw []byte) (string, bool) {
	var r struct {
		Content []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			MimeType string `json:"mimeType"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return string(raw), false
	}
	var parts []string
	for _, c := range r.Content {
		switch c.Type {
		case "text":
			parts = append(parts, c.Text)
		default:
			parts = append(parts, fmt.Sprintf("[%s content, %s]", c.Type, c.MimeType))
		}
	}
	if len(parts) == 0 && len(r.StructuredContent) > 0 {
		parts = append(parts, string(r.StructuredContent))
	}
	return strings.Join(parts, "\n"), r.IsError
}
