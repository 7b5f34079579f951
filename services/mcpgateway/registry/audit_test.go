package registry

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/etcdtest"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// auditEntry is an entry at t (RFC 3339 with milliseconds, as package audit writes it).
func auditEntry(t time.Time, kind, server, who string) *mcpgatewayv1.AuditEntry {
	return &mcpgatewayv1.AuditEntry{Time: t.UTC().Format("2006-01-02T15:04:05.000Z07:00"), Kind: kind, ServerId: server, Who: who, Outcome: "ok"}
}

// listAudit collects what q selects, at most limit (0: all).
func listAudit(t *testing.T, a AuditLog, q AuditQuery, limit int) []*mcpgatewayv1.AuditEntry {
	t.Helper()
	var out []*mcpgatewayv1.AuditEntry
	err := a.ListAudit(t.Context(), q, func(e *mcpgatewayv1.AuditEntry) bool {
		out = append(out, e)
		return limit == 0 || len(out) < limit
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// servers lists the entries' server ids, comma separated.
func serversOf(es []*mcpgatewayv1.AuditEntry) string {
	var s []string
	for _, e := range es {
		s = append(s, e.GetServerId())
	}
	return strings.Join(s, ",")
}

// runAuditContract checks AuditLog on a fresh store of open.
func runAuditContract(t *testing.T, open func(t *testing.T) Registry) {
	t.Run("AuditAppendOrderFilters", func(t *testing.T) {
		a := open(t).(AuditLog)
		ctx := t.Context()
		t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
		// Two batches; s1 and s2 at the same millisecond; s4 earlier than s3 by its time.
		if err := a.AppendAudit(ctx, []*mcpgatewayv1.AuditEntry{
			auditEntry(t0, "tool", "s0", "aaa"), auditEntry(t0.Add(time.Second), "admin", "s1", "bbb"),
			auditEntry(t0.Add(time.Second), "tool", "s2", "aaa"),
		}); err != nil {
			t.Fatal(err)
		}
		if err := a.AppendAudit(ctx, []*mcpgatewayv1.AuditEntry{
			auditEntry(t0.Add(3*time.Second), "tool", "s3", "bbb"), auditEntry(t0.Add(4*time.Second), "tool", "s4", "aaa"),
		}); err != nil {
			t.Fatal(err)
		}
		all := listAudit(t, a, AuditQuery{}, 0)
		if got := serversOf(all); got != "s4,s3,s2,s1,s0" {
			t.Fatalf("newest first: %s", got)
		}
		for i, e := range all {
			if len(e.GetId()) != AuditIDLen || (i > 0 && e.GetId() >= all[i-1].GetId()) {
				t.Fatalf("ids not unique and in order: %v", all)
			}
		}
		if got := serversOf(listAudit(t, a, AuditQuery{Ascending: true}, 0)); got != "s0,s1,s2,s3,s4" {
			t.Fatalf("ascending: %s", got)
		}
		// Limit is a hint of the page size: a caller that reads on gets every entry.
		for _, asc := range []bool{false, true} {
			want := "s4,s3,s2,s1,s0"
			if asc {
				want = "s0,s1,s2,s3,s4"
			}
			if got := serversOf(listAudit(t, a, AuditQuery{Limit: 2, Ascending: asc}, 0)); got != want {
				t.Fatalf("limit 2 read on, ascending %v: %s", asc, got)
			}
		}
		for q, want := range map[AuditQuery]string{
			{Kind: "admin"}:                                               "s1",
			{Kind: "tool", Who: "aaa"}:                                    "s4,s2,s0",
			{Server: "s3"}:                                                "s3",
			{Who: "nobody"}:                                               "",
			{Before: all[1].GetId()}:                                      "s2,s1,s0",
			{After: all[3].GetId()}:                                       "s4,s3,s2",
			{After: all[4].GetId(), Before: all[0].GetId()}:               "s3,s2,s1",
			{After: AuditTimeBound(t0.Add(time.Second))}:                  "s4,s3,s2,s1", // at and after
			{Before: AuditTimeBound(t0.Add(time.Second))}:                 "s0",          // strictly before
			{After: AuditTimeBound(t0.Add(time.Hour))}:                    "",
			{Before: AuditTimeBound(t0.Add(3 * time.Second)), Who: "aaa"}: "s2,s0",
			{After: all[2].GetId(), Ascending: true}:                      "s3,s4",
		} {
			if got := serversOf(listAudit(t, a, q, 0)); got != want {
				t.Errorf("%+v: %q, want %q", q, got, want)
			}
		}
		// Paging: two at a time, each page's last id the next one's Before.
		var pages []string
		q := AuditQuery{}
		for {
			page := listAudit(t, a, q, 2)
			if len(page) == 0 {
				break
			}
			pages = append(pages, serversOf(page))
			q.Before = page[len(page)-1].GetId()
		}
		if got := strings.Join(pages, "|"); got != "s4,s3|s2,s1|s0" {
			t.Fatalf("pages: %s", got)
		}
		if e := all[0]; e.GetKind() != "tool" || e.GetWho() != "aaa" || e.GetOutcome() != "ok" || !strings.HasPrefix(e.GetTime(), t0.UTC().Format("2006-01-02")) {
			t.Fatalf("entry not kept whole: %v", e)
		}
	})

	t.Run("AuditFullBatch", func(t *testing.T) {
		// The most entries the store says one write takes, in one write: every one kept.
		a := open(t).(AuditLog)
		now := time.Now().Truncate(time.Millisecond)
		batch := make([]*mcpgatewayv1.AuditEntry, a.MaxAuditBatch())
		for i := range batch {
			batch[i] = auditEntry(now.Add(time.Duration(i)*time.Millisecond), "tool", fmt.Sprintf("s%d", i), "w")
		}
		if err := a.AppendAudit(t.Context(), batch); err != nil {
			t.Fatalf("a batch of MaxAuditBatch (%d) entries: %v", len(batch), err)
		}
		if got := listAudit(t, a, AuditQuery{}, 0); len(got) != len(batch) {
			t.Fatalf("%d entries listed, want %d", len(got), len(batch))
		}
	})

	t.Run("AuditTrim", func(t *testing.T) {
		a := open(t).(AuditLog)
		ctx, now := t.Context(), time.Now().Truncate(time.Millisecond)
		var batch []*mcpgatewayv1.AuditEntry
		for i := range 3 {
			batch = append(batch, auditEntry(now.Add(-2*time.Hour+time.Duration(i)*time.Second), "tool", fmt.Sprintf("old%d", i), "w"))
		}
		for i := range 5 {
			batch = append(batch, auditEntry(now.Add(-time.Minute+time.Duration(i)*time.Second), "tool", fmt.Sprintf("new%d", i), "w"))
		}
		if err := a.AppendAudit(ctx, batch); err != nil {
			t.Fatal(err)
		}
		got, err := a.TrimAudit(ctx, AuditBounds{OlderThan: now.Add(-time.Hour)})
		if want := []AuditTrimmed{{Kind: "tool", Reason: "retention", Count: 3, From: now.Add(-2 * time.Hour), To: now.Add(-2*time.Hour + 2*time.Second)}}; err != nil || !sameTrims(got, want) {
			t.Fatalf("trim by age: %+v (%v), want %+v", got, err, want)
		}
		if got := serversOf(listAudit(t, a, AuditQuery{}, 0)); got != "new4,new3,new2,new1,new0" {
			t.Fatalf("after the trim by age: %s", got)
		}
		got, err = a.TrimAudit(ctx, AuditBounds{OlderThan: now.Add(-time.Hour), MaxTool: 2})
		if want := []AuditTrimmed{{Kind: "tool", Reason: "max_entries", Count: 3, From: now.Add(-time.Minute), To: now.Add(-time.Minute + 2*time.Second)}}; err != nil || !sameTrims(got, want) {
			t.Fatalf("trim by count: %+v (%v), want %+v", got, err, want)
		}
		if got := serversOf(listAudit(t, a, AuditQuery{}, 0)); got != "new4,new3" {
			t.Fatalf("after the trim by count: %s", got)
		}
		if got, err := a.TrimAudit(ctx, AuditBounds{OlderThan: now.Add(-time.Hour), MaxTool: 2}); err != nil || len(got) != 0 {
			t.Fatalf("a trim with nothing to do reported %+v (%v)", got, err)
		}
	})

	// Each kind is kept apart and bounded on its own: tool calls past their bound never push
	// an admin entry out, whatever their number or order; admin entries past theirs go,
	// oldest first; the trims' own reports are bounded apart and removed unreported. The
	// retention removes every kind.
	t.Run("AuditKindsApart", func(t *testing.T) {
		a := open(t).(AuditLog)
		ctx, now := t.Context(), time.Now().Truncate(time.Millisecond)
		at := func(i int) time.Time { return now.Add(-time.Hour + time.Duration(i)*time.Second) }
		var batch []*mcpgatewayv1.AuditEntry
		for i := range 60 { // admin entries at 0, 20, 40; trims at 10, 30, 50; tool calls between
			switch {
			case i%20 == 0:
				batch = append(batch, auditEntry(at(i), "admin", fmt.Sprintf("a%d", i), "w"))
			case i%20 == 10:
				batch = append(batch, auditEntry(at(i), "trim", fmt.Sprintf("r%d", i), "mcpgateway"))
			default:
				batch = append(batch, auditEntry(at(i), "tool", fmt.Sprintf("t%d", i), "w"))
			}
		}
		for len(batch) > 0 { // as package audit writes them: batches of mixed kinds
			n := min(len(batch), 25)
			if err := a.AppendAudit(ctx, batch[:n]); err != nil {
				t.Fatal(err)
			}
			batch = batch[n:]
		}
		if got := serversOf(listAudit(t, a, AuditQuery{Kind: "trim"}, 0)); got != "r50,r30,r10" {
			t.Fatalf("kind trim: %s", got)
		}
		got, err := a.TrimAudit(ctx, AuditBounds{OlderThan: now.Add(-2 * time.Hour), MaxTool: 5, MaxAdmin: 100})
		// 54 tool calls, the 49 oldest out: from t1 to t53 but the newest five (55-59).
		if want := []AuditTrimmed{{Kind: "tool", Reason: "max_entries", Count: 49, From: at(1), To: at(54)}}; err != nil || !sameTrims(got, want) {
			t.Fatalf("tool calls past 5: %+v (%v), want %+v", got, err, want)
		}
		if got := serversOf(listAudit(t, a, AuditQuery{}, 0)); got != "t59,t58,t57,t56,t55,r50,a40,r30,a20,r10,a0" {
			t.Fatalf("after the tool calls' trim: %s", got)
		}
		got, err = a.TrimAudit(ctx, AuditBounds{OlderThan: now.Add(-2 * time.Hour), MaxTool: 5, MaxAdmin: 2})
		if want := []AuditTrimmed{{Kind: "admin", Reason: "max_entries", Count: 1, From: at(0), To: at(0)}}; err != nil || !sameTrims(got, want) {
			t.Fatalf("admin entries past 2: %+v (%v), want %+v", got, err, want)
		}
		if got := serversOf(listAudit(t, a, AuditQuery{}, 0)); got != "t59,t58,t57,t56,t55,r50,a40,r30,a20" {
			t.Fatalf("after the admin entries' trim (the trims' reports bounded apart): %s", got)
		}
		got, err = a.TrimAudit(ctx, AuditBounds{OlderThan: at(41), MaxTool: 5, MaxAdmin: 2})
		want := []AuditTrimmed{{Kind: "admin", Reason: "retention", Count: 2, From: at(20), To: at(40)}}
		if err != nil || !sameTrims(got, want) {
			t.Fatalf("retention: %+v (%v), want %+v", got, err, want)
		}
		if got := serversOf(listAudit(t, a, AuditQuery{}, 0)); got != "t59,t58,t57,t56,t55,r50" {
			t.Fatalf("after the retention: %s", got)
		}
	})
}

// sameTrims compares reports, their times to the millisecond (ids keep nanoseconds).
func sameTrims(got, want []AuditTrimmed) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Kind != w.Kind || g.Reason != w.Reason || g.Count != w.Count ||
			!g.From.Truncate(time.Millisecond).Equal(w.From) || !g.To.Truncate(time.Millisecond).Equal(w.To) {
			return false
		}
	}
	return true
}

func TestAuditContractBolt(t *testing.T) {
	runAuditContract(t, func(t *testing.T) Registry {
		r, err := Open(t.TempDir() + "/registry.db")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	})
}

// TestAuditContractEtcd runs the audit contract on one etcd member, and two writers (two
// replicas' registries on one prefix) appending the same instants at once: every id is
// unique and every entry is kept.
func TestAuditContractEtcd(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	runAuditContract(t, func(t *testing.T) Registry { return openTestEtcd(t, c.Endpoints(), nil) })
	t.Run("TwoWriters", func(t *testing.T) {
		w1, w2 := openTestEtcd(t, c.Endpoints(), nil), openTestEtcd(t, c.Endpoints(), nil)
		at := time.Now()
		var wg sync.WaitGroup
		for _, w := range []*Etcd{w1, w2} {
			wg.Go(func() {
				for range 5 {
					batch := make([]*mcpgatewayv1.AuditEntry, 20)
					for i := range batch {
						batch[i] = auditEntry(at, "tool", "s", "w")
					}
					if err := w.AppendAudit(context.Background(), batch); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		all := listAudit(t, w1, AuditQuery{}, 0)
		seen := map[string]bool{}
		for _, e := range all {
			seen[e.GetId()] = true
		}
		if len(all) != 200 || len(seen) != 200 {
			t.Fatalf("%d entries, %d distinct ids; want 200 of each", len(all), len(seen))
		}
	})
}

// legacyTrail is a trail as an older build kept it, every kind among the tool calls: admin
// entries a0 and a6 around tool calls t1 to t5, with their ids.
func legacyTrail(t *testing.T) []*mcpgatewayv1.AuditEntry {
	t.Helper()
	t0 := time.Now().Add(-time.Minute)
	var es []*mcpgatewayv1.AuditEntry
	for i := range 7 {
		kind, name := "tool", fmt.Sprintf("t%d", i)
		if i == 0 || i == 6 {
			kind, name = "admin", fmt.Sprintf("a%d", i)
		}
		es = append(es, auditEntry(t0.Add(time.Duration(i)*time.Second), kind, name, "w"))
	}
	newAuditIDs().assign(es)
	return es
}

// checkSplit: the admin entries of a legacy trail are in their own space, listed as before,
// and a trim of the tool calls down to one keeps them.
func checkSplit(t *testing.T, a AuditLog) {
	t.Helper()
	if got := serversOf(listAudit(t, a, AuditQuery{}, 0)); got != "a6,t5,t4,t3,t2,t1,a0" {
		t.Fatalf("the trail after the split: %s", got)
	}
	if got := serversOf(listAudit(t, a, AuditQuery{Kind: "admin"}, 0)); got != "a6,a0" {
		t.Fatalf("admin entries after the split: %s", got)
	}
	if _, err := a.TrimAudit(t.Context(), AuditBounds{OlderThan: time.Now().Add(-time.Hour), MaxTool: 1, MaxAdmin: 10}); err != nil {
		t.Fatal(err)
	}
	if got := serversOf(listAudit(t, a, AuditQuery{}, 0)); got != "a6,t5,a0" {
		t.Fatalf("after a trim of the tool calls to 1: %s", got)
	}
}

// TestAuditSplitBolt: a registry whose trail an older build wrote (one bucket, every kind) has
// its admin entries moved to their own bucket when this build opens it, once.
func TestAuditSplitBolt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.db")
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	err = r.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket([]byte("audit_admin")); err != nil {
			return err
		}
		for _, e := range legacyTrail(t) {
			v, _ := proto.Marshal(e)
			if err := tx.Bucket([]byte("audit")).Put([]byte(e.GetId()), v); err != nil {
				return err
			}
		}
		return nil
	})
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	if r, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	checkSplit(t, r)
}

// TestAuditSplitEtcd: a store whose trail an older build wrote (audit/, every kind) has its
// admin entries moved to audit_admin/ by the first replica of this build that opens it, and
// the store marked so that no later open reads the trail again.
func TestAuditSplitEtcd(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	first := openTestEtcd(t, c.Endpoints(), nil)
	ctx := t.Context()
	if _, err := first.cli.Delete(ctx, first.prefix+keyAuditSplit); err != nil {
		t.Fatal(err)
	}
	for _, e := range legacyTrail(t) {
		v, _ := proto.Marshal(e)
		if _, err := first.cli.Put(ctx, first.prefix+"audit/"+e.GetId(), string(v)); err != nil {
			t.Fatal(err)
		}
	}
	again := openTestEtcd(t, c.Endpoints(), func(cfg *EtcdConfig) { cfg.Prefix = first.prefix })
	if resp, err := first.cli.Get(ctx, first.prefix+keyAuditSplit); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the store is not marked split: %v %v", resp, err)
	}
	if resp, err := first.cli.Get(ctx, first.prefix+"audit/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 5 {
		t.Fatalf("audit/ holds %v keys (%v), want the 5 tool calls", resp.Count, err)
	}
	checkSplit(t, again)
}

// TestAuditTrimEtcdInRounds: a trim past auditScan entries deletes them in rounds and reports
// them as one; two replicas trimming at once delete the excess between them, never more, and
// report what each deleted.
func TestAuditTrimEtcdInRounds(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	a := openTestEtcd(t, c.Endpoints(), nil)
	b := openTestEtcd(t, c.Endpoints(), func(cfg *EtcdConfig) { cfg.Prefix = a.prefix })
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	const n, keep = 2600, 100
	for i := 0; i < n; i += 100 {
		batch := make([]*mcpgatewayv1.AuditEntry, 100)
		for j := range batch {
			batch[j] = auditEntry(t0.Add(time.Duration(i+j)*time.Millisecond), "tool", fmt.Sprint(i+j), "w")
		}
		if err := a.AppendAudit(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
	}
	bounds := AuditBounds{OlderThan: t0.Add(-time.Hour), MaxTool: keep}
	var wg sync.WaitGroup
	reports := make([][]AuditTrimmed, 2)
	for i, r := range []*Etcd{a, b} {
		wg.Go(func() {
			got, err := r.TrimAudit(context.Background(), bounds)
			if err != nil {
				t.Error(err)
			}
			reports[i] = got
		})
	}
	wg.Wait()
	removed := 0
	for _, rep := range reports {
		for _, r := range rep {
			if r.Kind != "tool" || r.Reason != "max_entries" || r.From.Before(t0) || r.To.After(t0.Add((n-keep)*time.Millisecond)) {
				t.Errorf("report %+v", r)
			}
			removed += r.Count
		}
	}
	left := listAudit(t, a, AuditQuery{Ascending: true}, 0)
	if len(left) != keep || removed != n-keep || left[0].GetServerId() != fmt.Sprint(n-keep) {
		t.Fatalf("%d left (first %s), %d reported removed; want %d left from %d, %d removed", len(left), left[0].GetServerId(), removed, keep, n-keep, n-keep)
	}
	got, err := a.TrimAudit(t.Context(), AuditBounds{OlderThan: t0.Add(-time.Hour), MaxTool: 10})
	if want := []AuditTrimmed{{Kind: "tool", Reason: "max_entries", Count: keep - 10, From: t0.Add((n - keep) * time.Millisecond), To: t0.Add((n - 11) * time.Millisecond)}}; err != nil || !sameTrims(got, want) {
		t.Fatalf("one replica: %+v (%v), want %+v", got, err, want)
	}
}
