package host

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/grpcdial"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A watcher learns from the stream's headers that it is registered (before any event), and
// its stream ends as soon as the tool host starts shutting down, so that the graceful stop
// does not wait its drain timeout for it.
func TestWatchHeadersAndShutdown(t *testing.T) {
	cfg := DefaultConfig()
	cfg.StopGrace = time.Second
	cfg.DrainTimeout = 20 * time.Second // far longer than the test allows a stop to take
	cfg.Keys.Service = testServiceKey
	cfg.ServerUID = "0" // no shim here, and the fixtures lie in root's private temporary directories
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { New(cfg, nil).Serve(ctx, lis); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	cc, err := grpcdial.Dial(lis.Addr().String(), testServiceKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	c := toolhostv1.NewToolHostServiceClient(cc)

	wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer wcancel()
	stream, err := c.Watch(wctx, &toolhostv1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	headers := make(chan error, 1)
	go func() { _, err := stream.Header(); headers <- err }()
	select {
	case err := <-headers:
		if err != nil {
			t.Fatalf("headers: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no headers within 5s of opening a Watch stream with no event")
	}

	began := time.Now()
	cancel()
	if _, err := stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("Recv after shutdown began: %v, want Unavailable", err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the tool host did not stop within 5s with a Watch stream open")
	}
	t.Logf("stopped %v after shutdown began, with a watcher", time.Since(began))
}
