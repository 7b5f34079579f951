package openaiengine

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// fakeTextEngine serves /embeddings, a streamed /completions and a streamed /responses, and
// records each request body.
func fakeTextEngine(t *testing.T, seen map[string]string) *httptest.Server {
	t.Helper()
	events := func(w http.ResponseWriter, lines ...string) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, l := range lines {
			fmt.Fprintf(w, "%s\n\n", l)
			w.(http.Flusher).Flush()
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen[r.URL.Path] = string(b)
		switch r.URL.Path {
		case "/v1/embeddings":
			io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":1,"embedding":[0,1]},{"object":"embedding","index":0,"embedding":[0.6,0.8]}],"usage":{"prompt_tokens":2,"total_tokens":2}}`)
		case "/v1/completions":
			events(w, `data: {"id":"cmpl-1","created":5,"choices":[{"index":0,"text":"hel"}]}`,
				`data: {"id":"cmpl-1","created":5,"choices":[{"index":0,"text":"lo","finish_reason":"stop"}]}`,
				`data: {"id":"cmpl-1","created":5,"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`,
				`data: [DONE]`)
		case "/v1/responses":
			events(w, `event: response.created`+"\n"+`data: {"type":"response.created","response":{"id":"resp_1","created_at":9,"status":"in_progress"}}`,
				`data: {"type":"response.output_text.delta","output_index":0,"delta":"hi "}`,
				`data: {"type":"response.output_text.done","output_index":0,"text":"hi "}`,
				`data: {"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","call_id":"call_9","name":"f","arguments":""}}`,
				`data: {"type":"response.function_call_arguments.delta","output_index":1,"delta":"{\"a\":"}`,
				`data: {"type":"response.function_call_arguments.delta","output_index":1,"delta":"1}"}`,
				`data: {"type":"response.completed","response":{"id":"resp_1","status":"completed","usage":{"input_tokens":4,"output_tokens":3,"total_tokens":7}}}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestTextRelays(t *testing.T) {
	seen := map[string]string{}
	srv := fakeTextEngine(t, seen)
	e := engine(t, "up", srv.URL+"/v1")

	emb, err := e.Embeddings(t.Context(), &inferencev1.EmbeddingsRequest{Model: "m", Input: []string{"a", "b"}, Dimensions: 2})
	if err != nil {
		t.Fatal(err)
	}
	if v := emb.GetData()[0].GetVector(); len(v) != 2 || v[0] != 0.6 || emb.GetUsage().GetPromptTokens() != 2 {
		t.Fatalf("embeddings not put back in input order: %v", emb)
	}
	var sent map[string]any
	_ = json.Unmarshal([]byte(seen["/v1/embeddings"]), &sent)
	if sent["model"] != "up" || sent["encoding_format"] != "float" || sent["dimensions"] != 2.0 {
		t.Fatalf("embeddings request %s", seen["/v1/embeddings"])
	}

	var chunks []*inferencev1.CompletionsResponse
	seed := int64(42)
	err = e.Completions(t.Context(), &inferencev1.CompletionsRequest{Model: "m", Prompt: []string{"x"}, Seed: &seed},
		func(c *inferencev1.CompletionsResponse) error { chunks = append(chunks, c); return nil })
	if err != nil || len(chunks) != 3 || chunks[1].GetChoices()[0].GetFinishReason() != "stop" || chunks[2].GetUsage().GetTotalTokens() != 3 {
		t.Fatalf("completion chunks %v, %v", chunks, err)
	}
	if b := seen["/v1/completions"]; !strings.Contains(b, `"seed":42`) || !strings.Contains(b, `"stream":true`) || !strings.Contains(b, `"include_usage":true`) {
		t.Fatalf("completions request %s", b)
	}

	var pieces []*inferencev1.ResponsesResponse
	choice, _ := structpb.NewValue(map[string]any{"type": "function", "name": "f"})
	err = e.Responses(t.Context(), &inferencev1.ResponsesRequest{Model: "m", Input: structpb.NewStringValue("q"), ToolChoice: choice},
		func(p *inferencev1.ResponsesResponse) error { pieces = append(pieces, p); return nil })
	if err != nil || len(pieces) != 5 {
		t.Fatalf("response pieces %v, %v", pieces, err)
	}
	if pieces[0].GetTextDelta() != "hi " || pieces[1].GetFunctionCall().GetCallId() != "call_9" || pieces[3].GetFunctionCall().GetArgumentsDelta() != "1}" ||
		pieces[4].GetStatus() != "completed" || pieces[4].GetUsage().GetTotalTokens() != 7 || pieces[0].GetId() != "resp_1" {
		t.Fatalf("response pieces %v", pieces)
	}
	if b := seen["/v1/responses"]; !strings.Contains(b, `"input":"q"`) || !strings.Contains(b, `"tool_choice":{"name":"f","type":"function"}`) || !strings.Contains(b, `"store":false`) {
		t.Fatalf("responses request %s", b)
	}
}
