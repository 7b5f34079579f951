package e2e

// The admin API as tests use it: the keys, a call, a server's registration, the audit trail,
// the activity's callers and a chat held for approval.

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
)

func registerServer(t *testing.T, s *Suite, cfg map[string]any) {
	t.Helper()
	if r := admin(t, s, "POST", "/servers", jsonBody(t, cfg)); r.Status != 200 {
		t.Fatalf("register %v: %d %s", cfg["id"], r.Status, r.Body)
	}
}

const adminKey = "admin-key-e2e"

var adminAuth = "Authorization: Bearer " + adminKey

func admin(t *testing.T, s *Suite, method, path, body string) Response {
	t.Helper()
	return do(t, method, s.URL+"/internal/mcp"+path, body, "Content-Type: application/json", adminAuth)
}

func jsonBody(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func errMessage(t *testing.T, r Response) string {
	t.Helper()
	e, ok := r.JSON(t)["error"].(map[string]any)
	if !ok || e["type"] != "mcp_client_error" || e["status_code"] != float64(r.Status) {
		t.Fatalf("error shape: %d %s", r.Status, r.Body)
	}
	return e["message"].(string)
}

// auditEntry is one entry of GET /internal/mcp/audit, as the edge writes it.
type auditEntry struct {
	ID         string   `json:"id"`
	Time       string   `json:"time"`
	Kind       string   `json:"kind"`
	Who        string   `json:"who"`
	Action     string   `json:"action"`
	ServerID   string   `json:"server_id"`
	Target     string   `json:"target"`
	Tool       string   `json:"tool"`
	PresetID   string   `json:"preset_id"`
	Outcome    string   `json:"outcome"`
	Error      string   `json:"error"`
	DurationMs *int     `json:"duration_ms"`
	Changed    []string `json:"changed"`
	Arguments  string   `json:"arguments"`
	Result     string   `json:"result"`
	// UpstreamSubject is whom an upstream's tokens were issued to (finish_sign_in).
	UpstreamSubject string `json:"upstream_subject"`
}

type auditAnswer struct {
	Entries    []auditEntry `json:"entries"`
	NextBefore string       `json:"next_before"`
	Details    bool         `json:"details"`
	Retention  string       `json:"retention"`
	MaxEntries int          `json:"max_entries"`
	// MaxAdminEntries bounds the admin changes (ZEST_AUDIT_MAX_ADMIN_ENTRIES).
	MaxAdminEntries int    `json:"max_admin_entries"`
	Dropped         string `json:"dropped"`
	Failed          string `json:"failed"`
}

func listAudit(t *testing.T, s *Suite, query string) (auditAnswer, Response) {
	t.Helper()
	r := admin(t, s, "GET", "/audit"+query, "")
	var a auditAnswer
	if r.Status == 200 {
		if err := json.Unmarshal(r.Body, &a); err != nil {
			t.Fatalf("%s: %v", r.Body, err)
		}
	}
	return a, r
}

// waitAudit lists until n entries are there (they are written in batches every 100 ms), or
// for 10 s: then it returns what is there, for the caller to say what is missing.
func waitAudit(t *testing.T, s *Suite, query string, n int) auditAnswer {
	t.Helper()
	var a auditAnswer
	_, _ = waitfor.Poll(10*time.Second, func() error {
		var r Response
		if a, r = listAudit(t, s, query); r.Status != 200 {
			t.Fatalf("audit: %d %s", r.Status, r.Body)
		}
		if len(a.Entries) < n {
			return fmt.Errorf("%d entries", len(a.Entries))
		}
		return nil
	})
	return a
}

// summary is kind/action/target-or-tool/who/outcome of each entry, newest first.
func summary(es []auditEntry) string {
	var out []string
	for _, e := range es {
		name := e.Target
		if e.Kind == "tool" {
			name = e.ServerID + "." + e.Tool
		}
		out = append(out, fmt.Sprintf("%s/%s/%s/%s/%s", e.Kind, e.Action, name, e.Who, e.Outcome))
	}
	return strings.Join(out, "\n")
}

// approvalChat streams a chat calling mcp_guarded__echo with text, as the API key, and hands
// each zest_event to onEvent; it returns the final text.
func approvalChat(t *testing.T, s *Suite, text string, onEvent func(ev map[string]any)) string {
	t.Helper()
	body := jsonBody(t, map[string]any{"model": "builtin-llm", "mcp_server_ids": []string{"guarded"}, "stream": true, "zest_events": true,
		"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "mcp_guarded__echo"}},
		"messages":    []any{map[string]any{"role": "user", "content": jsonBody(t, map[string]any{"text": text})}}})
	req, _ := http.NewRequestWithContext(t.Context(), "POST", s.URL+"/api/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+fedAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("chat: %d", resp.StatusCode)
	}
	var content strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
			Event map[string]any `json:"zest_event"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		if ch.Event != nil {
			onEvent(ch.Event)
		}
		for _, c := range ch.Choices {
			content.WriteString(c.Delta.Content)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return content.String()
}

// who is the name the activity gives a key.
func who(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:6])
}
