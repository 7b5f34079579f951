package grpcdial_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/grpcserve"
	"github.com/zestmcp/zest/lib/testenv"
	"github.com/zestmcp/zest/lib/waitfor"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Replicas of a fake inference service, each a real lib/grpcserve server on loopback, dialled
// by grpcdial.Dial as the services dial each other. ListModels is a safe method (retried on
// UNAVAILABLE), GenerateImage is not.

// fake answers ListModels with its replica's name and counts the calls of each method. A call
// that finds armed set (shared by the replicas) clears it and kills its own server mid-call,
// as SIGKILL would: every connection and the listener close while the call runs.
type fake struct {
	inferencev1.UnimplementedInferenceServiceServer
	r *replica
}

func (f fake) ListModels(ctx context.Context, _ *inferencev1.ListModelsRequest) (*inferencev1.ListModelsResponse, error) {
	f.r.lists.Add(1)
	if f.r.armed.CompareAndSwap(true, false) {
		return nil, f.r.dieMidCall(ctx)
	}
	return &inferencev1.ListModelsResponse{Models: []*inferencev1.Model{{Id: f.r.name}}}, nil
}

func (f fake) GenerateImage(ctx context.Context, _ *inferencev1.GenerateImageRequest) (*inferencev1.GenerateImageResponse, error) {
	f.r.gens.Add(1)
	if f.r.armed.CompareAndSwap(true, false) {
		return nil, f.r.dieMidCall(ctx)
	}
	return &inferencev1.GenerateImageResponse{Images: [][]byte{[]byte(f.r.name)}}, nil
}

type replica struct {
	t           *testing.T
	name, addr  string
	armed       *atomic.Bool
	lists, gens atomic.Int64
	mu          sync.Mutex
	srv         *grpcserve.Server
	stopped     chan struct{} // closed when the current server's Serve returned
}

// startReplica serves a fake on a free port outside the ephemeral range: restart binds it
// again (testenv.ListenFixed).
func startReplica(t *testing.T, name string, armed *atomic.Bool) *replica {
	r := &replica{t: t, name: name, armed: armed}
	lis, err := testenv.ListenFixed()
	if err != nil {
		t.Fatal(err)
	}
	r.serve(lis)
	t.Cleanup(r.kill)
	return r
}

func (r *replica) serve(lis net.Listener) {
	s := grpcserve.New(grpcserve.Options{Logger: slog.New(slog.DiscardHandler), DrainTimeout: time.Second})
	inferencev1.RegisterInferenceServiceServer(s, fake{r: r})
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = s.Serve(context.Background(), lis) }()
	r.mu.Lock()
	r.addr, r.srv, r.stopped = lis.Addr().String(), s, stopped
	r.mu.Unlock()
}

// kill stops the server at once: listener and connections closed, calls in flight failed.
func (r *replica) kill() {
	r.mu.Lock()
	s, stopped := r.srv, r.stopped
	r.mu.Unlock()
	s.GRPC.Stop()
	<-stopped
}

// restart serves again on the same address, as a restarted process does.
func (r *replica) restart() {
	r.t.Helper()
	lis, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.serve(lis)
}

// dieMidCall kills the server while the call that asked runs: Stop closes the connection
// (the client sees the call fail) and waits for the handler, which returns once cancelled.
func (r *replica) dieMidCall(ctx context.Context) error {
	go r.kill()
	<-ctx.Done()
	return ctx.Err()
}

func (r *replica) setHealth(s healthpb.HealthCheckResponse_ServingStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.srv.Health.SetServingStatus("", s)
}

func startReplicas(t *testing.T, n int) ([]*replica, *atomic.Bool) {
	armed := &atomic.Bool{}
	var rs []*replica
	for i := range n {
		rs = append(rs, startReplica(t, fmt.Sprintf("r%d", i), armed))
	}
	return rs, armed
}

func listOf(rs []*replica) string {
	var a []string
	for _, r := range rs {
		a = append(a, r.addr)
	}
	return strings.Join(a, ",")
}

func dial(t *testing.T, target string) inferencev1.InferenceServiceClient {
	t.Helper()
	cc, err := grpcdial.Dial(target, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return inferencev1.NewInferenceServiceClient(cc)
}

// listN makes n ListModels calls, each bounded by 2 s, and counts the answers by replica name;
// a failed call fails the test.
func listN(t *testing.T, c inferencev1.InferenceServiceClient, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		resp, err := c.ListModels(ctx, &inferencev1.ListModelsRequest{})
		cancel()
		if err != nil {
			t.Fatalf("ListModels: %v", err)
		}
		got[resp.GetModels()[0].GetId()]++
	}
	return got
}

// allUp waits until calls reach every replica of rs (connections are made lazily, and a
// replica is picked once its health answered SERVING).
func allUp(t *testing.T, c inferencev1.InferenceServiceClient, rs []*replica) {
	t.Helper()
	waitfor.True(t, 3*time.Second, "every replica answers", func() bool {
		got := listN(t, c, 3*len(rs))
		return len(got) == len(rs)
	})
}

// TestListTargetBalancesOverReplicas: calls to a list go round robin, each replica its share.
func TestListTargetBalancesOverReplicas(t *testing.T) {
	rs, _ := startReplicas(t, 3)
	c := dial(t, listOf(rs))
	allUp(t, c, rs)
	got := listN(t, c, 30)
	for _, r := range rs {
		if got[r.name] != 10 {
			t.Fatalf("answers by replica %v, want 10 each (round robin)", got)
		}
	}
}

// TestKilledReplicaIsSkippedAndRejoins: a replica killed is dropped at once (every call after
// succeeds, on the others), and picked again soon after it restarts.
func TestKilledReplicaIsSkippedAndRejoins(t *testing.T) {
	rs, _ := startReplicas(t, 3)
	c := dial(t, listOf(rs))
	allUp(t, c, rs)
	rs[0].kill()
	before := rs[0].lists.Load()
	if got := listN(t, c, 30); got[rs[0].name] != 0 || got[rs[1].name]+got[rs[2].name] != 30 {
		t.Fatalf("answers after the kill %v, want none from %s", got, rs[0].name)
	}
	if n := rs[0].lists.Load(); n != before {
		t.Fatalf("the killed replica got %d calls", n-before)
	}
	// Down long enough for the reconnect backoff to reach its longest, as a process that
	// takes a second to restart: a sleep kept on purpose, for the downtime is what the test
	// is about (the client's backoff, inside gRPC, can be neither observed nor faked).
	time.Sleep(grpcdial.ReconnectMax + 200*time.Millisecond)
	rs[0].restart()
	took := waitfor.True(t, grpcdial.ReconnectMax+time.Second, "the restarted replica is picked again", func() bool {
		return listN(t, c, 3)[rs[0].name] > 0
	})
	t.Logf("the restarted replica was picked again after %v (reconnect backoff at most %v)", took.Round(time.Millisecond), grpcdial.ReconnectMax)
}

// TestSafeCallIsRetriedWhenItsReplicaDiesMidCall: a read whose replica dies while it runs
// succeeds on another; it was sent twice.
func TestSafeCallIsRetriedWhenItsReplicaDiesMidCall(t *testing.T) {
	rs, armed := startReplicas(t, 3)
	c := dial(t, listOf(rs))
	allUp(t, c, rs)
	var before int64
	for _, r := range rs {
		before += r.lists.Load()
	}
	armed.Store(true)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := c.ListModels(ctx, &inferencev1.ListModelsRequest{}); err != nil {
		t.Fatalf("a read whose replica died mid-call failed: %v", err)
	}
	if armed.Load() {
		t.Fatal("no replica died")
	}
	var after int64
	for _, r := range rs {
		after += r.lists.Load()
	}
	if after-before != 2 {
		t.Fatalf("the read was sent %d times, want 2 (the dead replica, then another)", after-before)
	}
}

// TestUnsafeCallIsNeverSentTwice: a generation whose replica dies while it runs fails with
// UNAVAILABLE and reached one replica once: the others never saw it.
func TestUnsafeCallIsNeverSentTwice(t *testing.T) {
	rs, armed := startReplicas(t, 3)
	c := dial(t, listOf(rs))
	allUp(t, c, rs)
	armed.Store(true)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := c.GenerateImage(ctx, &inferencev1.GenerateImageRequest{Prompt: "once"})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("a generation whose replica died mid-call: %v, want UNAVAILABLE", err)
	}
	t.Logf("the caller got: %v", err)
	var sent int64
	for _, r := range rs {
		sent += r.gens.Load()
	}
	if sent != 1 {
		t.Fatalf("the generation was sent %d times, want 1", sent)
	}
	// The others go on: a generation after it is answered (and sent once).
	if _, err := c.GenerateImage(ctx, &inferencev1.GenerateImageRequest{Prompt: "next"}); err != nil {
		t.Fatalf("the next generation: %v", err)
	}
}

// TestNotServingReplicaGetsNoCalls: a replica whose health says NOT_SERVING (it drains) is
// not picked; SERVING again, it is.
func TestNotServingReplicaGetsNoCalls(t *testing.T) {
	rs, _ := startReplicas(t, 3)
	c := dial(t, listOf(rs))
	allUp(t, c, rs)
	rs[1].setHealth(healthpb.HealthCheckResponse_NOT_SERVING)
	took := waitfor.True(t, time.Second, "the NOT_SERVING replica is left out", func() bool {
		return listN(t, c, 6)[rs[1].name] == 0
	})
	before := rs[1].lists.Load()
	if got := listN(t, c, 30); got[rs[1].name] != 0 {
		t.Fatalf("answers %v: the NOT_SERVING replica answered", got)
	}
	if rs[1].lists.Load() != before {
		t.Fatal("the NOT_SERVING replica got calls")
	}
	rs[1].setHealth(healthpb.HealthCheckResponse_SERVING)
	back := waitfor.True(t, time.Second, "the replica SERVING again is picked", func() bool {
		return listN(t, c, 6)[rs[1].name] > 0
	})
	t.Logf("left out after %v, picked again after %v", took.Round(time.Millisecond), back.Round(time.Millisecond))
}

// TestOneAddressAsBefore: a single address is dialled as before; when its only replica drains
// (NOT_SERVING) a call fails at once with UNAVAILABLE instead of waiting.
func TestOneAddressAsBefore(t *testing.T) {
	rs, _ := startReplicas(t, 1)
	c := dial(t, rs[0].addr)
	listN(t, c, 3)
	rs[0].setHealth(healthpb.HealthCheckResponse_NOT_SERVING)
	waitfor.True(t, time.Second, "a call to the draining replica fails", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		_, err := c.ListModels(ctx, &inferencev1.ListModelsRequest{})
		return status.Code(err) == codes.Unavailable
	})
}

// TestDNSTarget: dns:///localhost:port reaches the replica there (localhost may also resolve
// to ::1, where nothing listens: that address is skipped).
func TestDNSTarget(t *testing.T) {
	rs, _ := startReplicas(t, 1)
	_, port, _ := net.SplitHostPort(rs[0].addr)
	c := dial(t, "dns:///localhost:"+port)
	if got := listN(t, c, 5); got[rs[0].name] != 5 {
		t.Fatalf("answers %v", got)
	}
}

// TestBadTargetIsRefused: Dial refuses what ValidateTarget refuses, saying what is wanted.
func TestBadTargetIsRefused(t *testing.T) {
	_, err := grpcdial.Dial("a:1,,b:2", "", 0)
	if err == nil || !strings.Contains(err.Error(), "address 2 is empty") || !strings.Contains(err.Error(), "dns:///name:port") {
		t.Fatalf("Dial: %v", err)
	}
	if !errors.Is(grpcdial.ValidateTarget("x", "a:1"), nil) {
		t.Fatal("a:1 refused")
	}
}
