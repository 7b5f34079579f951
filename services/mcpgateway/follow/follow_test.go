package follow_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/mcptest"
	"github.com/zestmcp/zest/lib/waitfor"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/admin"
	"github.com/zestmcp/zest/services/mcpgateway/configcache"
	"github.com/zestmcp/zest/services/mcpgateway/follow"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// shared is a registry that several replicas share, as etcd is: a bbolt file whose every
// server and preset write is announced, in order, to every Watch.
type shared struct {
	registry.Registry

	mu       sync.Mutex // orders writes with their announcement
	watchers map[*watcher]struct{}
}

type watcher struct {
	ch   chan registry.Change
	fail chan error
}

func newShared(t *testing.T) *shared {
	t.Helper()
	bolt, err := registry.Open(filepath.Join(t.TempDir(), "registry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bolt.Close() })
	return &shared{Registry: bolt, watchers: map[*watcher]struct{}{}}
}

var _ registry.Watcher = (*shared)(nil)

// Watch delivers every change until ctx is done or fail breaks the watch.
func (s *shared) Watch(ctx context.Context, fn func(registry.Change)) error {
	w := &watcher{ch: make(chan registry.Change, 1024), fail: make(chan error, 1)}
	s.mu.Lock()
	s.watchers[w] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, w)
		s.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-w.fail:
			return err
		case c := <-w.ch:
			fn(c)
		}
	}
}

// fail breaks every watch with err.
func (s *shared) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watchers {
		w.fail <- err
	}
}

// watching reports how many watches run.
func (s *shared) watching() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.watchers)
}

func (s *shared) write(c registry.Change, do func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := do(); err != nil {
		return err
	}
	for w := range s.watchers {
		w.ch <- c
	}
	return nil
}

func (s *shared) PutServer(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) error {
	// The watch decodes what the store holds: another config than the writer's.
	c := registry.Change{Kind: registry.ServerPut, ID: cfg.GetId(), Server: proto.CloneOf(cfg)}
	return s.write(c, func() error { return s.Registry.PutServer(ctx, cfg) })
}

func (s *shared) DeleteServer(ctx context.Context, id string) error {
	return s.write(registry.Change{Kind: registry.ServerDeleted, ID: id}, func() error { return s.Registry.DeleteServer(ctx, id) })
}

func (s *shared) PutPreset(ctx context.Context, p *mcpgatewayv1.Preset) error {
	c := registry.Change{Kind: registry.PresetPut, ID: p.GetId(), Preset: proto.CloneOf(p)}
	return s.write(c, func() error { return s.Registry.PutPreset(ctx, p) })
}

func (s *shared) DeletePreset(ctx context.Context, id string) error {
	return s.write(registry.Change{Kind: registry.PresetDeleted, ID: id}, func() error { return s.Registry.DeletePreset(ctx, id) })
}

// presets records what the aggregate would be told.
type presets struct {
	mu      sync.Mutex
	changed []string
}

func (p *presets) PresetChanged(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.changed = append(p.changed, "preset:"+id)
}

func (p *presets) ServerChanged(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.changed = append(p.changed, "server:"+id)
}

func (p *presets) saw(what string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.changed, what)
}

// replica is one mcpgateway's registry-facing parts, as server.New wires them.
type replica struct {
	admin   *admin.Service
	up      *upstream.Manager
	presets *presets

	mu    sync.Mutex
	notes []string // "server: message"
}

func (r *replica) notified(server, method string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.notes, func(n string) bool { return strings.HasPrefix(n, server+": ") && strings.Contains(n, method) })
}

// store is a registry replicas share.
type store interface {
	registry.Registry
	registry.Watcher
}

// startReplica wires a replica on store and follows its watch until the test ends.
func startReplica(t *testing.T, store store) *replica {
	t.Helper()
	cache := configcache.New(store)
	up := upstream.New(nil, nil, nil)
	t.Cleanup(func() { up.Close(context.Background()) })
	tools := toolcall.New(toolcall.Config{}, cache, up, keyauth.Keys{})
	r := &replica{up: up, presets: &presets{}}
	changes := follow.New(up, slog.Default(), follow.WithBackoff(10*time.Millisecond, 50*time.Millisecond), follow.WithPresets(r.presets),
		follow.WithNotify(func(server string, msg []byte) {
			r.mu.Lock()
			r.notes = append(r.notes, server+": "+string(msg))
			r.mu.Unlock()
		}))
	r.admin = admin.New(cache, up, tools, slog.New(slog.DiscardHandler), admin.WithChanges(changes))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); changes.Follow(ctx, store, cache) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// within polls cond until it holds, failing the test after a second; it returns how long it took.
func within(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	return withinFor(t, what, time.Second, cond)
}

// withinFor is within with another limit.
func withinFor(t *testing.T, what string, limit time.Duration, cond func() bool) time.Duration {
	t.Helper()
	took := waitfor.True(t, limit, what, cond)
	t.Logf("%s: %v", what, took)
	return took
}

func waitWatching(t *testing.T, s *shared, n int) {
	t.Helper()
	within(t, "watches started", func() bool { return s.watching() == n })
}

func upsert(t *testing.T, a *admin.Service, in *mcpgatewayv1.ServerConfig) {
	t.Helper()
	if _, err := a.UpsertServer(t.Context(), &mcpgatewayv1.UpsertServerRequest{Server: in}); err != nil {
		t.Fatal(err)
	}
}

func toolNames(r *mcpgatewayv1.ListToolsResponse) string {
	var out []string
	for _, e := range r.GetTools() {
		out = append(out, e.GetServerId()+"/"+e.GetName())
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// A server registered, refiltered, moved and deleted through replica A is seen by replica B
// within a second, on every path of its admin API: GetServer, ListServers, ListTools and
// CallTool; B's connection to a server whose connection changed is closed, and a deleted
// server's forgotten; B's sessions of the server are told its tools changed.
func TestAnotherReplicasWrites(t *testing.T) {
	u1 := mcptest.Start(t, mcptest.Options{Tools: []string{"add", "secret"}})
	u2 := mcptest.Start(t, mcptest.Options{Tools: []string{"add", "secret"}})
	store := newShared(t)
	a, b := startReplica(t, store), startReplica(t, store)
	waitWatching(t, store, 2)
	ctx := t.Context()

	upsert(t, a.admin, &mcpgatewayv1.ServerConfig{Id: "s", Transport: "http", Url: u1.URL})
	within(t, "registered through A: GetServer on B", func() bool {
		r, err := b.admin.GetServer(ctx, &mcpgatewayv1.GetServerRequest{Id: "s"})
		return err == nil && r.GetServer().GetConfig().GetUrl() == u1.URL
	})
	ls, err := b.admin.ListServers(ctx, &mcpgatewayv1.ListServersRequest{})
	if err != nil || len(ls.GetServers()) != 1 {
		t.Fatalf("ListServers on B: %v %v", ls, err)
	}
	if r, err := b.admin.CallTool(ctx, &mcpgatewayv1.CallToolRequest{Id: "s", Name: "add"}); err != nil || r.GetServerId() != "s" {
		t.Fatalf("CallTool on B: %v %v", r, err)
	}
	if lt, err := b.admin.ListTools(ctx, &mcpgatewayv1.ListToolsRequest{}); err != nil || toolNames(lt) != "s/add,s/echo,s/secret" {
		t.Fatalf("ListTools on B: %q %v", toolNames(lt), err)
	}
	inits := u1.Initializes()

	// A filter change through A: B shows and calls what the filters expose, on the same
	// connection, and its sessions of s are told.
	upsert(t, a.admin, &mcpgatewayv1.ServerConfig{Id: "s", Transport: "http", Url: u1.URL,
		ToolsDeny: []string{"secret"}})
	within(t, "filter changed through A: ListTools on B", func() bool {
		lt, err := b.admin.ListTools(ctx, &mcpgatewayv1.ListToolsRequest{})
		return err == nil && toolNames(lt) == "s/add,s/echo"
	})
	if _, err := b.admin.CallTool(ctx, &mcpgatewayv1.CallToolRequest{Id: "s", Name: "secret"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("CallTool of a denied tool on B: %v, want FailedPrecondition", err)
	}
	within(t, "filter changed through A: B's sessions told", func() bool { return b.notified("s", "tools/list_changed") })
	within(t, "filter changed through A: B's presets told", func() bool { return b.presets.saw("server:s") })
	if u1.Initializes() != inits || u1.Deletes() != 0 {
		t.Fatalf("a filter change reconnected: %d initializes (was %d), %d deletes", u1.Initializes(), inits, u1.Deletes())
	}

	// A connection change, written straight to the store (a replica this test does not
	// run): B closes its connection to u1 and calls u2.
	moved := &mcpgatewayv1.ServerConfig{Id: "s", Transport: "streamable-http", Url: u2.URL, Enabled: proto.Bool(true), Expose: proto.Bool(true), ToolsDeny: []string{"secret"}}
	if err := store.PutServer(ctx, moved); err != nil {
		t.Fatal(err)
	}
	within(t, "connection changed: B's connection to the old URL closed", func() bool { return u1.Deletes() >= 1 })
	if cfg := b.up.Config("s"); cfg != nil {
		t.Fatalf("B still holds a connection of %v", cfg)
	}
	if _, err := b.admin.CallTool(ctx, &mcpgatewayv1.CallToolRequest{Id: "s", Name: "add"}); err != nil {
		t.Fatal(err)
	}
	if got := u2.ToolCalls(); !slices.Equal(got, []string{"add"}) {
		t.Fatalf("the moved server's calls: %v", got)
	}

	// Deleted through A: B forgets it and answers NotFound.
	if _, err := a.admin.DeleteServer(ctx, &mcpgatewayv1.DeleteServerRequest{Id: "s"}); err != nil {
		t.Fatal(err)
	}
	within(t, "deleted through A: NotFound on B", func() bool {
		_, err := b.admin.GetServer(ctx, &mcpgatewayv1.GetServerRequest{Id: "s"})
		return status.Code(err) == codes.NotFound
	})
	within(t, "deleted through A: B's connection forgotten", func() bool { return b.up.Config("s") == nil && u2.Deletes() >= 1 })
	if _, err := b.admin.CallTool(ctx, &mcpgatewayv1.CallToolRequest{Id: "s", Name: "add"}); status.Code(err) != codes.NotFound {
		t.Fatalf("CallTool of a deleted server on B: %v", err)
	}
	if lt, _ := b.admin.ListTools(ctx, &mcpgatewayv1.ListToolsRequest{}); len(lt.GetTools()) != 0 {
		t.Fatalf("ListTools on B after the delete: %q", toolNames(lt))
	}
	for _, u := range []*mcptest.Upstream{u1, u2} {
		if v := u.Violations(); len(v) > 0 {
			t.Errorf("violations: %v", v)
		}
	}
}

// A replica's own write coming back through the watch changes nothing: no reconnect, no
// second notification.
func TestOwnWriteComesBackHarmlessly(t *testing.T) {
	u := mcptest.Start(t, mcptest.Options{})
	store := newShared(t)
	a := startReplica(t, store)
	waitWatching(t, store, 1)
	ctx := t.Context()
	upsert(t, a.admin, &mcpgatewayv1.ServerConfig{Id: "s", Transport: "http", Url: u.URL})
	if _, err := a.admin.ConnectServer(ctx, &mcpgatewayv1.ConnectServerRequest{Id: "s"}); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	a.notes = nil
	a.mu.Unlock()
	upsert(t, a.admin, &mcpgatewayv1.ServerConfig{Id: "s", Transport: "http", Url: u.URL, ToolsDeny: []string{"echo"}})
	// A marker written after it: once the watch delivered the marker, it delivered the write.
	if err := store.PutPreset(ctx, &mcpgatewayv1.Preset{Id: "marker"}); err != nil {
		t.Fatal(err)
	}
	within(t, "the marker came back", func() bool { return a.presets.saw("preset:marker") })
	a.mu.Lock()
	notes := slices.Clone(a.notes)
	a.mu.Unlock()
	if len(notes) != 1 {
		t.Fatalf("notifications after one filter change: %q, want one", notes)
	}
	if u.Initializes() != 1 || u.Deletes() != 0 || !a.up.State("s").Connected {
		t.Fatalf("own write coming back: %d initializes, %d deletes, connected %v", u.Initializes(), u.Deletes(), a.up.State("s").Connected)
	}
}

// A preset written or deleted through another replica reaches this one's aggregate.
func TestPresetChangesReachTheAggregate(t *testing.T) {
	store := newShared(t)
	a, b := startReplica(t, store), startReplica(t, store)
	waitWatching(t, store, 2)
	ctx := t.Context()
	if _, err := a.admin.UpsertPreset(ctx, &mcpgatewayv1.UpsertPresetRequest{Preset: &mcpgatewayv1.PresetInput{Id: proto.String("p"), Name: proto.String("P")}}); err != nil {
		t.Fatal(err)
	}
	if !a.presets.saw("preset:p") {
		t.Fatal("the writing replica's aggregate was not told at once")
	}
	within(t, "preset written through A: B's aggregate told", func() bool { return b.presets.saw("preset:p") })
	b.presets.changed = nil
	if _, err := a.admin.DeletePreset(ctx, &mcpgatewayv1.DeletePresetRequest{Id: "p"}); err != nil {
		t.Fatal(err)
	}
	within(t, "preset deleted through A: B's aggregate told", func() bool { return b.presets.saw("preset:p") })
}

// A watch that fails is started again, and what was missed meanwhile is read again (as after
// a Resync): a server written while B did not watch is seen, a connection made with an old
// config is closed, a server deleted meanwhile is forgotten.
func TestAFailedWatchStartsAgainAndResyncs(t *testing.T) {
	u1 := mcptest.Start(t, mcptest.Options{})
	u2 := mcptest.Start(t, mcptest.Options{})
	store := newShared(t)
	b := startReplica(t, store)
	waitWatching(t, store, 1)
	ctx := t.Context()
	put := func(cfg *mcpgatewayv1.ServerConfig) {
		t.Helper()
		if err := store.Registry.PutServer(ctx, cfg); err != nil { // not announced: a missed change
			t.Fatal(err)
		}
	}
	put(&mcpgatewayv1.ServerConfig{Id: "moved", Transport: "streamable-http", Url: u1.URL, Enabled: proto.Bool(true), Expose: proto.Bool(true)})
	put(&mcpgatewayv1.ServerConfig{Id: "gone", Transport: "streamable-http", Url: u2.URL, Enabled: proto.Bool(true), Expose: proto.Bool(true)})
	for _, id := range []string{"moved", "gone"} {
		if _, err := b.admin.ConnectServer(ctx, &mcpgatewayv1.ConnectServerRequest{Id: id}); err != nil {
			t.Fatal(err)
		}
	}
	// Missed: moved moves to u2, gone is deleted.
	put(&mcpgatewayv1.ServerConfig{Id: "moved", Transport: "streamable-http", Url: u2.URL, Enabled: proto.Bool(true), Expose: proto.Bool(true)})
	if err := store.Registry.DeleteServer(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	store.fail(errors.New("the test broke the watch"))
	within(t, "after the watch failed: the moved server's old connection closed", func() bool { return u1.Deletes() == 1 })
	within(t, "after the watch failed: the deleted server forgotten", func() bool { return b.up.Config("gone") == nil && u2.Deletes() == 1 })
	within(t, "after the watch failed: the moved config read again", func() bool {
		r, err := b.admin.GetServer(ctx, &mcpgatewayv1.GetServerRequest{Id: "moved"})
		return err == nil && r.GetServer().GetConfig().GetUrl() == u2.URL
	})
	// The presets come last in a Resync's reactions: wait for them as for the rest.
	within(t, "after the watch failed: the aggregate told every preset may have changed", func() bool { return b.presets.saw("preset:") })
	waitWatching(t, store, 1)
	// The watch runs again: a change is seen as before.
	if err := store.DeleteServer(ctx, "moved"); err != nil {
		t.Fatal(err)
	}
	within(t, "deleted after the watch started again: NotFound", func() bool {
		_, err := b.admin.GetServer(ctx, &mcpgatewayv1.GetServerRequest{Id: "moved"})
		return status.Code(err) == codes.NotFound
	})
}
