package admin

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/mcptest"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/activity"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func newService(t *testing.T, opts ...Option) *Service {
	t.Helper()
	return newRecordingService(t, nil, opts...)
}

// newRecordingService is newService whose pipeline records its calls in calls (when not nil),
// which ListActivity lists.
func newRecordingService(t *testing.T, calls *activity.Log, opts ...Option) *Service {
	t.Helper()
	reg, err := registry.Open(filepath.Join(t.TempDir(), "registry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	up := upstream.New(nil, nil, nil)
	t.Cleanup(func() { up.Close(context.Background()) })
	var recorded []toolcall.Option
	if calls != nil {
		recorded = append(recorded, toolcall.WithActivity(calls))
		opts = append(opts, WithActivity(calls))
	}
	return New(reg, up, toolcall.New(toolcall.Config{}, reg, up, keyauth.Keys{}, recorded...), nil, opts...)
}

// An unknown server id is NotFound on every route that names one (the edge answers 404),
// the routes that reach an MCP server included.
func TestUnknownIDIsNotFound(t *testing.T) {
	s := newService(t)
	ctx := t.Context()
	calls := map[string]func() error{
		"connect": func() error {
			_, err := s.ConnectServer(ctx, &mcpgatewayv1.ConnectServerRequest{Id: "nope"})
			return err
		},
		"disconnect": func() error {
			_, err := s.DisconnectServer(ctx, &mcpgatewayv1.DisconnectServerRequest{Id: "nope"})
			return err
		},
		"refresh-tools": func() error {
			_, err := s.RefreshTools(ctx, &mcpgatewayv1.RefreshToolsRequest{Id: "nope"})
			return err
		},
		"tools/call": func() error {
			_, err := s.CallTool(ctx, &mcpgatewayv1.CallToolRequest{Id: "nope", Name: "echo"})
			return err
		},
		"delete": func() error {
			_, err := s.DeleteServer(ctx, &mcpgatewayv1.DeleteServerRequest{Id: "nope"})
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			if err := call(); status.Code(err) != codes.NotFound {
				t.Fatalf("%s of an unknown id: %v, want NotFound", name, err)
			}
		})
	}
}

// ListServers answers at once while a server's connect waits for a slow upstream.
func TestListServersDuringConnect(t *testing.T) {
	gate, arrived := make(chan struct{}), make(chan struct{}, 1)
	u := mcptest.Start(t, mcptest.Options{InitializeGate: gate, OnInitialize: func() { arrived <- struct{}{} }})
	s := newService(t)
	ctx := t.Context()
	body := &mcpgatewayv1.ServerConfig{Id: "slow", Transport: "streamable-http", Url: u.URL}
	if _, err := s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: body}); err != nil {
		t.Fatal(err)
	}
	connected := make(chan error, 1)
	go func() {
		_, err := s.ConnectServer(ctx, &mcpgatewayv1.ConnectServerRequest{Id: "slow"})
		connected <- err
	}()
	select { // the connect is held in the upstream's initialize
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("no connect in progress")
	}
	listed := make(chan *mcpgatewayv1.ListServersResponse, 1)
	began := time.Now()
	go func() {
		r, err := s.ListServers(ctx, &mcpgatewayv1.ListServersRequest{})
		if err != nil {
			t.Error(err)
		}
		listed <- r
	}()
	select {
	case r := <-listed:
		t.Logf("ListServers answered in %v during a connect", time.Since(began))
		if len(r.GetServers()) != 1 || r.GetServers()[0].GetConnected() {
			t.Fatalf("servers during connect: %v", r)
		}
	case <-time.After(time.Second):
		t.Fatal("ListServers waited for a connect in progress")
	}
	close(gate)
	if err := <-connected; err != nil {
		t.Fatal(err)
	}
	r, err := s.ListServers(ctx, &mcpgatewayv1.ListServersRequest{})
	if err != nil || !r.GetServers()[0].GetConnected() || len(r.GetServers()[0].GetTools()) != 1 {
		t.Fatalf("after connect: %v, %v", r, err)
	}
}
