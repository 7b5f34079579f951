package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
)

// endlessBytes is how much an endless peer below sends at most: more than any of Zest's bounds
// on an event-stream line (80 MiB for an MCP server's, 64 MiB for an engine's), so that a peer
// that stops on its own means Zest read all of it.
const endlessBytes = 256 << 20

// writeEndless writes an event whose line never ends, until endlessBytes or the reader left,
// counting what it wrote in sent.
func writeEndless(w http.ResponseWriter, start string, sent *atomic.Int64) {
	w.Header().Set("Content-Type", "text/event-stream")
	io.WriteString(w, start)
	piece := strings.Repeat("a", 64<<10)
	for sent.Load() < endlessBytes {
		n, err := io.WriteString(w, piece)
		sent.Add(int64(n))
		if err != nil {
			return
		}
	}
}

// TestEndlessEventStreamLine: a peer whose event stream never ends its line — an MCP server
// answering a tools/call, an OpenAI-compatible engine streaming a chat — gets its request
// answered with an error once Zest's bound is passed, instead of Zest gathering the line for
// ever (before, mcpgateway and the inference service each read the whole 256 MiB line).
func TestEndlessEventStreamLine(t *testing.T) {
	var mcpSent, engineSent atomic.Int64
	mcpServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&msg)
		answer := func(result string) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Mcp-Session-Id", "s1")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":`+result+`}`)
		}
		switch msg.Method {
		case "initialize":
			answer(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"endless","version":"1"}}`)
		case "tools/list":
			answer(`{"tools":[{"name":"endless","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			writeEndless(w, `data: {"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":{"content":[{"type":"text","text":"`, &mcpSent)
		case "server/discover":
			w.WriteHeader(http.StatusBadRequest)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(mcpServer.Close)
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			io.WriteString(w, `{"object":"list","data":[{"id":"endless"}]}`)
		case "/v1/chat/completions":
			writeEndless(w, `data: {"id":"c1","choices":[{"delta":{"content":"`, &engineSent)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(engine.Close)
	models := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(models, []byte(fmt.Sprintf(`health_interval: 200ms
models:
  - id: endless-llm
    engine: openai
    type: llm
    upstream_model: endless
    base_urls: [%s/v1]
    timeout: 60s
`, engine.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_MODELS_FILE="+models)

	t.Run("an MCP server's tools/call", func(t *testing.T) {
		cfg := map[string]any{"id": "endless", "name": "Endless", "transport": "streamable-http", "url": mcpServer.URL, "timeout_ms": 60000, "enabled": true}
		if r := admin(t, s, "POST", "/servers", jsonBody(t, map[string]any{"server": cfg})); r.Status != 200 {
			t.Fatalf("upsert: %d %s", r.Status, r.Body)
		}
		r := callTool(t, s, "endless", "endless", map[string]any{})
		if r.Status != http.StatusBadGateway {
			t.Fatalf("tools/call of an endless line: %d %.300s", r.Status, r.Body)
		}
		if n := mcpSent.Load(); n >= endlessBytes {
			t.Errorf("mcpgateway read the whole line (%d bytes)", n)
		}
		waitfor.NoError(t, 5*time.Second, func() error {
			if l := s.Logs("zest-mcpgateway"); !strings.Contains(l, "event-stream line over the limit") || !strings.Contains(l, "endless") {
				return fmt.Errorf("no warning names the server in mcpgateway's log")
			}
			return nil
		})
	})
	t.Run("an engine's chat stream", func(t *testing.T) {
		waitfor.NoError(t, 10*time.Second, func() error {
			if r, err := getOK(s.URL + "/api/v1/models"); err != nil || !strings.Contains(string(r), `"id":"endless-llm"`) {
				return fmt.Errorf("endless-llm not listed: %s %v", r, err)
			}
			return nil
		})
		r := do(t, "POST", s.URL+"/api/v1/chat/completions", `{"model":"endless-llm","stream":true,"messages":[{"role":"user","content":"x"}]}`,
			"Content-Type: application/json")
		if r.Status < 500 || !strings.Contains(string(r.Body), "67108864 bytes") {
			t.Fatalf("a chat whose stream never ends its line: %d %.300s", r.Status, r.Body)
		}
		if n := engineSent.Load(); n >= endlessBytes {
			t.Errorf("the inference service read the whole line (%d bytes)", n)
		}
	})
}
