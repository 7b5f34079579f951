// Package toolchat runs the chat tool loop on the server: the tools of the providers a preset
// (narrowed by the request's, if any) or the request selects, as far as their servers' filters
// expose them, are offered to the model, the tool calls it makes are run — the built-in
// lemonade_* tools in process, external tools on their MCP servers — and the results are fed
// back, round after round, until the model answers or the round cap is reached. Any OpenAI
// client can use it; the loop streams each tool call and result as an event, which the edge
// sends to the clients that ask (chunks that carry a "zest_event" object and no choices).
package toolchat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/openaichat"
	"github.com/zestmcp/zest/lib/requestid"
	"github.com/zestmcp/zest/lib/tooloutput"
	"github.com/zestmcp/zest/lib/tracing"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/catalog"
	"github.com/zestmcp/zest/services/mcpgateway/incident"
	"github.com/zestmcp/zest/services/mcpgateway/oauthclient"
	"github.com/zestmcp/zest/services/mcpgateway/pins"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"github.com/zestmcp/zest/services/mcpgateway/toolsearch"
	"github.com/zestmcp/zest/services/mcpgateway/toolshape"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
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
	keys      keyauth.Keys
	log       *slog.Logger
	// pipeline is the tool-call pipeline every call of the loop goes through, and the one
	// rule of which servers the chat's caller may reach.
	pipeline *toolcall.Pipeline
	// search is the shared tool-search index of presets with tool_search (nil: none).
	search *toolsearch.Shared
}

// New returns the loop; builtin lists the lemonade_* tools; tools runs every call; keys tell
// administrators (who may see why an MCP server failed) from API users.
func New(cfg Config, inference inferencev1.InferenceServiceClient, reg registry.Registry, up *upstream.Manager, builtin *server.MCPServer, tools *toolcall.Pipeline, keys keyauth.Keys, log *slog.Logger, opts ...Option) *Loop {
	if cfg.MaxRounds <= 0 {
		cfg.MaxRounds = DefaultMaxRounds
	}
	if cfg.MaxToolOutput <= 0 {
		cfg.MaxToolOutput = DefaultMaxToolOutput
	}
	if log == nil {
		log = slog.Default()
	}
	l := &Loop{cfg: cfg, inference: inference, reg: reg, up: up, builtin: builtin, pipeline: tools, keys: keys, log: log}
	for _, o := range opts {
		o(l)
	}
	return l
}

// tool is one tool the loop can run.
type tool struct {
	chatName string
	server   *mcpgatewayv1.ServerConfig // nil for a built-in tool
	name     string                     // the tool's own name
	openai   map[string]any
	meta     bool // search_tools or call_tool of a chat with tool search
	// served is the name the model is offered (the chat_name unless the preset renames it),
	// and shape the preset's shaping, which merges the call's arguments.
	served string
	shape  *toolshape.Shape
}

// shaped are the tools as the preset serves them (toolshape): by the name the model is
// offered, the hidden ones left out.
func shaped(tools map[string]*tool, s *toolshape.Shape) map[string]*tool {
	out := make(map[string]*tool, len(tools))
	for _, t := range tools {
		t.served, t.shape = t.chatName, s
		if s == nil {
			out[t.chatName] = t
			continue
		}
		fn, _ := t.openai["function"].(map[string]any)
		desc, _ := fn["description"].(string)
		params, _ := fn["parameters"].(map[string]any)
		name, desc, params, ok := s.Function(t.chatName, desc, params)
		if !ok {
			continue
		}
		fn = maps.Clone(fn)
		fn["name"], fn["description"], fn["parameters"] = name, desc, params
		t.openai = map[string]any{"type": "function", "function": fn}
		t.served = name
		out[name] = t
	}
	return out
}

// serverID is the id of the tool's provider.
func (t *tool) serverID() string {
	if t.server != nil {
		return t.server.GetId()
	}
	return serverconfig.LemonadeProvider
}

func invalid(format string, a ...any) error {
	return status.Errorf(codes.InvalidArgument, format, a...)
}

// invalidField is invalid naming the request field it is about (BadRequest), which the edge
// answers as OpenAI's error.param.
func invalidField(field, format string, a ...any) error {
	msg := fmt.Sprintf(format, a...)
	st := status.New(codes.InvalidArgument, msg)
	if withField, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: msg}}}); err == nil {
		st = withField
	}
	return st.Err()
}

// maxNamesShown is how many tool names a refusal of tool_choice lists.
const maxNamesShown = 12

// checkToolChoice refuses, before any model call, a tool_choice the chat cannot honour: a
// function that neither the request's own tools nor the selected providers offer (a server
// left out offers none: its warning says why), or "required" with no tool at all. Handed to
// the model, such a choice came back as a call of a tool never offered.
func checkToolChoice(chat *inferencev1.ChatRequest, tools map[string]*tool, warnings []string) error {
	choice := chat.GetToolChoice()
	names := slices.Sorted(maps.Keys(tools))
	for _, t := range chat.GetTools().GetValues() {
		if n := t.GetStructValue().GetFields()["function"].GetStructValue().GetFields()["name"].GetStringValue(); n != "" && tools[n] == nil {
			names = append(names, n)
		}
	}
	if choice.GetStringValue() == "required" && len(names) == 0 {
		return invalidField("tool_choice", `tool_choice "required" needs tools, and this chat offers none%s`, leftOut(warnings))
	}
	name := choice.GetStructValue().GetFields()["function"].GetStructValue().GetFields()["name"].GetStringValue()
	if name == "" || slices.Contains(names, name) {
		return nil
	}
	if len(names) == 0 {
		return invalidField("tool_choice", "tool_choice names function %q, but this chat offers no tools%s", name, leftOut(warnings))
	}
	shown := names
	more := ""
	if len(shown) > maxNamesShown {
		shown, more = shown[:maxNamesShown], fmt.Sprintf(" and %d more", len(names)-maxNamesShown)
	}
	return invalidField("tool_choice", "tool_choice names function %q, which this chat does not offer: it offers %s%s%s",
		name, strings.Join(shown, ", "), more, leftOut(warnings))
}

// leftOut is what a refusal adds about the providers left out of the chat.
func leftOut(warnings []string) string {
	if len(warnings) == 0 {
		return ""
	}
	return " (" + strings.Join(warnings, "; ") + ")"
}

// Chat implements ChatService.
func (l *Loop) Chat(req *mcpgatewayv1.ChatRequest, stream mcpgatewayv1.ChatService_ChatServer) error {
	ctx := stream.Context()
	if req.GetChat() == nil {
		return invalid("chat is required: the OpenAI chat request (model, messages, …)")
	}
	chat := proto.Clone(req.GetChat()).(*inferencev1.ChatRequest)
	providers, preset, err := l.selection(ctx, req)
	if err != nil {
		return err
	}
	if preset != nil {
		if chat.GetModel() == "" {
			chat.Model = preset.GetModel()
		}
		if sp := preset.GetSystemPrompt(); sp != "" {
			chat.Messages = append([]*inferencev1.ChatMessage{{Role: "system", Content: sp}}, chat.GetMessages()...)
		}
	}
	if chat.GetModel() == "" {
		return invalid("model is required (or a preset that names one); GET /api/v1/models lists the models")
	}
	if len(chat.GetMessages()) == 0 {
		return invalid("messages must hold at least one message")
	}
	// Administrators may see what a failing MCP server said (its stderr, its exit); API
	// users get an incident id instead.
	admin := l.keys.CallerIsAdmin(ctx)
	tools, warnings := l.tools(ctx, providers, admin)
	shape := toolshape.New(preset.GetTools())
	tools = shaped(tools, shape)
	var search *searchMode
	if preset.GetToolSearch() && l.search != nil {
		// The model is offered the two meta-tools; the tools are what call_tool may call.
		search, tools = newSearchMode(tools, providers, shape), metaTools()
	}
	if err := checkToolChoice(chat, tools, warnings); err != nil {
		return err
	}
	out := &emitter{stream: stream, maxRounds: l.cfg.MaxRounds}
	for _, w := range warnings {
		out.event(&mcpgatewayv1.ToolEvent{Type: "warning", Message: w})
	}
	return l.run(ctx, chat, tools, warnings, out, admin, preset.GetId(), search)
}

// hide turns an upstream failure into what the caller may see (incident.Describe).
func (l *Loop) hide(ctx context.Context, admin bool, serverID, what string, err error) string {
	return incident.Describe(ctx, l.log, admin, serverID, what, err)
}

// selection resolves the preset and the providers. With a preset, the request's
// mcp_server_ids narrow the preset's providers: each must be one of them (a preset is what its
// author let a chat reach), else the chat is refused naming them.
func (l *Loop) selection(ctx context.Context, req *mcpgatewayv1.ChatRequest) ([]string, *mcpgatewayv1.Preset, error) {
	var preset *mcpgatewayv1.Preset
	if id := req.GetPreset(); id != "" {
		p, err := l.reg.GetPreset(ctx, id)
		if errors.Is(err, registry.ErrNotFound) {
			return nil, nil, invalid("preset %q is not known; GET /internal/mcp/presets lists them", id)
		}
		if err != nil {
			return nil, nil, status.Error(codes.Internal, err.Error())
		}
		preset = p
	}
	providers := preset.GetMcpServerIds()
	if req.GetProviders() != nil {
		asked := serverconfig.SanitizeProviders(req.GetProviders().GetIds())
		if preset != nil {
			for _, id := range asked {
				if !slices.Contains(providers, id) {
					selects := strings.Join(providers, ", ")
					if selects == "" {
						selects = "none"
					}
					return nil, nil, invalidField("mcp_server_ids", "mcp_server_ids names %q, which preset %q does not select (it selects %s): with a preset, mcp_server_ids may only narrow its providers",
						id, preset.GetId(), selects)
				}
			}
		}
		providers = asked
	}
	if len(providers) > serverconfig.MaxProviders {
		return nil, nil, invalid("mcp_server_ids selects %d providers; a chat selects at most %d", len(providers), serverconfig.MaxProviders)
	}
	return providers, preset, nil
}

// tools gathers the selected providers' tools. A provider that cannot be used is left out
// with a warning: one failing server does not fail the chat.
func (l *Loop) tools(ctx context.Context, providers []string, admin bool) (map[string]*tool, []string) {
	out := map[string]*tool{}
	var warnings []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, id := range providers {
		if id == serverconfig.LemonadeProvider {
			// Under mu: the goroutines of the servers named before it write out meanwhile.
			mu.Lock()
			for name, st := range l.builtin.ListTools() {
				schema := map[string]any{"type": "object"}
				if len(st.Tool.RawInputSchema) > 0 {
					_ = json.Unmarshal(st.Tool.RawInputSchema, &schema)
				}
				out[name] = &tool{chatName: name, name: name, openai: map[string]any{"type": "function",
					"function": map[string]any{"name": name, "description": st.Tool.Description, "parameters": schema}}}
			}
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts, err := l.serverTools(ctx, id)
			mu.Lock()
			defer mu.Unlock()
			var unknown *toolcall.UnknownServerError
			switch {
			case errors.As(err, &unknown):
				warnings = append(warnings, fmt.Sprintf("MCP server %q left out of this chat: it is not registered", id))
				return
			case err != nil:
				warnings = append(warnings, l.hide(ctx, admin, id, fmt.Sprintf("MCP server %q left out of this chat", id), err))
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
	// The one rule of who reaches a server: not registered, disabled or hidden from this
	// caller are the same unknown server, with the same warning.
	cfg, err := l.pipeline.Resolve(ctx, toolcall.EntryChat, id)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, time.Duration(max(cfg.GetTimeoutMs(), 1000))*time.Millisecond)
	defer cancel()
	raws, err := l.up.ListTools(cctx, cfg, false)
	if err != nil {
		return nil, err
	}
	var out []*tool
	for _, e := range catalog.Entries(cfg, raws, nil) { // only the tools its filters expose
		out = append(out, &tool{chatName: e.GetChatName(), server: cfg, name: e.GetName(), openai: e.GetOpenaiTool().AsMap()})
	}
	return out, nil
}

// run is the loop itself.
func (l *Loop) run(ctx context.Context, chat *inferencev1.ChatRequest, tools map[string]*tool, warnings []string, out *emitter, admin bool, preset string, search *searchMode) error {
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
	var records []*mcpgatewayv1.ToolCallRecord
	var usage inferencev1.Usage
	var last openaichat.Completion
	for round := 1; ; round++ {
		if round > 1 {
			chat.ToolChoice = nil // the client's tool_choice applies to the first round only
		}
		// A span per round (when tracing is on): the model's answer, then the tool calls it
		// asked for; every return below ends it.
		ctx, span := tracing.Start(ctx, "chat round")
		if span.IsRecording() {
			span.SetAttributes(attribute.Int("zest.chat.round", round), attribute.String("gen_ai.request.model", chat.GetModel()))
		}
		var done openaichat.Completion
		st, err := l.inference.Chat(ctx, chat)
		if err != nil {
			return tracing.End(span, err)
		}
		for {
			ch, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return tracing.End(span, err)
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
		if span.IsRecording() {
			span.SetAttributes(attribute.String("gen_ai.response.finish_reason", done.FinishReason()), attribute.Int("zest.chat.tool_calls", len(calls)))
		}
		if done.FinishReason() != "tool_calls" || len(calls) == 0 {
			return tracing.End(span, out.finish(&last, last.FinishReason(), &usage, records, warnings))
		}
		for _, c := range calls {
			if lookup(tools, search, c.GetFunction().GetName()) == nil { // a tool of the client's own: its turn
				return tracing.End(span, out.finish(&last, "tool_calls", &usage, records, warnings))
			}
		}
		if round >= l.cfg.MaxRounds {
			return tracing.End(span, out.finish(&last, FinishMaxToolRounds, &usage, records, warnings))
		}
		results := l.runCalls(ctx, round, calls, tools, out, admin, preset, search)
		span.End()
		chat.Messages = append(chat.Messages, &inferencev1.ChatMessage{Role: "assistant", Content: done.Text(), ToolCalls: calls})
		for i, c := range calls {
			chat.Messages = append(chat.Messages, &inferencev1.ChatMessage{Role: "tool", ToolCallId: c.GetId(), Content: results[i].output})
			records = append(records, results[i].rec)
		}
	}
}

// result is one tool call's record and the text fed back to the model.
type result struct {
	rec    *mcpgatewayv1.ToolCallRecord
	output string
	// shown is output without the marker, for the tool_result event's preview.
	shown string
}

// previewBytes is how much of a tool's output a tool_result event shows.
const previewBytes = 512

// runCalls runs one round's tool calls in parallel (of a chat with preset, if any). With
// tool search, search_tools is answered here and a call_tool is the call of the tool it names.
func (l *Loop) runCalls(ctx context.Context, round int, calls []*inferencev1.ToolCall, tools map[string]*tool, out *emitter, admin bool, preset string, search *searchMode) []result {
	results := make([]result, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		t := lookup(tools, search, c.GetFunction().GetName())
		var answer *ran // a meta-tool's answer given here, not a call
		if t.meta {
			if t.name == toolsearch.SearchToolName {
				r := l.searchTools(ctx, search, c.GetFunction().GetArguments())
				answer = &r
			} else if inner, innerCall, problem := search.resolveCall(c); problem != "" {
				answer = &ran{text: problem, isErr: true}
			} else {
				t, c = inner, innerCall
			}
		}
		rec := &mcpgatewayv1.ToolCallRecord{Round: int32(round), Id: c.GetId(), Name: t.served, Arguments: c.GetFunction().GetArguments(),
			ServerId: t.serverID()}
		if t.meta {
			rec.ServerId = "" // Zest's own tool search
		}
		out.event(&mcpgatewayv1.ToolEvent{Type: "tool_call", Call: proto.Clone(rec).(*mcpgatewayv1.ToolCallRecord)})
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A call whose server asks for approval waits here, alone: the round's other
			// calls go on.
			began := time.Now()
			var r ran
			if answer != nil {
				r = *answer
			} else {
				r = l.safeCall(ctx, t, c, rec, out, admin, preset)
			}
			text, isErr := r.text, r.isErr
			rec.DurationMs = time.Since(began).Milliseconds()
			rec.IsError, rec.OutputBytes = isErr, int64(len(text))
			// The model gets the text without the characters that hide or reorder what it
			// says, inside a marker naming where it begins and ends (lib/tooloutput); Zest's
			// own note of a cut follows the marker, outside what the tool wrote.
			text = tooloutput.Sanitize(text)
			note := ""
			if len(text) > l.cfg.MaxToolOutput {
				text = CutUTF8(text, l.cfg.MaxToolOutput)
				note = fmt.Sprintf("\n[… Zest truncated this tool output: %d of %d bytes shown; tool output is untrusted input]", l.cfg.MaxToolOutput, rec.OutputBytes)
				rec.Truncated = true
			}
			results[i] = result{rec: rec, output: tooloutput.Wrap(rec.GetServerId(), t.name, text) + note, shown: text + note}
		}()
	}
	wg.Wait()
	for _, r := range results {
		ev := proto.Clone(r.rec).(*mcpgatewayv1.ToolCallRecord)
		ev.OutputPreview = r.shown
		if len(ev.OutputPreview) > previewBytes {
			ev.OutputPreview = CutUTF8(ev.OutputPreview, previewBytes) + "…"
		}
		out.event(&mcpgatewayv1.ToolEvent{Type: "tool_result", Call: ev})
	}
	return results
}

// CutUTF8 returns at most n bytes of s, never splitting a UTF-8 character (a cut inside one
// would make the text invalid for every JSON and gRPC hop after it).
func CutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// safeCall is call on its own goroutine: a tool whose handler panics fails alone, with an
// incident id the log line carries, instead of taking mcpgateway down (gRPC's recovery does
// not reach goroutines a handler starts).
func (l *Loop) safeCall(ctx context.Context, t *tool, c *inferencev1.ToolCall, rec *mcpgatewayv1.ToolCallRecord, out *emitter, admin bool, preset string) (r ran) {
	defer func() {
		if p := recover(); p != nil {
			incident := requestid.New()
			l.log.ErrorContext(ctx, "tool call panicked", "tool", t.chatName, "incident", incident, "panic", p, "stack", string(debug.Stack()))
			r = failed(fmt.Sprintf("The tool failed: internal error (incident %s)", incident))
		}
	}()
	return l.call(ctx, t, c, rec, out, admin, preset)
}

// ran is what one tool call gave: the text fed back to the model, and whether it is an error.
type ran struct {
	text  string
	isErr bool
}

// failed is a call that gave no result: text for the model.
func failed(text string) ran { return ran{text: text, isErr: true} }

// call runs one tool through the tool-call pipeline (which records it) and returns the text
// fed back to the model. The tools were gathered when the chat began; an administrator may
// have changed the server since (moved, disabled, deleted or hidden it, filtered this tool
// out, asked for approval): the pipeline calls it as it is configured now, or not at all.
func (l *Loop) call(ctx context.Context, t *tool, c *inferencev1.ToolCall, rec *mcpgatewayv1.ToolCallRecord, out *emitter, admin bool, preset string) ran {
	args := c.GetFunction().GetArguments()
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	var argMap map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &argMap); err != nil || argMap == nil {
		return failed("The tool arguments are not a JSON object: send the arguments as one JSON object matching the tool's parameters")
	}
	merged, err := t.shape.Arguments(t.chatName, t.served, json.RawMessage(args))
	if err != nil { // a fixed argument sent with another value: the model may call again without it
		return failed("The tool was not called: " + err.Error())
	}
	server := serverconfig.LemonadeProvider
	if t.server != nil {
		server = t.server.GetId()
	}
	params, _ := json.Marshal(map[string]any{"name": t.name, "arguments": merged})
	held := &chatApprover{out: out, rec: rec}
	raw, err := l.pipeline.Invoke(ctx, &toolcall.Call{Entry: toolcall.EntryChat, Server: server, Tool: t.name, ChatName: t.served,
		Preset: preset, CallID: c.GetId(), Params: params, Approver: held})
	var unknown *toolcall.UnknownServerError
	var filtered *serverconfig.ToolFilteredError
	var refused *toolcall.ApprovalError
	var limited *toolcall.LimitError
	var rpcErr *upstream.RPCError
	var pinned *pins.HeldError
	var onBehalf *oauthclient.OnBehalfError
	switch {
	case held.asked && err == nil:
		rec.Approval = registry.ApprovalApproved
	case errors.As(err, &refused):
		rec.Approval = refused.State
	}
	switch {
	case err == nil:
		text, isErr := resultText(raw)
		return ran{text: text, isErr: isErr}
	case errors.As(err, &unknown):
		return failed(fmt.Sprintf("The tool is not available: MCP server %q is not registered (or not enabled)", server))
	case errors.As(err, &filtered):
		return failed(fmt.Sprintf("The tool is not available: MCP server %q no longer exposes %q (its tools_allow/tools_deny filter it out)", server, t.name))
	case errors.As(err, &pinned):
		return failed("The tool is not available: " + pinned.Error())
	case errors.As(err, &onBehalf): // the chat's caller has a key, no access token to exchange
		return failed("The tool is not available: " + onBehalf.Error())
	case errors.As(err, &refused):
		return failed(refused.Text)
	case errors.As(err, &limited): // the server's limits: the model may try again
		return failed("The tool was not called: " + limited.Error() + ". Call it again later, or go on without it.")
	case errors.As(err, &rpcErr): // the server's own JSON-RPC answer
		return failed(fmt.Sprintf("The tool failed: JSON-RPC error %d: %s", rpcErr.Code, rpcErr.Message))
	}
	return failed(l.hide(ctx, admin, server, "The tool failed", err))
}

// chatApprover tells the chat's client, with an approval_required event, that a call waits
// for an administrator (a chat has no MCP client to ask: whoever the server's approval_by
// names, an administrator decides).
type chatApprover struct {
	out   *emitter
	rec   *mcpgatewayv1.ToolCallRecord
	asked bool
}

// Held sends the approval_required event.
func (a *chatApprover) Held(_ context.Context, ap *mcpgatewayv1.Approval) {
	a.asked = true
	a.out.event(&mcpgatewayv1.ToolEvent{Type: "approval_required", Call: proto.Clone(a.rec).(*mcpgatewayv1.ToolCallRecord),
		ApprovalId: ap.GetId(), ApprovalExpires: ap.GetExpires(),
		Message: fmt.Sprintf("%s of MCP server %q waits for an administrator's approval until %s: POST /internal/mcp/approvals/%s/approve or /deny",
			ap.GetTool(), ap.GetServerId(), ap.GetExpires(), ap.GetId())})
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
