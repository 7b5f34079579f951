package admin

import (
	"encoding/json"
	"errors"
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/pins"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The pins' routes list and decide; a server pointed at another program, or deleted, has its
// pins forgotten (its next first listing is pinned), while an edit of anything else keeps them.
func TestPinsRoutes(t *testing.T) {
	s := newService(t)
	store := s.reg.(registry.Pins)
	gate := pins.New(store, s.reg, nil)
	s.pins = gate
	ctx := t.Context()
	put := func(args ...string) {
		t.Helper()
		if _, err := s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: &mcpgatewayv1.ServerConfig{Id: "s", Command: "node", Args: args}}); err != nil {
			t.Fatal(err)
		}
	}
	tool := func(desc string) []json.RawMessage {
		return []json.RawMessage{json.RawMessage(`{"name":"echo","description":"` + desc + `"}`)}
	}
	put("a.js")
	gate.Admit(ctx, "s", tool("Echo"), true)
	gate.Admit(ctx, "s", tool("Changed"), true)

	list, err := s.ListToolPins(ctx, &mcpgatewayv1.ListToolPinsRequest{ServerId: "s"})
	if err != nil || len(list.GetServers()) != 1 || len(list.GetServers()[0].GetHeld()) != 1 {
		t.Fatalf("ListToolPins = %v, %v", list, err)
	}
	if _, err := s.ListToolPins(ctx, &mcpgatewayv1.ListToolPinsRequest{ServerId: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("ListToolPins of a server with no pins: %v", err)
	}
	for name, req := range map[string]*mcpgatewayv1.AcceptToolPinsRequest{"no server": {}, "a tool not held": {ServerId: "s", Tools: []string{"nope"}}} {
		want := map[string]codes.Code{"no server": codes.InvalidArgument, "a tool not held": codes.NotFound}[name]
		if _, err := s.AcceptToolPins(ctx, req); status.Code(err) != want {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}

	put("a.js") // the same program, written again: the held change stays
	if p, err := store.GetToolPins(ctx, "s"); err != nil || len(p.GetHeld()) != 1 {
		t.Fatalf("after an edit of the same program: %v, %v", p, err)
	}
	refused, err := s.RefuseToolPins(ctx, &mcpgatewayv1.RefuseToolPinsRequest{ServerId: "s"})
	if err != nil || len(refused.GetDecided()) != 1 || refused.GetPins().GetHeld()[0].GetState() != pins.StateRefused {
		t.Fatalf("RefuseToolPins = %v, %v", refused, err)
	}
	accepted, err := s.AcceptToolPins(ctx, &mcpgatewayv1.AcceptToolPinsRequest{ServerId: "s", Tools: []string{"echo"}})
	if err != nil || len(accepted.GetPins().GetHeld()) != 0 || accepted.GetPins().GetPinned()[0].GetDefinition().GetFields()["description"].GetStringValue() != "Changed" {
		t.Fatalf("AcceptToolPins = %v, %v", accepted, err)
	}

	put("b.js") // another program under the id
	if _, err := store.GetToolPins(ctx, "s"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("pins of a server pointed at another program: %v, want none", err)
	}
	gate.Admit(ctx, "s", tool("Echo"), true)
	if _, err := s.DeleteServer(ctx, &mcpgatewayv1.DeleteServerRequest{Id: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.GetToolPins(ctx, "s"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("pins of a deleted server: %v, want none", err)
	}
}
