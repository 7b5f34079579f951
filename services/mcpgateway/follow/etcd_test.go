package follow_test

import (
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/etcdtest"
	"github.com/zestmcp/zest/lib/mcptest"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
)

// On a real etcd of three members: replica B, whose only endpoint is member 0, keeps serving
// what it holds while that member is down; the writes made through A meanwhile (a filter
// change, a new server) reach B once the member is back (its watch starts again with a
// Resync), within catchUp of it answering.
func TestOnEtcdAReplicaCatchesUpAfterItsMemberCameBack(t *testing.T) {
	// catchUp: the etcd client reconnects and the registry's watch starts again after at most
	// its longest backoff (1 s); measured 45 to 600 ms.
	const catchUp = 3 * time.Second
	u := mcptest.Start(t, mcptest.Options{Tools: []string{"secret"}})
	c := etcdtest.Start(t, 3)
	open := func(endpoints []string) *registry.Etcd {
		t.Helper()
		r, err := registry.OpenEtcd(t.Context(), registry.EtcdConfig{Endpoints: endpoints, Prefix: "/follow/"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	a, b := startReplica(t, open(c.Endpoints()[1:])), startReplica(t, open(c.Endpoints()[:1]))
	ctx := t.Context()
	in := &mcpgatewayv1.ServerConfig{Id: "s", Transport: "http", Url: u.URL}
	upsert(t, a.admin, in)
	within(t, "registered through A: on B", func() bool {
		_, err := b.admin.GetServer(ctx, &mcpgatewayv1.GetServerRequest{Id: "s"})
		return err == nil
	})
	if _, err := b.admin.CallTool(ctx, &mcpgatewayv1.CallToolRequest{Id: "s", Name: "secret"}); err != nil {
		t.Fatal(err)
	}

	c.Kill(0)
	in.ToolsDeny = []string{"secret"}
	upsert(t, a.admin, in)
	upsert(t, a.admin, &mcpgatewayv1.ServerConfig{Id: "later", Transport: "http", Url: u.URL})
	// B serves what it holds: the config in memory, the open connection.
	if _, err := b.admin.CallTool(ctx, &mcpgatewayv1.CallToolRequest{Id: "s", Name: "secret"}); err != nil {
		t.Fatalf("B without its etcd member: %v", err)
	}
	c.Restart(0)
	began := time.Now()
	withinFor(t, "member back: the filter change reached B", catchUp, func() bool {
		_, err := b.admin.CallTool(ctx, &mcpgatewayv1.CallToolRequest{Id: "s", Name: "secret"})
		return err != nil
	})
	within(t, "member back: the new server reached B", func() bool {
		_, err := b.admin.GetServer(ctx, &mcpgatewayv1.GetServerRequest{Id: "later"})
		return err == nil
	})
	t.Logf("B caught up %v after its member answered again", time.Since(began))
}
