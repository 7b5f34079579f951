package server

import (
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/envflag"
	"github.com/zestmcp/zest/lib/etcdtest"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/activity"
	"github.com/zestmcp/zest/services/mcpgateway/audit"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
)

// TestValidateMCPPreset: ZEST_MCP_PRESET must be a preset id.
func TestValidateMCPPreset(t *testing.T) {
	for _, c := range []struct {
		preset string
		ok     bool
	}{{"", true}, {"desk", true}, {"a.b_c-1", true}, {"not an id", false}, {strings.Repeat("x", 97), false}} {
		cfg := DefaultConfig()
		cfg.Keys.Service = ""
		cfg.MCPPreset = c.preset
		err := cfg.Validate()
		if got := err == nil || !strings.Contains(err.Error(), "mcp-preset"); got != c.ok {
			t.Errorf("mcp-preset %q: %v", c.preset, err)
		}
	}
}

// TestValidateMCPRegistryURL: ZEST_MCP_REGISTRY_URL is the official registry by default, and
// a value that is no registry URL stops mcpgateway at startup with an error naming it.
func TestValidateMCPRegistryURL(t *testing.T) {
	if DefaultConfig().MCPRegistryURL != "https://registry.modelcontextprotocol.io" {
		t.Fatalf("default %q", DefaultConfig().MCPRegistryURL)
	}
	for _, c := range []struct {
		url string
		ok  bool
	}{{"https://registry.modelcontextprotocol.io", true}, {"http://127.0.0.1:8080/mirror/", true},
		{"registry.example", false}, {"https://user:secret@registry.example", false}, {"https://r.example/?x=1", false}} {
		cfg := DefaultConfig()
		cfg.Keys.Service = ""
		cfg.MCPRegistryURL = c.url
		err := cfg.Validate()
		if got := err == nil || !strings.Contains(err.Error(), "ZEST_MCP_REGISTRY_URL"); got != c.ok {
			t.Errorf("%q: %v", c.url, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("the error repeats the URL's password: %v", err)
		}
	}
}

// TestToolSearchEmbeddingModel: ZEST_TOOL_SEARCH_EMBEDDING_MODEL is unset by default (BM25
// alone), takes a model id, and refuses builtin-embed (not semantic) and a value that is no
// model id at startup, naming the variable.
func TestToolSearchEmbeddingModel(t *testing.T) {
	cfg, err := parseEnv(nil)
	if err != nil || cfg.ToolSearchEmbeddingModel != "" {
		t.Fatalf("default: %q %v", cfg.ToolSearchEmbeddingModel, err)
	}
	cfg, err = parseEnv(map[string]string{"ZEST_TOOL_SEARCH_EMBEDDING_MODEL": "nomic-embed-text:v1.5"})
	if err != nil || cfg.ToolSearchEmbeddingModel != "nomic-embed-text:v1.5" {
		t.Fatalf("set: %q %v", cfg.ToolSearchEmbeddingModel, err)
	}
	for bad, why := range map[string]string{"builtin-embed": "knows no meaning", "two words": "want a model id"} {
		_, err := parseEnv(map[string]string{"ZEST_TOOL_SEARCH_EMBEDDING_MODEL": bad})
		if err == nil || !strings.Contains(err.Error(), "ZEST_TOOL_SEARCH_EMBEDDING_MODEL") || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want an error naming the variable and saying %q", bad, err, why)
		}
	}
}

// TestActivityVariables: ZEST_ACTIVITY_SIZE and ZEST_ACTIVITY_DETAILS are read as every
// ZEST_ variable is, and a bad value is refused at startup with an error that names it.
func TestActivityVariables(t *testing.T) {
	parse := parseEnv
	cfg, err := parse(nil)
	if err != nil || cfg.ActivitySize != activity.DefaultSize || cfg.ActivityDetails {
		t.Fatalf("defaults: %d %v %v", cfg.ActivitySize, cfg.ActivityDetails, err)
	}
	cfg, err = parse(map[string]string{"ZEST_ACTIVITY_SIZE": "10000", "ZEST_ACTIVITY_DETAILS": "true"})
	if err != nil || cfg.ActivitySize != 10000 || !cfg.ActivityDetails {
		t.Fatalf("set: %d %v %v", cfg.ActivitySize, cfg.ActivityDetails, err)
	}
	for _, bad := range []map[string]string{
		{"ZEST_ACTIVITY_SIZE": "0"}, {"ZEST_ACTIVITY_SIZE": "-5"}, {"ZEST_ACTIVITY_SIZE": "10001"},
		{"ZEST_ACTIVITY_SIZE": "lots"}, {"ZEST_ACTIVITY_DETAILS": "maybe"},
	} {
		_, err := parse(bad)
		for name := range bad {
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%v: %v, want an error that names %s", bad, err, name)
			}
		}
	}
}

// TestAuditVariables: ZEST_AUDIT_RETENTION, ZEST_AUDIT_MAX_ENTRIES,
// ZEST_AUDIT_MAX_ADMIN_ENTRIES and ZEST_AUDIT_DETAILS have their defaults, are read as every ZEST_ variable is, and a bad value is refused at
// startup with an error that names it.
func TestAuditVariables(t *testing.T) {
	cfg, err := parseEnv(nil)
	if err != nil || cfg.AuditRetention != audit.DefaultRetention || cfg.AuditMaxEntries != audit.DefaultMaxEntries ||
		cfg.AuditMaxAdminEntries != audit.DefaultMaxAdminEntries || cfg.AuditDetails {
		t.Fatalf("defaults: %v %d %v %v", cfg.AuditRetention, cfg.AuditMaxEntries, cfg.AuditDetails, err)
	}
	cfg, err = parseEnv(map[string]string{"ZEST_AUDIT_RETENTION": "24h", "ZEST_AUDIT_MAX_ENTRIES": "0", "ZEST_AUDIT_DETAILS": "true", "ZEST_AUDIT_MAX_ADMIN_ENTRIES": "1"})
	if err != nil || cfg.AuditRetention != 24*time.Hour || cfg.AuditMaxEntries != 0 || !cfg.AuditDetails || cfg.AuditMaxAdminEntries != 1 {
		t.Fatalf("set: %v %d %v %v", cfg.AuditRetention, cfg.AuditMaxEntries, cfg.AuditDetails, err)
	}
	for _, bad := range []map[string]string{
		{"ZEST_AUDIT_RETENTION": "59m"}, {"ZEST_AUDIT_RETENTION": "a month"}, {"ZEST_AUDIT_MAX_ENTRIES": "-1"},
		{"ZEST_AUDIT_MAX_ENTRIES": "10000001"}, {"ZEST_AUDIT_DETAILS": "maybe"},
		{"ZEST_AUDIT_MAX_ADMIN_ENTRIES": "0"}, {"ZEST_AUDIT_MAX_ADMIN_ENTRIES": "10000001"}, {"ZEST_AUDIT_MAX_ADMIN_ENTRIES": "many"},
	} {
		_, err := parseEnv(bad)
		for name := range bad {
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%v: %v, want an error that names %s", bad, err, name)
			}
		}
	}
}

// TestRegistryVariable: ZEST_REGISTRY is read as every ZEST_ variable is and checked at
// startup; New opens the store it names (here a real etcd member).
func TestRegistryVariable(t *testing.T) {
	parse := func(v string) (Config, error) { return parseEnv(map[string]string{"ZEST_REGISTRY": v}) }
	for v, wantErr := range map[string]string{
		"":                         "",
		"etcd://127.0.0.1:2379":    "",
		"etcds://a:2379,b:2379/p/": "",
		"zk://h:2181":              "ZEST_REGISTRY",
		"etcd://u:p@h:2379":        "ZEST_ETCD_USERNAME",
	} {
		cfg, err := parse(v)
		if wantErr == "" && (err != nil || cfg.Registry != v) || wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)) {
			t.Errorf("ZEST_REGISTRY=%q: %q, %v; want an error naming %q", v, cfg.Registry, err, wantErr)
		}
	}

	c := etcdtest.Start(t, 1)
	cfg := DefaultConfig()
	cfg.Keys.Service = ""
	cfg.DataDir = t.TempDir()
	cfg.Registry = "etcd://" + c.Endpoints()[0] + "/server-test"
	s, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.reg.(*registry.Etcd); !ok {
		t.Fatalf("registry %T, want *registry.Etcd", s.reg)
	}
	if err := s.reg.PutServer(t.Context(), &mcpgatewayv1.ServerConfig{Id: "x", Command: "node"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "registry.db")); !os.IsNotExist(err) {
		t.Fatalf("a bbolt file was made alongside etcd: %v", err)
	}
}

// TestInferenceAddrTakesReplicas: ZEST_INFERENCE_ADDR is one address, a list or dns:///; a
// bad one is refused naming the flag and the forms.
func TestInferenceAddrTakesReplicas(t *testing.T) {
	for _, c := range []struct {
		addr string
		ok   bool
	}{{"127.0.0.1:13310", true}, {"10.0.0.1:13310,10.0.0.2:13310", true}, {"dns:///inference.zest:13310", true},
		{"10.0.0.1:13310,", false}, {"inference", false}, {"dns:///inference", false}} {
		cfg := DefaultConfig()
		cfg.Keys.Service = ""
		cfg.InferenceAddr = c.addr
		err := cfg.Validate()
		if c.ok != (err == nil) || (err != nil && !(strings.Contains(err.Error(), "inference-addr") && strings.Contains(err.Error(), "dns:///name:port"))) {
			t.Errorf("inference-addr %q: %v", c.addr, err)
		}
	}
}

// TestToolhostVariables: ZEST_TOOLHOST_ADDR takes one address, a list or dns:///name:port, and
// the pool's knobs are read and checked at startup with errors that name them.
func TestToolhostVariables(t *testing.T) {
	parse := parseEnv
	for _, ok := range []map[string]string{
		nil,
		{"ZEST_TOOLHOST_ADDR": "10.0.0.1:13312,10.0.0.2:13312"},
		{"ZEST_TOOLHOST_ADDR": "dns:///zest-toolhost.zest.svc.cluster.local:13312", "ZEST_TOOLHOST_RESOLVE_EVERY": "2s"},
		{"ZEST_TOOLHOST_HEALTH_EVERY": "200ms", "ZEST_TOOLHOST_WAIT": "5s"},
	} {
		if _, err := parse(ok); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	for _, bad := range []map[string]string{
		{"ZEST_TOOLHOST_ADDR": "10.0.0.1"}, {"ZEST_TOOLHOST_ADDR": "dns:///name"},
		{"ZEST_TOOLHOST_RESOLVE_EVERY": "1ms"}, {"ZEST_TOOLHOST_HEALTH_EVERY": "1ms"}, {"ZEST_TOOLHOST_WAIT": "1h"},
	} {
		_, err := parse(bad)
		for name := range bad {
			flagName := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, "ZEST_"), "_", "-"))
			if err == nil || !strings.Contains(err.Error(), flagName) {
				t.Errorf("%v: %v, want an error that names %s", bad, err, flagName)
			}
		}
	}
}

// parseEnv reads the configuration as the binary does, from env alone, and checks it.
func parseEnv(env map[string]string) (Config, error) {
	cfg := DefaultConfig()
	cfg.Keys.Service = ""
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.RegisterFlags(fs)
	if err := envflag.Parse(fs, nil, func(k string) string { return env[k] }); err != nil {
		return cfg, err
	}
	err := cfg.Validate() // before cfg is read: Go leaves the order of a return's operands open
	return cfg, err
}
