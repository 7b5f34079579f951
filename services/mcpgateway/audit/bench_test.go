package audit

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"

	"github.com/zestmcp/zest/services/mcpgateway/activity"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
)

// BenchmarkRecord is what the trail adds to a tool call's path: one entry built and queued
// (the registry writes happen on the writer's goroutine, in batches, on a bbolt file here).
func BenchmarkRecord(b *testing.B) {
	r, err := registry.Open(b.TempDir() + "/registry.db")
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	l := New(r, Config{Logger: quiet(), QueueSize: 1 << 20})
	rec := activity.Record{Time: time.Now(), Path: activity.PathMCP, Who: "0123456789ab", Server: "everything", Tool: "echo", Outcome: activity.OK, Duration: time.Millisecond}
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		l.Record(ctx, rec)
	}
	b.StopTimer()
	l.Close(ctx)
	if d, f := l.Stats(); d+f > 0 {
		b.Logf("dropped %d, failed %d of %d", d, f, b.N)
	}
}

// BenchmarkAppendBatch is the registry's side of the trail: tool-call entries written to a
// bbolt file in transactions of batch entries each (one op is one entry). cpu-ns/entry is the
// process's CPU (user and system, getrusage) per entry: each transaction's page writes and
// fdatasync cost CPU as well as waiting, and wall time shows only the sum.
func BenchmarkAppendBatch(b *testing.B) {
	for _, batch := range []int{100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			r, err := registry.Open(b.TempDir() + "/registry.db")
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			entries := make([]*mcpgatewayv1.AuditEntry, 0, batch)
			ctx := b.Context()
			cpu0 := cpuTime()
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				entries = append(entries, &mcpgatewayv1.AuditEntry{Kind: KindTool, Time: time.Now().UTC().Format(activity.TimeLayout),
					Who: "0123456789ab", Action: activity.PathMCP, ServerId: "everything", Tool: "echo", Outcome: activity.OK, DurationMs: 1})
				if len(entries) == batch {
					if err := r.AppendAudit(ctx, entries); err != nil {
						b.Fatal(err)
					}
					entries = entries[:0]
				}
				n++
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(n), "cpu-ns/entry")
		})
	}
}

// cpuTime is this process's CPU time so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
