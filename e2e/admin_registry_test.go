package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/mcpregistry/mcpregistrytest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// registrySuite starts the suite reading a registry fixture (mcpregistrytest, real
// server.json documents) on 127.0.0.1. The stdio servers it installs run as installed
// (npx -y @modelcontextprotocol/server-…@2026.8.31) in scripts/peers, where npm finds the
// package of that version installed: npm runs offline (npm_config_offline, passed to the
// servers by ZEST_TOOLHOST_ENV_ALLOW) with an empty cache of its own, so nothing is fetched.
func registrySuite(t *testing.T, extra ...string) (*Suite, *mcpregistrytest.Registry) {
	t.Helper()
	reg := mcpregistrytest.Start(t)
	s := startSuite(t, append([]string{"LEMONADE_ADMIN_API_KEY=" + adminKey, "ZEST_MCP_REGISTRY_URL=" + reg.URL,
		"ZEST_TOOLHOST_ENV_ALLOW=npm_config_offline,npm_config_cache,npm_config_update_notifier",
		"npm_config_offline=true", "npm_config_update_notifier=false", "npm_config_cache=" + filepath.Join(t.TempDir(), "npm-cache")}, extra...)...)
	return s, reg
}

// peersAsInstalled checks that the fixture's server.json of server-everything and
// server-memory name the versions scripts/peers has installed, which the installed command
// (npx -y …@version, offline) runs; it returns scripts/peers.
func peersAsInstalled(t *testing.T) string {
	t.Helper()
	peers := peersDir(t)
	docs := mcpregistrytest.Documents(t)
	for _, name := range []string{"server-everything", "server-memory"} {
		var doc struct{ Version string }
		var pkg struct{ Version string }
		b, err := os.ReadFile(filepath.Join(peers, "node_modules", "@modelcontextprotocol", name, "package.json"))
		if err != nil || json.Unmarshal(b, &pkg) != nil || json.Unmarshal(docs[name], &doc) != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if pkg.Version != doc.Version {
			t.Fatalf("scripts/peers has %s %s, the registry fixture's server.json says %s: update services/mcpgateway/mcpregistry/mcpregistrytest/servers/%s.json (and this file's versions)", name, pkg.Version, doc.Version, name)
		}
	}
	return peers
}

// registryAPIKey is TestRegistryRoute's API key: it may not read the registry through Zest.
const registryAPIKey = "registry-api-key"

// zestctlIn runs bin/zestctl as zestctl does, with stdin.
func zestctlIn(t *testing.T, s *Suite, stdin string, args ...string) ctlResult {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(binDir, "zestctl"), args...)
	cmd.Env = s.Env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("zestctl %q: %v", args, err)
	}
	return ctlResult{Stdout: out.String(), Stderr: errb.String(), Code: code}
}

// TestInstallFromRegistry is issue 25's acceptance for item 4: `zestctl servers install`
// against a registry fixture registers server-everything and server-memory by name, showing
// what will run and asking first, and they connect.
func TestInstallFromRegistry(t *testing.T) {
	peers := peersAsInstalled(t)
	s, _ := registrySuite(t)

	t.Run("search", func(t *testing.T) {
		r := mustCtl(t, s, 0, "servers", "search", "modelcontextprotocol")
		for _, want := range []string{"npx -y @modelcontextprotocol/server-memory@2026.8.31", "uvx mcp-server-fetch==2025.4.7"} {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("search lists no %q:\n%s", want, r.Stdout)
			}
		}
		m := mustCtl(t, s, 0, "servers", "search", "legacy", "-o", "json").JSON(t)
		if sv := m["servers"].([]any); len(sv) != 1 || !strings.Contains(sv[0].(map[string]any)["refused"].(string), "streamable-http only") {
			t.Errorf("search legacy: %v", m)
		}
		if r := mustCtl(t, s, 0, "servers", "search", "--limit", "1"); !strings.Contains(r.Stdout, "More: --cursor ") {
			t.Errorf("a page of one: %s", r.Stdout)
		}
	})

	t.Run("no saves nothing", func(t *testing.T) {
		r := zestctlIn(t, s, "n\n", "servers", "install", "io.github.modelcontextprotocol/server-everything", "--working-dir", peers)
		if r.Code != 1 || !strings.Contains(r.Stdout, "runs:        npx -y @modelcontextprotocol/server-everything@2026.8.31") ||
			!strings.Contains(r.Stdout, "Save it? [y/N]") || !strings.Contains(r.Stderr, "nothing was saved") {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
		}
		if got := admin(t, s, "GET", "/servers/server-everything", ""); got.Status != 404 {
			t.Fatalf("answered no, yet GET the server is %d: %s", got.Status, got.Body)
		}
	})

	t.Run("server-everything, confirmed", func(t *testing.T) {
		r := zestctlIn(t, s, "y\n", "servers", "install", "io.github.modelcontextprotocol/server-everything@2026.8.31", "--working-dir", peers)
		if r.Code != 0 || !strings.Contains(r.Stdout, `Installed "server-everything"`) {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
		}
	})

	t.Run("server-memory, --yes", func(t *testing.T) {
		r := zestctlIn(t, s, "", "servers", "install", "io.github.modelcontextprotocol/server-memory", "--working-dir", peers, "--yes", "-o", "json")
		if r.Code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
		}
		m := r.JSON(t)
		if m["id"] != "server-memory" || m["command"] != "npx" || !slices.Equal(strs(m["args"]), []string{"-y", "@modelcontextprotocol/server-memory@2026.8.31"}) ||
			m["name"] != "io.github.modelcontextprotocol/server-memory" || m["working_dir"] != peers {
			t.Fatalf("saved %v", m)
		}
		// What will run was shown on stderr, the optional variable left out and named.
		if !strings.Contains(r.Stderr, "MEMORY_FILE_PATH (optional, left out") {
			t.Fatalf("stderr: %s", r.Stderr)
		}
	})

	for id, tool := range map[string]string{"server-everything": "echo", "server-memory": "create_entities"} {
		t.Run("connect "+id, func(t *testing.T) {
			m := mustCtl(t, s, 0, "servers", "connect", id, "-o", "json").JSON(t)
			var names []string
			for _, tl := range m["tools"].([]any) {
				names = append(names, tl.(map[string]any)["name"].(string))
			}
			if m["status"] != "connected" || !slices.Contains(names, tool) {
				t.Fatalf("%s: status %v, tools %q; want connected with %s", id, m["status"], names, tool)
			}
		})
	}

	t.Run("refusals", func(t *testing.T) {
		r := zestctlIn(t, s, "", "servers", "install", "io.github.modelcontextprotocol/server-memory", "--yes")
		if r.Code != 2 || !strings.Contains(r.Stderr, `"server-memory" is registered already`) {
			t.Fatalf("a second install: exit %d\nstderr: %s", r.Code, r.Stderr)
		}
		r = zestctlIn(t, s, "", "servers", "install", "com.example/legacy-sse", "--yes")
		if r.Code != 1 || !strings.Contains(r.Stderr, "streamable-http only") {
			t.Fatalf("an SSE-only remote: exit %d\nstderr: %s", r.Code, r.Stderr)
		}
		r = zestctlIn(t, s, "", "servers", "install", "io.example/none", "--yes")
		if r.Code != 3 {
			t.Fatalf("an unknown server: exit %d\nstderr: %s", r.Code, r.Stderr)
		}
	})
}

// TestRegistryRoute: the console's search goes through Zest's admin route, which takes the
// admin key (not the API key, over HTTP or gRPC), and answers each server with what it would run or why it cannot.
func TestRegistryRoute(t *testing.T) {
	s, reg := registrySuite(t, "LEMONADE_API_KEY="+registryAPIKey)
	before := reg.Requests.Load()
	if r := do(t, "GET", s.URL+"/internal/mcp/registry/servers?search=memory", ""); r.Status != 401 {
		t.Fatalf("no key: %d %s", r.Status, r.Body)
	}
	if r := do(t, "GET", s.URL+"/internal/mcp/registry/servers?search=memory", "", "Authorization: Bearer "+registryAPIKey); r.Status != 401 {
		t.Fatalf("the API key: %d %s", r.Status, r.Body)
	}
	api := mcpgatewayv1.NewRegistryServiceClient(dialService(t, envOf(s.Env, "ZEST_MCPGATEWAY_ADDR"), registryAPIKey))
	if _, err := api.SearchRegistry(t.Context(), &mcpgatewayv1.SearchRegistryRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("RegistryService over gRPC with the API key: %v, want Unauthenticated", err)
	}
	if reg.Requests.Load() != before {
		t.Fatal("a request without the admin key reached the registry")
	}
	r := admin(t, s, "GET", "/registry/servers?search=modelcontextprotocol", "")
	m := r.JSON(t)
	servers, _ := m["servers"].([]any)
	if r.Status != 200 || len(servers) != 3 || m["registry_url"] != reg.URL {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	byName := map[string]map[string]any{}
	for _, sv := range servers {
		sv := sv.(map[string]any)
		byName[sv["name"].(string)] = sv
	}
	plan := byName["io.github.modelcontextprotocol/server-everything"]["plan"].(map[string]any)
	if plan["command_line"] != "npx -y @modelcontextprotocol/server-everything@2026.8.31" {
		t.Fatalf("server-everything's plan %v", plan)
	}
	if p := byName["io.github.modelcontextprotocol/fetch"]["plan"].(map[string]any); p["command_line"] != "uvx mcp-server-fetch==2025.4.7" {
		t.Fatalf("fetch's plan %v", p)
	}
	r = admin(t, s, "GET", "/registry/plan?name=io.github.github/github-mcp-server", "")
	if p := r.JSON(t)["server"].(map[string]any)["plan"].(map[string]any); r.Status != 200 || p["url"] != "https://api.githubcopilot.com/mcp/" ||
		p["config"].(map[string]any)["bearer_token"] != "${GITHUB_PAT}" {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	if r := admin(t, s, "GET", "/registry/plan?name=io.example/none", ""); r.Status != 404 {
		t.Fatalf("an unknown server: %d %s", r.Status, r.Body)
	}
}

// strs is a JSON array of strings.
func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
