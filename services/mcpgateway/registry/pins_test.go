package registry

import (
	"errors"
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// testToolPins checks the Pins contract on p, an empty store.
func testToolPins(t *testing.T, p Pins) {
	ctx := t.Context()
	if list, err := p.ListToolPins(ctx); err != nil || len(list) != 0 {
		t.Fatalf("empty store lists %v, %v", list, err)
	}
	if _, err := p.GetToolPins(ctx, "none"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
	if err := p.PutToolPins(ctx, &mcpgatewayv1.ToolPins{}); err == nil {
		t.Fatal("pins without a server id were stored")
	}
	for _, id := range []string{"b", "a"} {
		if err := p.PutToolPins(ctx, &mcpgatewayv1.ToolPins{ServerId: id, Pinned: []*mcpgatewayv1.PinnedTool{{Name: "echo", Sha256: id + "1"}}}); err != nil {
			t.Fatal(err)
		}
	}
	held := &mcpgatewayv1.ToolPins{ServerId: "a", Pinned: []*mcpgatewayv1.PinnedTool{{Name: "echo", Sha256: "a1"}},
		Held: []*mcpgatewayv1.HeldTool{{Name: "echo", State: "pending", OldSha256: "a1", NewSha256: "a2"}}}
	if err := p.PutToolPins(ctx, held); err != nil {
		t.Fatal(err)
	}
	got, err := p.GetToolPins(ctx, "a")
	if err != nil || len(got.GetHeld()) != 1 || got.GetHeld()[0].GetNewSha256() != "a2" || got.GetPinned()[0].GetSha256() != "a1" {
		t.Fatalf("a after a replacing put: %v, %v", got, err)
	}
	list, err := p.ListToolPins(ctx)
	if err != nil || len(list) != 2 || list[0].GetServerId() != "a" || list[1].GetServerId() != "b" {
		t.Fatalf("list = %v, %v; want a then b", list, err)
	}
	if err := p.DeleteToolPins(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := p.DeleteToolPins(ctx, "a"); err != nil {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err := p.GetToolPins(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
}
