package audit

import (
	"testing"
	"time"

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
