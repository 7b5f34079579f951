package builtin

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func cosine(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s / norm(a) / norm(b)
}

func TestEmbeddings(t *testing.T) {
	e := New(time.Now())
	resp, err := e.Embeddings(context.Background(), &inferencev1.EmbeddingsRequest{Model: Embed,
		Input: []string{"the cat sat on the mat", "the cat sat on the mat", "The cat sat on a mat", "quantum chromodynamics lattice"}})
	if err != nil {
		t.Fatal(err)
	}
	d := resp.GetData()
	if len(d) != 4 {
		t.Fatalf("%d embeddings for 4 inputs", len(d))
	}
	for i, x := range d {
		if len(x.GetVector()) != DefaultEmbeddingDimensions || math.Abs(norm(x.GetVector())-1) > 1e-5 {
			t.Fatalf("embedding %d: %d dimensions, norm %g; want %d, 1", i, len(x.GetVector()), norm(x.GetVector()), DefaultEmbeddingDimensions)
		}
	}
	if !slices.Equal(d[0].GetVector(), d[1].GetVector()) {
		t.Fatal("equal texts gave different vectors")
	}
	near, far := cosine(d[0].GetVector(), d[2].GetVector()), cosine(d[0].GetVector(), d[3].GetVector())
	if near <= far || near < 0.5 {
		t.Fatalf("cosine of near texts %g, of unrelated ones %g: want near > far", near, far)
	}
	if u := resp.GetUsage(); u.GetPromptTokens() != 6+6+6+3 || u.GetTotalTokens() != u.GetPromptTokens() {
		t.Fatalf("usage %v", u)
	}
	for _, dims := range []int32{1, 3, 1536, MaxEmbeddingDimensions} {
		r, err := e.Embeddings(context.Background(), &inferencev1.EmbeddingsRequest{Model: Embed, Input: []string{"x"}, Dimensions: dims})
		if err != nil {
			t.Fatal(err)
		}
		if v := r.GetData()[0].GetVector(); len(v) != int(dims) || math.Abs(norm(v)-1) > 1e-5 {
			t.Fatalf("dimensions %d: got %d, norm %g", dims, len(v), norm(v))
		}
	}
}

func TestEmbeddingsRefusals(t *testing.T) {
	e := New(time.Now())
	many := make([]string, MaxEmbeddingInputs+1)
	for i := range many {
		many[i] = "x"
	}
	for name, c := range map[string]struct {
		req  *inferencev1.EmbeddingsRequest
		kind error
		want string
	}{
		"chat model":      {&inferencev1.EmbeddingsRequest{Model: LLM, Input: []string{"x"}}, ErrWrongModel, "use builtin-embed"},
		"no input":        {&inferencev1.EmbeddingsRequest{Model: Embed}, ErrBadRequest, "input holds 0 texts"},
		"too many":        {&inferencev1.EmbeddingsRequest{Model: Embed, Input: many}, ErrBadRequest, "send 1 to 2048"},
		"empty text":      {&inferencev1.EmbeddingsRequest{Model: Embed, Input: []string{"a", ""}}, ErrBadRequest, "input[1] is empty"},
		"too many dims":   {&inferencev1.EmbeddingsRequest{Model: Embed, Input: []string{"a"}, Dimensions: MaxEmbeddingDimensions + 1}, ErrBadRequest, "dimensions 4097"},
		"negative dims":   {&inferencev1.EmbeddingsRequest{Model: Embed, Input: []string{"a"}, Dimensions: -1}, ErrBadRequest, "dimensions -1"},
		"too many floats": {&inferencev1.EmbeddingsRequest{Model: Embed, Input: many[:MaxEmbeddingInputs], Dimensions: MaxEmbeddingDimensions}, ErrBadRequest, "over the 4194304"},
		"embed for chat":  {&inferencev1.EmbeddingsRequest{Model: "x", Input: []string{"a"}}, ErrWrongModel, `"x"`},
	} {
		_, err := e.Embeddings(context.Background(), c.req)
		if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %v naming %q", name, err, c.kind, c.want)
		}
	}
}

func TestCompletions(t *testing.T) {
	e := New(time.Now())
	var chunks []*inferencev1.CompletionsResponse
	err := e.Completions(context.Background(), &inferencev1.CompletionsRequest{Model: LLM, Prompt: []string{"say hello world", "two. three four"},
		Stop: []string{"."}}, func(c *inferencev1.CompletionsResponse) error { chunks = append(chunks, c); return nil })
	if err != nil {
		t.Fatal(err)
	}
	text, finish := map[int32]string{}, map[int32]string{}
	for _, c := range chunks {
		for _, ch := range c.GetChoices() {
			text[ch.GetIndex()] += ch.GetText()
			if ch.GetFinishReason() != "" {
				finish[ch.GetIndex()] = ch.GetFinishReason()
			}
		}
	}
	if text[0] != "builtin-llm heard: say hello world" || text[1] != "builtin-llm heard: two" || finish[0] != "stop" || finish[1] != "stop" {
		t.Fatalf("texts %q finish %q", text, finish)
	}
	last := chunks[len(chunks)-1]
	if len(last.GetChoices()) != 0 || last.GetUsage().GetPromptTokens() != 3+3 || last.GetUsage().GetCompletionTokens() != 5+3 {
		t.Fatalf("last chunk %v", last)
	}

	chunks = nil
	err = e.Completions(context.Background(), &inferencev1.CompletionsRequest{Model: LLM, Prompt: []string{"a b c"}, MaxTokens: ptr(int32(2))},
		func(c *inferencev1.CompletionsResponse) error { chunks = append(chunks, c); return nil })
	if err != nil || len(chunks) != 2+1+1 || chunks[2].GetChoices()[0].GetFinishReason() != "length" {
		t.Fatalf("max_tokens 2: %v %v", err, chunks)
	}
	if err := e.Completions(context.Background(), &inferencev1.CompletionsRequest{Model: Embed, Prompt: []string{"x"}}, nil); !errors.Is(err, ErrWrongModel) {
		t.Fatalf("builtin-embed completing: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

func collectResponse(t *testing.T, e *Engine, req *inferencev1.ResponsesRequest) (string, []*inferencev1.ResponsesResponse) {
	t.Helper()
	var pieces []*inferencev1.ResponsesResponse
	if err := e.Responses(context.Background(), req, func(p *inferencev1.ResponsesResponse) error { pieces = append(pieces, p); return nil }); err != nil {
		t.Fatal(err)
	}
	var text string
	for _, p := range pieces {
		text += p.GetTextDelta()
	}
	return text, pieces
}

func TestResponses(t *testing.T) {
	e := New(time.Now())
	text, pieces := collectResponse(t, e, &inferencev1.ResponsesRequest{Model: LLM, Input: structpb.NewStringValue("hello there")})
	if text != "builtin-llm heard: hello there" || pieces[len(pieces)-1].GetStatus() != "completed" {
		t.Fatalf("text %q, last %v", text, pieces[len(pieces)-1])
	}
	items, _ := structpb.NewValue([]any{
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": `weather in {"city":"Paris"} please`}}},
		map[string]any{"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": `{"city":"Paris"}`},
		map[string]any{"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
	})
	if text, _ = collectResponse(t, e, &inferencev1.ResponsesRequest{Model: LLM, Input: items}); text != "The tool returned: sunny" {
		t.Fatalf("after a function_call_output: %q", text)
	}
	choice, _ := structpb.NewValue(map[string]any{"type": "function", "name": "weather"})
	_, pieces = collectResponse(t, e, &inferencev1.ResponsesRequest{Model: LLM, Input: items, ToolChoice: choice})
	fc := pieces[0].GetFunctionCall()
	if len(pieces) != 2 || fc.GetName() != "weather" || fc.GetArgumentsDelta() != `{"city":"Paris"}` || !strings.HasPrefix(fc.GetCallId(), "call_") {
		t.Fatalf("function call pieces %v", pieces)
	}
	text, pieces = collectResponse(t, e, &inferencev1.ResponsesRequest{Model: LLM, Input: structpb.NewStringValue("a b c d"), MaxOutputTokens: ptr(int32(1))})
	if last := pieces[len(pieces)-1]; text != "builtin-llm " || last.GetStatus() != "incomplete" || last.GetIncompleteReason() != "max_output_tokens" {
		t.Fatalf("max_output_tokens 1: %q %v", text, last)
	}
	empty, _ := structpb.NewValue([]any{})
	if err := e.Responses(context.Background(), &inferencev1.ResponsesRequest{Model: LLM, Input: empty}, nil); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("empty input: %v", err)
	}
}

func TestEmbedModelListed(t *testing.T) {
	for _, m := range New(time.Now()).Models() {
		if m.GetId() == Embed {
			if !slices.Contains(m.GetLabels(), "embeddings") || !strings.Contains(m.GetDescription(), "not semantic") {
				t.Fatalf("builtin-embed listed as %v", m)
			}
			return
		}
	}
	t.Fatal("builtin-embed is not in the model list")
}
