package e2e

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/lib/waitfor"
)

// mcpGoConformance builds mark3labs/mcp-go's conformance example server (the fixture tools,
// resources and prompts of the conformance suite, served in both eras over Streamable HTTP) and
// starts it on loopback; it returns its endpoint. The example binds its address itself
// (CONFORMANCE_ADDR) and cannot take a handed-over socket, so the port is looked up and a
// start that lost it to another process is retried.
func mcpGoConformance(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcpgo-conformance")
	build := exec.Command("go", "build", "-o", bin, "github.com/mark3labs/mcp-go/examples/conformance")
	build.Dir = filepath.Join(repoRoot(), "services", "mcpgateway") // a module that requires mcp-go
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building mcp-go's conformance example: %v\n%s", err, out)
	}
	for attempt := 0; ; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		cmd := exec.Command(bin)
		cmd.Env = []string{"CONFORMANCE_ADDR=" + addr}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		var logs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		stop := func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		url := "http://" + addr
		_, err = waitfor.Poll(15*time.Second, func() error {
			select {
			case <-exited:
				return waitfor.Stop(errors.New("exited"))
			default:
			}
			resp, err := http.Get(url + "/health")
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return errors.New(resp.Status)
			}
			return nil
		})
		if err == nil {
			t.Cleanup(stop)
			return url + "/mcp"
		}
		stop()
		if attempt == 2 || !strings.Contains(logs.String(), "address already in use") {
			t.Fatalf("mcp-go's conformance example did not start on %s:\n%s", addr, logs.String())
		}
	}
}

// TestFederationConformance2026 runs conformance 0.2.0-alpha.12 with --spec-version
// 2026-07-28 through /mcp/servers/conformance to mcp-go's conformance example, registered as a
// Streamable HTTP upstream: the conformance client is modern, the upstream is driven by Zest.
// Every scenario whose fixtures the example has must pass; the baseline lists the ones it has
// not (their tool, prompt or annotation is missing from it), and server-stateless fails only
// on the checks of its diagnostic tools.
func TestFederationConformance2026(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "conformance", "transport": "streamable-http", "url": mcpGoConformance(t)})
	dir := t.TempDir()
	// mcp-go's example itself sometimes drops the last progress notification before its
	// result (5 of 6 runs of tools-call-with-progress failed against it directly, without
	// Zest): that scenario's outcome is the upstream's. Progress through Zest is checked by
	// TestFederationHTTPUpstream and the federate package's tests.
	out := conformanceNext(t, fedURL(s, "conformance"), "2026-07-28", "conformance-2026-federation-baseline.yml", dir, "tools-call-with-progress")
	for _, sc := range []string{"tools-list", "tools-call-simple-text", "tools-call-image", "tools-call-audio", "tools-call-embedded-resource",
		"tools-call-mixed-content", "tools-call-error", "completion-complete", "resources-list", "resources-read-text",
		"resources-read-binary", "resources-templates-read", "prompts-list", "prompts-get-simple", "prompts-get-with-args",
		"prompts-get-embedded-resource", "prompts-get-with-image", "caching", "http-header-validation", "dns-rebinding-protection",
		"server-sse-multiple-streams", "input-required-result-unsupported-methods", "input-required-result-validate-input"} {
		if !strings.Contains(out, "✓ "+sc+":") {
			t.Fatalf("%s did not pass:\n%s", sc, out)
		}
	}
	// The example serves 2026-07-28: Zest drove it without a session (server/discover first).
	if r := admin(t, s, "GET", "/servers/conformance", ""); r.Status != 200 || !strings.Contains(string(r.Body), `"protocol_version":"2026-07-28"`) {
		t.Fatalf("the upstream's state: %d %s", r.Status, r.Body)
	}
	got := conformanceFailures(t, dir)["server-stateless"]
	want := []string{"sep-2575-http-server-no-independent-requests-on-stream", "sep-2575-missing-capability-http-400",
		"sep-2575-server-no-log-without-loglevel", "sep-2575-server-rejects-undeclared-capability"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("server-stateless: failing checks %v, want only the diagnostic-tool checks %v", got, want)
	}
}

// TestMcpGoClientModernFirst: mark3labs/mcp-go's client with its defaults (server/discover
// first, then 2026-07-28 without a session) through /mcp and through /mcp/servers/{id} to
// mcp-go's conformance example: it negotiates 2026-07-28, lists the tools and calls one.
func TestMcpGoClientModernFirst(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "conformance", "transport": "streamable-http", "url": mcpGoConformance(t)})
	for _, c := range []struct {
		url, server, tool, want string
	}{
		{s.URL + "/mcp", "lemonade-mcp", "lemonade_list_models", "builtin-llm"},
		{fedURL(s, "conformance"), "mcp-go-conformance", "test_simple_text", "This is a simple text response for testing."},
	} {
		t.Run(c.url, func(t *testing.T) {
			tr, err := transport.NewStreamableHTTP(c.url)
			if err != nil {
				t.Fatal(err)
			}
			cl := mcpclient.NewClient(tr)
			if err := cl.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cl.Close() })
			req := mcp.InitializeRequest{}
			req.Params.ClientInfo = mcp.Implementation{Name: "zest-e2e-mcp-go", Version: "1"}
			res, err := cl.Initialize(t.Context(), req)
			if err != nil {
				t.Fatalf("initialize: %v", err)
			}
			if res.ProtocolVersion != "2026-07-28" || res.ServerInfo.Name != c.server || tr.GetSessionId() != "" {
				t.Fatalf("negotiated %q with %q (session %q): want 2026-07-28 with %s, no session", res.ProtocolVersion, res.ServerInfo.Name, tr.GetSessionId(), c.server)
			}
			tools, err := cl.ListTools(t.Context(), mcp.ListToolsRequest{})
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			if !slices.ContainsFunc(tools.Tools, func(tl mcp.Tool) bool { return tl.Name == c.tool }) {
				t.Fatalf("tools/list lacks %s: %v", c.tool, tools.Tools)
			}
			call := mcp.CallToolRequest{}
			call.Params.Name = c.tool
			call.Params.Arguments = map[string]any{}
			out, err := cl.CallTool(t.Context(), call)
			if err != nil {
				t.Fatalf("tools/call: %v", err)
			}
			text := ""
			if len(out.Content) > 0 {
				if tc, ok := mcp.AsTextContent(out.Content[0]); ok {
					text = tc.Text
				}
			}
			if out.IsError || !strings.Contains(text, c.want) || out.ResultType != "complete" {
				t.Fatalf("tools/call %s: isError %v, resultType %q, text %q", c.tool, out.IsError, out.ResultType, text)
			}
		})
	}
}
