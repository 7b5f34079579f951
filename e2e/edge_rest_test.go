package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
)

// TestEveryRESTRouteUnderEveryPrefix, and the bad inputs of the REST API.
func TestEveryRESTRouteUnderEveryPrefix(t *testing.T) {
	s := startSuite(t, "ZEST_MAX_BODY_BYTES=65536")
	for _, p := range []string{"/api/v1/", "/api/v0/", "/v1/", "/v0/"} {
		t.Run(p, func(t *testing.T) {
			for route, want := range map[string]int{"health": 200, "models": 200, "models/builtin-llm": 200, "models/nope": 404} {
				if r := do(t, "GET", s.URL+p+route, ""); r.Status != want {
					t.Errorf("GET %s%s: %d %s", p, route, r.Status, r.Body)
				}
			}
			if r := do(t, "POST", s.URL+p+"chat/completions", `{"model":"builtin-llm","messages":[{"role":"user","content":"hi"}]}`); r.Status != 200 {
				t.Errorf("chat: %d %s", r.Status, r.Body)
			}
			body, ct := multipartAudio(t, toneWAVSized(7956), map[string]string{"model": "builtin-transcribe", "response_format": "verbose_json"})
			if r := do(t, "POST", s.URL+p+"audio/transcriptions", body, "Content-Type: "+ct); r.Status != 200 || r.JSON(t)["duration"] == nil {
				t.Errorf("transcription: %d %s", r.Status, r.Body)
			}
			if r := do(t, "POST", s.URL+p+"images/generations", `{"model":"builtin-image","prompt":"x","size":"32x32"}`); r.Status != 200 {
				t.Errorf("image: %d %s", r.Status, r.Body)
			}
			for _, route := range []string{"chat/completions", "audio/transcriptions", "images/generations"} {
				r := do(t, "GET", s.URL+p+route, "")
				if r.Status != 405 || r.JSON(t)["error"] != "Method Not Allowed. Use POST for this endpoint" {
					t.Errorf("GET %s: %d %s", route, r.Status, r.Body)
				}
			}
		})
	}
	openaiErr := func(t *testing.T, r Response, status int, want string) {
		t.Helper()
		e, _ := r.JSON(t)["error"].(map[string]any)
		if r.Status != status || e == nil || !strings.Contains(fmt.Sprint(e["message"]), want) || e["type"] == nil {
			t.Fatalf("%d %s, want %d with %q", r.Status, r.Body, status, want)
		}
	}
	t.Run("malformed JSON", func(t *testing.T) {
		openaiErr(t, do(t, "POST", s.URL+"/api/v1/chat/completions", `{"model":`), 400, "not a JSON object")
	})
	t.Run("wrong field type", func(t *testing.T) {
		openaiErr(t, do(t, "POST", s.URL+"/api/v1/chat/completions", `{"model":"builtin-llm","stream":"yes","messages":[{"role":"user","content":"x"}]}`), 400, "stream must be true or false")
	})
	t.Run("no messages", func(t *testing.T) {
		openaiErr(t, do(t, "POST", s.URL+"/api/v1/chat/completions", `{"model":"builtin-llm","messages":[]}`), 400, "messages")
	})
	t.Run("fields checked by name", func(t *testing.T) {
		for body, param := range map[string]string{
			`{"model":"builtin-llm","messages":[{"role":"robot","content":"x"}]}`:                                                          "messages[0].role",
			`{"model":"builtin-llm","messages":[{"role":"user","content":"x"},{"role":"tool","content":"1"}]}`:                             "messages[1].tool_call_id",
			`{"model":"builtin-llm","temperature":"hot","messages":[{"role":"user","content":"x"}]}`:                                       "temperature",
			`{"model":"builtin-llm","top_p":2,"messages":[{"role":"user","content":"x"}]}`:                                                 "top_p",
			`{"model":"builtin-llm","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`:                                            "max_tokens",
			`{"model":"builtin-llm","n":3,"messages":[{"role":"user","content":"x"}]}`:                                                     "n",
			`{"model":"builtin-llm","tool_choice":{"type":"function","function":{"name":"f"}},"messages":[{"role":"user","content":"x"}]}`: "tool_choice",
		} {
			r := do(t, "POST", s.URL+"/api/v1/chat/completions", body)
			e, _ := r.JSON(t)["error"].(map[string]any)
			if r.Status != 400 || e["param"] != param || e["type"] != "invalid_request_error" || strings.Contains(fmt.Sprint(e["message"]), "json:") {
				t.Errorf("%s: %d %s, want 400 naming %s", body, r.Status, r.Body, param)
			}
		}
	})
	t.Run("completion ids are fresh", func(t *testing.T) {
		id := regexp.MustCompile(`"id":"(chatcmpl-[0-9a-f]{24})"`)
		seen := map[string]bool{}
		for range 3 {
			r := do(t, "POST", s.URL+"/api/v1/chat/completions", `{"model":"builtin-llm","messages":[{"role":"developer","content":"d"},{"role":"user","content":"same"}]}`)
			m := id.FindSubmatch(r.Body)
			if r.Status != 200 || m == nil || seen[string(m[1])] {
				t.Fatalf("%d %s (ids so far %v)", r.Status, r.Body, seen)
			}
			seen[string(m[1])] = true
		}
	})
	t.Run("unknown model", func(t *testing.T) {
		openaiErr(t, do(t, "POST", s.URL+"/api/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"x"}]}`), 404, `model "nope" is not known`)
	})
	t.Run("oversized upload", func(t *testing.T) {
		body, ct := multipartAudio(t, make([]byte, 100<<10), map[string]string{"model": "builtin-transcribe"})
		r := do(t, "POST", s.URL+"/api/v1/audio/transcriptions", body, "Content-Type: "+ct)
		if r.Status != 413 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})
	t.Run("a WAV whose header lies", func(t *testing.T) {
		body, ct := multipartAudio(t, craftedWAV(), map[string]string{"model": "builtin-transcribe"})
		r := do(t, "POST", s.URL+"/api/v1/audio/transcriptions", body, "Content-Type: "+ct)
		openaiErr(t, r, 400, "audio: tone.wav: WAV block_align 1 does not match 2 channels × 32 bits")
		if !s.procs["zest-inference"].running() {
			t.Fatalf("the inference node exited:\n%s", s.Logs("zest-inference"))
		}
		body, ct = multipartAudio(t, toneWAVSized(7956), map[string]string{"model": "builtin-transcribe"})
		if r := do(t, "POST", s.URL+"/api/v1/audio/transcriptions", body, "Content-Type: "+ct); r.Status != 200 || !strings.Contains(string(r.Body), "0.25 s of 16000 Hz mono") {
			t.Fatalf("the next transcription: %d %s", r.Status, r.Body)
		}
	})
	t.Run("audio it cannot decode", func(t *testing.T) {
		body, ct := multipartAudio(t, []byte("ID3 not a wav"), map[string]string{"model": "builtin-transcribe"})
		openaiErr(t, do(t, "POST", s.URL+"/api/v1/audio/transcriptions", body, "Content-Type: "+ct), 400, "RIFF/WAVE PCM only")
	})
}

// TestClientCancelCancelsTheEngineRequest: a client that drops a stream through an
// OpenAI-compatible engine frees the engine slot at once (the upstream request is cancelled).
func TestClientCancelCancelsTheEngineRequest(t *testing.T) {
	base := append(os.Environ(), "ZEST_LOG_LEVEL=warn", "LEMONADE_API_KEY=", "LEMONADE_ADMIN_API_KEY=")
	upInf, upEdge := freeAddr(t), freeAddr(t)
	runService(t, "zest-inference", append(append([]string{}, base...), "ZEST_INFERENCE_ADDR="+upInf, "ZEST_BUILTIN_TOKEN_INTERVAL=50ms"))
	runService(t, "zest-gateway", append(append([]string{}, base...), "ZEST_INFERENCE_ADDR="+upInf, "ZEST_EDGE_ADDR="+upEdge,
		"ZEST_MCPGATEWAY_ADDR="+unusedAddr(t), "ZEST_TOOLHOST_ADDR="+unusedAddr(t)))
	models := filepath.Join(t.TempDir(), "models.yaml")
	os.WriteFile(models, []byte("models:\n  - id: slow\n    upstream_model: builtin-llm\n    base_urls: [http://"+upEdge+"/v1]\n"), 0o644)
	s := startSuite(t, "ZEST_MODELS_FILE="+models)

	inFlight := func() float64 {
		var h struct {
			Engines []struct {
				InFlight float64 `json:"in_flight"`
			} `json:"engines"`
		}
		json.Unmarshal(do(t, "GET", s.URL+"/api/v1/health", "").Body, &h)
		if len(h.Engines) != 1 {
			t.Fatalf("engines: %+v", h)
		}
		return h.Engines[0].InFlight
	}
	req, _ := http.NewRequest("POST", s.URL+"/api/v1/chat/completions",
		strings.NewReader(`{"model":"slow","stream":true,"messages":[{"role":"user","content":"`+strings.Repeat("word ", 100)+`"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	if !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q", line)
	}
	if n := inFlight(); n != 1 {
		t.Fatalf("in flight while streaming: %v", n)
	}
	resp.Body.Close() // the client goes away ~5 s before the completion would end
	waitfor.NoError(t, 2*time.Second, func() error {
		if n := inFlight(); n != 0 {
			return fmt.Errorf("still %v in flight", n)
		}
		return nil
	})
}
