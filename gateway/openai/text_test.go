package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/lib/grpctest"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeText is TextService behind the edge: it records requests and answers with fixed pieces.
type fakeText struct {
	inferencev1.UnimplementedTextServiceServer
	mu   sync.Mutex
	reqs []any
}

func (f *fakeText) note(r any) { f.mu.Lock(); f.reqs = append(f.reqs, r); f.mu.Unlock() }

func (f *fakeText) Embeddings(_ context.Context, req *inferencev1.EmbeddingsRequest) (*inferencev1.EmbeddingsResponse, error) {
	f.note(req)
	if req.GetModel() == "nope" {
		return nil, status.Error(codes.NotFound, `model "nope" is not known`)
	}
	out := &inferencev1.EmbeddingsResponse{Usage: &inferencev1.Usage{PromptTokens: 2, TotalTokens: 2}}
	for range req.GetInput() {
		out.Data = append(out.Data, &inferencev1.Embedding{Vector: []float32{0.6, -0.8}})
	}
	return out, nil
}

func (f *fakeText) Completions(req *inferencev1.CompletionsRequest, stream inferencev1.TextService_CompletionsServer) error {
	f.note(req)
	for _, c := range []*inferencev1.CompletionsResponse{
		{Choices: []*inferencev1.CompletionChoice{{Index: 0, Text: "hello "}}},
		{Choices: []*inferencev1.CompletionChoice{{Index: 0, Text: "world", FinishReason: "stop"}}},
		{Usage: &inferencev1.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}},
	} {
		c.Model, c.Created = req.GetModel(), 7
		if err := stream.Send(c); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeText) Responses(req *inferencev1.ResponsesRequest, stream inferencev1.TextService_ResponsesServer) error {
	f.note(req)
	pieces := []*inferencev1.ResponsesResponse{{TextDelta: "hello "}, {TextDelta: "world"},
		{FunctionCall: &inferencev1.ResponsesFunctionCall{Index: 1, CallId: "call_1", Name: "f", ArgumentsDelta: `{"a":`}},
		{FunctionCall: &inferencev1.ResponsesFunctionCall{Index: 1, ArgumentsDelta: `1}`}},
		{Status: "completed", Usage: &inferencev1.Usage{PromptTokens: 1, CompletionTokens: 3, TotalTokens: 4}}}
	for _, p := range pieces {
		if err := stream.Send(p); err != nil {
			return err
		}
	}
	return nil
}

func newTextEdge(t *testing.T) (string, *fakeText) {
	t.Helper()
	f := &fakeText{}
	cc := grpctest.Loopback(t, func(s *grpc.Server) { inferencev1.RegisterTextServiceServer(s, f) })
	api := &API{Text: inferencev1.NewTextServiceClient(cc), Forward: func(r *http.Request) context.Context { return r.Context() }}
	mux := http.NewServeMux()
	api.Register(mux, "/api/v1/", func(h http.Handler) http.Handler { return httpguard.LimitBody(bodyLimit, WriteError, h) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/api/v1/", f
}

func TestEmbeddingsRoute(t *testing.T) {
	url, f := newTextEdge(t)
	a := postJSON(t, url+"embeddings", `{"model":"m","input":["a","b"],"dimensions":2}`)
	var out struct {
		Object string `json:"object"`
		Model  string `json:"model"`
		Data   []struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
		Usage map[string]int `json:"usage"`
	}
	if err := json.Unmarshal(a.body, &out); err != nil || a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	if out.Object != "list" || out.Model != "m" || len(out.Data) != 2 || out.Data[1].Index != 1 || out.Data[1].Object != "embedding" ||
		out.Data[0].Embedding[1] != -0.8 || out.Usage["prompt_tokens"] != 2 {
		t.Fatalf("%s", a.body)
	}
	if got := f.reqs[0].(*inferencev1.EmbeddingsRequest); got.GetDimensions() != 2 || len(got.GetInput()) != 2 {
		t.Fatalf("sent %v", got)
	}
	a = postJSON(t, url+"embeddings", `{"model":"m","input":"a","encoding_format":"base64"}`)
	var b64 struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	_ = json.Unmarshal(a.body, &b64)
	raw, err := base64.StdEncoding.DecodeString(b64.Data[0].Embedding)
	if err != nil || len(raw) != 8 || math.Float32frombits(binary.LittleEndian.Uint32(raw[4:])) != -0.8 {
		t.Fatalf("base64 embedding %s: %v", a.body, err)
	}
	if a = postJSON(t, url+"embeddings", `{"model":"nope","input":"a"}`); a.status != 404 {
		t.Fatalf("unknown model: %d %s", a.status, a.body)
	}
}

func TestCompletionsRoute(t *testing.T) {
	url, _ := newTextEdge(t)
	a := postJSON(t, url+"completions", `{"model":"m","prompt":"hi"}`)
	var out struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage map[string]int `json:"usage"`
	}
	if err := json.Unmarshal(a.body, &out); err != nil || a.status != 200 || out.Object != "text_completion" || !strings.HasPrefix(out.ID, "cmpl-") ||
		out.Choices[0].Text != "hello world" || out.Choices[0].FinishReason != "stop" || out.Usage["total_tokens"] != 3 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	a = postJSON(t, url+"completions", `{"model":"m","prompt":["hi"],"stream":true,"stream_options":{"include_usage":true}}`)
	var events []string
	sc := bufio.NewScanner(bytes.NewReader(a.body))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, d)
		}
	}
	if a.header.Get("Content-Type") != "text/event-stream" || len(events) != 4 || events[3] != "[DONE]" ||
		!strings.Contains(events[0], `"text":"hello "`) || !strings.Contains(events[2], `"total_tokens":3`) {
		t.Fatalf("stream %q", events)
	}
}

func TestResponsesRoute(t *testing.T) {
	url, f := newTextEdge(t)
	a := postJSON(t, url+"responses", `{"model":"m","input":[{"role":"user","content":"hi"}],"instructions":"be brief",
		"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":{"type":"function","name":"f"},"max_output_tokens":5}`)
	var out struct {
		ID     string `json:"id"`
		Object string `json:"object"`
		Status string `json:"status"`
		Output []struct {
			Type      string `json:"type"`
			Status    string `json:"status"`
			CallID    string `json:"call_id"`
			Arguments string `json:"arguments"`
			Content   []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
		Usage map[string]any `json:"usage"`
	}
	if err := json.Unmarshal(a.body, &out); err != nil || a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	if out.Object != "response" || !strings.HasPrefix(out.ID, "resp_") || out.Status != "completed" || len(out.Output) != 2 ||
		out.Output[0].Content[0].Text != "hello world" || out.Output[1].Type != "function_call" || out.Output[1].Arguments != `{"a":1}` ||
		out.Output[1].CallID != "call_1" || out.Output[1].Status != "completed" || out.Usage["output_tokens"] != 3.0 {
		t.Fatalf("%s", a.body)
	}
	sent := f.reqs[0].(*inferencev1.ResponsesRequest)
	if sent.GetInstructions() != "be brief" || sent.GetMaxOutputTokens() != 5 || sent.GetToolChoice().GetStructValue().GetFields()["name"].GetStringValue() != "f" {
		t.Fatalf("sent %v", sent)
	}

	a = postJSON(t, url+"responses", `{"model":"m","input":"hi","stream":true}`)
	var types []string
	sc := bufio.NewScanner(bytes.NewReader(a.body))
	for sc.Scan() {
		if e, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			types = append(types, e)
		}
		// OpenAI adds a message with no content; its text part comes in content_part.added
		// (the OpenAI Node SDK's responses.stream() fails on a part that is there already).
		var ev struct {
			Type string
			Item struct {
				Type    string
				Content []any
			}
			Part struct{ Type, Text string }
		}
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Unmarshal([]byte(data), &ev) == nil {
			if ev.Type == "response.output_item.added" && ev.Item.Type == "message" && (ev.Item.Content == nil || len(ev.Item.Content) != 0) {
				t.Errorf("a message added with content: %s", data)
			}
			if ev.Type == "response.content_part.added" && (ev.Part.Type != "output_text" || ev.Part.Text != "") {
				t.Errorf("a text part added with text: %s", data)
			}
		}
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.done", "response.content_part.done",
		"response.output_item.done", "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done", "response.completed"}
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Fatalf("events\n%q\nwant\n%q", types, want)
	}
}

func TestTextRoutesRefuseBadInput(t *testing.T) {
	url, f := newTextEdge(t)
	for _, c := range []struct {
		route, body, param, says string
	}{
		{"embeddings", `{"input":"a"}`, "model", "model is required"},
		{"embeddings", `{"model":1,"input":"a"}`, "model", "model must be a string, not a number"},
		{"embeddings", `{"model":"m"}`, "input", "input is required"},
		{"embeddings", `{"model":"m","input":{"a":1}}`, "input", "input must be a string or an array of strings, not an object"},
		{"embeddings", `{"model":"m","input":[1,2,3]}`, "input", "tokens are not served"},
		{"embeddings", `{"model":"m","input":[[1,2]]}`, "input", "tokens are not served"},
		{"embeddings", `{"model":"m","input":["a",true]}`, "input[1]", "input[1] must be a string"},
		{"embeddings", `{"model":"m","input":[]}`, "input", "send 1 to 2048"},
		{"embeddings", `{"model":"m","input":["a",""]}`, "input", "input[1] is empty"},
		{"embeddings", `{"model":"m","input":"a","encoding_format":"int8"}`, "encoding_format", "use float or base64"},
		{"embeddings", `{"model":"m","input":"a","dimensions":0}`, "dimensions", "dimensions must be between 1"},
		{"embeddings", `{"model":"m","input":"a","dimensions":"8"}`, "dimensions", "dimensions must be an integer"},
		{"embeddings", `[1]`, "", "not a JSON object"},
		{"completions", `{"prompt":"a"}`, "model", "model is required"},
		{"completions", `{"model":"m"}`, "prompt", "prompt is required"},
		{"completions", `{"model":"m","prompt":[7,8]}`, "prompt", "tokens are not served"},
		{"completions", `{"model":"m","prompt":"a","max_tokens":0}`, "max_tokens", "between 1"},
		{"completions", `{"model":"m","prompt":"a","temperature":3}`, "temperature", "between 0 and 2"},
		{"completions", `{"model":"m","prompt":"a","stop":["a","b","c","d","e"]}`, "stop", "at most 4"},
		{"completions", `{"model":"m","prompt":"a","stop":7}`, "stop", "stop must be a string or an array of strings"},
		{"completions", `{"model":"m","prompt":"a","stream":"yes"}`, "stream", "stream must be true or false"},
		{"completions", `{"model":"m","prompt":"a","n":2}`, "n", "n must be 1"},
		{"completions", `{"model":"m","prompt":"a","echo":true}`, "echo", "echo is not served"},
		{"responses", `{"input":"a"}`, "model", "model is required"},
		{"responses", `{"model":"m"}`, "input", "input is required"},
		{"responses", `{"model":"m","input":5}`, "input", "input must be a string or an array of input items, not a number"},
		{"responses", `{"model":"m","input":[]}`, "input", "input holds no items"},
		{"responses", `{"model":"m","input":["hi"]}`, "input[0]", "input[0] must be an input item object"},
		{"responses", `{"model":"m","input":[{"role":"robot","content":"x"}]}`, "input[0].role", "must be one of user"},
		{"responses", `{"model":"m","input":[{"role":"user","content":3}]}`, "input[0].content", "a string or an array of content parts"},
		{"responses", `{"model":"m","input":[{"type":"function_call_output","output":"x"}]}`, "input[0].call_id", "must be a string"},
		{"responses", `{"model":"m","input":"a","tools":{}}`, "tools", "tools must be an array"},
		{"responses", `{"model":"m","input":"a","tools":[{"type":"function","function":{"name":"f"}}]}`, "tools[0].name", "Responses tools are"},
		{"responses", `{"model":"m","input":"a","tool_choice":"always"}`, "tool_choice", "is not one of"},
		{"responses", `{"model":"m","input":"a","tool_choice":{"type":"function","name":"g"}}`, "tool_choice", "not among"},
		{"responses", `{"model":"m","input":"a","tool_choice":"required"}`, "tool_choice", "needs tools"},
		{"responses", `{"model":"m","input":"a","previous_response_id":"resp_1"}`, "previous_response_id", "Zest keeps no responses"},
		{"responses", `{"model":"m","input":"a","max_output_tokens":-1}`, "max_output_tokens", "between 1"},
	} {
		a := postJSON(t, url+c.route, c.body)
		msg, param := openAIError(t, a, 400)
		if p, _ := param.(string); p != c.param || !strings.Contains(msg, c.says) || decoderText.MatchString(msg) {
			t.Errorf("%s %s: param %v message %q; want param %q saying %q", c.route, c.body, param, msg, c.param, c.says)
		}
	}
	for _, route := range []string{"embeddings", "completions", "responses"} {
		big := `{"model":"m","input":"` + strings.Repeat("x", bodyLimit) + `"}`
		a := postJSON(t, url+route, big)
		if msg, _ := openAIError(t, a, 413); !strings.Contains(msg, "Request body too large") {
			t.Errorf("%s over the limit: %q", route, msg)
		}
	}
	if len(f.reqs) != 0 {
		t.Fatalf("refused requests reached the engine: %v", f.reqs)
	}
}
