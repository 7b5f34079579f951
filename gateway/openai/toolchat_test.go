package openai

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/zestmcp/zest/lib/grpctest"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// fakeChat is ChatService: it records each request and answers with the items it was given.
type fakeChat struct {
	mcpgatewayv1.UnimplementedChatServiceServer
	items []*mcpgatewayv1.ChatResponse
	err   error // the answer instead of items
	mu    sync.Mutex
	reqs  []*mcpgatewayv1.ChatRequest
}

func (f *fakeChat) Chat(req *mcpgatewayv1.ChatRequest, s mcpgatewayv1.ChatService_ChatServer) error {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	for _, it := range f.items {
		if err := s.Send(it); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeChat) requests() []*mcpgatewayv1.ChatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*mcpgatewayv1.ChatRequest(nil), f.reqs...)
}

// newToolChatEdge serves the OpenAI routes under /api/v1/ in front of a fake ChatService
// (reached over loopback gRPC) that answers with items.
func newToolChatEdge(t *testing.T, items ...*mcpgatewayv1.ChatResponse) (string, *fakeChat) {
	t.Helper()
	f := &fakeChat{items: items}
	cc := grpctest.Loopback(t, func(s *grpc.Server) { mcpgatewayv1.RegisterChatServiceServer(s, f) })
	api := &API{ToolChat: mcpgatewayv1.NewChatServiceClient(cc), Forward: func(r *http.Request) context.Context { return r.Context() }}
	mux := http.NewServeMux()
	api.Register(mux, "/api/v1/", func(h http.Handler) http.Handler { return h })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/api/v1/", f
}

// toolLoop is what mcpgateway streams for a chat whose model called one MCP tool and then
// handed a call of the client's own tool back: the text, the call and its result, and the
// outcome. The outcome names no finish reason, so the edge's defaults show.
func toolLoop() []*mcpgatewayv1.ChatResponse {
	call := &mcpgatewayv1.ToolCallRecord{Round: 1, Id: "call_1", Name: "mcp_echo__echo", ServerId: "echo", Arguments: `{"text":"hi"}`,
		OutputBytes: 2, DurationMs: 5, OutputPreview: "hi"}
	return []*mcpgatewayv1.ChatResponse{
		{Kind: &mcpgatewayv1.ChatResponse_Chunk{Chunk: &inferencev1.ChatResponse{Id: "chatcmpl-1", Model: "m", Created: 7,
			Delta: &inferencev1.ChatMessage{Role: "assistant", Content: "checking"}}}},
		{Kind: &mcpgatewayv1.ChatResponse_Event{Event: &mcpgatewayv1.ToolEvent{Type: "tool_call", Call: call}}},
		{Kind: &mcpgatewayv1.ChatResponse_Event{Event: &mcpgatewayv1.ToolEvent{Type: "tool_result", Call: call}}},
		{Kind: &mcpgatewayv1.ChatResponse_Done{Done: &mcpgatewayv1.ChatDone{Id: "chatcmpl-1", Model: "m", Created: 7,
			Message: &inferencev1.ChatMessage{Role: "assistant", ToolCalls: []*inferencev1.ToolCall{
				{Index: 2, Id: "call_2", Type: "function", Function: &inferencev1.FunctionCall{Name: "get_weather", Arguments: "{}"}}}},
			Usage:     &inferencev1.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7},
			ToolCalls: []*mcpgatewayv1.ToolCallRecord{call}}}},
	}
}

const zestToolCall = `{"round":1,"id":"call_1","name":"mcp_echo__echo","server_id":"echo","arguments":"{\"text\":\"hi\"}",` +
	`"is_error":false,"output_bytes":2,"truncated":false,"duration_ms":5}`

// TestToolChatCompletion: the outcome as one chat.completion: the message as the plain chat
// renders it (content null beside tool calls, no index), finish_reason "stop" when the loop
// named none, usage, zest_tool_calls and zest_warnings ([] when none); the request reached
// ChatService with its selection and the chat's fields.
func TestToolChatCompletion(t *testing.T) {
	url, f := newToolChatEdge(t, toolLoop()...)
	a := postJSON(t, url+"chat/completions", `{"model":"m","preset":"helper","mcp_server_ids":["echo","lemonade"],"temperature":0.5,
		"messages":[{"role":"user","content":"hi"}]}`)
	want := `{"id":"chatcmpl-1","object":"chat.completion","created":7,"model":"m",
		"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":null,
			"tool_calls":[{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{}"}}]}}],
		"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7},
		"zest_tool_calls":[` + zestToolCall + `],"zest_warnings":[]}`
	if a.status != http.StatusOK || mustCompact(t, string(a.body)) != mustCompact(t, want) {
		t.Fatalf("%d\n%s\nwant\n%s", a.status, mustCompact(t, string(a.body)), mustCompact(t, want))
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests reached ChatService", len(reqs))
	}
	got, _ := protojson.Marshal(reqs[0])
	wantReq := `{"chat":{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.5},"preset":"helper","providers":{"ids":["echo","lemonade"]}}`
	if mustCompact(t, string(got)) != mustCompact(t, wantReq) {
		t.Fatalf("ChatService got\n%s\nwant\n%s", got, wantReq)
	}
}

// TestToolChatStream: the same loop as SSE: the model's chunk as the plain chat renders it,
// each event as a chunk with no choices and a zest_event when the request asks with
// zest_events (none otherwise: an OpenAI SDK would copy it into its final completion), the
// outcome as a last chunk whose tool calls keep their own index and whose finish_reason is
// null when the loop named none, with usage when asked for, then [DONE].
func TestToolChatStream(t *testing.T) {
	url, _ := newToolChatEdge(t, toolLoop()...)
	stream := func(t *testing.T, extra string) []string {
		a := postJSON(t, url+"chat/completions", `{"mcp_server_ids":["echo"],"stream":true,"stream_options":{"include_usage":true},`+extra+`
			"messages":[{"role":"user","content":"hi"}]}`)
		if a.status != http.StatusOK || a.header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%d %v %s", a.status, a.header, a.body)
		}
		var events []string
		sc := bufio.NewScanner(bytes.NewReader(a.body))
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events = append(events, d)
			}
		}
		return events
	}
	const head = `"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m"`
	want := []string{
		`{` + head + `,"choices":[{"index":0,"delta":{"role":"assistant","content":"checking"},"finish_reason":null}]}`,
		`{` + head + `,"choices":[],"zest_event":{"type":"tool_call","round":1,"id":"call_1","name":"mcp_echo__echo","server_id":"echo","arguments":"{\"text\":\"hi\"}"}}`,
		`{` + head + `,"choices":[],"zest_event":{"type":"tool_result","round":1,"id":"call_1","name":"mcp_echo__echo","server_id":"echo",` +
			`"is_error":false,"output_bytes":2,"truncated":false,"duration_ms":5,"output":"hi"}}`,
		`{` + head + `,"choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},"finish_reason":null}],` +
			`"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7},"zest_tool_calls":[` + zestToolCall + `],"zest_warnings":[]}`,
		`[DONE]`,
	}
	compare := func(t *testing.T, events, want []string) {
		if len(events) != len(want) {
			t.Fatalf("%d events, want %d: %q", len(events), len(want), events)
		}
		for i := range want[:len(want)-1] {
			if g, w := mustCompact(t, events[i]), mustCompact(t, want[i]); g != w {
				t.Errorf("event %d\n%s\nwant\n%s", i, g, w)
			}
		}
		if events[len(events)-1] != "[DONE]" {
			t.Errorf("last event %q", events[len(events)-1])
		}
	}
	t.Run("zest_events asked", func(t *testing.T) { compare(t, stream(t, `"zest_events":true,`), want) })
	t.Run("an OpenAI client", func(t *testing.T) {
		compare(t, stream(t, ""), []string{want[0], want[3], want[4]})
		compare(t, stream(t, `"zest_events":false,`), []string{want[0], want[3], want[4]})
	})
}

// TestToolChatRefusesBadFieldsByName: a tool chat's refusals name their field in error.param,
// as the plain chat's do, and none reaches ChatService.
func TestToolChatRefusesBadFieldsByName(t *testing.T) {
	url, f := newToolChatEdge(t, toolLoop()...)
	const user = `"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct {
		name, body string
		param      any
		want       string
	}{
		{"preset a number", `{"preset":5,` + user + `}`, "preset", "preset must be a preset id"},
		{"preset empty", `{"preset":"",` + user + `}`, "preset", "preset must be a preset id"},
		{"mcp_server_ids a string", `{"mcp_server_ids":"echo",` + user + `}`, "mcp_server_ids", "must be an array of provider ids"},
		{"mcp_server_ids holds a number", `{"mcp_server_ids":["echo",1],` + user + `}`, "mcp_server_ids", "must be an array of provider ids"},
		{"temperature too high", `{"preset":"helper","temperature":2.5,` + user + `}`, "temperature", "between 0 and 2, not 2.5"},
		{"messages missing", `{"preset":"helper"}`, "messages", "messages is required"},
		{"stream a string", `{"mcp_server_ids":[],"stream":"yes",` + user + `}`, "stream", "stream must be true or false"},
		{"zest_events a string", `{"mcp_server_ids":[],"zest_events":"yes",` + user + `}`, "zest_events", "zest_events must be true or false"},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg, param := openAIError(t, postJSON(t, url+"chat/completions", c.body), http.StatusBadRequest)
			if param != c.param || !strings.Contains(msg, c.want) {
				t.Fatalf("param %v, message %q; want param %v and %q", param, msg, c.param, c.want)
			}
		})
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("%d refused requests reached ChatService", n)
	}
}

// TestToolChatRefusalNamesItsField: a refusal of the tool loop that names its field (a
// BadRequest detail) is answered with that field in error.param.
func TestToolChatRefusalNamesItsField(t *testing.T) {
	url, f := newToolChatEdge(t)
	st, err := status.New(codes.InvalidArgument, "tool_choice names function \"x\", which this chat does not offer").
		WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "tool_choice"}}})
	if err != nil {
		t.Fatal(err)
	}
	f.err = st.Err()
	msg, param := openAIError(t, postJSON(t, url+"chat/completions", `{"mcp_server_ids":["echo"],"messages":[{"role":"user","content":"hi"}]}`), http.StatusBadRequest)
	if param != "tool_choice" || !strings.Contains(msg, "does not offer") {
		t.Fatalf("param %v, message %q", param, msg)
	}
}
