package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/zestmcp/zest/lib/testenv"
	"github.com/zestmcp/zest/lib/waitfor"
)

// browserRun is what e2e/testdata/browser-client/client.mjs's mcpRun answers.
type browserRun struct {
	Era     string   `json:"era"`
	Session string   `json:"session"`
	Tools   []string `json:"tools"`
	Text    string   `json:"text"`
	IsError bool     `json:"isError"`
	Error   string   `json:"error"`
}

// TestBrowserClientFromAnotherOrigin: the official MCP TypeScript SDK v2 client, in Chromium,
// on a page of another origin (http://app.example:PORT, allowed by LEMONADE_ALLOWED_ORIGINS),
// connects to /mcp, /mcp/servers/{id} and /mcp/presets/{id} in both eras (2025-11-25 by
// initialize, with its Mcp-Session-Id read from the answer; 2026-07-28 pinned, with its
// Mcp-Method, Mcp-Name and Mcp-Param-* headers), lists the tools and calls one — the way
// Lemonade's GUI will reach stdio servers from the browser. A page of an origin nobody allowed
// (http://other.example:PORT) gets nothing: its preflight is refused.
func TestBrowserClientFromAnotherOrigin(t *testing.T) {
	bundle := bundleBrowserClient(t)
	pageSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<!doctype html><html lang="en"><head><title>An MCP client page</title>`+
				`<script type="module" src="/client.js"></script></head><body><main><h1>MCP client</h1></main></body></html>`)
		case "/client.js":
			w.Header().Set("Content-Type", "text/javascript")
			w.Write(bundle)
		default:
			http.NotFound(w, r)
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go pageSrv.Serve(ln)
	t.Cleanup(func() { pageSrv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	app, other := fmt.Sprintf("http://app.example:%d", port), fmt.Sprintf("http://other.example:%d", port)

	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey, "LEMONADE_ALLOWED_ORIGINS="+app)
	echo := filepath.Join(peersDir(t), "echo-server.mjs")
	registerServer(t, s, map[string]any{"id": "echo", "command": "node", "args": []string{echo}})
	if r := admin(t, s, "POST", "/presets", `{"id":"web","mcp_server_ids":["echo","lemonade"]}`); r.Status != 200 {
		t.Fatalf("preset: %d %s", r.Status, r.Body)
	}

	// Both names resolve to loopback in this browser alone: two origins that are not loopback's.
	ctx := newBrowser(t, chromedp.Flag("host-resolver-rules", "MAP app.example 127.0.0.1, MAP other.example 127.0.0.1"))
	run := func(origin, url, era, tool string, args map[string]any) browserRun {
		t.Helper()
		navigate(t, ctx, origin+"/")
		waitfor.NoError(t, 10*time.Second, func() error {
			if ready, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`typeof window.mcpRun === "function"`)); err != nil || !ready {
				return fmt.Errorf("the page's client is not loaded: %v", err)
			}
			return nil
		})
		a, _ := json.Marshal(args)
		expr := fmt.Sprintf(`window.mcpRun(%q, %q, %q, %q, %s)`, url, fedAPIKey, era, tool, a)
		callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out, err := chromedp.Run(callCtx, chromedp.Evaluate[browserRun](expr, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("mcpRun %s %s: %v", url, era, err)
		}
		return out
	}

	endpoints := []struct {
		name, url, tool, want string
		args                  map[string]any
	}{
		{"/mcp", s.URL + "/mcp", "lemonade_list_models", "", map[string]any{}},
		{"/mcp/servers/echo", fedURL(s, "echo"), "echo", "hello from another origin", map[string]any{"text": "hello from another origin"}},
		{"/mcp/presets/web", presetURL(s, "web"), "mcp_echo__echo", "hello through a preset", map[string]any{"text": "hello through a preset"}},
	}
	for _, era := range []string{"2025-11-25", "2026-07-28"} {
		for _, e := range endpoints {
			t.Run(e.name+" "+era, func(t *testing.T) {
				got := run(app, e.url, era, e.tool, e.args)
				if got.Error != "" {
					t.Fatalf("the SDK failed: %s", got.Error)
				}
				if got.Era != era || !slices.Contains(got.Tools, e.tool) || got.IsError || (e.want != "" && got.Text != e.want) || got.Text == "" {
					t.Fatalf("got era %q, %d tools (%q listed: %v), text %.200q, isError %v", got.Era, len(got.Tools), e.tool,
						slices.Contains(got.Tools, e.tool), got.Text, got.IsError)
				}
				// A session-era client reads Mcp-Session-Id from the answer (exposed to scripts);
				// a 2026-07-28 client has no session.
				if (era == "2025-11-25") != (got.Session != "") {
					t.Fatalf("era %s with session id %q", era, got.Session)
				}
			})
		}
	}
	t.Run("an origin nobody allowed", func(t *testing.T) {
		got := run(other, fedURL(s, "echo"), "2025-11-25", "echo", map[string]any{"text": "x"})
		if got.Error == "" || len(got.Tools) != 0 {
			t.Fatalf("a page of %s reached the server: %+v", other, got)
		}
		t.Logf("the SDK on %s: %s", other, got.Error)
	})
}

// bundleBrowserClient bundles e2e/testdata/browser-client/client.mjs with the SDK for a page,
// with esbuild (both from scripts/browser, installed by make browser-deps).
func bundleBrowserClient(t *testing.T) []byte {
	t.Helper()
	modules := testenv.Need(t, testenv.BrowserSDK, "a page runs the MCP TypeScript SDK v2 client")
	node := testenv.Need(t, testenv.Node, "esbuild bundles the client for the page")
	entry, err := filepath.Abs(filepath.Join("testdata", "browser-client", "client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "client.js")
	script := `require("esbuild").build({entryPoints: [process.argv[1]], bundle: true, format: "esm", platform: "browser",
		nodePaths: [process.argv[3]], outfile: process.argv[2], logLevel: "warning"}).catch(() => process.exit(1))`
	cmd := exec.Command(node, "-e", script, entry, out, modules)
	cmd.Dir = filepath.Dir(modules)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bundling the browser client: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "mcpRun") {
		t.Fatalf("the bundle has no mcpRun (%d bytes)", len(b))
	}
	return b
}
