package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/lib/waitfor"
)

// fakeEngine is a small HTTP peer standing in for lemond or Ollama: it records every call
// (method, path, JSON body) and keeps which models it holds loaded.
type fakeEngine struct {
	*httptest.Server
	mu        sync.Mutex
	calls     []fakeCall
	loaded    map[string]bool
	cancelled chan struct{} // closed when a blocking pull's request is cancelled
}

type fakeCall struct {
	Method, Path string
	Body         map[string]any
}

func (f *fakeEngine) record(r *http.Request) map[string]any {
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	f.mu.Lock()
	f.calls = append(f.calls, fakeCall{r.Method, r.URL.Path, body})
	f.mu.Unlock()
	return body
}

// call returns the last call to path, if any.
func (f *fakeEngine) call(path string) (fakeCall, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.calls) - 1; i >= 0; i-- {
		if f.calls[i].Path == path {
			return f.calls[i], true
		}
	}
	return fakeCall{}, false
}

func (f *fakeEngine) setLoaded(name string, v bool) {
	f.mu.Lock()
	f.loaded[name] = v
	f.mu.Unlock()
}

func (f *fakeEngine) loadedNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n, v := range f.loaded {
		if v {
			out = append(out, n)
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// newFakeLemond serves lemond's routes under /api/v1: models, health, load, unload, pull
// (SSE with stream true; "slow-model" sends one event and blocks until the request ends),
// delete.
func newFakeLemond(t *testing.T) *fakeEngine {
	f := &fakeEngine{loaded: map[string]bool{}, cancelled: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/models", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"object": "list", "data": []map[string]any{{"id": "Qwen3-0.6B-GGUF"}, {"id": "slow-model"}}})
	})
	mux.HandleFunc("GET /api/v1/health", func(w http.ResponseWriter, r *http.Request) {
		all := []map[string]any{}
		for _, n := range f.loadedNames() {
			all = append(all, map[string]any{"model_name": n, "type": "llm"})
		}
		writeJSON(w, map[string]any{"status": "ok", "all_models_loaded": all})
	})
	mux.HandleFunc("POST /api/v1/load", func(w http.ResponseWriter, r *http.Request) {
		b := f.record(r)
		f.setLoaded(b["model_name"].(string), true)
		writeJSON(w, map[string]any{"status": "success", "message": "Loaded model: " + b["model_name"].(string)})
	})
	mux.HandleFunc("POST /api/v1/unload", func(w http.ResponseWriter, r *http.Request) {
		b := f.record(r)
		f.setLoaded(b["model_name"].(string), false)
		writeJSON(w, map[string]any{"status": "success", "message": "Model unloaded successfully"})
	})
	mux.HandleFunc("POST /api/v1/delete", func(w http.ResponseWriter, r *http.Request) {
		b := f.record(r)
		writeJSON(w, map[string]any{"status": "success", "message": "Deleted model: " + b["model_name"].(string)})
	})
	mux.HandleFunc("POST /api/v1/pull", func(w http.ResponseWriter, r *http.Request) {
		b := f.record(r)
		if b["stream"] != true {
			writeJSON(w, map[string]any{"status": "success", "message": "Installed model: " + b["model_name"].(string)})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		fmt.Fprint(w, "event: progress\ndata: {\"file\":\"model.gguf\",\"file_index\":1,\"total_files\":2,\"bytes_downloaded\":400,\"bytes_total\":1000,\"percent\":40}\n\n")
		fl.Flush()
		if b["model_name"] == "slow-model" {
			<-r.Context().Done()
			close(f.cancelled)
			return
		}
		fmt.Fprint(w, "event: progress\ndata: {\"file\":\"config.json\",\"file_index\":2,\"total_files\":2,\"bytes_downloaded\":10,\"bytes_total\":10,\"percent\":100}\n\n")
		fmt.Fprint(w, "event: complete\ndata: {\"file_index\":2,\"total_files\":2,\"percent\":100}\n\n")
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

// newFakeOllama serves Ollama's routes: /v1/models, /api/ps, /api/generate (keep_alive
// loads or unloads), /api/pull (NDJSON), /api/delete.
func newFakeOllama(t *testing.T) *fakeEngine {
	f := &fakeEngine{loaded: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"object": "list", "data": []map[string]any{{"id": "qwen:0.5b"}}})
	})
	mux.HandleFunc("GET /api/ps", func(w http.ResponseWriter, r *http.Request) {
		ms := []map[string]any{}
		for _, n := range f.loadedNames() {
			ms = append(ms, map[string]any{"name": n, "model": n})
		}
		writeJSON(w, map[string]any{"models": ms})
	})
	mux.HandleFunc("POST /api/generate", func(w http.ResponseWriter, r *http.Request) {
		b := f.record(r)
		f.setLoaded(b["model"].(string), b["keep_alive"] != float64(0))
		writeJSON(w, map[string]any{"model": b["model"], "done": true})
	})
	mux.HandleFunc("DELETE /api/delete", func(w http.ResponseWriter, r *http.Request) {
		f.record(r)
	})
	mux.HandleFunc("POST /api/pull", func(w http.ResponseWriter, r *http.Request) {
		f.record(r)
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, l := range []string{`{"status":"pulling manifest"}`, `{"status":"pulling abc","digest":"sha256:abc","total":1000,"completed":250}`,
			`{"status":"pulling abc","digest":"sha256:abc","total":1000,"completed":1000}`, `{"status":"verifying sha256 digest"}`, `{"status":"success"}`} {
			fmt.Fprintln(w, l)
		}
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

// modelsSuite starts a suite whose model file has a Lemonade engine, an Ollama engine, a
// plain OpenAI-compatible engine and a Lemonade engine that is down.
func modelsSuite(t *testing.T) (*Suite, *fakeEngine, *fakeEngine, *fakeEngine) {
	lem, oll, doomed := newFakeLemond(t), newFakeOllama(t), newFakeLemond(t)
	models := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(models, []byte(fmt.Sprintf(`health_interval: 200ms
models:
  - id: lem-llm
    engine_kind: lemonade
    upstream_model: Qwen3-0.6B-GGUF
    base_urls: [%[1]s/api/v1]
  - id: lem-slow
    engine_kind: lemonade
    upstream_model: slow-model
    base_urls: [%[1]s/api/v1]
  - id: oll-llm
    engine_kind: ollama
    upstream_model: "qwen:0.5b"
    base_urls: [%[2]s/v1]
  - id: plain-llm
    upstream_model: Qwen3-0.6B-GGUF
    base_urls: [%[1]s/api/v1]
  - id: down-llm
    engine_kind: lemonade
    upstream_model: Qwen3-0.6B-GGUF
    base_urls: [%[3]s/api/v1]
`, lem.URL, oll.URL, doomed.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	// down-llm's engine stops once the suite is up (a suite with an engine down from the start
	// reports itself degraded, and startSuite waits for healthy).
	return startSuite(t, "ZEST_MODELS_FILE="+models), lem, oll, doomed
}

func modelEntry(t *testing.T, s *Suite, id string, showAll bool) map[string]any {
	t.Helper()
	url := s.URL + "/api/v1/models"
	if showAll {
		url += "?show_all=true"
	}
	r := do(t, "GET", url, "")
	for _, m := range r.JSON(t)["data"].([]any) {
		if m.(map[string]any)["id"] == id {
			return m.(map[string]any)
		}
	}
	return nil
}

func loadedInHealth(t *testing.T, s *Suite) (map[string]map[string]any, map[string]any) {
	t.Helper()
	h := do(t, "GET", s.URL+"/api/v1/health", "").JSON(t)
	out := map[string]map[string]any{}
	for _, m := range h["all_models_loaded"].([]any) {
		out[m.(map[string]any)["model_name"].(string)] = m.(map[string]any)
	}
	return out, h
}

func post(t *testing.T, url, body string) Response {
	t.Helper()
	return do(t, "POST", url, body, "Content-Type: application/json")
}

func wantError(t *testing.T, r Response, status int, param, contains string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	e, _ := r.JSON(t)["error"].(map[string]any)
	if e == nil || !strings.Contains(fmt.Sprint(e["message"]), contains) {
		t.Fatalf("error %s does not say %q", r.Body, contains)
	}
	if param != "" && e["param"] != param {
		t.Fatalf("param %v, want %s: %s", e["param"], param, r.Body)
	}
}

// TestModelManagement: Lemonade's load, unload, pull, delete, stats, system-info and health
// under the four prefixes; the built-in models' state in GET models and GET health; the
// calls relayed to a lemond-like and an Ollama-like engine with their shapes; a plain
// OpenAI-compatible engine refused with the reason; an engine down answered 503; bad input
// answered 400 naming the field; each lemonade_*_model tool through /mcp with mcp-go's client.
func TestModelManagement(t *testing.T) {
	s, lem, oll, doomed := modelsSuite(t)

	t.Run("labels", func(t *testing.T) {
		for id, want := range map[string][]string{"builtin-llm": {"chat", "tool-calling"}, "builtin-image": {"image"},
			"builtin-transcribe": {"transcription"}, "lem-llm": {"chat"}, "plain-llm": {"chat"}} {
			m := modelEntry(t, s, id, true)
			if m == nil {
				t.Fatalf("%s not listed", id)
			}
			for _, l := range want {
				if !slices.Contains(m["labels"].([]any), any(l)) {
					t.Errorf("%s labels %v lack %s", id, m["labels"], l)
				}
			}
		}
	})

	t.Run("every route under every prefix", func(t *testing.T) {
		for _, p := range []string{"/api/v1/", "/api/v0/", "/v1/", "/v0/"} {
			if r := do(t, "GET", s.URL+p+"stats", ""); r.Status != 200 || r.JSON(t)["request_count_total"] == nil {
				t.Fatalf("%sstats: %d %s", p, r.Status, r.Body)
			}
			r := do(t, "GET", s.URL+p+"system-info", "")
			si := r.JSON(t)
			if r.Status != 200 || si["Processor"] == "" || si["recipes"].(map[string]any)["builtin"] == nil ||
				si["recipes"].(map[string]any)["lemonade"] == nil || si["devices"].(map[string]any)["cpu"] == nil {
				t.Fatalf("%ssystem-info: %d %s", p, r.Status, r.Body)
			}
			for _, step := range []struct{ route, msg string }{{"unload", "Model unloaded successfully"}, {"load", "Loaded model: builtin-image"},
				{"delete", "Deleted model: builtin-image"}, {"pull", "Installed model: builtin-image"}, {"load", "Loaded model: builtin-image"}} {
				r := post(t, s.URL+p+step.route, `{"model_name":"builtin-image"}`)
				if b := r.JSON(t); r.Status != 200 || b["status"] != "success" || b["message"] != step.msg {
					t.Fatalf("%s%s: %d %s", p, step.route, r.Status, r.Body)
				}
			}
			if r := do(t, "GET", s.URL+p+"load", ""); r.Status != http.StatusMethodNotAllowed {
				t.Fatalf("GET %sload: %d", p, r.Status)
			}
			if r := post(t, s.URL+p+"stats", ""); r.Status != http.StatusMethodNotAllowed {
				t.Fatalf("POST %sstats: %d", p, r.Status)
			}
		}
	})

	t.Run("built-in state in models and health", func(t *testing.T) {
		if r := post(t, s.URL+"/api/v1/unload", `{"model_name":"builtin-llm"}`); r.Status != 200 {
			t.Fatalf("unload: %d %s", r.Status, r.Body)
		}
		if m := modelEntry(t, s, "builtin-llm", false); m == nil || m["loaded"] != false || m["downloaded"] != true {
			t.Fatalf("after unload: %v", m)
		}
		if l, _ := loadedInHealth(t, s); l["builtin-llm"] != nil {
			t.Fatalf("health still lists builtin-llm as loaded: %v", l)
		}
		if r := post(t, s.URL+"/api/v1/load", `{"model_name":"builtin-llm"}`); r.Status != 200 {
			t.Fatalf("load: %d %s", r.Status, r.Body)
		}
		if m := modelEntry(t, s, "builtin-llm", false); m["loaded"] != true {
			t.Fatalf("after load: %v", m)
		}
		l, h := loadedInHealth(t, s)
		if m := l["builtin-llm"]; m == nil || m["type"] != "llm" || m["recipe"] != "builtin" || m["device"] != "cpu" || h["model_loaded"] != "builtin-llm" || h["version"] == "" {
			t.Fatalf("health after load: %v", h)
		}
		if h["services"] == nil || h["engines"] == nil {
			t.Fatalf("health lost Zest's own members: %v", h)
		}
		// delete: not downloaded (listed only with show_all, as suggested); a request loads it again.
		post(t, s.URL+"/api/v1/delete", `{"model_name":"builtin-transcribe"}`)
		if m := modelEntry(t, s, "builtin-transcribe", false); m != nil {
			t.Fatalf("deleted model listed without show_all: %v", m)
		}
		if m := modelEntry(t, s, "builtin-transcribe", true); m == nil || m["suggested"] != true || m["downloaded"] != false {
			t.Fatalf("deleted model with show_all: %v", m)
		}
		post(t, s.URL+"/api/v1/unload", `{}`) // every loaded model
		if l, _ := loadedInHealth(t, s); l["builtin-llm"] != nil || l["builtin-image"] != nil {
			t.Fatalf("unload of everything left %v", l)
		}
		r := post(t, s.URL+"/api/v1/chat/completions", `{"model":"builtin-llm","messages":[{"role":"user","content":"wake up"}]}`)
		if r.Status != 200 {
			t.Fatalf("chat after unload: %d %s", r.Status, r.Body)
		}
		if m := modelEntry(t, s, "builtin-llm", false); m["loaded"] != true {
			t.Fatalf("a request did not load the model: %v", m)
		}
		st := do(t, "GET", s.URL+"/api/v1/stats", "").JSON(t)
		if st["output_tokens"].(float64) < 1 || st["request_count_total"].(float64) < 1 || st["time_to_first_token"] == nil {
			t.Fatalf("stats after a chat: %v", st)
		}
	})

	t.Run("lemond relay", func(t *testing.T) {
		r := post(t, s.URL+"/api/v1/load", `{"model_name":"lem-llm","ctx_size":8192,"llamacpp_backend":"vulkan"}`)
		if r.Status != 200 || r.JSON(t)["message"] != "Loaded model: lem-llm" {
			t.Fatalf("load: %d %s", r.Status, r.Body)
		}
		c, ok := lem.call("/api/v1/load")
		if !ok || c.Method != "POST" || c.Body["model_name"] != "Qwen3-0.6B-GGUF" || c.Body["ctx_size"] != float64(8192) || c.Body["llamacpp_backend"] != "vulkan" {
			t.Fatalf("lemond got %+v", c)
		}
		waitfor.NoError(t, 5*time.Second, func() error {
			l, _ := loadedInHealth(t, s)
			if m := l["lem-llm"]; m == nil || m["recipe"] != "lemonade" || m["backend_url"] != lem.URL+"/api/v1" || m["checkpoint"] != "Qwen3-0.6B-GGUF" {
				return fmt.Errorf("health: %v", l)
			}
			return nil
		})
		if m := modelEntry(t, s, "lem-llm", false); m["loaded"] != true {
			t.Fatalf("models: %v", m)
		}
		if r := post(t, s.URL+"/api/v1/unload", `{"model_name":"lem-llm"}`); r.Status != 200 {
			t.Fatalf("unload: %d %s", r.Status, r.Body)
		}
		if c, ok := lem.call("/api/v1/unload"); !ok || c.Body["model_name"] != "Qwen3-0.6B-GGUF" {
			t.Fatalf("lemond unload got %+v", c)
		}
		if m := modelEntry(t, s, "lem-llm", false); m["loaded"] != false {
			t.Fatalf("after unload: %v", m)
		}
		// pull, streamed: lemond's events relayed one by one.
		r = post(t, s.URL+"/v1/pull", `{"model_name":"lem-llm","stream":true}`)
		if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("pull stream: %d %s", r.Status, r.Body)
		}
		events := sseEvents(t, string(r.Body))
		if len(events) != 3 || events[0].name != "progress" || events[0].data["percent"] != float64(40) || events[0].data["file"] != "model.gguf" ||
			events[1].data["file_index"] != float64(2) || events[2].name != "complete" {
			t.Fatalf("pull events: %s", r.Body)
		}
		if c, _ := lem.call("/api/v1/pull"); c.Body["stream"] != true || c.Body["model_name"] != "Qwen3-0.6B-GGUF" {
			t.Fatalf("lemond pull got %+v", c)
		}
		// pull, not streamed; and GUI3's stream with subscribe false: the completed snapshot.
		if r := post(t, s.URL+"/v1/pull", `{"model_name":"lem-llm"}`); r.Status != 200 || r.JSON(t)["message"] != "Installed model: lem-llm" {
			t.Fatalf("pull: %d %s", r.Status, r.Body)
		}
		if r := post(t, s.URL+"/v1/pull", `{"model_name":"lem-llm","stream":true,"subscribe":false}`); r.Status != 200 || r.JSON(t)["complete"] != true || r.JSON(t)["status"] != "completed" {
			t.Fatalf("pull subscribe false: %d %s", r.Status, r.Body)
		}
		if r := post(t, s.URL+"/v0/delete", `{"model_name":"lem-llm"}`); r.Status != 200 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		if c, _ := lem.call("/api/v1/delete"); c.Body["model_name"] != "Qwen3-0.6B-GGUF" {
			t.Fatalf("lemond delete got %+v", c)
		}
	})

	t.Run("ollama relay", func(t *testing.T) {
		if r := post(t, s.URL+"/api/v1/load", `{"model_name":"oll-llm"}`); r.Status != 200 {
			t.Fatalf("load: %d %s", r.Status, r.Body)
		}
		if c, _ := oll.call("/api/generate"); c.Body["model"] != "qwen:0.5b" || c.Body["keep_alive"] != float64(-1) {
			t.Fatalf("ollama load got %+v", c)
		}
		if l, _ := loadedInHealth(t, s); l["oll-llm"] == nil || l["oll-llm"]["recipe"] != "ollama" {
			t.Fatalf("health: %v", l)
		}
		post(t, s.URL+"/api/v1/unload", `{"model_name":"oll-llm"}`)
		if c, _ := oll.call("/api/generate"); c.Body["keep_alive"] != float64(0) {
			t.Fatalf("ollama unload got %+v", c)
		}
		r := post(t, s.URL+"/api/v1/pull", `{"model_name":"oll-llm","stream":true}`)
		events := sseEvents(t, string(r.Body))
		if r.Status != 200 || len(events) < 3 || events[len(events)-1].name != "complete" {
			t.Fatalf("pull: %d %s", r.Status, r.Body)
		}
		if e := events[1].data; e["file"] != "sha256:abc" || e["percent"] != float64(25) || e["bytes_total"] != float64(1000) {
			t.Fatalf("ollama progress as Lemonade's: %v", e)
		}
		if c, _ := oll.call("/api/pull"); c.Body["model"] != "qwen:0.5b" {
			t.Fatalf("ollama pull got %+v", c)
		}
		if r := post(t, s.URL+"/api/v1/delete", `{"model_name":"oll-llm"}`); r.Status != 200 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		if c, _ := oll.call("/api/delete"); c.Method != "DELETE" || c.Body["model"] != "qwen:0.5b" {
			t.Fatalf("ollama delete got %+v", c)
		}
	})

	t.Run("engines that cannot", func(t *testing.T) {
		for _, route := range []string{"load", "unload", "pull", "delete"} {
			r := post(t, s.URL+"/api/v1/"+route, `{"model_name":"plain-llm"}`)
			wantError(t, r, 400, "", "no model management")
			if !strings.Contains(string(r.Body), lem.URL) {
				t.Fatalf("the reason does not name the engine: %s", r.Body)
			}
		}
		doomed.Close()
		r := post(t, s.URL+"/api/v1/load", `{"model_name":"down-llm"}`)
		wantError(t, r, 503, "", "cannot be reached")
		if !strings.Contains(string(r.Body), doomed.URL) {
			t.Fatalf("503 does not name the engine: %s", r.Body)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		wantError(t, post(t, s.URL+"/api/v1/load", `{}`), 400, "model_name", "model_name is required")
		wantError(t, post(t, s.URL+"/api/v1/delete", ``), 400, "", "JSON")
		wantError(t, post(t, s.URL+"/api/v1/pull", `{"model_name":5}`), 400, "model_name", "must be a string")
		wantError(t, post(t, s.URL+"/api/v1/pull", `{"model_name":"builtin-llm","stream":"yes"}`), 400, "stream", "must be a boolean")
		wantError(t, post(t, s.URL+"/api/v1/load", `{"model_name":"builtin-llm","ctx_size":"big"}`), 400, "ctx_size", "must be a number")
		wantError(t, post(t, s.URL+"/api/v1/unload", `[1]`), 400, "", "not a JSON object")
		wantError(t, post(t, s.URL+"/api/v1/load", `{"model_name":"nope"}`), 404, "model_name", "not known")
		big := `{"model_name":"builtin-llm","pad":"` + strings.Repeat("x", 64<<10) + `"}`
		wantError(t, post(t, s.URL+"/api/v1/load", big), 413, "", "")
	})

	t.Run("MCP tools", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		c, err := mcpclient.NewStreamableHttpClient(s.URL + "/mcp")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var mu sync.Mutex
		var progress []map[string]any
		c.OnNotification(func(n mcp.JSONRPCNotification) {
			if n.Method == "notifications/progress" {
				mu.Lock()
				progress = append(progress, n.Params.AdditionalFields)
				mu.Unlock()
			}
		})
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		init := mcp.InitializeRequest{}
		init.Params.ProtocolVersion = "2025-11-25"
		init.Params.ClientInfo = mcp.Implementation{Name: "zest-e2e-models", Version: "1"}
		if _, err := c.Initialize(ctx, init); err != nil {
			t.Fatal(err)
		}
		tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, tl := range tools.Tools {
			switch tl.Name {
			case "lemonade_load_model", "lemonade_unload_model", "lemonade_pull_model", "lemonade_delete_model":
				found++
				destructive := tl.Name == "lemonade_delete_model"
				if tl.Annotations.DestructiveHint == nil || *tl.Annotations.DestructiveHint != destructive || *tl.Annotations.ReadOnlyHint {
					t.Errorf("%s annotations %+v", tl.Name, tl.Annotations)
				}
			}
		}
		if found != 4 {
			t.Fatalf("tools/list has %d of the 4 model tools", found)
		}
		callTool := func(name string, args map[string]any, token any) *mcp.CallToolResult {
			t.Helper()
			req := mcp.CallToolRequest{}
			req.Params.Name, req.Params.Arguments = name, args
			if token != nil {
				req.Params.Meta = &mcp.Meta{ProgressToken: token}
			}
			res, err := c.CallTool(ctx, req)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return res
		}
		text := func(r *mcp.CallToolResult) string { return r.Content[0].(mcp.TextContent).Text }
		if r := callTool("lemonade_unload_model", map[string]any{"model_name": "builtin-image"}, nil); r.IsError || text(r) != "Model unloaded successfully" {
			t.Fatalf("unload: %+v", r)
		}
		if m := modelEntry(t, s, "builtin-image", false); m["loaded"] != false {
			t.Fatalf("unload through MCP not reflected: %v", m)
		}
		if r := callTool("lemonade_load_model", map[string]any{"model_name": "lem-llm", "ctx_size": 4096}, nil); r.IsError || text(r) != "Loaded model: lem-llm" {
			t.Fatalf("load: %+v", r)
		}
		if c, _ := lem.call("/api/v1/load"); c.Body["ctx_size"] != float64(4096) {
			t.Fatalf("lemond got %+v", c)
		}
		if r := callTool("lemonade_pull_model", map[string]any{"model_name": "lem-llm"}, "pull-1"); r.IsError || text(r) != "Installed model: lem-llm" {
			t.Fatalf("pull: %+v", r)
		}
		mu.Lock()
		got := len(progress)
		first := map[string]any{}
		if got > 0 {
			first = progress[0]
		}
		mu.Unlock()
		if got < 2 || first["progressToken"] != "pull-1" || first["progress"] != float64(40) || first["total"] != float64(100) {
			t.Fatalf("progress notifications %d, first %v", got, first)
		}
		if r := callTool("lemonade_delete_model", map[string]any{"model_name": "builtin-image"}, nil); r.IsError || text(r) != "Deleted model: builtin-image" {
			t.Fatalf("delete: %+v", r)
		}
		if r := callTool("lemonade_delete_model", map[string]any{"model_name": "plain-llm"}, nil); !r.IsError || !strings.Contains(text(r), "no model management") {
			t.Fatalf("delete on a plain engine: %+v", r)
		}
		if r := callTool("lemonade_load_model", map[string]any{}, nil); !r.IsError || !strings.Contains(text(r), "model_name is required") {
			t.Fatalf("load without model_name: %+v", r)
		}
		if r := callTool("lemonade_load_model", map[string]any{"model_name": 7}, nil); !r.IsError || !strings.Contains(text(r), "model_name") {
			t.Fatalf("load with a number: %+v", r)
		}
		// Cancellation: the client gives up on a pull that hangs; the engine's request ends.
		pctx, pcancel := context.WithCancel(ctx)
		go func() {
			waitfor.NoError(t, 10*time.Second, func() error {
				mu.Lock()
				defer mu.Unlock()
				for _, p := range progress {
					if p["progressToken"] == "slow" {
						return nil
					}
				}
				return fmt.Errorf("no progress of the slow pull yet")
			})
			pcancel()
		}()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "lemonade_pull_model", map[string]any{"model_name": "lem-slow"}
		req.Params.Meta = &mcp.Meta{ProgressToken: "slow"}
		if _, err := c.CallTool(pctx, req); err == nil {
			t.Fatal("the cancelled pull returned a result")
		}
		select {
		case <-lem.cancelled:
		case <-time.After(10 * time.Second):
			t.Fatal("the engine's pull request was not cancelled")
		}
	})
}

type sseEvent struct {
	name string
	data map[string]any
}

func sseEvents(t *testing.T, body string) []sseEvent {
	t.Helper()
	var out []sseEvent
	name := ""
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			name = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			var d map[string]any
			if err := json.Unmarshal([]byte(v), &d); err != nil {
				t.Fatalf("event data %q: %v", v, err)
			}
			out = append(out, sseEvent{name, d})
		}
	}
	return out
}

// TestModelToolsFromTheTypeScriptSDK: the four model-management tools of /mcp called by the
// official TypeScript SDK, their effect seen in GET models: builtin-image unloaded, loaded
// again, deleted (not downloaded), pulled back (downloaded), and a refusal as isError.
func TestModelToolsFromTheTypeScriptSDK(t *testing.T) {
	s := startSuite(t)
	calls := `[["lemonade_unload_model", {"model_name": "builtin-image"}],
		["lemonade_load_model", {"model_name": "builtin-image"}],
		["lemonade_delete_model", {"model_name": "builtin-image"}],
		["lemonade_pull_model", {"model_name": "builtin-image"}],
		["lemonade_load_model", {"model_name": "no-such-model"}]]`
	cmd := exec.Command("node", filepath.Join(peersDir(t), "tools-client.mjs"), s.URL+"/mcp", calls)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("tools-client.mjs: %v\n%s", err, stderr)
	}
	var got []struct {
		Tool    string
		IsError bool
		Text    string
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got) != 5 {
		t.Fatalf("%v: %s", err, out)
	}
	for i, want := range []string{"Model unloaded successfully", "Loaded model: builtin-image", "Deleted model: builtin-image", "Installed model: builtin-image"} {
		if got[i].IsError || got[i].Text != want {
			t.Errorf("%s: %+v, want %q", got[i].Tool, got[i], want)
		}
	}
	if !got[4].IsError || !strings.Contains(got[4].Text, "no-such-model") {
		t.Errorf("an unknown model: %+v", got[4])
	}
	r := do(t, "GET", s.URL+"/api/v1/models?show_all=true", "")
	for _, m := range asSlice(r.JSON(t)["data"]) {
		if mm := m.(map[string]any); mm["id"] == "builtin-image" && mm["downloaded"] != true {
			t.Errorf("builtin-image after pull: %v", mm)
		}
	}
}
