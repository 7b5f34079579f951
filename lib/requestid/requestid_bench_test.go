package requestid

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"
)

// BenchmarkFromIncoming is the id lookup every gRPC call of the suite pays, with the
// metadata a call between Zest's services carries (go test -bench FromIncoming ./requestid/).
func BenchmarkFromIncoming(b *testing.B) {
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(
		":authority", "127.0.0.1:1234", "content-type", "application/grpc", "user-agent", "grpc-go/1.85.0",
		"authorization", "Bearer 0123456789abcdef0123456789abcdef", "x-request-id", "0123456789abcdef", "grpc-accept-encoding", "gzip"))
	b.ReportAllocs()
	for b.Loop() {
		_ = fromIncoming(ctx)
	}
}

// BenchmarkOutgoing is what the edge pays to pass the id on to mcpgateway, its outgoing
// metadata holding the client's authorization as mcphttp sets it (go test -bench Outgoing
// ./requestid/).
func BenchmarkOutgoing(b *testing.B) {
	ctx := With(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer 0123456789abcdef0123456789abcdef"), "0123456789abcdef")
	b.ReportAllocs()
	for b.Loop() {
		_ = outgoing(ctx)
	}
}
