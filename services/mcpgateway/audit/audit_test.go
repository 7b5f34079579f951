package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zestmcp/zest/lib/keyauth"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/activity"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// fakeStore records the batches written and the bounds of each trim, which reports trimmed;
// block, when set, holds every write until closed.
type fakeStore struct {
	mu      sync.Mutex
	batches [][]*mcpgatewayv1.AuditEntry
	block   chan struct{}
	fail    error
	trims   int
	bounds  []registry.AuditBounds
	trimmed []registry.AuditTrimmed
	trimErr error
	batch   int // MaxAuditBatch; 0 is etcd's
}

func (f *fakeStore) MaxAuditBatch() int {
	if f.batch == 0 {
		return registry.EtcdMaxAuditBatch
	}
	return f.batch
}

func (f *fakeStore) AppendAudit(_ context.Context, es []*mcpgatewayv1.AuditEntry) error {
	if f.block != nil {
		<-f.block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.batches = append(f.batches, slices.Clone(es))
	return nil
}

func (f *fakeStore) ListAudit(context.Context, registry.AuditQuery, func(*mcpgatewayv1.AuditEntry) bool) error {
	return nil
}

func (f *fakeStore) TrimAudit(_ context.Context, b registry.AuditBounds) ([]registry.AuditTrimmed, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.trims++
	f.bounds = append(f.bounds, b)
	return f.trimmed, f.trimErr
}

func (f *fakeStore) sizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int
	for _, b := range f.batches {
		out = append(out, len(b))
	}
	return out
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func call(i int) activity.Record {
	return activity.Record{Time: time.Now(), Path: activity.PathMCP, Who: "abc", Server: "s", Tool: "t", Outcome: activity.OK,
		Duration: time.Duration(i) * time.Millisecond, Arguments: `{"a":1}`, Result: `{"content":[]}`}
}

// TestBatches: 250 entries queued at once are written in batches of at most the store's
// MaxAuditBatch; a
// lone entry is written within FlushEvery, not held for more. The writer runs in a synctest
// bubble: its clock moves only when everything in it waits, so "within FlushEvery" is exact.
func TestBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const flushEvery = 20 * time.Millisecond
		st := &fakeStore{block: make(chan struct{})}
		l := New(st, Config{Logger: quiet(), FlushEvery: flushEvery})
		for i := range 250 {
			l.Record(t.Context(), call(i))
		}
		close(st.block)        // the first write waited: the rest queued behind it
		time.Sleep(flushEvery) // the bubble's clock: the last partial batch is due
		synctest.Wait()
		sizes := st.sizes()
		if sum(sizes) != 250 || slices.Max(sizes) > st.MaxAuditBatch() || len(sizes) > 5 {
			t.Fatalf("batches %v: want 250 entries in at most 5 batches of at most %d", sizes, st.MaxAuditBatch())
		}
		before := len(sizes)
		l.Record(t.Context(), call(1))
		time.Sleep(flushEvery) // the bubble's clock
		synctest.Wait()
		if got := st.sizes(); len(got) != before+1 || got[before] != 1 {
			t.Fatalf("a lone entry was not flushed on its own within %v: %v", flushEvery, got)
		}
		if err := l.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if d, f := l.Stats(); d != 0 || f != 0 {
			t.Fatalf("dropped %d failed %d", d, f)
		}
	})
}

// TestBatchesFollowTheStore: the writer fills batches up to what the store's transaction
// holds, not to a bound of its own: 250 entries queued within FlushEvery go out in one batch
// on a store that takes 1,000 (bbolt's), in batches of 7 on one that takes 7. Fewer
// transactions cost the registry less CPU per entry (BenchmarkAppendBatch).
func TestBatchesFollowTheStore(t *testing.T) {
	for _, tc := range []struct{ batch, batches int }{{registry.BoltMaxAuditBatch, 1}, {7, 36}} {
		t.Run(fmt.Sprint(tc.batch), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const flushEvery = 20 * time.Millisecond
				st := &fakeStore{batch: tc.batch}
				l := New(st, Config{Logger: quiet(), FlushEvery: flushEvery})
				for i := range 250 {
					l.Record(t.Context(), call(i))
				}
				time.Sleep(flushEvery) // the bubble's clock: the last partial batch is due
				synctest.Wait()
				sizes := st.sizes()
				if err := l.Close(t.Context()); err != nil {
					t.Fatal(err)
				}
				if sum(sizes) != 250 || len(sizes) != tc.batches || slices.Max(sizes) > tc.batch {
					t.Fatalf("batches %v: want 250 entries in %d batches of at most %d", sizes, tc.batches, tc.batch)
				}
			})
		})
	}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// TestFlushOnClose: what is queued when Close is called is written before it returns, even
// with a flush interval far away; later entries are dropped, not written.
func TestFlushOnClose(t *testing.T) {
	st := &fakeStore{}
	l := New(st, Config{Logger: quiet(), FlushEvery: time.Hour})
	for i := range 7 {
		l.Record(t.Context(), call(i))
	}
	if err := l.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := sum(st.sizes()); got != 7 {
		t.Fatalf("%d entries written on close, want 7", got)
	}
	l.Record(t.Context(), call(8))
	if d, _ := l.Stats(); d != 1 {
		t.Fatalf("an entry after Close: dropped %d, want 1", d)
	}
	if st.trims != 1 {
		t.Fatalf("%d trims, want the one at start", st.trims)
	}
}

// TestQueueFullDrops: with the registry stuck, entries past the queue are dropped and
// counted, and recording never blocks.
func TestQueueFullDrops(t *testing.T) {
	st := &fakeStore{block: make(chan struct{})}
	l := New(st, Config{Logger: quiet(), QueueSize: 10, FlushEvery: time.Millisecond})
	start := time.Now()
	for i := range 500 {
		l.Record(t.Context(), call(i))
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("recording 500 entries against a stuck registry took %v", took)
	}
	d, _ := l.Stats()
	// One batch is held by the stuck write, at most 10 wait in the queue.
	if d < 500-uint64(st.MaxAuditBatch())-10 || d > 500-10 {
		t.Fatalf("dropped %d of 500 with a queue of 10", d)
	}
	close(st.block)
	if err := l.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if written := uint64(sum(st.sizes())); written+d != 500 {
		t.Fatalf("written %d + dropped %d != 500", written, d)
	}
}

// TestFailedWritesCounted: a refused write counts its entries as failed.
func TestFailedWritesCounted(t *testing.T) {
	st := &fakeStore{fail: errors.New("no quorum")}
	l := New(st, Config{Logger: quiet()})
	for i := range 3 {
		l.Record(t.Context(), call(i))
	}
	l.Close(t.Context())
	if _, f := l.Stats(); f != 3 {
		t.Fatalf("failed %d, want 3", f)
	}
}

// TestDetails: arguments and results go into entries only with Details.
func TestDetails(t *testing.T) {
	for _, details := range []bool{false, true} {
		st := &fakeStore{}
		l := New(st, Config{Logger: quiet(), Details: details})
		l.Record(t.Context(), call(5))
		l.Close(t.Context())
		e := st.batches[0][0]
		if (e.GetArguments() != "") != details || (e.GetResult() != "") != details {
			t.Fatalf("details %v: entry %v", details, e)
		}
		if e.GetKind() != KindTool || e.GetAction() != activity.PathMCP || e.GetWho() != "abc" || e.GetDurationMs() != 5 || e.GetServerId() != "s" {
			t.Fatalf("entry %v", e)
		}
	}
}

// TestInterceptor: a mutating admin call (an approval's decision too) is recorded with who,
// action, target, outcome and the fields the handler noted; a read is not.
func TestInterceptor(t *testing.T) {
	st := &fakeStore{}
	l := New(st, Config{Logger: quiet()})
	ic := l.UnaryInterceptor()
	ctx := activity.NewCallers(keyauth.Keys{Admin: "admin-key"}).Context(metadata.NewIncomingContext(t.Context(), metadata.Pairs("authorization", "Bearer admin-key")))
	upsert := func(ctx context.Context, req any) (any, error) {
		NoteChanged(ctx, []string{"command", "args"})
		return &mcpgatewayv1.UpsertServerResponse{Server: &mcpgatewayv1.ServerConfig{Id: "derived"}}, nil
	}
	if _, err := ic(ctx, &mcpgatewayv1.UpsertServerRequest{}, &grpc.UnaryServerInfo{FullMethod: mcpgatewayv1.AdminService_UpsertServer_FullMethodName}, upsert); err != nil {
		t.Fatal(err)
	}
	refuse := func(context.Context, any) (any, error) {
		return nil, status.Error(codes.NotFound, "preset \"p\": not found")
	}
	ic(ctx, &mcpgatewayv1.DeletePresetRequest{Id: "p"}, &grpc.UnaryServerInfo{FullMethod: mcpgatewayv1.AdminService_DeletePreset_FullMethodName}, refuse)
	ic(ctx, &mcpgatewayv1.ListServersRequest{}, &grpc.UnaryServerInfo{FullMethod: mcpgatewayv1.AdminService_ListServers_FullMethodName},
		func(context.Context, any) (any, error) { return &mcpgatewayv1.ListServersResponse{}, nil })
	ic(ctx, &mcpgatewayv1.DenyToolCallRequest{Id: "ap1", Reason: "no"}, &grpc.UnaryServerInfo{FullMethod: mcpgatewayv1.AdminService_DenyToolCall_FullMethodName},
		func(context.Context, any) (any, error) {
			return &mcpgatewayv1.DenyToolCallResponse{Approval: &mcpgatewayv1.Approval{Id: "ap1", ServerId: "fs", State: "denied"}}, nil
		})
	l.Close(t.Context())
	var got []*mcpgatewayv1.AuditEntry
	for _, b := range st.batches {
		got = append(got, b...)
	}
	if len(got) != 3 {
		t.Fatalf("%d entries, want 3: %v", len(got), got)
	}
	if deny := got[2]; deny.GetAction() != "deny_tool_call" || deny.GetTarget() != "ap1" || deny.GetServerId() != "fs" || deny.GetOutcome() != "ok" {
		t.Fatalf("deny entry %v", deny)
	}
	up, del := got[0], got[1]
	if up.GetKind() != KindAdmin || up.GetAction() != "upsert_server" || up.GetTarget() != "derived" || up.GetServerId() != "derived" ||
		up.GetWho() != activity.Who("admin-key") || up.GetOutcome() != "ok" || strings.Join(up.GetChanged(), ",") != "command,args" {
		t.Fatalf("upsert entry %v", up)
	}
	if del.GetAction() != "delete_preset" || del.GetTarget() != "p" || del.GetServerId() != "" || del.GetOutcome() != "not_found" || !strings.Contains(del.GetError(), "not found") {
		t.Fatalf("delete entry %v", del)
	}
}

// TestInterceptorSignIn: the callback of an upstream sign-in comes without a key; its entry
// names whom the sign-in noted (who started it) and the upstream's subject, not anonymous.
func TestInterceptorSignIn(t *testing.T) {
	st := &fakeStore{}
	l := New(st, Config{Logger: quiet()})
	ic := l.UnaryInterceptor()
	ctx := activity.NewCallers(keyauth.Keys{Admin: "admin-key"}).Context(t.Context()) // no key: anonymous
	finish := func(ctx context.Context, _ any) (any, error) {
		NoteSignIn(ctx, activity.Who("admin-key"), "user-1")
		return &mcpgatewayv1.FinishSignInResponse{Id: "tracker"}, nil
	}
	if _, err := ic(ctx, &mcpgatewayv1.FinishSignInRequest{}, &grpc.UnaryServerInfo{FullMethod: mcpgatewayv1.UpstreamOAuthService_FinishSignIn_FullMethodName}, finish); err != nil {
		t.Fatal(err)
	}
	l.Close(t.Context())
	if len(st.batches) != 1 || len(st.batches[0]) != 1 {
		t.Fatalf("entries %v", st.batches)
	}
	if e := st.batches[0][0]; e.GetAction() != "finish_sign_in" || e.GetServerId() != "tracker" || e.GetWho() != activity.Who("admin-key") || e.GetUpstreamSubject() != "user-1" {
		t.Fatalf("entry %v", e)
	}
}

// TestChanged names the fields that differ, and every set field of a creation.
func TestChanged(t *testing.T) {
	old := &mcpgatewayv1.ServerConfig{Id: "a", Command: "node", Args: []string{"x"}, Env: map[string]string{"K": "${K}"}, Enabled: proto.Bool(true)}
	cur := &mcpgatewayv1.ServerConfig{Id: "a", Command: "node", Args: []string{"y"}, Env: map[string]string{"K": "${K2}"}, Enabled: proto.Bool(true), TimeoutMs: proto.Int32(5)}
	if got := strings.Join(Changed(old, cur), ","); got != "args,env,timeout_ms" {
		t.Fatalf("changed %q", got)
	}
	if got := Changed(cur, cur); len(got) != 0 {
		t.Fatalf("no change: %v", got)
	}
	var none *mcpgatewayv1.ServerConfig
	if got := strings.Join(Changed(none, old), ","); got != "id,command,args,env,enabled" {
		t.Fatalf("creation %q", got)
	}
}

func TestOutcome(t *testing.T) {
	for err, want := range map[error]string{nil: "ok", status.Error(codes.InvalidArgument, "x"): "invalid_argument",
		status.Error(codes.NotFound, "x"): "not_found", errors.New("plain"): "unknown", status.Error(codes.FailedPrecondition, ""): "failed_precondition"} {
		if got := Outcome(err); got != want {
			t.Errorf("Outcome(%v) = %q, want %q", err, got, want)
		}
	}
}

// TestFilters: ids and times as bounds; every bad value is refused with the parameter named.
func TestFilters(t *testing.T) {
	id := "0000018c5e1a2b3c-00112233445566ff"
	q, err := Filters{After: id, Before: "2026-01-02T15:04:05Z", Kind: "tool", Server: "fs", Who: "abc"}.Query()
	if err != nil || q.After != id || q.Before != registry.AuditTimeBound(time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)) || q.Kind != "tool" || q.Server != "fs" {
		t.Fatalf("%+v %v", q, err)
	}
	for _, kind := range []string{"", KindAdmin, KindTool, KindTrim} {
		if q, err := (Filters{Kind: kind}).Query(); err != nil || q.Kind != kind {
			t.Errorf("kind %q: %+v %v", kind, q, err)
		}
	}
	for f, want := range map[Filters]string{
		{After: "yesterday"}:               "after",
		{Before: strings.ToUpper(id)}:      "before",
		{Kind: "admins"}:                   "kind",
		{Server: strings.Repeat("s", 200)}: "server",
		{After: "2026-13-01T00:00:00Z"}:    "after",
	} {
		if _, err := f.Query(); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%+v: %v, want an error naming %s", f, err, want)
		}
	}
	for n, want := range map[int32]int{0: DefaultListLimit, 1: 1, MaxListLimit: MaxListLimit} {
		if got, err := Limit(n); err != nil || got != want {
			t.Errorf("Limit(%d) = %d %v", n, got, err)
		}
	}
	for _, n := range []int32{-1, MaxListLimit + 1} {
		if _, err := Limit(n); err == nil {
			t.Errorf("Limit(%d) accepted", n)
		}
	}
}

// FuzzFilters: any parameters give a query or an error, never a panic; a bound taken is an
// id, or the time bound shape (17 bytes ending in -).
func FuzzFilters(f *testing.F) {
	f.Add("0000018c5e1a2b3c-00112233445566ff", "2026-01-02T15:04:05.123+01:00", "admin", "fs", "abc")
	f.Add("", "", "", "", "")
	f.Add("-", "0000018c5e1a2b3c-", "tool", "\x00", "anonymous")
	f.Fuzz(func(t *testing.T, after, before, kind, server, who string) {
		q, err := Filters{After: after, Before: before, Kind: kind, Server: server, Who: who}.Query()
		if err != nil {
			return
		}
		for _, b := range []string{q.After, q.Before} {
			if b != "" && !IsID(b) && (len(b) != 17 || b[16] != '-') {
				t.Fatalf("bound %q from %q/%q", b, after, before)
			}
		}
	})
}

// TestTrimReports: the trim bounds the tool calls by MaxEntries and the admin entries by
// MaxAdminEntries, and reports what the registry says it removed — a log line at info per kind
// and reason, and one entry of kind trim by mcpgateway carrying them all — even when the trim
// failed part way; a trim that removed nothing writes nothing.
func TestTrimReports(t *testing.T) {
	from := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	removed := []registry.AuditTrimmed{
		{Kind: KindTool, Reason: registry.AuditTrimMaxEntries, Count: 25, From: from, To: from.Add(time.Minute)},
		{Kind: KindAdmin, Reason: registry.AuditTrimRetention, Count: 2, From: from.Add(-time.Hour), To: from.Add(-time.Hour + time.Second)},
	}
	for _, c := range []struct {
		name    string
		trimmed []registry.AuditTrimmed
		err     error
	}{{"removed", removed, nil}, {"removed, then failed", removed[:1], errors.New("no quorum")}, {"nothing removed", nil, nil}} {
		t.Run(c.name, func(t *testing.T) {
			var logs strings.Builder
			st := &fakeStore{trimmed: c.trimmed, trimErr: c.err}
			l := New(st, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil)), MaxEntries: 20, MaxAdminEntries: 7, Retention: 2 * time.Hour})
			if err := l.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			if len(st.bounds) != 1 || st.bounds[0].MaxTool != 20 || st.bounds[0].MaxAdmin != 7 ||
				time.Since(st.bounds[0].OlderThan) < 2*time.Hour || time.Since(st.bounds[0].OlderThan) > 2*time.Hour+time.Minute {
				t.Fatalf("bounds %+v", st.bounds)
			}
			if c.trimmed == nil {
				if len(st.batches) != 0 || strings.Contains(logs.String(), "trimmed") {
					t.Fatalf("a trim that removed nothing wrote %v, logged %s", st.batches, logs.String())
				}
				return
			}
			if len(st.batches) != 1 || len(st.batches[0]) != 1 {
				t.Fatalf("batches %v, want the trim's entry alone", st.batches)
			}
			e := st.batches[0][0]
			if e.GetKind() != KindTrim || e.GetWho() != TrimWho || e.GetAction() != TrimAction || e.GetOutcome() != activity.OK ||
				e.GetServerId() != "" || len(e.GetTrimmed()) != len(c.trimmed) {
				t.Fatalf("trim entry %v", e)
			}
			for i, r := range c.trimmed {
				got := e.GetTrimmed()[i]
				f, to := r.From.Format(activity.TimeLayout), r.To.Format(activity.TimeLayout)
				if got.GetKind() != r.Kind || got.GetReason() != r.Reason || int(got.GetCount()) != r.Count || got.GetFrom() != f || got.GetTo() != to {
					t.Errorf("trimmed[%d] = %v, want %+v", i, got, r)
				}
				line := fmt.Sprintf(`level=INFO msg="audit entries trimmed" kind=%s reason=%s removed=%d from=%s to=%s`, r.Kind, r.Reason, r.Count, f, to)
				if !strings.Contains(logs.String(), line) {
					t.Errorf("no log line %s in\n%s", line, logs.String())
				}
			}
			if (c.err != nil) != strings.Contains(logs.String(), "audit trail not trimmed") {
				t.Errorf("the failure logged? %s", logs.String())
			}
		})
	}
}
