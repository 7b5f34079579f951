package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
)

// TestOpenAICompatibleEngineFailover: a second inference node, serving the built-in engines
// through two edges of its own, is the OpenAI-compatible engine (two replicas) of the first
// suite. Chat is relayed through it; when one replica is killed, requests fail over to the
// other and the edge's health shows the dead replica.
func TestOpenAICompatibleEngineFailover(t *testing.T) {
	base := append(os.Environ(), "ZEST_LOG_LEVEL=warn", "LEMONADE_API_KEY=", "LEMONADE_ADMIN_API_KEY=")
	upInf := freeAddr(t)
	runService(t, "zest-inference", append(append([]string{}, base...), "ZEST_INFERENCE_ADDR="+upInf))
	var replicas []*service
	var urls []string
	for range 2 {
		addr := freeAddr(t)
		replicas = append(replicas, runService(t, "zest-gateway", append(append([]string{}, base...),
			"ZEST_INFERENCE_ADDR="+upInf, "ZEST_EDGE_ADDR="+addr, "ZEST_MCPGATEWAY_ADDR="+unusedAddr(t), "ZEST_TOOLHOST_ADDR="+unusedAddr(t))))
		urls = append(urls, "http://"+addr+"/v1")
	}
	models := filepath.Join(t.TempDir(), "models.yaml")
	os.WriteFile(models, []byte(fmt.Sprintf(`health_interval: 200ms
models:
  - id: remote-llm
    engine: openai
    type: llm
    upstream_model: builtin-llm
    base_urls: [%s, %s]
    max_concurrency: 4
    timeout: 10s
`, urls[0], urls[1])), 0o644)
	s := startSuite(t, "ZEST_MODELS_FILE="+models)

	waitfor.NoError(t, 10*time.Second, func() error {
		r, err := getOK(s.URL + "/api/v1/models")
		if err != nil || !strings.Contains(string(r), `"id":"remote-llm"`) || !strings.Contains(string(r), `"loaded":true,"object":"model","owned_by":"zest","recipe":"openai"`) {
			return fmt.Errorf("remote-llm not loaded: %s %v", r, err)
		}
		return nil
	})
	chat := func(stream bool) Response {
		return do(t, "POST", s.URL+"/api/v1/chat/completions",
			fmt.Sprintf(`{"model":"remote-llm","stream":%v,"messages":[{"role":"user","content":"through the relay"}]}`, stream),
			"Content-Type: application/json")
	}
	r := chat(true)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"content":"relay"`) || !strings.HasSuffix(strings.TrimSpace(string(r.Body)), "data: [DONE]") {
		t.Fatalf("streamed relay: %d %s", r.Status, r.Body)
	}
	if r := chat(false); r.Status != 200 || !strings.Contains(string(r.Body), `"content":"builtin-llm heard: through the relay"`) {
		t.Fatalf("relay: %d %s", r.Status, r.Body)
	}

	replicas[0].stop(syscall.SIGKILL)
	for i := range 10 {
		if r := chat(i%2 == 0); r.Status != 200 {
			t.Fatalf("request %d after a replica died: %d %s", i, r.Status, r.Body)
		}
	}
	h := do(t, "GET", s.URL+"/api/v1/health", "")
	if !strings.Contains(string(h.Body), `"healthy":false`) || !strings.Contains(string(h.Body), urls[0]) || h.Status != http.StatusOK {
		t.Fatalf("health does not show the dead replica (or calls the suite down while one replica serves): %d %s", h.Status, h.Body)
	}
	replicas[1].stop(syscall.SIGKILL)
	if r := chat(false); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("with no replica left: %d %s", r.Status, r.Body)
	}
	if h := do(t, "GET", s.URL+"/api/v1/health", ""); h.Status != http.StatusServiceUnavailable || !strings.Contains(string(h.Body), "degraded") {
		t.Fatalf("health with no replica: %d %s", h.Status, h.Body)
	}
}
