package e2e

// MCP as tests speak it on the three endpoints (/mcp, /mcp/servers/{id}, /mcp/presets/{id}):
// sessions, calls, the 2026-07-28 era, a chat with tools.

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	mcpclient "github.com/mark3labs/mcp-go/client"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// builtinTools are the built-in tools of /mcp (the "lemonade" provider), sorted: the tests
// that count or list them read this one list, so a tool added is added here once.
var builtinTools = []string{
	"lemonade_chat",
	"lemonade_delete_model",
	"lemonade_docs",
	"lemonade_edit_image",
	"lemonade_generate_3d",
	"lemonade_generate_audio",
	"lemonade_generate_image",
	"lemonade_list_models",
	"lemonade_load_model",
	"lemonade_omni",
	"lemonade_pull_model",
	"lemonade_text_to_speech",
	"lemonade_transcribe_audio",
	"lemonade_unload_model",
}

const fedAPIKey = "fed-api-key"

var fedAPIAuth = "Authorization: Bearer " + fedAPIKey

// fedURL is the endpoint of a registered server.
func fedURL(s *Suite, id string) string { return s.URL + "/mcp/servers/" + id }

// fedInit opens a session of server id and returns its id and the initialize result.
func fedInit(t *testing.T, s *Suite, id, version string, headers ...string) (string, map[string]any) {
	t.Helper()
	r := do(t, "POST", fedURL(s, id), sprintf(initBody, version), append(mcpHeaders, headers...)...)
	if r.Status != http.StatusOK || r.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize of %s: %d %v %s", id, r.Status, r.Header, r.Body)
	}
	res, ok := r.JSON(t)["result"].(map[string]any)
	if !ok {
		t.Fatalf("initialize of %s answered %s", id, r.Body)
	}
	return r.Header.Get("Mcp-Session-Id"), res
}

// fedCall posts one message to server id in session.
func fedCall(t *testing.T, s *Suite, id, session, body string, headers ...string) Response {
	t.Helper()
	return do(t, "POST", fedURL(s, id), body, append(append(mcpHeaders, "Mcp-Session-Id: "+session), headers...)...)
}

// sseMessages returns the JSON-RPC messages of a body: the body itself when it is JSON, else
// the data lines of its SSE events.
func sseMessages(t *testing.T, r Response) []map[string]any {
	t.Helper()
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		return []map[string]any{r.JSON(t)}
	}
	var out []map[string]any
	for _, line := range strings.Split(string(r.Body), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("SSE data %q: %v", data, err)
			}
			out = append(out, m)
		}
	}
	return out
}

// mustInit opens a session of server id with the API key.
func mustInit(t *testing.T, s *Suite, id string) string {
	t.Helper()
	sess, _ := fedInit(t, s, id, "2025-11-25", fedAPIAuth)
	return sess
}

func presetURL(s *Suite, id string) string { return s.URL + "/mcp/presets/" + id }

// presetCall posts one message to preset id in session.
func presetCall(t *testing.T, s *Suite, id, session, body string, headers ...string) Response {
	t.Helper()
	return do(t, "POST", presetURL(s, id), body, append(append(mcpHeaders, "Mcp-Session-Id: "+session), headers...)...)
}

func presetInit(t *testing.T, s *Suite, id string, headers ...string) (string, map[string]any) {
	t.Helper()
	r := do(t, "POST", presetURL(s, id), sprintf(initBody, "2025-11-25"), append(mcpHeaders, headers...)...)
	if r.Status != http.StatusOK || r.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize of preset %s: %d %s", id, r.Status, r.Body)
	}
	return r.Header.Get("Mcp-Session-Id"), firstResult(t, r)
}

func toolNames(t *testing.T, r Response) []string {
	t.Helper()
	var out []string
	for _, tool := range asSlice(firstResult(t, r)["tools"]) {
		out = append(out, tool.(map[string]any)["name"].(string))
	}
	return out
}

type elicitorFunc func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error)

func (f elicitorFunc) Elicit(ctx context.Context, r mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return f(ctx, r)
}

// modernPost sends one request of 2026-07-28 (no session) to url, its client declaring
// capabilities, and returns the JSON-RPC response (the last message of an SSE stream).
func modernPost(t *testing.T, url, method, name, params, capabilities string) map[string]any {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal([]byte(params), &p); err != nil {
		t.Fatal(err)
	}
	p["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "e2e", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": json.RawMessage(capabilities)}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": p})
	r := do(t, "POST", url, string(body), append(mcpHeaders, "MCP-Protocol-Version: 2026-07-28", "Mcp-Method: "+method, "Mcp-Name: "+name)...)
	msg := r.Body
	if strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(r.Body), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, `"id"`) {
				msg = []byte(data)
			}
		}
	}
	var out map[string]any
	if json.Unmarshal(msg, &out) != nil || (r.Status != http.StatusOK && out["error"] == nil) {
		t.Fatalf("%s %s: %d %s", method, name, r.Status, r.Body)
	}
	return out
}

// modernAskedClient is mcp-go's client with its defaults (2026-07-28) at url, initialized,
// with a sampling handler that answers sampled and an elicitation handler that accepts
// {"username":"ada","email":"ada@example.com"}; asked returns what the client was asked, in order
// ("sampling: <text>", "elicitation: <message>").
func modernAskedClient(t *testing.T, url, sampled string) (cl *mcpclient.Client, asked func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	note := func(s string) {
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
	}
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatal(err)
	}
	cl = mcpclient.NewClient(tr,
		mcpclient.WithSamplingHandler(samplerFunc(func(_ context.Context, r mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			var c struct {
				Text string `json:"text"`
			}
			b, _ := json.Marshal(r.Messages[0].Content)
			_ = json.Unmarshal(b, &c)
			note("sampling: " + c.Text)
			return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent(sampled)}, Model: "e2e"}, nil
		})),
		mcpclient.WithElicitationHandler(elicitorFunc(func(_ context.Context, r mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
			note("elicitation: " + r.Params.Message)
			return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept,
				Content: map[string]any{"username": "ada", "email": "ada@example.com"}}}, nil
		})))
	if err := cl.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "zest-e2e-mcp-go", Version: "1"}
	if res, err := cl.Initialize(t.Context(), init); err != nil || res.ProtocolVersion != "2026-07-28" {
		t.Fatalf("initialize: %+v, %v", res, err)
	}
	return cl, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

func chatJSON(t *testing.T, s *Suite, body string) (toolChatAnswer, Response) {
	t.Helper()
	r := do(t, "POST", s.URL+"/api/v1/chat/completions", body, "Content-Type: application/json")
	var a toolChatAnswer
	if r.Status == 200 {
		if err := json.Unmarshal(r.Body, &a); err != nil {
			t.Fatalf("%s: %v", r.Body, err)
		}
	}
	return a, r
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`

var mcpHeaders = []string{"Content-Type: application/json", "Accept: application/json, text/event-stream"}

// mcpInit opens a session and returns its id and the negotiated version.
func mcpInit(t *testing.T, s *Suite, version string, headers ...string) (string, map[string]any) {
	t.Helper()
	r := do(t, "POST", s.URL+"/mcp", sprintf(initBody, version), append(mcpHeaders, headers...)...)
	if r.Status != http.StatusOK {
		t.Fatalf("initialize: %d %s", r.Status, r.Body)
	}
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		t.Fatalf("initialize returned no Mcp-Session-Id; headers %v", r.Header)
	}
	return id, r.JSON(t)["result"].(map[string]any)
}

func mcpCall(t *testing.T, s *Suite, session, body string, headers ...string) Response {
	t.Helper()
	return do(t, "POST", s.URL+"/mcp", body, append(append(mcpHeaders, "Mcp-Session-Id: "+session), headers...)...)
}

// callTool calls a tool through the admin API.
func callTool(t *testing.T, s *Suite, id, tool string, args map[string]any) Response {
	t.Helper()
	return admin(t, s, "POST", "/servers/"+id+"/tools/call", jsonBody(t, map[string]any{"name": tool, "arguments": args, "timeout_ms": 10000}))
}

// resultText is the first text block of a tools/call answer.
func resultText(t *testing.T, r Response) string {
	t.Helper()
	var a struct {
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(r.Body, &a); err != nil || len(a.Result.Content) == 0 {
		t.Fatalf("tools/call answer %d %s", r.Status, r.Body)
	}
	return a.Result.Content[0].Text
}

// toolChatAnswer is a chat completion of the tool loop, with what it called (chatJSON).
type toolChatAnswer struct {
	Choices []struct {
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	ZestToolCalls []struct {
		Name     string `json:"name"`
		ServerID string `json:"server_id"`
		IsError  bool   `json:"is_error"`
	} `json:"zest_tool_calls"`
	ZestWarnings []string `json:"zest_warnings"`
}
