package configcache

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"google.golang.org/protobuf/proto"
)

// countingRegistry counts the registry reads of GetServer.
type countingRegistry struct {
	registry.Registry
	mu    sync.Mutex
	reads int
}

func (c *countingRegistry) GetServer(ctx context.Context, id string) (*mcpgatewayv1.ServerConfig, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.Registry.GetServer(ctx, id)
}

func open(t *testing.T) (*countingRegistry, *Registry) {
	t.Helper()
	bolt, err := registry.Open(filepath.Join(t.TempDir(), "registry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bolt.Close() })
	c := &countingRegistry{Registry: bolt}
	return c, New(c)
}

// Reads after the first come from memory and see every write and delete at once.
func TestReadsSeeWrites(t *testing.T) {
	c, r := open(t)
	ctx := t.Context()
	a := &mcpgatewayv1.ServerConfig{Id: "a", Enabled: proto.Bool(true)}
	if err := c.Registry.PutServer(ctx, a); err != nil { // written before the cache existed
		t.Fatal(err)
	}
	for range 3 {
		if got, err := r.GetServer(ctx, "a"); err != nil || !got.GetEnabled() {
			t.Fatalf("get: %v %v", got, err)
		}
	}
	if c.reads != 1 {
		t.Fatalf("%d registry reads for 3 gets, want 1", c.reads)
	}
	if err := r.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "a", Enabled: proto.Bool(false)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.GetServer(ctx, "a"); got.GetEnabled() {
		t.Fatal("a get after a write returned the old config")
	}
	if err := r.DeleteServer(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetServer(ctx, "a"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("a get after a delete: %v, want ErrNotFound", err)
	}
}

// racingRegistry runs during once, after its first read of a server, as if an upsert came
// between that read and what the reader does with it.
type racingRegistry struct {
	registry.Registry
	during func()
}

func (r *racingRegistry) GetServer(ctx context.Context, id string) (*mcpgatewayv1.ServerConfig, error) {
	cfg, err := r.Registry.GetServer(ctx, id)
	if f := r.during; f != nil {
		r.during = nil
		f()
	}
	return cfg, err
}

// A config read from the registry while a write happened is not kept: the next read meets
// the written config (its filters), not the older one.
func TestAFillThatRacedAWriteIsDropped(t *testing.T) {
	bolt, err := registry.Open(filepath.Join(t.TempDir(), "registry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bolt.Close() })
	ctx := t.Context()
	old := &mcpgatewayv1.ServerConfig{Id: "e", Command: "node", Enabled: proto.Bool(true), Expose: proto.Bool(true)}
	newer := &mcpgatewayv1.ServerConfig{Id: "e", Command: "node", ToolsDeny: []string{"*"}}
	if err := bolt.PutServer(ctx, old); err != nil {
		t.Fatal(err)
	}
	racing := &racingRegistry{Registry: bolt}
	c := New(racing)
	racing.during = func() {
		if err := c.PutServer(ctx, newer); err != nil {
			t.Error(err)
		}
	}
	if got, err := c.GetServer(ctx, "e"); err != nil || !proto.Equal(got, old) {
		t.Fatalf("the racing read: %v %v", got, err)
	}
	if got, _ := c.GetServer(ctx, "e"); !proto.Equal(got, newer) {
		t.Fatalf("after the write: %v, want %v", got, newer)
	}
}

// ListServers answers from memory once read, with the configs GetServer returns, and sees
// every write and delete at once.
func TestListServersFromMemory(t *testing.T) {
	c, r := open(t)
	ctx := t.Context()
	if err := c.Registry.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "b"}); err != nil { // before the cache
		t.Fatal(err)
	}
	a := &mcpgatewayv1.ServerConfig{Id: "a", Enabled: proto.Bool(true)}
	if err := r.PutServer(ctx, a); err != nil {
		t.Fatal(err)
	}
	ids := func() []string {
		t.Helper()
		all, err := r.ListServers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, cfg := range all {
			got, err := r.GetServer(ctx, cfg.GetId())
			if err != nil || got != cfg {
				t.Fatalf("ListServers gave %p for %q, GetServer %p (%v)", cfg, cfg.GetId(), got, err)
			}
			out = append(out, cfg.GetId())
		}
		return out
	}
	if got := ids(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("ListServers = %v", got)
	}
	first, _ := r.ListServers(ctx)
	again, _ := r.ListServers(ctx)
	if first[0] != again[0] || first[1] != again[1] {
		t.Fatal("a second ListServers gave other configs")
	}
	if err := r.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "c"}); err != nil {
		t.Fatal(err)
	}
	if err := r.DeleteServer(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := ids(); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("ListServers after a write and a delete = %v", got)
	}
}

// A change seen by the watch (another replica's write) reaches GetServer and ListServers at
// once, without a registry read; its old config is returned; this replica's own write coming
// back changes nothing.
func TestApply(t *testing.T) {
	c, r := open(t)
	ctx := t.Context()
	// theirs is another replica's write: to the registry, then seen by the watch.
	theirs := func(ch registry.Change) *mcpgatewayv1.ServerConfig {
		t.Helper()
		var err error
		if ch.Kind == registry.ServerDeleted {
			err = c.Registry.DeleteServer(ctx, ch.ID)
		} else {
			err = c.Registry.PutServer(ctx, ch.Server)
		}
		if err != nil {
			t.Fatal(err)
		}
		return r.Apply(ch)
	}
	mine := &mcpgatewayv1.ServerConfig{Id: "a", Url: "http://127.0.0.1:1/mcp"}
	if err := r.PutServer(ctx, mine); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ListServers(ctx); err != nil {
		t.Fatal(err)
	}
	// Its own write, as the watch decodes it: an equal config, another pointer.
	if old := r.Apply(registry.Change{Kind: registry.ServerPut, ID: "a", Server: proto.Clone(mine).(*mcpgatewayv1.ServerConfig)}); old != mine {
		t.Fatalf("Apply of its own write returned %p, want %p", old, mine)
	}
	if got, _ := r.GetServer(ctx, "a"); got != mine {
		t.Fatal("its own write coming back replaced the config in memory")
	}
	changed := &mcpgatewayv1.ServerConfig{Id: "a", Url: "http://127.0.0.1:2/mcp", ToolsDeny: []string{"*"}}
	if old := theirs(registry.Change{Kind: registry.ServerPut, ID: "a", Server: changed}); old != mine {
		t.Fatalf("Apply returned %v, want the old config", old)
	}
	reads := c.reads
	if got, _ := r.GetServer(ctx, "a"); got != changed {
		t.Fatalf("GetServer after Apply: %v", got)
	}
	if c.reads != reads {
		t.Fatal("GetServer read the registry after Apply")
	}
	if all, _ := r.ListServers(ctx); len(all) != 1 || all[0] != changed {
		t.Fatalf("ListServers after Apply: %v", all)
	}
	if old := theirs(registry.Change{Kind: registry.ServerPut, ID: "b", Server: &mcpgatewayv1.ServerConfig{Id: "b"}}); old != nil {
		t.Fatalf("Apply of a new server returned %v", old)
	}
	if old := theirs(registry.Change{Kind: registry.ServerDeleted, ID: "a"}); old != changed {
		t.Fatalf("Apply of a delete returned %v", old)
	}
	if _, err := r.GetServer(ctx, "a"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("GetServer after a delete: %v", err)
	}
	if all, _ := r.ListServers(ctx); len(all) != 1 || all[0].GetId() != "b" {
		t.Fatalf("ListServers after a delete: %v", all)
	}
	if old := r.Apply(registry.Change{Kind: registry.PresetPut, ID: "p", Preset: &mcpgatewayv1.Preset{Id: "p"}}); old != nil {
		t.Fatalf("a preset change returned %v", old)
	}
}

// A Resync drops everything: each config is read from the registry again, and Drop returns
// what memory held.
func TestResyncReadsAgain(t *testing.T) {
	c, r := open(t)
	ctx := t.Context()
	if err := r.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "a"}); err != nil {
		t.Fatal(err)
	}
	// A write memory missed (the watch lost it).
	if err := c.Registry.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "a", Enabled: proto.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.GetServer(ctx, "a"); got.GetEnabled() {
		t.Fatal("the test's write reached memory without a change")
	}
	r.Apply(registry.Change{Kind: registry.Resync})
	if got, _ := r.GetServer(ctx, "a"); !got.GetEnabled() {
		t.Fatal("after a Resync, memory kept the old config")
	}
	if held := r.Drop(); len(held) != 1 || !held[0].GetEnabled() {
		t.Fatalf("Drop returned %v", held)
	}
}

// A fill that raced with a change from the watch is not kept.
func TestAFillThatRacedAChangeIsDropped(t *testing.T) {
	bolt, err := registry.Open(filepath.Join(t.TempDir(), "registry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bolt.Close() })
	ctx := t.Context()
	old := &mcpgatewayv1.ServerConfig{Id: "e", Enabled: proto.Bool(true), Expose: proto.Bool(true)}
	if err := bolt.PutServer(ctx, old); err != nil {
		t.Fatal(err)
	}
	racing := &racingRegistry{Registry: bolt}
	c := New(racing)
	newer := &mcpgatewayv1.ServerConfig{Id: "e", ToolsDeny: []string{"*"}}
	racing.during = func() {
		// Another replica writes: the registry, then the watch.
		if err := bolt.PutServer(ctx, newer); err != nil {
			t.Error(err)
		}
		c.Apply(registry.Change{Kind: registry.ServerPut, ID: "e", Server: newer})
	}
	if got, err := c.GetServer(ctx, "e"); err != nil || !proto.Equal(got, old) {
		t.Fatalf("the racing read: %v %v", got, err)
	}
	if got, _ := c.GetServer(ctx, "e"); got != newer {
		t.Fatalf("after the change: %v, want %v", got, newer)
	}
}

// overtakingRegistry runs during inside PutServer, after the write: as if another replica's
// younger write arrived through the watch before this one's returned.
type overtakingRegistry struct {
	registry.Registry
	during func()
	gets   int
}

func (o *overtakingRegistry) GetServer(ctx context.Context, id string) (*mcpgatewayv1.ServerConfig, error) {
	o.gets++
	return o.Registry.GetServer(ctx, id)
}

func (o *overtakingRegistry) reads() int { return o.gets }

func (o *overtakingRegistry) DeleteServer(ctx context.Context, id string) error {
	err := o.Registry.DeleteServer(ctx, id)
	if f := o.during; f != nil {
		o.during = nil
		f()
	}
	return err
}

func (o *overtakingRegistry) PutServer(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) error {
	err := o.Registry.PutServer(ctx, cfg)
	if f := o.during; f != nil {
		o.during = nil
		f()
	}
	return err
}

// A write of this replica that a change from the watch overtook is not kept in memory: the
// registry holds the other replica's, and so does the next read.
func TestAWriteOvertakenByAChangeIsNotKept(t *testing.T) {
	bolt, err := registry.Open(filepath.Join(t.TempDir(), "registry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bolt.Close() })
	ctx := t.Context()
	o := &overtakingRegistry{Registry: bolt}
	c := New(o)
	theirs := &mcpgatewayv1.ServerConfig{Id: "e", Enabled: proto.Bool(true)}
	o.during = func() {
		if err := bolt.PutServer(ctx, theirs); err != nil {
			t.Error(err)
		}
		c.Apply(registry.Change{Kind: registry.ServerPut, ID: "e", Server: theirs})
	}
	if err := c.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "e"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.GetServer(ctx, "e"); !got.GetEnabled() {
		t.Fatal("memory kept a write that a younger change overtook")
	}
}

// This replica's write coming back through the watch before the write returned is taken as
// done: Apply returns the config written (no news), memory keeps it; a change of another
// server meanwhile does not make the write uncertain.
func TestOwnWriteBackBeforeItReturns(t *testing.T) {
	bolt, err := registry.Open(filepath.Join(t.TempDir(), "registry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bolt.Close() })
	ctx := t.Context()
	o := &overtakingRegistry{Registry: bolt}
	c := New(o)
	before := &mcpgatewayv1.ServerConfig{Id: "e"}
	if err := c.PutServer(ctx, before); err != nil {
		t.Fatal(err)
	}
	mine := &mcpgatewayv1.ServerConfig{Id: "e", Enabled: proto.Bool(true)}
	var old *mcpgatewayv1.ServerConfig
	o.during = func() {
		old = c.Apply(registry.Change{Kind: registry.ServerPut, ID: "e", Server: proto.CloneOf(mine)})
		c.Apply(registry.Change{Kind: registry.ServerPut, ID: "other", Server: &mcpgatewayv1.ServerConfig{Id: "other"}})
	}
	if err := c.PutServer(ctx, mine); err != nil {
		t.Fatal(err)
	}
	if old != mine {
		t.Fatalf("Apply of the write under way returned %v, want the config written", old)
	}
	reads := o.reads()
	if got, _ := c.GetServer(ctx, "e"); got != mine {
		t.Fatalf("memory after the write: %v", got)
	}
	if o.reads() != reads {
		t.Fatal("the write was not kept in memory")
	}
	o.during = func() {
		if old := c.Apply(registry.Change{Kind: registry.ServerDeleted, ID: "e"}); old != nil {
			t.Errorf("Apply of the delete under way returned %v", old)
		}
	}
	if err := c.DeleteServer(ctx, "e"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetServer(ctx, "e"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("after the delete: %v", err)
	}
}
