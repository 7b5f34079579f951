package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/lib/grpctest"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// fakeInference is the inference service behind the edge: it records what it was asked and
// answers a chat with "hello world" under the completion id it is given.
type fakeInference struct {
	inferencev1.UnimplementedInferenceServiceServer
	mu         sync.Mutex
	id         string // completion id of its chunks ("" like an engine that gives none)
	chats      []*inferencev1.ChatRequest
	transcribe *inferencev1.TranscribeRequest
	images     []*inferencev1.GenerateImageRequest
	fail       error // answered to Transcribe and GenerateImage when set
}

func (f *fakeInference) Chat(req *inferencev1.ChatRequest, stream inferencev1.InferenceService_ChatServer) error {
	f.mu.Lock()
	f.chats = append(f.chats, req)
	id := f.id
	f.mu.Unlock()
	for _, c := range []*inferencev1.ChatResponse{
		{Delta: &inferencev1.ChatMessage{Role: "assistant"}},
		{Delta: &inferencev1.ChatMessage{Content: "hello "}},
		{Delta: &inferencev1.ChatMessage{Content: "world"}},
		{Delta: &inferencev1.ChatMessage{}, FinishReason: "stop", Usage: &inferencev1.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}},
	} {
		c.Id, c.Model, c.Created = id, req.GetModel(), 7
		if err := stream.Send(c); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeInference) Transcribe(_ context.Context, req *inferencev1.TranscribeRequest) (*inferencev1.TranscribeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.transcribe = req
	if f.fail != nil {
		return nil, f.fail
	}
	return &inferencev1.TranscribeResponse{Text: fmt.Sprintf("%d bytes", len(req.GetAudio())), Language: "en", DurationSeconds: 1.5}, nil
}

func (f *fakeInference) GenerateImage(_ context.Context, req *inferencev1.GenerateImageRequest) (*inferencev1.GenerateImageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images = append(f.images, req)
	if f.fail != nil {
		return nil, f.fail
	}
	return &inferencev1.GenerateImageResponse{Images: [][]byte{[]byte("png")}, Created: 7}, nil
}

func (f *fakeInference) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.chats) + len(f.images)
}

const bodyLimit = 8 << 20

// newEdge serves the OpenAI routes under /api/v1/ with an 8 MiB body limit, in front of a
// fake inference service reached over loopback gRPC.
func newEdge(t *testing.T) (string, *fakeInference) {
	t.Helper()
	f := &fakeInference{}
	cc := grpctest.Loopback(t, func(s *grpc.Server) { inferencev1.RegisterInferenceServiceServer(s, f) }, grpc.MaxRecvMsgSize(16<<20))
	api := &API{Inference: inferencev1.NewInferenceServiceClient(cc), Forward: func(r *http.Request) context.Context { return r.Context() }}
	mux := http.NewServeMux()
	api.Register(mux, "/api/v1/", func(h http.Handler) http.Handler { return httpguard.LimitBody(bodyLimit, WriteError, h) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/api/v1/", f
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func post(t *testing.T, url, contentType string, body io.Reader) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, b}
}

func postJSON(t *testing.T, url, body string) answer {
	t.Helper()
	return post(t, url, "application/json", strings.NewReader(body))
}

// decoderText is what Go's and protobuf's decoders say; none of it may reach a client.
var decoderText = regexp.MustCompile(`json: |proto: |Go struct|Go value|cannot unmarshal|unexpected token|invalid value for|syntax error \(line|mime: |multipart: `)

// openAIError checks OpenAI's error shape {"error":{"message","type","param","code":null}}
// with exactly those keys, and returns message and param.
func openAIError(t *testing.T, a answer, status int) (msg string, param any) {
	t.Helper()
	var body struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(a.body, &body); err != nil || body.Error == nil {
		t.Fatalf("%d %s: not an OpenAI error", a.status, a.body)
	}
	e := body.Error
	if a.status != status || len(e) != 4 || e["type"] != "invalid_request_error" || e["code"] != nil {
		t.Fatalf("got %d %s, want %d with message, type invalid_request_error, param, code null", a.status, a.body, status)
	}
	if _, ok := e["param"]; !ok {
		t.Fatalf("no param: %s", a.body)
	}
	msg, _ = e["message"].(string)
	if msg == "" || decoderText.MatchString(msg) {
		t.Fatalf("message %q is empty or quotes a decoder", msg)
	}
	return msg, e["param"]
}

func TestChatRefusesEachBadFieldByName(t *testing.T) {
	url, f := newEdge(t)
	const user = `{"role":"user","content":"hi"}`
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`
	for _, c := range []struct {
		name, body string
		param      any // nil: the body as a whole
		want       string
	}{
		{"malformed JSON", `{"model":`, nil, "not a JSON object"},
		{"bad JSON inside", `{"model":"m","messages":[}`, nil, "invalid JSON at byte"},
		{"empty body", ``, nil, "not a JSON object: it is empty"},
		{"array body", `[1]`, nil, "it is an array"},
		{"two objects", `{"model":"m"} {}`, nil, "something follows the object"},
		{"model missing", `{"messages":[` + user + `]}`, "model", "model is required"},
		{"model a number", `{"model":5,"messages":[` + user + `]}`, "model", "model must be a string, not a number"},
		{"messages missing", `{"model":"m"}`, "messages", "messages is required"},
		{"messages null", `{"model":"m","messages":null}`, "messages", "messages is required"},
		{"messages empty", `{"model":"m","messages":[]}`, "messages", "at least one message"},
		{"messages a string", `{"model":"m","messages":"hi"}`, "messages", "messages must be an array of messages, not a string"},
		{"message a number", `{"model":"m","messages":[1]}`, "messages[0]", "must be a message object, not a number"},
		{"role missing", `{"model":"m","messages":[{"content":"x"}]}`, "messages[0].role", "role is required"},
		{"role unknown", `{"model":"m","messages":[` + user + `,{"role":"robot","content":"x"}]}`, "messages[1].role", `"robot" is not a role: use one of system, developer, user, assistant, tool`},
		{"role function", `{"model":"m","messages":[{"role":"function","content":"x"}]}`, "messages[0].role", `"function" is not a role`},
		{"role a number", `{"model":"m","messages":[{"role":1}]}`, "messages[0].role", "must be a string, not a number"},
		{"content a number", `{"model":"m","messages":[{"role":"user","content":5}]}`, "messages[0].content", "a string or an array of content parts, not a number"},
		{"content part not an object", `{"model":"m","messages":[{"role":"user","content":["x"]}]}`, "messages[0].content[0]", "content part object"},
		{"tool message without tool_call_id", `{"model":"m","messages":[` + user + `,{"role":"tool","content":"42"}]}`, "messages[1].tool_call_id", "tool message without tool_call_id"},
		{"tool_calls not an array", `{"model":"m","messages":[{"role":"assistant","tool_calls":{}}]}`, "messages[0].tool_calls", "must be an array"},
		{"tool call without function", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c"}]}]}`, "messages[0].tool_calls[0].function", "function is required"},
		{"tool call arguments a number", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":1}}]}]}`, "messages[0].tool_calls[0].function.arguments", "a string of JSON"},
		{"temperature too high", `{"model":"m","temperature":2.5,"messages":[` + user + `]}`, "temperature", "between 0 and 2, not 2.5"},
		{"temperature negative", `{"model":"m","temperature":-0.1,"messages":[` + user + `]}`, "temperature", "between 0 and 2"},
		{"temperature a string", `{"model":"m","temperature":"hot","messages":[` + user + `]}`, "temperature", "temperature must be a number, not a string"},
		{"top_p too high", `{"model":"m","top_p":1.01,"messages":[` + user + `]}`, "top_p", "between 0 and 1"},
		{"top_p negative", `{"model":"m","top_p":-1,"messages":[` + user + `]}`, "top_p", "between 0 and 1"},
		{"max_tokens 0", `{"model":"m","max_tokens":0,"messages":[` + user + `]}`, "max_tokens", "between 1 and 2147483647, not 0"},
		{"max_tokens negative", `{"model":"m","max_tokens":-5,"messages":[` + user + `]}`, "max_tokens", "not -5"},
		{"max_tokens huge", `{"model":"m","max_tokens":99999999999,"messages":[` + user + `]}`, "max_tokens", "between 1 and 2147483647"},
		{"max_tokens fractional", `{"model":"m","max_tokens":1.5,"messages":[` + user + `]}`, "max_tokens", "must be an integer, not 1.5"},
		{"max_tokens a string", `{"model":"m","max_tokens":"10","messages":[` + user + `]}`, "max_tokens", "must be an integer, not a string"},
		{"max_completion_tokens 0", `{"model":"m","max_completion_tokens":0,"messages":[` + user + `]}`, "max_completion_tokens", "between 1 and"},
		{"n 2", `{"model":"m","n":2,"messages":[` + user + `]}`, "n", "n must be 1, not 2"},
		{"n 0", `{"model":"m","n":0,"messages":[` + user + `]}`, "n", "n must be 1, not 0"},
		{"presence_penalty", `{"model":"m","presence_penalty":2.5,"messages":[` + user + `]}`, "presence_penalty", "between -2 and 2, not 2.5"},
		{"frequency_penalty", `{"model":"m","frequency_penalty":-3,"messages":[` + user + `]}`, "frequency_penalty", "between -2 and 2, not -3"},
		{"seed fractional", `{"model":"m","seed":1.5,"messages":[` + user + `]}`, "seed", "seed must be an integer"},
		{"stop a number", `{"model":"m","stop":5,"messages":[` + user + `]}`, "stop", "a string or an array of strings"},
		{"stop holds a number", `{"model":"m","stop":["a",5],"messages":[` + user + `]}`, "stop[1]", "must be a string, not a number"},
		{"stream a string", `{"model":"m","stream":"yes","messages":[` + user + `]}`, "stream", "stream must be true or false, not a string"},
		{"include_usage a string", `{"model":"m","stream":true,"stream_options":{"include_usage":"y"},"messages":[` + user + `]}`, "stream_options.include_usage", "true or false"},
		{"tools an object", `{"model":"m","tools":{},"messages":[` + user + `]}`, "tools", "an array of tools, not an object"},
		{"tool without function", `{"model":"m","tools":[{"type":"function"}],"messages":[` + user + `]}`, "tools[0].function", "an object with the function's name"},
		{"tool function without name", `{"model":"m","tools":[{"type":"function","function":{}}],"messages":[` + user + `]}`, "tools[0].function.name", "must be a string, not null"},
		{"tool_choice unknown word", `{"model":"m","tool_choice":"sometimes",` + tools + `,"messages":[` + user + `]}`, "tool_choice", `"sometimes" is not one of "none", "auto", "required"`},
		{"tool_choice a number", `{"model":"m","tool_choice":1,` + tools + `,"messages":[` + user + `]}`, "tool_choice", "not a number"},
		{"tool_choice object without name", `{"model":"m","tool_choice":{"type":"function"},` + tools + `,"messages":[` + user + `]}`, "tool_choice", `{"type":"function","function":{"name":"…"}}`},
		{"tool_choice other type", `{"model":"m","tool_choice":{"type":"file_search","function":{"name":"get_weather"}},` + tools + `,"messages":[` + user + `]}`, "tool_choice", "tool_choice must be"},
		{"tool_choice names an unknown function", `{"model":"m","tool_choice":{"type":"function","function":{"name":"get_time"}},` + tools + `,"messages":[` + user + `]}`, "tool_choice", `"get_time", which is not among the request's tools (get_weather)`},
		{"tool_choice names a function without tools", `{"model":"m","tool_choice":{"type":"function","function":{"name":"get_time"}},"messages":[` + user + `]}`, "tool_choice", "the request has no tools"},
		{"tool_choice required without tools", `{"model":"m","tool_choice":"required","messages":[` + user + `]}`, "tool_choice", `"required" needs tools`},
		{"response_format a string", `{"model":"m","response_format":"json","messages":[` + user + `]}`, "response_format", "must be an object, not a string"},
		{"chat_template_kwargs an array", `{"model":"m","chat_template_kwargs":[],"messages":[` + user + `]}`, "chat_template_kwargs", "must be an object, not an array"},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg, param := openAIError(t, postJSON(t, url+"chat/completions", c.body), http.StatusBadRequest)
			if param != c.param || !strings.Contains(msg, c.want) {
				t.Fatalf("param %v, message %q; want param %v and %q", param, msg, c.param, c.want)
			}
		})
	}
	if n := f.calls(); n != 0 {
		t.Fatalf("%d refused requests reached inference", n)
	}
}

func TestChatPassesCheckedFieldsThrough(t *testing.T) {
	url, f := newEdge(t)
	body := `{"model":"m","temperature":2,"top_p":0,"max_completion_tokens":7,"n":1,"presence_penalty":-2,"frequency_penalty":2,
	  "seed":9007199254740993,"stop":"END","user":"someone","logprobs":null,"response_format":{"type":"json_object"},
	  "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],
	  "tool_choice":{"type":"function","function":{"name":"get_weather"}},
	  "messages":[{"role":"developer","content":"be brief"},
	    {"role":"user","content":[{"type":"text","text":"hi"}],"name":null},
	    {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":{"city":"Oslo"}}}]},
	    {"role":"tool","tool_call_id":"c1","content":"sunny"}]}`
	if a := postJSON(t, url+"chat/completions", body); a.status != http.StatusOK {
		t.Fatalf("%d %s", a.status, a.body)
	}
	got, _ := protojson.Marshal(f.chats[0])
	want := `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","contentParts":[{"text":"hi","type":"text"}]},` +
		`{"role":"assistant","toolCalls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},` +
		`{"role":"tool","toolCallId":"c1","content":"sunny"}],"temperature":2,"topP":0,"maxTokens":7,"stop":["END"],"seed":"9007199254740993",` +
		`"tools":[{"function":{"name":"get_weather","parameters":{"type":"object"}},"type":"function"}],` +
		`"toolChoice":{"function":{"name":"get_weather"},"type":"function"},"responseFormat":{"type":"json_object"}}`
	if g, w := mustCompact(t, string(got)), mustCompact(t, want); g != w {
		t.Fatalf("inference got\n%s\nwant\n%s", g, w)
	}
}

func mustCompact(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

var completionID = regexp.MustCompile(`^chatcmpl-[0-9a-f]{24}$`)

// TestChatCompletionIDs: a response whose engine named no completion gets a fresh id of
// 24 random hex digits, the same in every chunk of a stream; an engine's own id passes.
func TestChatCompletionIDs(t *testing.T) {
	url, f := newEdge(t)
	const body = `{"model":"m","messages":[{"role":"user","content":"same"}]}`
	seen := map[string]bool{}
	for range 3 {
		a := postJSON(t, url+"chat/completions", body)
		var c struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(a.body, &c); err != nil || c.Object != "chat.completion" || c.Choices[0].Message.Content != "hello world" {
			t.Fatalf("%d %s", a.status, a.body)
		}
		if !completionID.MatchString(c.ID) || seen[c.ID] {
			t.Fatalf("id %q (seen before: %v)", c.ID, seen[c.ID])
		}
		seen[c.ID] = true
	}

	a := postJSON(t, url+"chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"same"}]}`)
	if ct := a.header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	ids := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(a.body))
	var events []string
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, d)
		}
	}
	if len(events) != 5 || events[4] != "[DONE]" {
		t.Fatalf("events %q", events)
	}
	for _, e := range events[:4] {
		var c struct{ ID string }
		json.Unmarshal([]byte(e), &c)
		ids[c.ID] = true
	}
	for id := range ids {
		if len(ids) != 1 || !completionID.MatchString(id) || seen[id] {
			t.Fatalf("stream ids %v", ids)
		}
	}

	f.mu.Lock()
	f.id = "chatcmpl-upstream"
	f.mu.Unlock()
	if a := postJSON(t, url+"chat/completions", body); !strings.Contains(string(a.body), `"id":"chatcmpl-upstream"`) {
		t.Fatalf("the engine's id was replaced: %s", a.body)
	}
}

func TestImagesRefuseBadFieldsByName(t *testing.T) {
	url, f := newEdge(t)
	for _, c := range []struct {
		name, body string
		param      any
		want       string
	}{
		{"malformed", `{"prompt":`, nil, "not a JSON object"},
		{"null", `null`, nil, "not a JSON object: it is null"},
		{"an array", ` [{"prompt":"x"}]`, nil, "not a JSON object: it is an array"},
		{"a string", `"x"`, nil, "not a JSON object: it is a string"},
		{"empty", ``, nil, "not a JSON object: it is empty"},
		{"two objects", `{"prompt":"x"} {}`, nil, "something follows the object"},
		{"a type error after a syntax error", `{"n":"two",}`, nil, "invalid JSON at byte"},
		{"n a string", `{"prompt":"x","n":"two"}`, "n", "n must be an integer in range, not a string"},
		{"n fractional", `{"prompt":"x","n":1.5}`, "n", "n must be an integer in range, not 1.5"},
		{"prompt a number", `{"prompt":5}`, "prompt", "prompt must be a string, not a number"},
		{"seed an object", `{"prompt":"x","seed":{}}`, "seed", "seed must be an integer in range, not an object"},
		{"size", `{"prompt":"x","size":"big"}`, "size", "WIDTHxHEIGHT"},
		{"response_format", `{"prompt":"x","response_format":"url"}`, "response_format", "use b64_json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg, param := openAIError(t, postJSON(t, url+"images/generations", c.body), http.StatusBadRequest)
			if param != c.param || !strings.Contains(msg, c.want) {
				t.Fatalf("param %v, message %q; want param %v and %q", param, msg, c.param, c.want)
			}
		})
	}
	if n := f.calls(); n != 0 {
		t.Fatalf("%d refused requests reached inference", n)
	}
	if a := postJSON(t, url+"images/generations", `{"model":"img","prompt":"x","size":"64x32","n":1}`); a.status != 200 || !strings.Contains(string(a.body), `"b64_json":"cG5n"`) {
		t.Fatalf("%d %s", a.status, a.body)
	}
}

func multipartBody(t *testing.T, file []byte, fields ...string) (*bytes.Buffer, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for i := 0; i+1 < len(fields); i += 2 {
		mw.WriteField(fields[i], fields[i+1])
	}
	if file != nil {
		fw, _ := mw.CreateFormFile("file", "a.wav")
		fw.Write(file)
	}
	mw.Close()
	return &b, mw.FormDataContentType()
}

// unsized hides a reader's length, so that the request is sent chunked (no Content-Length).
type unsized struct{ io.Reader }

func TestTranscription(t *testing.T) {
	url, f := newEdge(t)
	audio := bytes.Repeat([]byte("0123456789abcdef"), 6<<20/16) // 6 MiB, under the 8 MiB limit
	body, ct := multipartBody(t, audio, "model", "asr", "language", "de", "prompt", "p", "temperature", "0.5", "extra", "ignored")
	a := post(t, url+"audio/transcriptions", ct, body)
	if a.status != 200 || !strings.Contains(string(a.body), fmt.Sprintf(`"text":"%d bytes"`, len(audio))) {
		t.Fatalf("%d %s", a.status, a.body)
	}
	got := f.transcribe
	if !bytes.Equal(got.GetAudio(), audio) || got.GetModel() != "asr" || got.GetLanguage() != "de" || got.GetPrompt() != "p" ||
		got.GetTemperature() != 0.5 || got.GetFilename() != "a.wav" {
		t.Fatalf("inference got %q %q %q %v %q and %d bytes", got.GetModel(), got.GetLanguage(), got.GetPrompt(), got.GetTemperature(), got.GetFilename(), len(got.GetAudio()))
	}
	body, ct = multipartBody(t, []byte("RIFF"), "model", "asr", "response_format", "text")
	if a := post(t, url+"audio/transcriptions", ct, body); a.status != 200 || string(a.body) != "4 bytes" {
		t.Fatalf("text: %d %s", a.status, a.body)
	}

	for _, c := range []struct {
		name, ct string
		body     io.Reader
		status   int
		param    any
		want     string
	}{
		{"not multipart", "application/json", strings.NewReader(`{}`), 400, nil, "send multipart/form-data"},
		{"no boundary", "multipart/form-data", strings.NewReader(`x`), 400, nil, "send multipart/form-data"},
		{"broken multipart", "multipart/form-data; boundary=zz", strings.NewReader("--zz\r\nno headers end"), 400, nil, "malformed"},
		{"no file", "", nil, 400, "file", "file is required"},
		{"bad temperature", "", nil, 400, "temperature", "between 0 and 1"},
		{"bad response_format", "", nil, 400, "response_format", "srt needs segment times"},
		{"over the limit, chunked", "", nil, 413, "file", "Request body too large: the limit is 8 MiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			body, ct := c.body, c.ct
			switch c.name {
			case "no file":
				body, ct = multipartBody(t, nil, "model", "asr")
			case "bad temperature":
				body, ct = multipartBody(t, []byte("x"), "model", "asr", "temperature", "hot")
			case "bad response_format":
				body, ct = multipartBody(t, []byte("x"), "model", "asr", "response_format", "srt")
			case "over the limit, chunked":
				b, mct := multipartBody(t, make([]byte, bodyLimit+1), "model", "asr")
				body, ct = unsized{b}, mct
			}
			msg, param := openAIError(t, post(t, url+"audio/transcriptions", ct, body), c.status)
			if param != c.param || !strings.Contains(msg, c.want) {
				t.Fatalf("param %v, message %q; want param %v and %q", param, msg, c.param, c.want)
			}
		})
	}

	f.mu.Lock()
	f.fail = status.Error(codes.InvalidArgument, "audio: a.wav: WAV block_align 1 does not match 2 channels × 32 bits")
	f.mu.Unlock()
	body, ct = multipartBody(t, []byte("RIFF"), "model", "asr")
	if msg, _ := openAIError(t, post(t, url+"audio/transcriptions", ct, body), 400); msg != "audio: a.wav: WAV block_align 1 does not match 2 channels × 32 bits" {
		t.Fatalf("message %q", msg)
	}
}

func TestWrongMethod(t *testing.T) {
	url, _ := newEdge(t)
	for _, route := range []string{"chat/completions", "audio/transcriptions", "images/generations"} {
		resp, err := http.Get(url + route)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" || !strings.Contains(string(b), "Use POST for this endpoint") {
			t.Fatalf("GET %s: %d %s", route, resp.StatusCode, b)
		}
	}
	for _, route := range []string{"models", "models/m"} {
		a := postJSON(t, url+route, `{}`)
		if a.status != 405 || a.header.Get("Allow") != "GET, HEAD" || !strings.Contains(string(a.body), "Use GET for this endpoint") {
			t.Fatalf("POST %s: %d %s", route, a.status, a.body)
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodHead, url+route, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 405 { // served as GET is (the fake has no models: its error, not 405)
			t.Fatalf("HEAD %s: 405", route)
		}
	}
}

// TestTranslation: audio/translations is served (it was 404): the request reaches inference
// as a translation with no language (OpenAI's translations take none), and verbose_json says
// task "translate".
func TestTranslation(t *testing.T) {
	url, f := newEdge(t)
	body, ct := multipartBody(t, []byte("RIFF"), "model", "asr", "language", "de", "prompt", "p", "response_format", "verbose_json")
	a := post(t, url+"audio/translations", ct, body)
	if a.status != 200 || !strings.Contains(string(a.body), `"task":"translate"`) || !strings.Contains(string(a.body), `"text":"4 bytes"`) {
		t.Fatalf("%d %s", a.status, a.body)
	}
	if got := f.transcribe; !got.GetTranslate() || got.GetLanguage() != "" || got.GetPrompt() != "p" || got.GetModel() != "asr" {
		t.Fatalf("inference got %v", got)
	}
	body, ct = multipartBody(t, []byte("RIFF"), "model", "asr")
	if a := post(t, url+"audio/transcriptions", ct, body); a.status != 200 || f.transcribe.GetTranslate() {
		t.Fatalf("a transcription asked for a translation: %d %s", a.status, a.body)
	}
}
