package registry

import (
	"errors"
	"sync"
	"testing"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

func pendingApproval(id string, created, expires time.Time) *mcpgatewayv1.Approval {
	return &mcpgatewayv1.Approval{Id: id, State: ApprovalPending, ServerId: "fs", Tool: "write_file", Arguments: `{"path":"/x"}`,
		Created: created.UTC().Format(time.RFC3339Nano), Expires: expires.UTC().Format(time.RFC3339Nano)}
}

// testApprovals checks the Approvals contract on a, an empty store.
func testApprovals(t *testing.T, a Approvals) {
	ctx, now := t.Context(), time.Now()
	if list, err := a.ListApprovals(ctx); err != nil || len(list) != 0 {
		t.Fatalf("empty store lists %v, %v", list, err)
	}
	if _, err := a.GetApproval(ctx, "none"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
	if _, err := a.DecideApproval(ctx, "none", ApprovalApproved, "", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("decide unknown: %v", err)
	}
	if err := a.PutApproval(ctx, &mcpgatewayv1.Approval{Id: "bad", Expires: "soon"}); err == nil {
		t.Fatal("an approval whose expiry is not RFC 3339 was stored")
	}
	if err := a.PutApproval(ctx, &mcpgatewayv1.Approval{Expires: now.Format(time.RFC3339)}); err == nil {
		t.Fatal("an approval without an id was stored")
	}
	// b is older than a: the list is oldest first, not by id. gone is past its keep.
	for _, ap := range []*mcpgatewayv1.Approval{
		pendingApproval("a", now, now.Add(time.Minute)),
		pendingApproval("b", now.Add(-time.Second), now.Add(time.Minute)),
		pendingApproval("gone", now.Add(-time.Hour), now.Add(-ApprovalKeep-time.Second)),
	} {
		if err := a.PutApproval(ctx, ap); err != nil {
			t.Fatal(err)
		}
	}
	list, err := a.ListApprovals(ctx)
	if err != nil || len(list) != 2 || list[0].GetId() != "b" || list[1].GetId() != "a" || list[1].GetArguments() != `{"path":"/x"}` {
		t.Fatalf("list = %v, %v; want b then a, arguments kept", list, err)
	}
	got, err := a.DecideApproval(ctx, "a", ApprovalDenied, "not today", "abc")
	if err != nil || got.GetState() != ApprovalDenied || got.GetReason() != "not today" || got.GetDecidedBy() != "abc" {
		t.Fatalf("deny = %v, %v", got, err)
	}
	if got, err := a.GetApproval(ctx, "a"); err != nil || got.GetState() != ApprovalDenied || got.GetDecidedBy() != "abc" {
		t.Fatalf("get after deny = %v, %v", got, err)
	}
	got, err = a.DecideApproval(ctx, "a", ApprovalApproved, "", "def")
	if !errors.Is(err, ErrDecided) || got.GetState() != ApprovalDenied {
		t.Fatalf("approve after deny = %v, %v; want ErrDecided and the denial", got, err)
	}
	// Two deciders at once: exactly one wins.
	var wg sync.WaitGroup
	wins := make(chan string, 2)
	for _, st := range []string{ApprovalApproved, ApprovalExpired} {
		wg.Go(func() {
			if _, err := a.DecideApproval(ctx, "b", st, "", "x"); err == nil {
				wins <- st
			} else if !errors.Is(err, ErrDecided) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	close(wins)
	var won []string
	for w := range wins {
		won = append(won, w)
	}
	if got, _ := a.GetApproval(ctx, "b"); len(won) != 1 || got.GetState() != won[0] {
		t.Fatalf("racing decisions: winners %v, stored %v", won, got)
	}
	if err := a.DeleteApproval(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteApproval(ctx, "b"); err != nil {
		t.Fatalf("delete twice: %v", err)
	}
	if list, _ := a.ListApprovals(ctx); len(list) != 1 || list[0].GetId() != "a" {
		t.Fatalf("list after delete = %v", list)
	}
}
