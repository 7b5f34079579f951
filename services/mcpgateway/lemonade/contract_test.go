package lemonade

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	userdocs "github.com/zestmcp/zest/docs/user"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// lemonadeContract is testdata/lemonade-mcp-tools.json: Lemonade's six tools as its
// docs/api/mcp.md documents them (the file names its source, commit and date).
type lemonadeContract struct {
	Source string `json:"source"`
	Commit string `json:"commit"`
	Date   string `json:"date"`
	Tools  map[string]struct {
		Required  []string          `json:"required"`
		Arguments map[string]string `json:"arguments"`
	} `json:"tools"`
}

func readContract(t *testing.T) lemonadeContract {
	t.Helper()
	b, err := os.ReadFile("testdata/lemonade-mcp-tools.json")
	if err != nil {
		t.Fatal(err)
	}
	var c lemonadeContract
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.Source == "" || len(c.Commit) != 40 || c.Date == "" || len(c.Tools) != 6 {
		t.Fatalf("the fixture must name its source, commit and date, and hold Lemonade's six tools: %+v", c)
	}
	return c
}

// toolsList is tools/list of a server with every built-in tool registered, as /mcp has them.
func toolsList(t *testing.T) map[string]mcp.Tool {
	t.Helper()
	srv := server.NewMCPServer("zest-test", "0")
	tools := New(models{}, nil, Dirs{})
	tools.Register(srv)
	NewModelTools(nil).Register(srv)
	NewMedia(tools, nil).Register(srv)
	resp := srv.HandleMessage(t.Context(), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	b, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Result struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	got := map[string]mcp.Tool{}
	for _, tl := range out.Result.Tools {
		var s mcp.ToolInputSchema
		if err := json.Unmarshal(tl.InputSchema, &s); err != nil {
			t.Fatalf("%s: %v", tl.Name, err)
		}
		got[tl.Name] = mcp.Tool{Name: tl.Name, InputSchema: s}
	}
	return got
}

// TestToolsListMatchesLemonade: tools/list holds Lemonade's six tools with exactly the
// argument names and required arguments of its docs/api/mcp.md, and the same JSON type for
// each argument where Lemonade's schema names one; Zest's additional tools may follow.
func TestToolsListMatchesLemonade(t *testing.T) {
	want := readContract(t)
	got := toolsList(t)
	for name, w := range want.Tools {
		tl, ok := got[name]
		if !ok {
			t.Errorf("tools/list has no %s (Lemonade %s)", name, want.Commit[:9])
			continue
		}
		props := tl.InputSchema.Properties
		if g, w := slices.Sorted(maps.Keys(props)), slices.Sorted(maps.Keys(w.Arguments)); !slices.Equal(g, w) {
			t.Errorf("%s arguments:\n got %v\nwant %v", name, g, w)
		}
		if g, w := slices.Sorted(slices.Values(tl.InputSchema.Required)), slices.Sorted(slices.Values(w.Required)); !slices.Equal(g, w) {
			t.Errorf("%s required: got %v, want %v", name, g, w)
		}
		for arg, typ := range w.Arguments {
			p, _ := props[arg].(map[string]any)
			if g, ok := p["type"].(string); ok && typ != "" && g != typ {
				t.Errorf("%s.%s is a %s; Lemonade's is a %s", name, arg, g, typ)
			}
		}
	}
}

// TestListModelsShape: Lemonade's summary and {loaded, available, suggested_to_pull,
// recommended_chat_model}; both lists asked for by default, and each left out when its
// argument is false.
func TestListModelsShape(t *testing.T) {
	rec := &listRecorder{models: models{list: []*inferencev1.Model{
		model("img", img, loaded), model("chat", llm, loaded), model("av", llm, available), model("sg", llm, suggested),
	}}}
	tools := New(rec, nil, Dirs{})
	res, _ := tools.listModels(t.Context(), callArgs(nil))
	if res.IsError || len(res.Content) != 2 {
		t.Fatalf("result %+v", res)
	}
	if !rec.got.GetIncludeAvailable() || !rec.got.GetIncludeSuggested() {
		t.Fatalf("asked for %v; both lists are the default", rec.got)
	}
	summary := res.Content[0].(mcp.TextContent).Text
	if !strings.Contains(summary, "img (image), chat (llm)") || !strings.Contains(summary, "Use `chat` for chat") {
		t.Errorf("summary %q", summary)
	}
	var out struct {
		Loaded      []map[string]any `json:"loaded"`
		Available   []map[string]any `json:"available"`
		Suggested   []map[string]any `json:"suggested_to_pull"`
		Recommended *string          `json:"recommended_chat_model"`
	}
	if err := json.Unmarshal([]byte(res.Content[1].(mcp.TextContent).Text), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Loaded) != 2 || len(out.Available) != 1 || len(out.Suggested) != 1 || out.Recommended == nil || *out.Recommended != "chat" {
		t.Fatalf("lists %+v", out)
	}
	if out.Available[0]["model_name"] != "av" || out.Available[0]["downloaded"] != true || out.Suggested[0]["model_name"] != "sg" {
		t.Errorf("entries %+v %+v", out.Available, out.Suggested)
	}
	tools.listModels(t.Context(), callArgs(map[string]any{"include_available": false, "include_suggested": false}))
	if rec.got.GetIncludeAvailable() || rec.got.GetIncludeSuggested() {
		t.Errorf("false not passed on: %v", rec.got)
	}
}

type listRecorder struct {
	models
	got *inferencev1.ListModelsRequest
}

func (l *listRecorder) ListModels(ctx context.Context, r *inferencev1.ListModelsRequest, o ...grpc.CallOption) (*inferencev1.ListModelsResponse, error) {
	l.got = r
	return l.models.ListModels(ctx, r, o...)
}

// chunks is a chat stream of fixed chunks.
type chunks struct {
	grpc.ClientStream
	list []*inferencev1.ChatResponse
}

func (c *chunks) Recv() (*inferencev1.ChatResponse, error) {
	if len(c.list) == 0 {
		return nil, io.EOF
	}
	ch := c.list[0]
	c.list = c.list[1:]
	return ch, nil
}
func (c *chunks) Header() (metadata.MD, error) { return nil, nil }

// answering is a chat model that answers with fixed chunks, recording the request.
type answering struct {
	models
	got   *inferencev1.ChatRequest
	reply []*inferencev1.ChatResponse
}

func (a *answering) Chat(_ context.Context, r *inferencev1.ChatRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[inferencev1.ChatResponse], error) {
	a.got = r
	return &chunks{list: a.reply}, nil
}

func delta(content, reasoning string, calls ...*inferencev1.ToolCall) *inferencev1.ChatResponse {
	return &inferencev1.ChatResponse{Delta: &inferencev1.ChatMessage{Content: content, ReasoningContent: reasoning, ToolCalls: calls}}
}

// TestChatAsLemonadeAnswers: thinking is off unless chat_template_kwargs turns it on; the
// answer is the text, the reasoning when the text is empty, and "tool_calls: <json>" after it
// when the model called tools.
func TestChatAsLemonadeAnswers(t *testing.T) {
	msgs := []any{map[string]any{"role": "user", "content": "x"}}
	a := &answering{models: models{list: []*inferencev1.Model{model("chat", llm, loaded)}}}
	tools := New(a, nil, Dirs{})

	a.reply = []*inferencev1.ChatResponse{delta("", "let me think"), delta("hello", "")}
	res, _ := tools.chat(t.Context(), callArgs(map[string]any{"messages": msgs, "chat_template_kwargs": map[string]any{"foo": "bar"}}))
	if res.IsError || len(res.Content) != 1 || res.Content[0].(mcp.TextContent).Text != "hello" {
		t.Fatalf("content answer %+v", res)
	}
	if kw := a.got.GetChatTemplateKwargs().AsMap(); a.got.EnableThinking == nil || a.got.GetEnableThinking() || kw["foo"] != "bar" {
		t.Fatalf("sent enable_thinking %v, chat_template_kwargs %v; want thinking off and the caller's kwargs", a.got.EnableThinking, kw)
	}

	a.reply = []*inferencev1.ChatResponse{delta("", "only "), delta("", "thoughts")}
	res, _ = tools.chat(t.Context(), callArgs(map[string]any{"messages": msgs, "chat_template_kwargs": map[string]any{"enable_thinking": true}}))
	if res.IsError || res.Content[0].(mcp.TextContent).Text != "only thoughts" {
		t.Fatalf("reasoning fallback %+v", res)
	}
	if v := a.got.GetChatTemplateKwargs().GetFields()["enable_thinking"]; v.GetBoolValue() != true || a.got.EnableThinking != nil {
		t.Fatalf("the caller's enable_thinking was overridden: %v, %v", v, a.got.EnableThinking)
	}

	call := &inferencev1.ToolCall{Id: "call_1", Type: "function", Function: &inferencev1.FunctionCall{Name: "f", Arguments: `{"a":1}`}}
	a.reply = []*inferencev1.ChatResponse{delta("", "", call)}
	tool := map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{"type": "object"}}}
	res, _ = tools.chat(t.Context(), callArgs(map[string]any{"messages": msgs, "tools": []any{tool}, "tool_choice": "required", "seed": 7.0,
		"response_format": map[string]any{"type": "json_object"}}))
	if res.IsError || len(res.Content) != 2 {
		t.Fatalf("tool call answer %+v", res)
	}
	calls, ok := strings.CutPrefix(res.Content[1].(mcp.TextContent).Text, "tool_calls: ")
	var parsed []map[string]any
	if !ok || json.Unmarshal([]byte(calls), &parsed) != nil || len(parsed) != 1 || parsed[0]["id"] != "call_1" {
		t.Fatalf("tool_calls block %q", res.Content[1].(mcp.TextContent).Text)
	}
	if a.got.GetSeed() != 7 || a.got.GetToolChoice() == nil || len(a.got.GetTools().GetValues()) != 1 ||
		a.got.GetResponseFormat().AsMap()["type"] != "json_object" {
		t.Fatalf("request sent %v", a.got)
	}
}

// TestTranscribeFormatsAgreeWithREST: srt and vtt are refused with the reason (the engines
// return no segment times), as the transcription route refuses them; the other formats give
// the transcript, then the route's JSON answer of that format.
func TestTranscribeFormatsAgreeWithREST(t *testing.T) {
	tools, m, dirs := newMedia(t)
	if err := os.WriteFile(dirs.Audio+"/a.wav", []byte("RIFF"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"srt", "vtt"} {
		m.audio = nil
		res, _ := tools.transcribe(t.Context(), callArgs(map[string]any{"audio_path": "a.wav", "response_format": f}))
		if !res.IsError || !strings.Contains(text(res), "needs segment times") || m.audio != nil {
			t.Errorf("%s: %s (engine called: %v)", f, text(res), m.audio != nil)
		}
	}
	for f, key := range map[string]string{"": "text", "json": "text", "text": "text", "verbose_json": "task"} {
		res, _ := tools.transcribe(t.Context(), callArgs(map[string]any{"audio_path": "a.wav", "response_format": f}))
		var full map[string]any
		if res.IsError || len(res.Content) != 2 || json.Unmarshal([]byte(res.Content[1].(mcp.TextContent).Text), &full) != nil || full[key] == nil {
			t.Errorf("%q: %+v", f, res)
		}
	}
}

// TestDocsTool: lemonade_docs lists the bundled pages (summary, then {"pages"}), returns one
// page's Markdown, and answers isError for a page it does not bundle.
func TestDocsTool(t *testing.T) {
	tools := New(models{}, nil, Dirs{})
	res, _ := tools.docs(t.Context(), callArgs(nil))
	var list struct {
		Pages []userdocs.Page `json:"pages"`
	}
	if res.IsError || len(res.Content) != 2 || json.Unmarshal([]byte(res.Content[1].(mcp.TextContent).Text), &list) != nil || len(list.Pages) == 0 {
		t.Fatalf("listing %+v", res)
	}
	for _, p := range list.Pages {
		res, _ := tools.docs(t.Context(), callArgs(map[string]any{"page": p.ID}))
		if md := res.Content[0].(mcp.TextContent).Text; res.IsError || len(md) != p.Bytes || !strings.HasPrefix(md, "# ") {
			t.Errorf("%s: %d bytes, isError %v", p.ID, len(md), res.IsError)
		}
	}
	res, _ = tools.docs(t.Context(), callArgs(map[string]any{"page": "user/nope"}))
	if !res.IsError || !strings.Contains(text(res), "user/lemonade") {
		t.Errorf("unknown page: %+v", res)
	}
}
