package e2e

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/zestmcp/zest/lib/waitfor"
)

var textPrefixes = []string{"/api/v1/", "/api/v0/", "/v1/", "/v0/"}

func vectorNorm(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

// checkEmbeddings embeds through the SDK: unit vectors, equal texts give equal vectors,
// dimensions honoured; base64 decodes to the same float32s.
func checkEmbeddings(t *testing.T, client openai.Client, url, model string) [][]float64 {
	t.Helper()
	res, err := client.Embeddings.New(t.Context(), openai.EmbeddingNewParams{Model: model,
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"the cat sat", "the cat sat", "stock prices fell"}}})
	if err != nil {
		t.Fatalf("embeddings: %v", err)
	}
	if len(res.Data) != 3 || res.Object != "list" || res.Model != model || res.Usage.PromptTokens != 9 {
		t.Fatalf("embeddings: %+v", res)
	}
	var vecs [][]float64
	for i, d := range res.Data {
		if d.Index != int64(i) || d.Object != "embedding" || len(d.Embedding) != 384 || math.Abs(vectorNorm(d.Embedding)-1) > 1e-5 {
			t.Fatalf("embedding %d: index %d, %d dimensions, norm %g", i, d.Index, len(d.Embedding), vectorNorm(d.Embedding))
		}
		vecs = append(vecs, d.Embedding)
	}
	if !slices.Equal(vecs[0], vecs[1]) || slices.Equal(vecs[0], vecs[2]) {
		t.Fatal("equal texts must give equal vectors, different ones different vectors")
	}
	small, err := client.Embeddings.New(t.Context(), openai.EmbeddingNewParams{Model: model, Dimensions: openai.Int(64),
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("the cat sat")}})
	if err != nil || len(small.Data[0].Embedding) != 64 || math.Abs(vectorNorm(small.Data[0].Embedding)-1) > 1e-5 {
		t.Fatalf("dimensions 64: %v %+v", err, small)
	}
	r := do(t, "POST", url+"embeddings", `{"model":"`+model+`","input":"the cat sat","encoding_format":"base64"}`, "Content-Type: application/json", "Authorization: Bearer oai-key")
	var b64 struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &b64); err != nil || len(b64.Data) != 1 {
		t.Fatalf("base64 embeddings: %d %s", r.Status, r.Body)
	}
	raw, err := base64.StdEncoding.DecodeString(b64.Data[0].Embedding)
	if err != nil || len(raw) != 4*384 {
		t.Fatalf("base64 embedding: %v, %d bytes", err, len(raw))
	}
	for i := range 384 {
		if f := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); f != float32(vecs[0][i]) { // JSON carries the float32s' shortest decimal
			t.Fatalf("base64 float %d is %g, the float answer %g", i, f, vecs[0][i])
		}
	}
	return vecs
}

func checkCompletions(t *testing.T, client openai.Client, model string) {
	t.Helper()
	c, err := client.Completions.New(t.Context(), openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(model),
		Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfStrings: []string{"once upon a time", "hello there"}}})
	if err != nil || len(c.Choices) != 2 || c.Object != "text_completion" {
		t.Fatalf("completions: %v %+v", err, c)
	}
	if c.Choices[0].Text != "builtin-llm heard: once upon a time" || c.Choices[1].Text != "builtin-llm heard: hello there" ||
		c.Choices[1].Index != 1 || c.Choices[0].FinishReason != "stop" || c.Usage.CompletionTokens != 6+4 {
		t.Fatalf("completions: %s", c.RawJSON())
	}
	stream := client.Completions.NewStreaming(t.Context(), openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(model),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("a b c d e")}, MaxTokens: openai.Int(3),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	var text, finish string
	chunks, usage := 0, int64(0)
	for stream.Next() {
		ch := stream.Current()
		chunks++
		for _, c := range ch.Choices {
			text += c.Text
			if c.FinishReason != "" {
				finish = string(c.FinishReason)
			}
		}
		usage += ch.Usage.CompletionTokens
	}
	if err := stream.Err(); err != nil || text != "builtin-llm heard: a " || finish != "length" || chunks != 5 || usage != 3 {
		t.Fatalf("streamed completion: %v %q %q, %d chunks, usage %d", err, text, finish, chunks, usage)
	}
}

// checkResponses runs a Responses text answer, a streamed one, and a function call round trip.
func checkResponses(t *testing.T, client openai.Client, model string) {
	t.Helper()
	ctx := t.Context()
	res, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: model, Instructions: openai.String("be brief"),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello responses")}})
	if err != nil || res.OutputText() != "builtin-llm heard: hello responses" || res.Status != "completed" || !strings.HasPrefix(res.ID, "resp_") ||
		res.Usage.OutputTokens != 4 {
		t.Fatalf("response: %v %+v", err, res)
	}

	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("stream me please")}})
	var deltas, done string
	var types []string
	var final responses.Response
	for stream.Next() {
		ev := stream.Current()
		if len(types) == 0 || types[len(types)-1] != ev.Type {
			types = append(types, ev.Type)
		}
		switch ev.Type {
		case "response.output_text.delta":
			deltas += ev.Delta
		case "response.output_text.done":
			done = ev.AsResponseOutputTextDone().Text
		case "response.completed":
			final = ev.AsResponseCompleted().Response
		}
	}
	wantTypes := "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done response.completed"
	if err := stream.Err(); err != nil || deltas != "builtin-llm heard: stream me please" || done != deltas || final.OutputText() != deltas ||
		strings.Join(types, " ") != wantTypes {
		t.Fatalf("streamed response: %v %q %q %q\n%s", err, deltas, done, final.OutputText(), strings.Join(types, " "))
	}

	tool := responses.ToolParamOfFunction("get_sum", map[string]any{"type": "object",
		"properties": map[string]any{"a": map[string]any{"type": "number"}, "b": map[string]any{"type": "number"}}}, false)
	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(`add {"a":40,"b":2}`, responses.EasyInputMessageRoleUser)}
	cs := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: model, Tools: []responses.ToolUnionParam{tool},
		ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "get_sum"}},
		Input:      responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
	var args, argsDone string
	var call responses.ResponseFunctionToolCall
	for cs.Next() {
		ev := cs.Current()
		switch ev.Type {
		case "response.function_call_arguments.delta":
			args += ev.Delta
		case "response.function_call_arguments.done":
			argsDone = ev.Arguments
		case "response.output_item.done":
			call = ev.AsResponseOutputItemDone().Item.AsFunctionCall()
		}
	}
	if err := cs.Err(); err != nil || args != `{"a":40,"b":2}` || argsDone != args || call.Name != "get_sum" || call.Arguments != args || !strings.HasPrefix(call.CallID, "call_") {
		t.Fatalf("streamed function call: %v %q %q %+v", err, args, argsDone, call)
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput("42")
	out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	input = append(input, responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name), out)
	second, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: model, Tools: []responses.ToolUnionParam{tool},
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
	if err != nil || second.OutputText() != "The tool returned: 42" {
		t.Fatalf("after the function output: %v %+v", err, second)
	}
}

// TestTextRoutesWithTheOpenAIGoSDK drives embeddings, completions and responses with the
// official SDK, unchanged, under each of the four prefixes.
func TestTextRoutesWithTheOpenAIGoSDK(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY=oai-key")
	for _, prefix := range textPrefixes {
		t.Run(prefix, func(t *testing.T) {
			client := openai.NewClient(option.WithBaseURL(s.URL+prefix), option.WithAPIKey("oai-key"), option.WithMaxRetries(0))
			checkEmbeddings(t, client, s.URL+prefix, "builtin-embed")
			checkCompletions(t, client, "builtin-llm")
			checkResponses(t, client, "builtin-llm")
		})
	}
	m := do(t, "GET", s.URL+"/api/v1/models/builtin-embed", "", "Authorization: Bearer oai-key")
	if m.Status != 200 || !strings.Contains(string(m.Body), `"labels":["builtin","embeddings"]`) {
		t.Fatalf("builtin-embed in the model list: %d %s", m.Status, m.Body)
	}
}

// TestTextRoutesRefuseBadInput: under every prefix, each route answers bad input with 400
// naming the field (OpenAI's error shape), a body over the limit with 413, and a model that
// does not answer the route with 400.
func TestTextRoutesRefuseBadInput(t *testing.T) {
	s := startSuite(t, "ZEST_MAX_BODY_BYTES=65536")
	cases := []struct {
		route, body string
		status      int
		param, says string
	}{
		{"embeddings", `{"input":"a"}`, 400, "model", "model is required"},
		{"embeddings", `{"model":"builtin-embed"}`, 400, "input", "input is required"},
		{"embeddings", `{"model":"builtin-embed","input":[[1,2]]}`, 400, "input", "tokens are not served"},
		{"embeddings", `{"model":"builtin-embed","input":{"text":"a"}}`, 400, "input", "input must be a string or an array of strings"},
		{"embeddings", `{"model":"builtin-embed","input":"a","dimensions":"many"}`, 400, "dimensions", "dimensions must be an integer"},
		{"embeddings", `{"model":"builtin-embed","input":"a","dimensions":5000}`, 400, "", "dimensions 5000: ask for 1 to 4096"},
		{"embeddings", `{"model":"builtin-llm","input":"a"}`, 400, "", "use builtin-embed"},
		{"embeddings", `{"model":"no-such","input":"a"}`, 404, "model", "no-such"},
		{"completions", `{"prompt":"a"}`, 400, "model", "model is required"},
		{"completions", `{"model":"builtin-llm"}`, 400, "prompt", "prompt is required"},
		{"completions", `{"model":"builtin-llm","prompt":true}`, 400, "prompt", "prompt must be a string or an array of strings"},
		{"completions", `{"model":"builtin-llm","prompt":"a","max_tokens":"3"}`, 400, "max_tokens", "max_tokens must be an integer"},
		{"completions", `{"model":"builtin-embed","prompt":"a"}`, 400, "", "use builtin-llm"},
		{"responses", `{"input":"a"}`, 400, "model", "model is required"},
		{"responses", `{"model":"builtin-llm"}`, 400, "input", "input is required"},
		{"responses", `{"model":"builtin-llm","input":{"role":"user"}}`, 400, "input", "input must be a string or an array of input items"},
		{"responses", `{"model":"builtin-llm","input":"a","tools":[{"type":"function"}]}`, 400, "tools[0].name", "tools[0].name must be"},
		{"responses", `{"model":"builtin-llm","input":"a","previous_response_id":"resp_1"}`, 400, "previous_response_id", "Zest keeps no responses"},
		{"responses", `{"model":"builtin-image","input":"a"}`, 400, "", "use builtin-llm"},
	}
	big := `{"model":"builtin-llm","input":"` + strings.Repeat("x", 70000) + `"}`
	for _, prefix := range textPrefixes {
		for _, c := range cases {
			r := do(t, "POST", s.URL+prefix+c.route, c.body, "Content-Type: application/json")
			var e struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Param   any    `json:"param"`
				} `json:"error"`
			}
			_ = json.Unmarshal(r.Body, &e)
			p, _ := e.Error.Param.(string)
			if r.Status != c.status || p != c.param || !strings.Contains(e.Error.Message, c.says) || e.Error.Type == "" {
				t.Errorf("%s%s %s: %d %s; want %d naming %q saying %q", prefix, c.route, c.body, r.Status, r.Body, c.status, c.param, c.says)
			}
		}
		for _, route := range []string{"embeddings", "completions", "responses"} {
			r := do(t, "POST", s.URL+prefix+route, big, "Content-Type: application/json")
			if r.Status != 413 || !strings.Contains(string(r.Body), "Request body too large: the limit is 64 KiB") {
				t.Errorf("%s%s over the limit: %d %s", prefix, route, r.Status, r.Body)
			}
			if r := do(t, "GET", s.URL+prefix+route, ""); r.Status != 405 {
				t.Errorf("GET %s%s: %d", prefix, route, r.Status)
			}
		}
	}
}

// TestTextRoutesRelayedThroughAZestEngine: a second Zest (inference node and edge) is the
// OpenAI-compatible engine of the suite for remote-llm and remote-embed; embeddings,
// completions and responses (streamed, and a function call) are relayed through it.
func TestTextRoutesRelayedThroughAZestEngine(t *testing.T) {
	base := append(os.Environ(), "ZEST_LOG_LEVEL=warn", "LEMONADE_API_KEY=", "LEMONADE_ADMIN_API_KEY=")
	upInf, upEdge := freeAddr(t), freeAddr(t)
	runService(t, "zest-inference", append(append([]string{}, base...), "ZEST_INFERENCE_ADDR="+upInf))
	runService(t, "zest-gateway", append(append([]string{}, base...),
		"ZEST_INFERENCE_ADDR="+upInf, "ZEST_EDGE_ADDR="+upEdge, "ZEST_MCPGATEWAY_ADDR="+unusedAddr(t), "ZEST_TOOLHOST_ADDR="+unusedAddr(t)))
	models := filepath.Join(t.TempDir(), "models.yaml")
	os.WriteFile(models, []byte(fmt.Sprintf(`health_interval: 200ms
models:
  - id: remote-llm
    engine: openai
    type: llm
    upstream_model: builtin-llm
    base_urls: [http://%[1]s/v1]
    timeout: 10s
  - id: remote-embed
    engine: openai
    type: embedding
    upstream_model: builtin-embed
    base_urls: [http://%[1]s/v1]
    timeout: 10s
`, upEdge)), 0o644)
	s := startSuite(t, "ZEST_MODELS_FILE="+models)
	waitfor.NoError(t, 10*time.Second, func() error {
		r, err := getOK(s.URL + "/api/v1/models")
		if err != nil || strings.Count(string(r), `"loaded":true,"object":"model","owned_by":"zest","recipe":"openai"`) != 2 {
			return fmt.Errorf("remote models not loaded: %s %v", r, err)
		}
		return nil
	})
	client := openai.NewClient(option.WithBaseURL(s.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	remote := checkEmbeddings(t, client, s.URL+"/v1/", "remote-embed")
	local := checkEmbeddings(t, client, s.URL+"/v1/", "builtin-embed")
	if !slices.Equal(remote[0], local[0]) {
		t.Fatal("the relayed embedding differs from the engine's own")
	}
	checkCompletions(t, client, "remote-llm")
	checkResponses(t, client, "remote-llm")

	// The relay streams: each word arrives as its own event, as the engine sent it.
	r := do(t, "POST", s.URL+"/v1/completions", `{"model":"remote-llm","prompt":"one two three","stream":true}`, "Content-Type: application/json")
	if r.Status != 200 || strings.Count(string(r.Body), `"text":"`) != 5+1 || !strings.HasSuffix(strings.TrimSpace(string(r.Body)), "data: [DONE]") {
		t.Fatalf("streamed relayed completion: %d %s", r.Status, r.Body)
	}
	r = do(t, "POST", s.URL+"/v1/responses", `{"model":"remote-llm","input":"one two three","stream":true}`, "Content-Type: application/json")
	if r.Status != 200 || strings.Count(string(r.Body), "event: response.output_text.delta") != 5 {
		t.Fatalf("streamed relayed response: %d %s", r.Status, r.Body)
	}
	// An engine's refusal comes back as the suite's 400.
	r = do(t, "POST", s.URL+"/v1/embeddings", `{"model":"remote-embed","input":"a","dimensions":9999}`, "Content-Type: application/json")
	if r.Status != 400 || !strings.Contains(string(r.Body), "dimensions 9999") {
		t.Fatalf("relayed refusal: %d %s", r.Status, r.Body)
	}
}
