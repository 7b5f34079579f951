package host

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
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

// An answer says how far its server's notifications had come when the child's answer was
// read (notification_seq): the seq of the last notification the child wrote before it, as
// the Watch stream numbers them, on the unary Call and on CallStream alike. A Watch stream
// opened later begins with that count (published), since none of those comes on it.
func TestAnswersCountTheNotificationsBeforeThem(t *testing.T) {
	c := startHost(t)
	startFixture(t, c)
	stream, err := c.Watch(t.Context(), &toolhostv1.WatchRequest{Id: "fx"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Header(); err != nil {
		t.Fatal(err)
	}
	// notes reads the Watch stream until n notifications came, and returns their seqs.
	notes := func(n int) []uint64 {
		var seqs []uint64
		for len(seqs) < n {
			ev, err := stream.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if ev.GetNotification() != nil {
				if !strings.Contains(string(ev.GetNotification()), "notifications/message") {
					t.Fatalf("notification %s", ev.GetNotification())
				}
				seqs = append(seqs, ev.GetSeq())
			}
		}
		return seqs
	}

	r, err := c.Call(t.Context(), &toolhostv1.CallRequest{Id: "fx", Method: "tools/call", Params: json.RawMessage(`{"name":"log","arguments":{"n":3}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := notes(3); fmt.Sprint(got) != "[1 2 3]" || r.GetNotificationSeq() != 3 {
		t.Fatalf("Call: notifications %v on Watch, answer's notification_seq %d; want [1 2 3] and 3", got, r.GetNotificationSeq())
	}

	cs, err := c.CallStream(t.Context(), &toolhostv1.CallStreamRequest{Call: &toolhostv1.CallRequest{Id: "fx", Method: "tools/call",
		Params: json.RawMessage(`{"name":"log","arguments":{"n":2},"_meta":{"progressToken":"p"}}`)}})
	if err != nil {
		t.Fatal(err)
	}
	var answer *toolhostv1.CallResponse
	for answer == nil {
		item, err := cs.Recv()
		if err != nil {
			t.Fatal(err)
		}
		answer = item.GetAnswer()
	}
	if got := notes(2); fmt.Sprint(got) != "[4 5]" || answer.GetNotificationSeq() != 5 || !strings.Contains(string(answer.GetResult()), "logged 2") {
		t.Fatalf("CallStream: notifications %v on Watch, answer %v; want [4 5] and notification_seq 5", got, answer)
	}

	later, err := c.Watch(t.Context(), &toolhostv1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := later.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if ev.GetId() != "fx" || ev.GetPublished() != 5 {
		t.Fatalf("a later Watch stream began with %v, want fx published 5", ev)
	}
}
