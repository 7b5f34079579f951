package host

import (
	"testing"

	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
)

// BenchmarkCallEcho measures echo on server-everything through the gRPC API (client and
// tool host in one process). `make bench` measures the real binaries; this is for profiling.
func BenchmarkCallEcho(b *testing.B) {
	c := startHostB(b)
	if _, err := c.EnsureStarted(b.Context(), &toolhostv1.EnsureStartedRequest{Spec: serverSpecB(b)}); err != nil {
		b.Fatal(err)
	}
	p := []byte(`{"name":"echo","arguments":{"message":"bench"}}`)
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Call(b.Context(), &toolhostv1.CallRequest{Id: "everything", Method: "tools/call", Params: p}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
