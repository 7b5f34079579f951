package stdio

import (
	"encoding/json"
	"testing"
)

// BenchmarkCallEcho measures echo calls from 32 goroutines on one mcpfixture child: the
// stdio path of a call (framing, writes combined on stdin, the read loop, answer delivery).
func BenchmarkCallEcho(b *testing.B) {
	c, err := Start(Options{Path: fixture})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Stop() })
	p := json.RawMessage(`{"name":"echo","arguments":{"message":"bench"}}`)
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Call(b.Context(), "tools/call", p, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
