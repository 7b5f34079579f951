package zestctl

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/adminjson"
)

func TestLemonadeServerFiles(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"HOME": "/h"}, []string{"/h/.config/lemonade/mcp_servers.json", "/h/.cache/lemonade/mcp_servers.json"}},
		{map[string]string{"HOME": "/h", "XDG_CONFIG_HOME": "/c", "XDG_CACHE_HOME": "/k"}, []string{"/c/lemonade/mcp_servers.json", "/k/lemonade/mcp_servers.json"}},
		{map[string]string{}, nil},
	} {
		if got := lemonadeServerFiles(env(c.env)); !slices.Equal(got, c.want) {
			t.Errorf("%v: %v, want %v", c.env, got, c.want)
		}
	}
}

// TestFindLemonadeServersPrefersTheConfigDir: the config directory's file is read; a legacy
// copy beside it is reported as ignored; the legacy one alone is read; neither is an error
// naming both places.
func TestFindLemonadeServersPrefersTheConfigDir(t *testing.T) {
	dir := t.TempDir()
	current, legacy := filepath.Join(dir, "config", "mcp_servers.json"), filepath.Join(dir, "cache", "mcp_servers.json")
	files := []string{current, legacy}
	if _, _, err := findLemonadeServers(files); err == nil || !strings.Contains(err.Error(), "give its path") || !strings.Contains(err.Error(), legacy) {
		t.Fatalf("neither: %v", err)
	}
	write := func(p, body string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(legacy, `{"servers":[{"id":"old","transport":"stdio","command":"old"}]}`)
	if got, ignored, err := findLemonadeServers(files); err != nil || got != legacy || ignored != nil {
		t.Fatalf("legacy alone: %q %v %v", got, ignored, err)
	}
	write(current, `{"version":1,"servers":[{"id":"echo","name":"Echo","transport":"stdio","command":"node","args":["echo.mjs"],"env":{"TOKEN":"${TOKEN}"},"working_dir":"","enabled":false,"timeout_ms":30000}]}`)
	got, ignored, err := findLemonadeServers(files)
	if err != nil || got != current || !slices.Equal(ignored, []string{legacy}) {
		t.Fatalf("both: %q %v %v", got, ignored, err)
	}
	entries, err := lemonadeServerEntries(got)
	if err != nil || len(entries) != 1 {
		t.Fatalf("entries %v %v", entries, err)
	}
	// lemond's persisted shape is what the admin API's Lemonade reader takes.
	in, mask, err := adminjson.Server(entries[0])
	if err != nil || in.GetId() != "echo" || in.GetCommand() != "node" || in.GetEnabled() || len(mask.GetPaths()) == 0 {
		t.Fatalf("adminjson: %v %v %v", in, mask, err)
	}
	write(current, `{"servers":{}}`)
	if _, err := lemonadeServerEntries(current); err == nil || !strings.Contains(err.Error(), "is not Lemonade's mcp_servers.json") {
		t.Fatalf("bad file: %v", err)
	}
}
