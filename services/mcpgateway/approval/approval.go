// Package approval holds the tool calls that wait for a person's approval (their server's
// approval is "required", or an approval_tools pattern names the tool: serverconfig.
// NeedsApproval) until an administrator approves or denies them through the admin API, or
// ZEST_APPROVAL_TIMEOUT passes. The pending approvals live in the registry
// (registry.Approvals), so a decision taken through any mcpgateway replica reaches the one
// whose call waits: the waiting side reads its approval again every PollEvery, and at once
// when the decision came through its own replica.
package approval

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/activity"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
)

// Limits of ZEST_APPROVAL_TIMEOUT, and its default: long enough for a person to look, short
// enough that a forgotten chat does not hold its stream for long.
const (
	DefaultTimeout = 5 * time.Minute
	MinTimeout     = time.Second
	MaxTimeout     = time.Hour
)

// PollEvery is how often a waiting call reads its approval again, for a decision taken
// through another replica.
const PollEvery = 250 * time.Millisecond

// Limits of what an approval keeps.
const (
	// MaxArguments bounds the arguments an approval shows (the call itself gets them whole).
	MaxArguments = 16 << 10
	// MaxReason bounds a decision's reason.
	MaxReason = 500
	// MaxPending bounds the calls that wait at once, on every replica together: past it a call
	// that needs approval fails at once instead of filling the registry.
	MaxPending = 1000
)

// storeTimeout bounds the registry writes made after the caller's context ended (withdrawing
// an approval of a chat that was cancelled).
const storeTimeout = 3 * time.Second

// Errors of Decide.
var (
	// ErrNotFound: no approval of that id is kept (never was, or decided and forgotten).
	ErrNotFound = errors.New("no such approval")
	// ErrDecided: the approval is no longer pending.
	ErrDecided = errors.New("the approval is no longer pending")
	// ErrTooMany: MaxPending calls already wait (Open).
	ErrTooMany = errors.New("too many tool calls wait for approval")
)

// Gate opens, waits for and decides approvals.
type Gate struct {
	store      registry.Approvals
	timeout    time.Duration
	poll       time.Duration
	maxPending int
	log        *slog.Logger

	mu      sync.Mutex
	waiting map[string]chan struct{} // approvals waited for on this replica → a wake-up
}

// New returns a gate over store; timeout is ZEST_APPROVAL_TIMEOUT (0: DefaultTimeout).
func New(store registry.Approvals, timeout time.Duration, log *slog.Logger) *Gate {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if log == nil {
		log = slog.Default()
	}
	return &Gate{store: store, timeout: timeout, poll: PollEvery, maxPending: MaxPending, log: log, waiting: map[string]chan struct{}{}}
}

// Timeout is how long a call waits for a decision.
func (g *Gate) Timeout() time.Duration { return g.timeout }

// CheckTimeout checks a ZEST_APPROVAL_TIMEOUT value.
func CheckTimeout(d time.Duration) error {
	if d < MinTimeout || d > MaxTimeout {
		return fmt.Errorf("approval-timeout (ZEST_APPROVAL_TIMEOUT) %v: want a duration from %v to %v, e.g. 5m", d, MinTimeout, MaxTimeout)
	}
	return nil
}

// Request is the call that waits.
type Request struct {
	Server, Tool, ChatName, Arguments, Preset, CallID string
	// ArgumentsHash is the hash of the call's canonical arguments (toolcall.ArgumentsHash):
	// the approval covers that call only.
	ArgumentsHash string
	// By is who decides: serverconfig.ApprovalByAdmin or ApprovalByClient.
	By string
}

// Open stores a pending approval for r, asked by the caller of ctx, and returns it; the caller
// then tells its client (the approval's id and expiry) and calls Wait.
func (g *Gate) Open(ctx context.Context, r Request) (*mcpgatewayv1.Approval, error) {
	pending, err := g.Pending(ctx)
	if err != nil {
		return nil, err
	}
	if len(pending) >= g.maxPending {
		return nil, fmt.Errorf("%w: %d tool calls already wait for approval (at most %d): decide them (GET /internal/mcp/approvals) or let them expire", ErrTooMany, len(pending), g.maxPending)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	now := time.Now().UTC()
	args := r.Arguments
	if len(args) > MaxArguments {
		args = activity.Cut(args, MaxArguments)
	}
	a := &mcpgatewayv1.Approval{Id: hex.EncodeToString(b[:]), State: registry.ApprovalPending, ServerId: r.Server, Tool: r.Tool,
		ChatName: r.ChatName, Arguments: args, Who: activity.WhoOf(ctx), Created: stamp(now), Expires: stamp(now.Add(g.timeout)),
		PresetId: r.Preset, CallId: r.CallID, ArgumentsSha256: r.ArgumentsHash, ApprovalBy: r.By}
	if err := g.store.PutApproval(ctx, a); err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.waiting[a.GetId()] = make(chan struct{}, 1)
	g.mu.Unlock()
	return a, nil
}

func stamp(t time.Time) string { return t.UTC().Format(activity.TimeLayout) }

// Wait waits until a is decided, expires (it then stores it as expired) or ctx ends (it then
// stores it as withdrawn), and returns it as decided; the approval is forgotten then. An error
// means the registry failed: the call must not run.
func (g *Gate) Wait(ctx context.Context, a *mcpgatewayv1.Approval) (*mcpgatewayv1.Approval, error) {
	id := a.GetId()
	g.mu.Lock()
	wake := g.waiting[id]
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.waiting, id)
		g.mu.Unlock()
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
		defer cancel()
		if err := g.store.DeleteApproval(dctx, id); err != nil {
			g.log.WarnContext(ctx, "approval not forgotten: the registry keeps it until its expiry", "approval", id, "err", err)
		}
	}()
	expires, err := time.Parse(time.RFC3339Nano, a.GetExpires())
	if err != nil {
		return nil, err
	}
	deadline := time.NewTimer(time.Until(expires))
	defer deadline.Stop()
	tick := time.NewTicker(g.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
			defer cancel()
			return g.end(dctx, id, registry.ApprovalWithdrawn, "the chat that asked ended before a decision")
		case <-deadline.C:
			return g.end(ctx, id, registry.ApprovalExpired, fmt.Sprintf("no decision within %v (ZEST_APPROVAL_TIMEOUT)", g.timeout))
		case <-tick.C:
		case <-wake:
		}
		cur, err := g.store.GetApproval(ctx, id)
		switch {
		case errors.Is(err, registry.ErrNotFound):
			return nil, fmt.Errorf("approval %s vanished from the registry before a decision", id)
		case err != nil:
			if ctx.Err() != nil {
				continue // the next round withdraws it
			}
			g.log.WarnContext(ctx, "approval: the registry did not answer; trying again", "approval", id, "err", err)
			continue
		case cur.GetState() != registry.ApprovalPending:
			return cur, nil
		}
	}
}

// end stores the waiting side's own outcome, unless a decision came first (then it wins).
func (g *Gate) end(ctx context.Context, id, state, reason string) (*mcpgatewayv1.Approval, error) {
	a, err := g.store.DecideApproval(ctx, id, state, reason, "")
	if errors.Is(err, registry.ErrDecided) {
		return a, nil
	}
	return a, err
}

// Decide approves (approve) or denies the pending approval id for the caller of ctx, with
// reason; it returns the approval as decided. ErrNotFound and ErrDecided tell why not.
func (g *Gate) Decide(ctx context.Context, id string, approve bool, reason string) (*mcpgatewayv1.Approval, error) {
	if len(reason) > MaxReason {
		return nil, fmt.Errorf("reason is %d bytes; at most %d are kept: shorten it", len(reason), MaxReason)
	}
	cur, err := g.store.GetApproval(ctx, id)
	if errors.Is(err, registry.ErrNotFound) {
		return nil, fmt.Errorf("approval %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	// One whose waiting replica died stays pending until the registry forgets it: past its
	// expiry nobody waits for it any more.
	if exp, err := time.Parse(time.RFC3339Nano, cur.GetExpires()); err == nil && time.Now().After(exp) && cur.GetState() == registry.ApprovalPending {
		return cur, fmt.Errorf("approval %q expired at %s: %w", id, cur.GetExpires(), ErrDecided)
	}
	state := registry.ApprovalDenied
	if approve {
		state = registry.ApprovalApproved
	}
	a, err := g.store.DecideApproval(ctx, id, state, reason, activity.WhoOf(ctx))
	switch {
	case errors.Is(err, registry.ErrNotFound):
		return nil, fmt.Errorf("approval %q: %w", id, ErrNotFound)
	case errors.Is(err, registry.ErrDecided):
		return a, fmt.Errorf("approval %q is already %s: %w", id, a.GetState(), ErrDecided)
	case err != nil:
		return nil, err
	}
	g.mu.Lock()
	if w := g.waiting[id]; w != nil {
		select {
		case w <- struct{}{}:
		default:
		}
	}
	g.mu.Unlock()
	return a, nil
}

// Pending lists the approvals that wait, on every replica, oldest first.
func (g *Gate) Pending(ctx context.Context) ([]*mcpgatewayv1.Approval, error) {
	all, err := g.store.ListApprovals(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := make([]*mcpgatewayv1.Approval, 0, len(all))
	for _, a := range all {
		exp, err := time.Parse(time.RFC3339Nano, a.GetExpires())
		if a.GetState() == registry.ApprovalPending && err == nil && now.Before(exp) {
			out = append(out, a)
		}
	}
	return out, nil
}

// Release stops a wake-up for approval id on this replica: nobody here waits for it (an MCP
// 2026-07-28 call, whose retry decides it).
func (g *Gate) Release(id string) {
	g.mu.Lock()
	delete(g.waiting, id)
	g.mu.Unlock()
}

// Get returns approval id as stored (registry.ErrNotFound when it is not kept).
func (g *Gate) Get(ctx context.Context, id string) (*mcpgatewayv1.Approval, error) {
	return g.store.GetApproval(ctx, id)
}

// Forget drops approval id once its call has its answer (a failure only logs: the registry
// forgets it past its expiry anyway).
func (g *Gate) Forget(ctx context.Context, id string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := g.store.DeleteApproval(dctx, id); err != nil {
		g.log.WarnContext(ctx, "approval not forgotten: the registry keeps it until its expiry", "approval", id, "err", err)
	}
}
