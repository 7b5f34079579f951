package registry

import (
	"errors"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/etcdtest"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/proto"
)

// runContract checks what every Registry promises, whatever stores it: each subtest opens a
// store of its own (an empty one) with open.
func runContract(t *testing.T, open func(t *testing.T) Registry) {
	t.Run("ServersRoundTrip", func(t *testing.T) {
		r, ctx := open(t), t.Context()
		for _, id := range []string{"b", "a"} {
			if err := r.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: id, Command: "node", Env: map[string]string{"K": "${K}"}}); err != nil {
				t.Fatal(err)
			}
		}
		list, err := r.ListServers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].GetId() != "a" || list[1].GetId() != "b" || list[1].GetEnv()["K"] != "${K}" {
			t.Fatalf("list = %v, want a then b, env kept", list)
		}
		if err := r.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "a", Command: "python"}); err != nil {
			t.Fatal(err)
		}
		if got, err := r.GetServer(ctx, "a"); err != nil || got.GetCommand() != "python" || got.GetEnv() != nil {
			t.Fatalf("a after a replacing put: %v, %v", got, err)
		}
		if err := r.DeleteServer(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.GetServer(ctx, "a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get deleted: %v", err)
		}
		if err := r.DeleteServer(ctx, "a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
		if _, err := r.GetServer(ctx, "never"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get unknown: %v", err)
		}
		if list, _ := r.ListServers(ctx); len(list) != 1 || list[0].GetId() != "b" {
			t.Fatalf("list after delete = %v", list)
		}
	})

	t.Run("Approvals", func(t *testing.T) { testApprovals(t, open(t).(Approvals)) })
	t.Run("ToolPins", func(t *testing.T) { testToolPins(t, open(t).(Pins)) })
	t.Run("OAuthTokens", func(t *testing.T) { testOAuthTokens(t, open(t).(OAuthTokens)) })

	t.Run("EmptyIDsRefused", func(t *testing.T) {
		r, ctx := open(t), t.Context()
		if err := r.PutServer(ctx, &mcpgatewayv1.ServerConfig{Command: "node"}); err == nil {
			t.Error("a server without an id was stored")
		}
		if err := r.PutPreset(ctx, &mcpgatewayv1.Preset{Name: "x"}); err == nil {
			t.Error("a preset without an id was stored")
		}
	})

	// Tool filters and expose are stored with the config; expose:false is kept (protojson
	// omits a false bool: the read must not turn it back on).
	t.Run("ToolFiltersAndExposeRoundTrip", func(t *testing.T) {
		r, ctx := open(t), t.Context()
		if err := r.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "f", Command: "node", ToolsAllow: []string{"echo", "get-*"}, ToolsDeny: []string{"get-env"}, Expose: proto.Bool(true)}); err != nil {
			t.Fatal(err)
		}
		got, err := r.GetServer(ctx, "f")
		if err != nil || strings.Join(got.GetToolsAllow(), ",") != "echo,get-*" || strings.Join(got.GetToolsDeny(), ",") != "get-env" || !got.GetExpose() {
			t.Fatalf("f: %v %v", got, err)
		}
		got.Expose = proto.Bool(false)
		if err := r.PutServer(ctx, got); err != nil {
			t.Fatal(err)
		}
		if got, _ := r.GetServer(ctx, "f"); got.GetExpose() {
			t.Fatal("expose:false was not kept")
		}
	})

	t.Run("PresetsRoundTrip", func(t *testing.T) {
		r, ctx := open(t), t.Context()
		for _, p := range []*mcpgatewayv1.Preset{
			{Id: "p2", Name: "Two", McpServerIds: []string{"lemonade", "fs"}},
			{Id: "p1", Name: "One", ToolsEnabled: false}, // an explicit empty list, the legacy flag off
		} {
			if err := r.PutPreset(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		list, err := r.ListPresets(ctx)
		if err != nil || len(list) != 2 || list[0].GetId() != "p1" || list[1].GetId() != "p2" {
			t.Fatalf("list = %v, %v; want p1 then p2", list, err)
		}
		if p, err := r.GetPreset(ctx, "p2"); err != nil || p.GetName() != "Two" || strings.Join(p.GetMcpServerIds(), ",") != "lemonade,fs" {
			t.Fatalf("p2 = %v, %v", p, err)
		}
		if p, _ := r.GetPreset(ctx, "p1"); len(p.GetMcpServerIds()) != 0 {
			t.Fatalf("p1 = %v: an explicit empty list must stay empty", p)
		}
		if err := r.DeletePreset(ctx, "p1"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.GetPreset(ctx, "p1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get deleted: %v", err)
		}
		if err := r.DeletePreset(ctx, "p1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
	})

	t.Run("EndedSessions", func(t *testing.T) {
		r, ctx, now := open(t), t.Context(), time.Now()
		if ended, err := r.SessionEnded(ctx, "s1"); err != nil || ended {
			t.Fatalf("a fresh session reads as ended (%v)", err)
		}
		writes := []struct {
			id  string
			exp time.Time
		}{
			{"s1", now.Add(time.Hour)},
			{"old", now.Add(-time.Hour)},
			{"epoch", time.Time{}}, // before 1970
			{"moved", now.Add(time.Minute)},
			{"moved", now.Add(3 * time.Hour)},
			{"back", now.Add(-time.Minute)}, // expired, then written again unexpired
			{"back", now.Add(time.Hour)},
			{"s2", now.Add(time.Hour)}, // a write after the others (bbolt prunes on it)
		}
		for _, w := range writes {
			if err := r.EndSession(ctx, w.id, w.exp); err != nil {
				t.Fatal(err)
			}
		}
		for id, want := range map[string]bool{"s1": true, "s2": true, "moved": true, "back": true, "old": false, "epoch": false, "s3": false} {
			if ended, err := r.SessionEnded(ctx, id); err != nil || ended != want {
				t.Errorf("SessionEnded(%s) = %v (%v), want %v", id, ended, err, want)
			}
		}
	})

	t.Run("SessionLogLevels", func(t *testing.T) {
		r, ctx, now := open(t), t.Context(), time.Now()
		if l, err := r.SessionLogLevel(ctx, "sess-1"); err != nil || l != "" {
			t.Fatalf("a session that set no level: %q %v", l, err)
		}
		for _, w := range []struct {
			id, level string
			exp       time.Time
		}{
			{"sess-1", "debug", now.Add(time.Hour)},
			{"old", "error", now.Add(-time.Hour)},
			{"sess-1", "warning", now.Add(time.Hour)}, // replaces
			{"lapsed", "info", now.Add(time.Hour)},
			{"lapsed", "info", now.Add(-time.Second)}, // written again, expired
		} {
			if err := r.SetSessionLogLevel(ctx, w.id, w.level, w.exp); err != nil {
				t.Fatal(err)
			}
		}
		for id, want := range map[string]string{"sess-1": "warning", "old": "", "lapsed": "", "sess-2": ""} {
			if l, err := r.SessionLogLevel(ctx, id); err != nil || l != want {
				t.Errorf("SessionLogLevel(%s) = %q (%v), want %q", id, l, err, want)
			}
		}
	})
}

func TestContractBolt(t *testing.T) {
	runContract(t, func(t *testing.T) Registry {
		r, err := Open(filepath.Join(t.TempDir(), "registry.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	})
}

// TestContractEtcd runs the contract on one etcd member, TestContractEtcdCluster on three (a
// write there commits on two). Each subtest has a prefix of its own in the test's cluster.
func TestContractEtcd(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	runContract(t, func(t *testing.T) Registry { return openTestEtcd(t, c.Endpoints(), nil) })
}

func TestContractEtcdCluster(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 3)
	runContract(t, func(t *testing.T) Registry { return openTestEtcd(t, c.Endpoints(), nil) })
}

var unsafePrefixChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// testPrefix is a key prefix of t's own: /test/<its name>/.
func testPrefix(t *testing.T) string {
	return "/test/" + unsafePrefixChars.ReplaceAllString(t.Name(), "_") + "/"
}

// openTestEtcd opens the registry at testPrefix(t) on endpoints, closed when t ends; edit, when
// not nil, changes the config first.
func openTestEtcd(t *testing.T, endpoints []string, edit func(*EtcdConfig)) *Etcd {
	t.Helper()
	cfg := EtcdConfig{Endpoints: endpoints, Prefix: testPrefix(t), RequestTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	if edit != nil {
		edit(&cfg)
	}
	r, err := OpenEtcd(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
