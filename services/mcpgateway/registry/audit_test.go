package registry

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/etcdtest"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
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

	t.Run("AuditTrim", func(t *testing.T) {
		a := open(t).(AuditLog)
		ctx, now := t.Context(), time.Now()
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
		if n, err := a.TrimAudit(ctx, now.Add(-time.Hour), 0); err != nil || n != 3 {
			t.Fatalf("trim by age removed %d (%v), want 3", n, err)
		}
		if got := serversOf(listAudit(t, a, AuditQuery{}, 0)); got != "new4,new3,new2,new1,new0" {
			t.Fatalf("after the trim by age: %s", got)
		}
		if n, err := a.TrimAudit(ctx, now.Add(-time.Hour), 2); err != nil || n != 3 {
			t.Fatalf("trim by count removed %d (%v), want 3", n, err)
		}
		if got := serversOf(listAudit(t, a, AuditQuery{}, 0)); got != "new4,new3" {
			t.Fatalf("after the trim by count: %s", got)
		}
		if n, err := a.TrimAudit(ctx, now.Add(-time.Hour), 2); err != nil || n != 0 {
			t.Fatalf("a trim with nothing to do removed %d (%v)", n, err)
		}
	})
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
