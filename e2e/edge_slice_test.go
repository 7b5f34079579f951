package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

func TestWalkingSkeletonSlice(t *testing.T) {
	s := startSuite(t)

	t.Run("live", func(t *testing.T) {
		r := do(t, "GET", s.URL+"/live", "")
		if r.Status != 200 || r.JSON(t)["status"] != "ok" {
			t.Fatalf("/live: %d %s", r.Status, r.Body)
		}
	})

	t.Run("health under the four prefixes", func(t *testing.T) {
		for _, p := range []string{"/api/v1/", "/api/v0/", "/v1/", "/v0/"} {
			r := do(t, "GET", s.URL+p+"health", "")
			m := r.JSON(t)
			if r.Status != 200 || m["status"] != "ok" {
				t.Fatalf("%shealth: %d %s", p, r.Status, r.Body)
			}
			svc := m["services"].(map[string]any)
			for _, name := range []string{"inference", "mcpgateway", "toolhost"} {
				if svc[name] != "SERVING" {
					t.Errorf("%shealth: %s is %v", p, name, svc[name])
				}
			}
		}
	})

	t.Run("initialize negotiates versions", func(t *testing.T) {
		for offered, want := range map[string]string{
			"2025-11-25": "2025-11-25", "2025-06-18": "2025-06-18", "2025-03-26": "2025-03-26",
			"2024-11-05": "2024-11-05", "1999-01-01": "2025-11-25",
		} {
			_, res := mcpInit(t, s, offered)
			if res["protocolVersion"] != want {
				t.Errorf("offered %s: got %v, want %s", offered, res["protocolVersion"], want)
			}
			if res["serverInfo"].(map[string]any)["name"] != "lemonade-mcp" {
				t.Errorf("serverInfo = %v", res["serverInfo"])
			}
		}
	})

	session, _ := mcpInit(t, s, "2025-11-25")

	t.Run("tools/list gives the built-in tools with their schemas", func(t *testing.T) {
		r := mcpCall(t, s, session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		if r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		tools := r.JSON(t)["result"].(map[string]any)["tools"].([]any)
		props := map[string][]string{}
		required := map[string][]string{}
		for _, x := range tools {
			tool := x.(map[string]any)
			schema := tool["inputSchema"].(map[string]any)
			var names []string
			for k := range schema["properties"].(map[string]any) {
				names = append(names, k)
			}
			sort.Strings(names)
			props[tool["name"].(string)] = names
			for _, r := range asSlice(schema["required"]) {
				required[tool["name"].(string)] = append(required[tool["name"].(string)], r.(string))
			}
			if tool["description"] == "" || tool["annotations"] == nil {
				t.Errorf("%s lacks a description or annotations", tool["name"])
			}
		}
		want := map[string][]string{
			"lemonade_list_models": {"include_available", "include_suggested"},
			"lemonade_chat": {"allow_download", "chat_template_kwargs", "max_tokens", "messages", "model", "response_format",
				"seed", "stop", "temperature", "tool_choice", "tools", "top_p"},
			"lemonade_transcribe_audio": {"allow_download", "audio_base64", "audio_path", "filename", "language", "model",
				"prompt", "response_format", "temperature"},
			"lemonade_generate_image": {"allow_download", "cfg_scale", "model", "n", "negative_prompt", "output_dir",
				"output_path", "prompt", "seed", "size", "steps"},
			"lemonade_text_to_speech": {"allow_download", "input", "model", "output_dir", "output_path", "response_format", "speed", "voice"},
			"lemonade_generate_audio": {"allow_download", "duration", "lyrics", "model", "output_dir", "output_path", "prompt", "seed", "steps"},
			"lemonade_edit_image": {"allow_download", "cfg_scale", "image_base64", "image_path", "mask_base64", "mask_path", "model", "n",
				"output_dir", "output_path", "prompt", "seed", "size", "steps"},
			"lemonade_generate_3d": {"allow_download", "image_base64", "image_model", "image_path", "model", "output_dir", "output_path",
				"prompt", "resolution", "seed"},
		}
		if len(props) != len(builtinTools) {
			t.Fatalf("got tools %v, want %d", props, len(builtinTools))
		}
		for name, w := range want {
			if !slices.Equal(props[name], w) {
				t.Errorf("%s properties = %v, want %v", name, props[name], w)
			}
		}
		omni := props["lemonade_omni"]
		for _, p := range []string{"messages", "model", "allow_download", "output_dir", "temperature", "max_tokens"} {
			if !slices.Contains(omni, p) {
				t.Errorf("lemonade_omni lacks %s: %v", p, omni)
			}
		}
		for name, req := range map[string]string{"lemonade_chat": "messages", "lemonade_generate_image": "prompt", "lemonade_omni": "messages"} {
			if !slices.Contains(required[name], req) {
				t.Errorf("%s: %s not required (%v)", name, req, required[name])
			}
		}
	})

	t.Run("tools/call lemonade_list_models reaches the inference node", func(t *testing.T) {
		r := mcpCall(t, s, session, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"lemonade_list_models","arguments":{}}}`)
		res := r.JSON(t)["result"].(map[string]any)
		if res["isError"] == true {
			t.Fatalf("isError: %s", r.Body)
		}
		// Lemonade's shape: a summary, then {loaded, available, suggested_to_pull, …} as JSON.
		text := res["content"].([]any)[1].(map[string]any)["text"].(string)
		var listed struct {
			Loaded []struct {
				ModelName string `json:"model_name"`
				Type      string
			}
		}
		if err := json.Unmarshal([]byte(text), &listed); err != nil {
			t.Fatalf("text is not the model list: %v\n%s", err, text)
		}
		got := map[string]string{}
		for _, m := range listed.Loaded {
			got[m.ModelName] = m.Type + "/loaded"
		}
		want := map[string]string{"builtin-llm": "llm/loaded", "builtin-image": "image/loaded", "builtin-transcribe": "transcription/loaded",
			"builtin-tts": "tts/loaded", "builtin-audio": "audio_generation/loaded", "builtin-3d": "mesh/loaded"}
		for id, tw := range want {
			if got[id] != tw {
				t.Errorf("model %s = %q, want %q (all: %v)", id, got[id], tw, got)
			}
		}
	})

	t.Run("tools/call lemonade_chat streams through the built-in engine", func(t *testing.T) {
		r := mcpCall(t, s, session, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"lemonade_chat","arguments":{"messages":[{"role":"user","content":"ping zest"}]}}}`)
		res := r.JSON(t)["result"].(map[string]any)
		text := res["content"].([]any)[0].(map[string]any)["text"].(string)
		if text != "builtin-llm heard: ping zest" {
			t.Fatalf("chat text = %q (%s)", text, r.Body)
		}
	})

	t.Run("session rules", func(t *testing.T) {
		r := do(t, "POST", s.URL+"/mcp", `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`, mcpHeaders...)
		if r.Status != http.StatusBadRequest {
			t.Errorf("no session: %d %s", r.Status, r.Body)
		}
		r = mcpCall(t, s, session+"x", `{"jsonrpc":"2.0","id":6,"method":"tools/list"}`)
		if r.Status != http.StatusNotFound {
			t.Errorf("forged session: %d %s", r.Status, r.Body)
		}
		r = mcpCall(t, s, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		if r.Status != http.StatusAccepted || len(r.Body) != 0 {
			t.Errorf("notification: %d %q", r.Status, r.Body)
		}
		r = mcpCall(t, s, session, `{"jsonrpc":"2.0","id":7,"method":"no/such"}`)
		if code := r.JSON(t)["error"].(map[string]any)["code"]; code != float64(-32601) {
			t.Errorf("unknown method: %s", r.Body)
		}
		r = mcpCall(t, s, session, `{"jsonrpc":"2.0","id":8,"method":"server/discover"}`)
		if code := r.JSON(t)["error"].(map[string]any)["code"]; code != float64(-32601) {
			t.Errorf("server/discover: %s", r.Body)
		}
		r = mcpCall(t, s, session, `{not json`)
		if r.Status != http.StatusBadRequest || r.JSON(t)["error"].(map[string]any)["code"] != float64(-32700) {
			t.Errorf("bad json: %d %s", r.Status, r.Body)
		}
		r = mcpCall(t, s, session, `{"jsonrpc":"2.0","id":9,"method":"ping"}`, "MCP-Protocol-Version: 2030-01-01")
		if r.Status != http.StatusBadRequest {
			t.Errorf("unsupported protocol header: %d %s", r.Status, r.Body)
		}
	})

	t.Run("loopback listener refuses a foreign Host", func(t *testing.T) {
		r := do(t, "POST", s.URL+"/mcp", sprintf(initBody, "2025-11-25"), append(mcpHeaders, "Host: attacker.example")...)
		if r.Status < 400 || r.Status > 499 {
			t.Fatalf("foreign Host: %d", r.Status)
		}
	})

	t.Run("origin", func(t *testing.T) {
		r := do(t, "POST", s.URL+"/mcp", sprintf(initBody, "2025-11-25"), append(mcpHeaders, "Origin: https://evil.example")...)
		if r.Status != http.StatusForbidden || r.JSON(t)["error"] != "Origin not allowed" {
			t.Fatalf("foreign origin: %d %s", r.Status, r.Body)
		}
		r = do(t, "POST", s.URL+"/mcp", sprintf(initBody, "2025-11-25"), append(mcpHeaders, "Origin: http://localhost:5173")...)
		if r.Status != 200 || r.Header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" {
			t.Fatalf("loopback origin: %d %v", r.Status, r.Header)
		}
	})

	t.Run("admin API fails closed without keys", func(t *testing.T) {
		for _, m := range []string{"GET", "OPTIONS", "POST"} {
			r := do(t, m, s.URL+"/internal/mcp/servers", "")
			if r.Status != http.StatusForbidden || !strings.Contains(string(r.Body), "LEMONADE_ADMIN_API_KEY") {
				t.Errorf("%s: %d %s", m, r.Status, r.Body)
			}
		}
	})

	t.Run("registry file is created in the data dir, mode 0600", func(t *testing.T) {
		st, err := os.Stat(filepath.Join(s.DataDir, "registry.db"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v", st.Mode().Perm())
		}
	})
}

func TestKeysAtTheEdgeAndOverGRPC(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY=api-key-1", "LEMONADE_ADMIN_API_KEY=admin-key-1")

	// An MCP endpoint refuses a key as a JSON-RPC error (an MCP client reads one), whoever
	// refuses it: the edge (no key) or mcpgateway.
	r := do(t, "POST", s.URL+"/mcp", sprintf(initBody, "2025-11-25"), mcpHeaders...)
	if e, _ := r.JSON(t)["error"].(map[string]any); r.Status != http.StatusUnauthorized || r.JSON(t)["jsonrpc"] != "2.0" || e["message"] != "Invalid or missing API key" {
		t.Fatalf("no key: %d %s", r.Status, r.Body)
	}
	session, _ := mcpInit(t, s, "2025-11-25", "Authorization: Bearer api-key-1")
	r = mcpCall(t, s, session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lemonade_list_models","arguments":{}}}`,
		"Authorization: Bearer admin-key-1")
	if r.Status != 200 || strings.Contains(string(r.Body), `"isError":true`) {
		t.Fatalf("admin key on /mcp, through mcpgateway to inference: %d %s", r.Status, r.Body)
	}
	if r := do(t, "GET", s.URL+"/api/v1/models", ""); r.Status != http.StatusUnauthorized {
		t.Fatalf("models without key: %d", r.Status)
	}
	r = do(t, "GET", s.URL+"/api/v1/models", "", "Authorization: Bearer api-key-1")
	if r.Status != 200 || len(asSlice(r.JSON(t)["data"])) != 7 { // the seven built-in models
		t.Fatalf("models with key: %d %s", r.Status, r.Body)
	}

	r = do(t, "GET", s.URL+"/internal/mcp/servers", "", "Authorization: Bearer api-key-1")
	if r.Status != http.StatusUnauthorized || r.JSON(t)["error"] != "Invalid or missing admin API key" {
		t.Fatalf("api key on admin route: %d %s", r.Status, r.Body)
	}
	r = do(t, "GET", s.URL+"/internal/mcp/servers", "", "Authorization: Bearer admin-key-1")
	if r.Status != 200 {
		t.Fatalf("admin key: %d %s", r.Status, r.Body)
	}
	if servers, ok := r.JSON(t)["servers"].([]any); !ok || len(servers) != 0 {
		t.Fatalf("servers = %s", r.Body)
	}
	r = do(t, "PUT", s.URL+"/internal/mcp/servers", "", "Authorization: Bearer admin-key-1")
	if r.Status != http.StatusMethodNotAllowed {
		t.Fatalf("wrong method on an admin route: %d %s", r.Status, r.Body)
	}
}
