package openaiengine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/sse"
	"github.com/zestmcp/zest/lib/waitfor"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"github.com/zestmcp/zest/services/inference/modelfile"
)

// fakeEngine is an OpenAI-compatible server: /models lists "up", /chat/completions streams.
func fakeEngine(t *testing.T, seen chan<- string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			io.WriteString(w, `{"object":"list","data":[{"id":"up"}]}`)
		case "/v1/chat/completions":
			b, _ := io.ReadAll(r.Body)
			if seen != nil {
				seen <- string(b)
			}
			if strings.Contains(string(b), `"bad"`) {
				w.WriteHeader(400)
				io.WriteString(w, `{"error":{"message":"model bad is unknown"}}`)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			for _, c := range []string{
				`{"id":"c1","created":7,"choices":[{"delta":{"role":"assistant"}}]}`,
				`{"id":"c1","created":7,"choices":[{"delta":{"content":"hi ","reasoning_content":"hmm"}}]}`,
				`{"id":"c1","created":7,"choices":[{"delta":{"tool_calls":[{"index":0,"id":"t1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`,
			} {
				fmt.Fprintf(w, "data: %s\n\n", c)
				w.(http.Flusher).Flush()
			}
			io.WriteString(w, "data: [DONE]\n\n")
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func deadURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/v1"
}

func engine(t *testing.T, upstream string, urls ...string) *Engine {
	t.Helper()
	return engineWithin(t, 5*time.Second, upstream, urls...)
}

// engineWithin is engine with a model whose calls time out after timeout.
func engineWithin(t *testing.T, timeout time.Duration, upstream string, urls ...string) *Engine {
	t.Helper()
	f := &modelfile.File{HealthInterval: time.Hour, Models: []modelfile.Model{{ID: "m", Engine: "openai", Type: "llm",
		UpstreamModel: upstream, BaseURLs: urls, MaxConcurrency: 2, Timeout: timeout}}}
	e, err := New(f, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestChatRelaysChunksAndFailsOver(t *testing.T) {
	seen := make(chan string, 4)
	good := fakeEngine(t, seen)
	e := engine(t, "up", deadURL(t), good.URL+"/v1") // the first replica is dead
	var got []*inferencev1.ChatResponse
	err := e.Chat(t.Context(), &inferencev1.ChatRequest{Model: "m", Messages: []*inferencev1.ChatMessage{{Role: "user", Content: "x"}}},
		func(c *inferencev1.ChatResponse) error { got = append(got, c); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1].GetDelta().GetContent() != "hi " || got[1].GetDelta().GetReasoningContent() != "hmm" || got[2].GetFinishReason() != "tool_calls" ||
		got[2].GetDelta().GetToolCalls()[0].GetFunction().GetName() != "f" || got[2].GetUsage().GetTotalTokens() != 5 || got[0].GetModel() != "m" {
		t.Fatalf("chunks %v", got)
	}
	body := <-seen
	if !strings.Contains(body, `"model":"up"`) || !strings.Contains(body, `"stream":true`) {
		t.Fatalf("request to the engine: %s", body)
	}
	h := e.Health()
	if h[0].Healthy || h[0].LastError == "" || !h[1].Healthy {
		t.Fatalf("health after failover: %+v", h)
	}
	e.probeAll(t.Context())
	if ms := e.Models(); ms[0].GetState() != inferencev1.ModelState_MODEL_STATE_LOADED {
		t.Fatalf("state %v", ms[0].GetState())
	}
}

func TestEngineErrorsAreMapped(t *testing.T) {
	good := fakeEngine(t, nil)
	e := engine(t, "bad", good.URL+"/v1")
	err := e.Chat(t.Context(), &inferencev1.ChatRequest{Model: "m"}, func(*inferencev1.ChatResponse) error { return nil })
	if !errors.Is(err, ErrUpstreamRequest) || !strings.Contains(err.Error(), "model bad is unknown") {
		t.Fatalf("4xx: %v", err)
	}
	e = engine(t, "up", deadURL(t))
	err = e.Chat(t.Context(), &inferencev1.ChatRequest{Model: "m"}, func(*inferencev1.ChatResponse) error { return nil })
	if !errors.Is(err, ErrNoReplica) {
		t.Fatalf("no replica: %v", err)
	}
	if ms := e.Models(); ms[0].GetState() != inferencev1.ModelState_MODEL_STATE_SUGGESTED {
		t.Fatalf("a model with no reachable replica should not read as usable: %v", ms[0].GetState())
	}
}

func TestPerReplicaBoundWaitsWithinTheDeadline(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer slow.Close()
	defer close(release)
	e := engine(t, "up", slow.URL+"/v1") // two slots
	for range 2 {
		go e.Chat(context.Background(), &inferencev1.ChatRequest{Model: "m"}, func(*inferencev1.ChatResponse) error { return nil })
	}
	waitfor.True(t, 2*time.Second, "both slots busy", func() bool { return e.Health()[0].InFlight == 2 })
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	err := e.Chat(ctx, &inferencev1.ChatRequest{Model: "m"}, func(*inferencev1.ChatResponse) error { return nil })
	if !errors.Is(err, ErrNoReplica) || !strings.Contains(err.Error(), "all 2 request slots busy") {
		t.Fatalf("third request: %v", err)
	}
}

// TestEndlessStreamLineIsAnError: an engine whose event stream never ends its line fails the
// chat with an error that names the limit, after at most maxCompletionBytes of it, and nothing
// is relayed.
func TestEndlessStreamLineIsAnError(t *testing.T) {
	var sent int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c1","choices":[{"delta":{"content":"`)
		piece := strings.Repeat("a", 64<<10)
		for {
			n, err := io.WriteString(w, piece)
			sent += n
			if err != nil || sent > 4*maxCompletionBytes {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	// Reading the bound's 64 MiB takes seconds under -race on a busy machine: the call's
	// timeout must not end it first (it did at 5 s).
	e := engineWithin(t, 2*time.Minute, "up", srv.URL+"/v1")
	relayed := 0
	err := e.Chat(t.Context(), &inferencev1.ChatRequest{Model: "m", Messages: []*inferencev1.ChatMessage{{Role: "user", Content: "x"}}},
		func(*inferencev1.ChatResponse) error { relayed++; return nil })
	if !errors.Is(err, sse.ErrTooLong) || !errors.Is(err, ErrUpstream) || !strings.Contains(err.Error(), "67108864 bytes") || relayed != 0 {
		t.Fatalf("an endless line: %v (%d chunks relayed)", err, relayed)
	}
}

// TestTranslationGoesToTranslations: a translation is sent to the engine's
// /audio/translations (a transcription to /audio/transcriptions); an engine without that route
// is refused, naming the model and what to use instead.
func TestTranslationGoesToTranslations(t *testing.T) {
	paths := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths <- r.URL.Path
		switch r.URL.Path {
		case "/v1/models":
			io.WriteString(w, `{"object":"list","data":[{"id":"up"}]}`)
		case "/v1/audio/translations", "/v1/audio/transcriptions":
			io.WriteString(w, `{"text":"hello","language":"en","duration":1.5}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	e := engine(t, "up", srv.URL+"/v1")
	for translate, want := range map[bool]string{true: "/v1/audio/translations", false: "/v1/audio/transcriptions"} {
		res, err := e.Transcribe(t.Context(), &inferencev1.TranscribeRequest{Model: "m", Audio: []byte("RIFF"), Translate: translate})
		if err != nil || res.GetText() != "hello" {
			t.Fatalf("translate %v: %v %v", translate, res, err)
		}
		for p := range paths {
			if p == want {
				break
			}
			if p != "/v1/models" {
				t.Fatalf("translate %v went to %s, want %s", translate, p, want)
			}
		}
	}
	none := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(none.Close)
	_, err := engine(t, "up", none.URL+"/v1").Transcribe(t.Context(), &inferencev1.TranscribeRequest{Model: "m", Audio: []byte("RIFF"), Translate: true})
	if !errors.Is(err, ErrUpstreamRequest) || !strings.Contains(err.Error(), `model "m" cannot translate: its engine serves no /audio/translations (it answered 404)`) {
		t.Fatalf("an engine that does not translate: %v", err)
	}
}
