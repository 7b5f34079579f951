package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// gui3Call is one call of testdata/gui3-calls.json: what Lemonade's GUI3 sends and the
// fields of the answer it reads.
type gui3Call struct {
	Step    string          `json:"step"`
	Method  string          `json:"method"`
	Path    string          `json:"path"`
	Body    json.RawMessage `json:"body"`
	Status  int             `json:"status"`
	Fields  []string        `json:"fields"`
	Array   bool            `json:"array"`
	SSE     bool            `json:"sse"`
	Session bool            `json:"session"`
	Auth    string          `json:"auth"`
	WS      string          `json:"ws"`
	Pending string          `json:"pending"`
}

// lookup follows a dotted path (numbers index arrays) in a decoded JSON value.
func lookup(v any, path string) (any, bool) {
	for _, p := range strings.Split(path, ".") {
		switch c := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = c[p]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i >= len(c) {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// TestGUI3Calls drives the API calls Lemonade's GUI3 makes, in its order, from the recorded
// list in testdata/gui3-calls.json, as a browser on another origin does (Origin set, so
// each answer must carry CORS): every one answered with its status (2xx unless recorded
// otherwise) and the fields GUI3 reads. Entries marked "pending" name the work that brings
// them and are skipped with a log line.
func TestGUI3Calls(t *testing.T) {
	const adminKey = "gui3-admin-key"
	const origin = "http://localhost:5173"
	b, err := os.ReadFile(filepath.Join("testdata", "gui3-calls.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Calls []gui3Call `json:"calls"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	for i, c := range rec.Calls {
		name := strconv.Itoa(i) + " " + c.Step
		if c.Pending != "" {
			t.Logf("SKIP %s: pending %s (%s %s)", name, c.Pending, c.Method, c.Path)
			continue
		}
		if c.WS != "" {
			gui3Socket(t, s, c, origin)
			continue
		}
		headers := []string{"Origin: " + origin}
		if len(c.Body) > 0 {
			headers = append(headers, "Content-Type: application/json")
		}
		if c.Auth == "admin" {
			headers = append(headers, "Authorization: Bearer "+adminKey)
		}
		if c.Session {
			headers = append(headers, "X-Client-Session-Id: 6f1c1d2e-0000-4000-8000-000000000000")
			pre := do(t, "OPTIONS", s.URL+c.Path, "", "Origin: "+origin, "Access-Control-Request-Method: "+c.Method,
				"Access-Control-Request-Headers: content-type,x-client-session-id")
			if pre.Status != 204 || !strings.Contains(strings.ToLower(pre.Header.Get("Access-Control-Allow-Headers")), "x-client-session-id") {
				t.Errorf("%s: preflight %d %v", name, pre.Status, pre.Header)
			}
		}
		r := do(t, c.Method, s.URL+c.Path, string(c.Body), headers...)
		want := c.Status
		if want == 0 {
			want = 200
		}
		if r.Status != want {
			t.Errorf("%s: %s %s: %d, want %d: %s", name, c.Method, c.Path, r.Status, want, r.Body)
			continue
		}
		if got := r.Header.Get("Access-Control-Allow-Origin"); got != origin {
			t.Errorf("%s: no CORS (Access-Control-Allow-Origin %q)", name, got)
		}
		if c.SSE {
			body := string(r.Body)
			if !strings.Contains(body, "data: {") || !strings.Contains(body, "data: [DONE]") || !strings.Contains(body, `"choices"`) {
				t.Errorf("%s: not an OpenAI event stream: %.300s", name, body)
			}
			continue
		}
		var v any
		if err := json.Unmarshal(r.Body, &v); err != nil {
			t.Errorf("%s: not JSON: %s", name, r.Body)
			continue
		}
		if c.Array {
			if _, ok := v.([]any); !ok {
				t.Errorf("%s: want a JSON array: %s", name, r.Body)
			}
		}
		for _, f := range c.Fields {
			if _, ok := lookup(v, f); !ok {
				t.Errorf("%s: %s %s lacks %q: %s", name, c.Method, c.Path, f, r.Body)
			}
		}
	}
	// A route lemond has and Zest does not is a 404 the browser can read (CORS), not a
	// network error.
	r := do(t, "GET", s.URL+"/api/v1/models/builtin-llm/files", "", "Origin: "+origin)
	if r.Status != 404 || r.Header.Get("Access-Control-Allow-Origin") != origin {
		t.Errorf("unknown route: %d, Allow-Origin %q", r.Status, r.Header.Get("Access-Control-Allow-Origin"))
	}
}

// gui3Socket opens a WebSocket as GUI3 does (?api_key only when it has one,
// client_session_id always) and exchanges its first messages.
func gui3Socket(t *testing.T, s *Suite, c gui3Call, origin string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(s.URL, "http") + c.Path + "?client_session_id=6f1c1d2e"
	conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {origin}}})
	if err != nil {
		t.Errorf("%s: %v", c.Step, err)
		return
	}
	defer conn.CloseNow()
	var msg map[string]any
	switch c.WS {
	case "logs":
		_ = wsjson.Write(ctx, conn, map[string]any{"type": "logs.subscribe", "after_seq": nil})
		if err := wsjson.Read(ctx, conn, &msg); err != nil || msg["type"] != "logs.snapshot" {
			t.Errorf("%s: %v %v", c.Step, err, msg)
			return
		}
		if _, ok := msg["entries"].([]any); !ok {
			t.Errorf("%s: snapshot without entries: %v", c.Step, msg)
		}
	case "spans":
		_ = wsjson.Write(ctx, conn, map[string]any{"type": "auth", "token": "", "client_session_id": "6f1c1d2e"})
		if err := wsjson.Read(ctx, conn, &msg); err != nil || msg["type"] != "auth.ok" {
			t.Errorf("%s: %v %v", c.Step, err, msg)
		}
	}
	conn.Close(websocket.StatusNormalClosure, "")
}

// TestGUI3ModelOptions: GET models/{id}/options shows a model's entry of the model file
// (GUI3's model detail and effective-settings views), defaults included; a built-in model
// has none; an unknown one is 404; saving is 405 naming the model file; every prefix.
func TestGUI3ModelOptions(t *testing.T) {
	// An engine that lists the model, so that the suite is healthy.
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"qwen","object":"model"}]}`))
	}))
	defer engine.Close()
	models := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(models, []byte("models:\n  - id: far-llm\n    upstream_model: qwen\n    base_urls: [\""+engine.URL+"/v1\"]\n    max_concurrency: 3\n    timeout: 90s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startSuite(t, "ZEST_MODELS_FILE="+models)
	for _, p := range []string{"/api/v1/", "/api/v0/", "/v1/", "/v0/"} {
		r := do(t, "GET", s.URL+p+"models/far-llm/options", "")
		if r.Status != 200 {
			t.Fatalf("%s: %d %s", p, r.Status, r.Body)
		}
		m := r.JSON(t)
		eff, _ := m["effective"].(map[string]any)
		def, _ := m["defaults"].(map[string]any)
		if m["model_name"] != "far-llm" || m["recipe"] != "openai" || eff["max_concurrency"] != 3.0 || eff["timeout"] != "1m30s" ||
			eff["upstream_model"] != "qwen" || def["max_concurrency"] != 8.0 || m["resolved_ctx_size"] != -1.0 {
			t.Errorf("%s: %s", p, r.Body)
		}
		if _, ok := eff["api_key"]; ok {
			t.Errorf("api_key shown: %s", r.Body)
		}
	}
	r := do(t, "GET", s.URL+"/api/v1/models/builtin-llm/options", "")
	if eff, _ := r.JSON(t)["effective"].(map[string]any); r.Status != 200 || len(eff) != 0 {
		t.Errorf("built-in: %d %s", r.Status, r.Body)
	}
	if r := do(t, "GET", s.URL+"/api/v1/models/nope/options", ""); r.Status != 404 {
		t.Errorf("unknown: %d %s", r.Status, r.Body)
	}
	// slots: one per engine replica.
	r = do(t, "GET", s.URL+"/v1/slots", "")
	var slots []map[string]any
	if err := json.Unmarshal(r.Body, &slots); err != nil || r.Status != 200 || len(slots) != 1 || slots[0]["model"] != "far-llm" ||
		slots[0]["is_processing"] != false || slots[0]["base_url"] != engine.URL+"/v1" {
		t.Errorf("slots: %d %s", r.Status, r.Body)
	}
	if r := do(t, "POST", s.URL+"/api/v1/models/far-llm/options", `{"ctx_size":4096}`); r.Status != 405 || !strings.Contains(string(r.Body), "ZEST_MODELS_FILE") {
		t.Errorf("save: %d %s", r.Status, r.Body)
	}
}
