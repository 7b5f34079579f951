package approval

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/keyauth"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/activity"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"google.golang.org/grpc/metadata"
)

func openStore(t *testing.T) *registry.Bolt {
	t.Helper()
	r, err := registry.Open(filepath.Join(t.TempDir(), "registry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// withKey is ctx as a gRPC call with key arrives: its metadata, its caller named (the user's
// and the admin's keys are configured).
func withKey(ctx context.Context, key string) context.Context {
	return callers.Context(metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+key)))
}

var callers = activity.NewCallers(keyauth.Keys{API: "user-key", Admin: "admin-key"})

// waitFor runs Wait on its own goroutine.
func waitFor(g *Gate, ctx context.Context, a *mcpgatewayv1.Approval) <-chan *mcpgatewayv1.Approval {
	ch := make(chan *mcpgatewayv1.Approval, 1)
	go func() {
		got, err := g.Wait(ctx, a)
		if err != nil {
			got = &mcpgatewayv1.Approval{State: "error: " + err.Error()}
		}
		ch <- got
	}()
	return ch
}

func TestApproveOnThisReplicaAndAnother(t *testing.T) {
	store := openStore(t)
	here, there := New(store, time.Minute, nil), New(store, time.Minute, nil)
	here.poll = time.Hour // only the wake-up can end the first wait: it must come at once
	ctx := withKey(t.Context(), "user-key")
	a, err := here.Open(ctx, Request{Server: "fs", Tool: "write_file", ChatName: "fs_write_file", Arguments: `{"path":"/x"}`, CallID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if a.GetWho() != activity.WhoOf(ctx) || a.GetWho() == "anonymous" || a.GetState() != "pending" || len(a.GetId()) != 32 {
		t.Fatalf("opened %v", a)
	}
	pending, err := there.Pending(t.Context())
	if err != nil || len(pending) != 1 || pending[0].GetArguments() != `{"path":"/x"}` || pending[0].GetChatName() != "fs_write_file" {
		t.Fatalf("pending on the other replica: %v, %v", pending, err)
	}
	done := waitFor(here, ctx, a)
	got, err := here.Decide(withKey(t.Context(), "admin-key"), a.GetId(), true, "ok")
	if err != nil || got.GetState() != "approved" || got.GetDecidedBy() != activity.WhoOf(withKey(t.Context(), "admin-key")) {
		t.Fatalf("approve = %v, %v", got, err)
	}
	if w := <-done; w.GetState() != "approved" {
		t.Fatalf("wait ended %v", w)
	}
	if _, err := store.GetApproval(t.Context(), a.GetId()); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("a decided approval is kept after its wait: %v", err)
	}

	// Decided through the other replica: the waiting side reads it at its next poll.
	here.poll = 10 * time.Millisecond
	b, _ := here.Open(ctx, Request{Server: "fs", Tool: "rm"})
	done = waitFor(here, ctx, b)
	if _, err := there.Decide(t.Context(), b.GetId(), false, "no deletes today"); err != nil {
		t.Fatal(err)
	}
	if w := <-done; w.GetState() != "denied" || w.GetReason() != "no deletes today" {
		t.Fatalf("wait ended %v", w)
	}
}

func TestDecideRefusals(t *testing.T) {
	store := openStore(t)
	g := New(store, time.Minute, nil)
	if _, err := g.Decide(t.Context(), "nope", true, ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	a, _ := g.Open(t.Context(), Request{Server: "fs", Tool: "rm"})
	if _, err := g.Decide(t.Context(), a.GetId(), false, strings.Repeat("x", MaxReason+1)); err == nil || !strings.Contains(err.Error(), "reason is 501 bytes; at most 500") {
		t.Fatalf("long reason: %v", err)
	}
	if _, err := g.Decide(t.Context(), a.GetId(), false, ""); err != nil {
		t.Fatal(err)
	}
	if got, err := g.Decide(t.Context(), a.GetId(), true, ""); !errors.Is(err, ErrDecided) || got.GetState() != "denied" || !strings.Contains(err.Error(), "already denied") {
		t.Fatalf("approve after deny: %v, %v", got, err)
	}
	// An approval whose waiting replica died: pending past its expiry, not listed, not decidable.
	stale := &mcpgatewayv1.Approval{Id: "stale", State: "pending", Created: stamp(time.Now().Add(-time.Minute)), Expires: stamp(time.Now().Add(-time.Second))}
	if err := store.PutApproval(t.Context(), stale); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Decide(t.Context(), "stale", true, ""); !errors.Is(err, ErrDecided) || !strings.Contains(err.Error(), "expired at") {
		t.Fatalf("stale: %v", err)
	}
	if p, _ := g.Pending(t.Context()); len(p) != 0 {
		t.Fatalf("pending lists decided or stale approvals: %v", p)
	}
}

func TestTimeoutExpires(t *testing.T) {
	g := New(openStore(t), 50*time.Millisecond, nil)
	g.poll = 10 * time.Millisecond
	a, _ := g.Open(t.Context(), Request{Server: "fs", Tool: "rm"})
	got, err := g.Wait(t.Context(), a)
	if err != nil || got.GetState() != "expired" || !strings.Contains(got.GetReason(), "ZEST_APPROVAL_TIMEOUT") {
		t.Fatalf("wait = %v, %v", got, err)
	}
	if _, err := g.Decide(t.Context(), a.GetId(), true, ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("approve after expiry: %v", err)
	}
}

func TestCancelWithdraws(t *testing.T) {
	store := openStore(t)
	g := New(store, time.Minute, nil)
	ctx, cancel := context.WithCancel(t.Context())
	a, _ := g.Open(ctx, Request{Server: "fs", Tool: "rm"})
	done := waitFor(g, ctx, a)
	cancel()
	if w := <-done; w.GetState() != "withdrawn" {
		t.Fatalf("wait ended %v", w)
	}
	if p, _ := g.Pending(t.Context()); len(p) != 0 {
		t.Fatalf("a withdrawn approval is still pending: %v", p)
	}
}

func TestCheckTimeout(t *testing.T) {
	for d, ok := range map[time.Duration]bool{time.Second: true, DefaultTimeout: true, time.Hour: true, 999 * time.Millisecond: false, 0: false, 61 * time.Minute: false} {
		if err := CheckTimeout(d); (err == nil) != ok {
			t.Errorf("CheckTimeout(%v) = %v", d, err)
		}
	}
	if err := CheckTimeout(0); !strings.Contains(err.Error(), "ZEST_APPROVAL_TIMEOUT") {
		t.Errorf("the error does not name the variable: %v", err)
	}
}

func TestOpenRefusesPastMaxPending(t *testing.T) {
	g := New(openStore(t), time.Minute, nil)
	g.maxPending = 2
	for range 2 {
		if _, err := g.Open(t.Context(), Request{Server: "fs", Tool: "rm"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.Open(t.Context(), Request{Server: "fs", Tool: "rm"}); !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), "2 tool calls already wait for approval (at most 2)") {
		t.Fatalf("third: %v", err)
	}
	p, _ := g.Pending(t.Context())
	if _, err := g.Decide(t.Context(), p[0].GetId(), false, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Open(t.Context(), Request{Server: "fs", Tool: "rm"}); err != nil {
		t.Fatalf("after a decision: %v", err)
	}
}
