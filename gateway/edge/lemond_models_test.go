package edge

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// TestModelFilesRuntimeAndLoadCommand: GUI3's model views get lemond's shapes from the model's
// entry, under every prefix; an unknown model is 404 naming it.
func TestModelFilesRuntimeAndLoadCommand(t *testing.T) {
	te := startEdge(t, nil)
	for _, p := range Prefixes {
		a := do(t, http.MethodGet, te.url+p+"models/far-llm/files", "", "Origin", guiOrigin)
		if m := a.json(t); a.status != 200 || m["model_id"] != "far-llm" || m["files"] == nil || len(m["files"].([]any)) != 0 ||
			a.header.Get("Access-Control-Allow-Origin") != guiOrigin {
			t.Errorf("%s files: %d %s", p, a.status, a.body)
		}
		a = do(t, http.MethodGet, te.url+p+"models/far-llm/runtime", "")
		if m := a.json(t); a.status != 200 || m["model_name"] != "far-llm" || m["ctx_size"] != -1.0 {
			t.Errorf("%s runtime: %d %s", p, a.status, a.body)
		}
		a = do(t, http.MethodPost, te.url+p+"load/command", `{"model_name":"far-llm","ctx_size":4096}`, "Content-Type", "application/json")
		m := a.json(t)
		opts, _ := m["options"].(map[string]any)
		if args, _ := m["args"].([]any); a.status != 200 || m["model_name"] != "far-llm" || m["recipe"] != "openai" || opts["upstream_model"] != "qwen" ||
			args == nil || !strings.Contains(m["command"].(string), `{"model_name":"far-llm"}`) {
			t.Errorf("%s load/command: %d %s", p, a.status, a.body)
		}
	}
	for _, path := range []string{"models/nope/files", "models/nope/runtime"} {
		if a := do(t, http.MethodGet, te.url+"/api/v1/"+path, ""); a.status != 404 || !strings.Contains(a.body, "nope") {
			t.Errorf("%s: %d %s", path, a.status, a.body)
		}
	}
	if a := do(t, http.MethodPost, te.url+"/api/v1/load/command", `{"model_name":"nope"}`); a.status != 404 {
		t.Errorf("load/command of an unknown model: %d %s", a.status, a.body)
	}
	if a := do(t, http.MethodPost, te.url+"/api/v1/load/command", `{}`); a.status != 400 || a.json(t)["error"].(map[string]any)["param"] != "model_name" {
		t.Errorf("load/command without a model: %d %s", a.status, a.body)
	}
}

// TestLemondFeaturesZestLacks: each route GUI3 calls for a feature Zest does not have answers
// as lemond answers an unavailable feature (400, error.message, which GUI3 shows, saying what
// Zest does instead), under every prefix and with CORS; jobs list as none.
func TestLemondFeaturesZestLacks(t *testing.T) {
	te := startEdge(t, nil)
	cases := []struct{ method, path, body, says string }{
		{"POST", "install", `{"backend":"cloud","provider":"openrouter","base_url":"https://openrouter.ai/api/v1","allow_insecure_http":false}`, "no cloud providers"},
		{"POST", "install", `{"recipe":"llamacpp","backend":"vulkan","stream":true,"subscribe":false}`, "installs no backends"},
		{"POST", "uninstall", `{"backend":"cloud","provider":"openrouter"}`, "no cloud providers"},
		{"POST", "uninstall", `{"recipe":"llamacpp","backend":"vulkan"}`, "none to uninstall"},
		{"POST", "cloud/auth", `{"provider":"openrouter","api_key":"k"}`, "no cloud providers"},
		{"DELETE", "cloud/auth/openrouter", ``, "no cloud providers"},
		{"GET", "pull/variants?checkpoint=unsloth%2FQwen3-GGUF&source=huggingface", ``, "does not search model registries"},
		{"GET", "registry/search?source=huggingface&query=qwen&limit=14&format=gguf", ``, "does not search model registries"},
		{"POST", "models/register", `{"model_name":"user.Mine","checkpoint":"x"}`, "does not register model definitions"},
		{"POST", "jobs", `{"name":"j","definition":{"steps":[]},"inputs":{}}`, "runs no jobs"},
		{"POST", "images/upscale", `{"model":"m","image":"AAAA"}`, "no image upscaling"},
	}
	for _, p := range Prefixes {
		for _, c := range cases {
			a := do(t, c.method, te.url+p+c.path, c.body, "Origin", guiOrigin, "Content-Type", "application/json")
			e, _ := a.json(t)["error"].(map[string]any)
			msg, _ := e["message"].(string)
			if a.status != 400 || e["code"] != UnsupportedCode || !strings.Contains(msg, c.says) || a.header.Get("Access-Control-Allow-Origin") != guiOrigin {
				t.Errorf("%s %s%s: %d %s", c.method, p, c.path, a.status, a.body)
			}
		}
		if a := do(t, "GET", te.url+p+"jobs", ""); a.status != 200 || strings.TrimSpace(a.body) != `{"jobs":[]}` {
			t.Errorf("%s jobs: %d %s", p, a.status, a.body)
		}
		for _, c := range [][2]string{{"GET", "jobs/j1"}, {"DELETE", "jobs/j1"}, {"POST", "jobs/j1/pause"}} {
			if a := do(t, c[0], te.url+p+c[1], ""); a.status != 404 || !strings.Contains(a.body, "j1") {
				t.Errorf("%s %s%s: %d %s", c[0], p, c[1], a.status, a.body)
			}
		}
	}
	if a := do(t, "GET", te.url+"/api/v1/models/register", ""); a.status == 400 {
		t.Errorf("GET models/register answered as a POST: %s", a.body)
	}
}

// TestRealtimeSaysWhy: GUI3's live microphone opens /v1/realtime; Zest sends the realtime
// error event GUI3 shows, then closes normally (a failed upgrade would show only "WebSocket
// connect failed").
func TestRealtimeSaysWhy(t *testing.T) {
	te := startEdge(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws://"+te.addr+"/v1/realtime?model=m&api_key="+adminKey+"&client_session_id=s",
		&websocket.DialOptions{HTTPHeader: http.Header{"Origin": {guiOrigin}}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	_ = wsjson.Write(ctx, conn, map[string]any{"type": "session.update", "session": map[string]any{"model": "m"}})
	var msg struct {
		Type  string `json:"type"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := wsjson.Read(ctx, conn, &msg); err != nil || msg.Type != "error" || !strings.Contains(msg.Error.Message, "audio/transcriptions") {
		t.Fatalf("%v %+v", err, msg)
	}
	if _, _, err := conn.Read(ctx); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Errorf("close: %v", err)
	}
}
