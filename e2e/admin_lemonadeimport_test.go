package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestZestctlImportsLemonadeServers: `zestctl servers import-lemonade` registers the servers
// of Lemonade's mcp_servers.json from ~/.config/lemonade (where lemond keeps it since its PR
// #3028), ignoring and naming a legacy ~/.cache/lemonade copy beside it; the legacy copy alone
// is read.
func TestZestctlImportsLemonadeServers(t *testing.T) {
	const apiKey, admin = "import-api-key", "import-admin-key"
	s := startSuite(t, "LEMONADE_API_KEY="+apiKey, "LEMONADE_ADMIN_API_KEY="+admin)
	home := t.TempDir()
	write := func(rel, id string) string {
		p := filepath.Join(home, rel, "lemonade", "mcp_servers.json")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(map[string]any{"version": 1, "servers": []any{map[string]any{"id": id, "name": id, "transport": "stdio",
			"command": "node", "args": []string{"server.mjs"}, "env": map[string]string{}, "working_dir": "", "enabled": false, "timeout_ms": 30000}}})
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	current, legacy := write(".config", "from-config"), write(".cache", "from-cache")
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=", "XDG_CACHE_HOME="}
	importOnce := func() map[string]any {
		t.Helper()
		r := zestctl(t, s, env, "servers", "import-lemonade", "-o", "json")
		if r.Code != 0 {
			t.Fatalf("import: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
		}
		return r.JSON(t)
	}
	out := importOnce()
	if out["file"] != current || len(asSlice(out["ignored"])) != 1 || asSlice(out["ignored"])[0] != legacy {
		t.Fatalf("both present: %v", out)
	}
	list := zestctl(t, s, nil, "servers", "list", "-o", "json")
	if !strings.Contains(list.Stdout, `"from-config"`) || strings.Contains(list.Stdout, `"from-cache"`) {
		t.Fatalf("servers after the import: %s", list.Stdout)
	}
	if err := os.Remove(current); err != nil {
		t.Fatal(err)
	}
	if out := importOnce(); out["file"] != legacy || asSlice(out["servers"])[0].(map[string]any)["id"] != "from-cache" {
		t.Fatalf("legacy alone: %v", out)
	}
}
