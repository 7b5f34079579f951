package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/etcdtest"
)

// TestApprovalOverREST: a chat through the edge calling a stdio server whose approval is
// required pauses at the call with an approval_required event; GET /internal/mcp/approvals
// shows it with its arguments and who asked; approved, the call runs and the chat completes;
// denied, or left until ZEST_APPROVAL_TIMEOUT, the model is told it did not run. Only the
// admin key decides.
func TestApprovalOverREST(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_APPROVAL_TIMEOUT=2s")
	echo := filepath.Join(peersDir(t), "echo-server.mjs")
	r := admin(t, s, "POST", "/servers", jsonBody(t, map[string]any{"id": "guarded", "command": "node", "args": []string{echo}, "approval": "required"}))
	if r.Status != 200 || r.JSON(t)["server"].(map[string]any)["approval"] != "required" {
		t.Fatalf("upsert: %d %s", r.Status, r.Body)
	}
	if r := admin(t, s, "POST", "/servers", `{"id":"bad","command":"node","approval":"sometimes"}`); r.Status != 400 ||
		!strings.Contains(errMessage(t, r), `approval "sometimes": use "required"`) {
		t.Fatalf("bad approval: %d %s", r.Status, r.Body)
	}
	sum := sha256.Sum256([]byte(fedAPIKey))
	who := hex.EncodeToString(sum[:6])

	t.Run("approved, the call runs", func(t *testing.T) {
		var events []string
		got := approvalChat(t, s, "hello-approval", func(ev map[string]any) {
			events = append(events, ev["type"].(string))
			if ev["type"] != "approval_required" {
				return
			}
			id := ev["approval_id"].(string)
			list := admin(t, s, "GET", "/approvals", "")
			pending := asSlice(list.JSON(t)["approvals"])
			if list.Status != 200 || len(pending) != 1 || list.JSON(t)["timeout_ms"] != "2000" {
				t.Fatalf("list: %d %s", list.Status, list.Body)
			}
			p := pending[0].(map[string]any)
			if p["id"] != id || p["server_id"] != "guarded" || p["tool"] != "echo" || p["who"] != who ||
				!strings.Contains(p["arguments"].(string), "hello-approval") || p["state"] != "pending" || p["expires"] == "" {
				t.Fatalf("pending: %v", p)
			}
			// The API key that started the chat may not decide: only the admin key.
			if r := do(t, "POST", s.URL+"/internal/mcp/approvals/"+id+"/approve", "", "Authorization: Bearer "+fedAPIKey); r.Status != 401 && r.Status != 403 {
				t.Fatalf("approve with the API key: %d %s", r.Status, r.Body)
			}
			r := admin(t, s, "POST", "/approvals/"+id+"/approve", "")
			if r.Status != 200 || r.JSON(t)["approval"].(map[string]any)["state"] != "approved" {
				t.Fatalf("approve: %d %s", r.Status, r.Body)
			}
			if r := admin(t, s, "POST", "/approvals/"+id+"/deny", ""); r.Status != 400 && r.Status != 404 {
				t.Fatalf("deny after approve: %d %s", r.Status, r.Body)
			}
		})
		if got != "The tool returned: hello-approval" || strings.Join(events, ",") != "tool_call,approval_required,tool_result" {
			t.Fatalf("chat said %q; events %v", got, events)
		}
	})
	t.Run("denied, the model is told why", func(t *testing.T) {
		got := approvalChat(t, s, "rm -rf", func(ev map[string]any) {
			if ev["type"] == "approval_required" {
				if r := admin(t, s, "POST", "/approvals/"+ev["approval_id"].(string)+"/deny", `{"reason":"not on production"}`); r.Status != 200 {
					t.Fatalf("deny: %d %s", r.Status, r.Body)
				}
			}
			if ev["type"] == "tool_result" && (ev["is_error"] != true || ev["approval"] != "denied") {
				t.Errorf("tool_result %v", ev)
			}
		})
		if !strings.Contains(got, "an administrator denied it (approval_denied): not on production") {
			t.Fatalf("chat said %q", got)
		}
	})
	t.Run("zestctl lists and denies", func(t *testing.T) {
		got := approvalChat(t, s, "via zestctl", func(ev map[string]any) {
			if ev["type"] != "approval_required" {
				return
			}
			id := ev["approval_id"].(string)
			if r := mustCtl(t, s, 0, "approvals", "list"); !strings.Contains(r.Stdout, id) || !strings.Contains(r.Stdout, "via zestctl") {
				t.Errorf("approvals list:\n%s", r.Stdout)
			}
			if r := mustCtl(t, s, 0, "approvals", "deny", id, "--reason", "said zestctl", "-o", "json").JSON(t); r["state"] != "denied" {
				t.Errorf("approvals deny: %v", r)
			}
		})
		if !strings.Contains(got, "approval_denied): said zestctl") {
			t.Fatalf("chat said %q", got)
		}
	})
	t.Run("undecided, it expires", func(t *testing.T) {
		began := time.Now()
		got := approvalChat(t, s, "nobody looks", func(map[string]any) {})
		if !strings.Contains(got, "nobody approved it within 2s (approval_expired; ZEST_APPROVAL_TIMEOUT)") || time.Since(began) < 2*time.Second {
			t.Fatalf("chat said %q after %v", got, time.Since(began))
		}
	})
	if r := admin(t, s, "POST", "/approvals/0123456789abcdef0123456789abcdef/approve", `{"reason":"x"}`); r.Status != 404 ||
		!strings.Contains(errMessage(t, r), "GET /internal/mcp/approvals lists the pending ones") {
		t.Fatalf("unknown id: %d %s", r.Status, r.Body)
	}
	if r := admin(t, s, "POST", "/approvals/x/approve", `{"why":"x"}`); r.Status != 400 || !strings.Contains(errMessage(t, r), `unknown field "why"`) {
		t.Fatalf("unknown field: %d %s", r.Status, r.Body)
	}
	if r := admin(t, s, "GET", "/approvals", ""); r.Status != 200 || len(asSlice(r.JSON(t)["approvals"])) != 0 {
		t.Fatalf("left pending: %s", r.Body)
	}
}

// TestApprovalAcrossReplicas: two edges, each in front of its own mcpgateway, on one etcd. A
// chat through A waits for approval; B lists the pending call and approves it, and A's chat
// completes; a denial through B reaches A the same way.
func TestApprovalAcrossReplicas(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	r := startReplicas(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_APPROVAL_TIMEOUT=30s", "ZEST_SERVICE_KEY="+serviceKey,
		"ZEST_REGISTRY=etcd://"+strings.Join(etcd.Endpoints(), ",")+"/e2e-approvals/")
	a, b := &Suite{URL: r.urls[0], t: t}, &Suite{URL: r.urls[1], t: t}
	echo := filepath.Join(peersDir(t), "echo-server.mjs")
	registerServer(t, a, map[string]any{"id": "guarded", "command": "node", "args": []string{echo}, "approval": "required"})
	for _, c := range []struct {
		verb, text, want string
	}{
		{"approve", "across replicas", "The tool returned: across replicas"},
		{"deny", "not across", "an administrator denied it (approval_denied): through B"},
	} {
		var decided time.Time
		var events []string
		got := approvalChat(t, a, c.text, func(ev map[string]any) {
			events = append(events, jsonBody(t, ev))
			if ev["type"] != "approval_required" {
				return
			}
			id := ev["approval_id"].(string)
			list := admin(t, b, "GET", "/approvals", "")
			if pending := asSlice(list.JSON(t)["approvals"]); len(pending) != 1 || pending[0].(map[string]any)["id"] != id {
				t.Fatalf("B lists %s", list.Body)
			}
			if r := admin(t, b, "POST", "/approvals/"+id+"/"+c.verb, `{"reason":"through B"}`); r.Status != 200 {
				t.Fatalf("%s through B: %d %s", c.verb, r.Status, r.Body)
			}
			decided = time.Now()
		})
		if !strings.Contains(got, c.want) {
			t.Fatalf("%s: A's chat said %q; events %s", c.verb, got, events)
		}
		t.Logf("%s through B reached A's chat and its answer within %v", c.verb, time.Since(decided))
	}
}
