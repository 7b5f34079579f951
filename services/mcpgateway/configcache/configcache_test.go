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
	a := &mcpgatewayv1.ServerConfig{Id: "a", Enabled: true}
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
	if err := r.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "a", Enabled: false}); err != nil {
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
	old := &mcpgatewayv1.ServerConfig{Id: "e", Command: "node"}
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
	a := &mcpgatewayv1.ServerConfig{Id: "a", Enabled: true}
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
