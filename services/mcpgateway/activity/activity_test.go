package activity

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
	"google.golang.org/grpc/metadata"
)

func newLog(t *testing.T, size int, details bool) *Log {
	t.Helper()
	l, err := New(size, details)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func ids(calls []Record) []uint64 {
	out := []uint64{}
	for _, c := range calls {
		out = append(out, c.ID)
	}
	return out
}

func add(l *Log, n int) {
	for i := 0; i < n; i++ {
		l.Add(context.Background(), Call{Path: PathMCP, Server: "s", Tool: "t", Began: time.Now(), Outcome: OK})
	}
}

func TestNewBounds(t *testing.T) {
	for _, size := range []int{0, -1, MaxSize + 1} {
		if _, err := New(size, false); err == nil || !strings.Contains(err.Error(), "from 1 to 10000") {
			t.Errorf("New(%d) = %v, want an error that gives the range", size, err)
		}
	}
	for _, size := range []int{1, DefaultSize, MaxSize} {
		if l, err := New(size, false); err != nil || l.Size() != size {
			t.Errorf("New(%d): %v", size, err)
		}
	}
}

// The ring keeps the newest size calls; after and limit select among them, newest first.
func TestListWraparoundAfterLimit(t *testing.T) {
	l := newLog(t, 4, false)
	if calls, latest := l.List(0, 0); len(calls) != 0 || latest != 0 {
		t.Fatalf("empty: %v %d", ids(calls), latest)
	}
	add(l, 3)
	if calls, latest := l.List(0, 0); latest != 3 || !equal(ids(calls), 3, 2, 1) {
		t.Fatalf("3 calls: %v %d", ids(calls), latest)
	}
	add(l, 7) // 10 calls: the ring holds 7..10
	cases := []struct {
		after uint64
		limit int
		want  []uint64
	}{
		{0, 0, []uint64{10, 9, 8, 7}},
		{0, 2, []uint64{10, 9}},
		{0, 100, []uint64{10, 9, 8, 7}},
		{8, 0, []uint64{10, 9}},
		{8, 1, []uint64{10}},
		{9, 0, []uint64{10}},
		{10, 0, nil},
		{11, 0, nil},
		{^uint64(0), 0, nil},
		{3, 0, []uint64{10, 9, 8, 7}}, // 4..6 were overwritten: what is left
	}
	for _, c := range cases {
		calls, latest := l.List(c.after, c.limit)
		if latest != 10 || !equal(ids(calls), c.want...) {
			t.Errorf("List(%d, %d) = %v, %d; want %v, 10", c.after, c.limit, ids(calls), latest, c.want)
		}
	}
}

func equal(got []uint64, want ...uint64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// Writers racing with readers: every id is given once, the ring never holds more than its
// size, and what a reader sees is ordered (run with -race).
func TestConcurrentWriters(t *testing.T) {
	l := newLog(t, 64, true)
	const writers, each = 8, 500
	var wg sync.WaitGroup
	stop := make(chan struct{})
	readerDone := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				readerDone <- nil
				return
			default:
			}
			calls, latest := l.List(0, 0)
			if len(calls) > 64 {
				readerDone <- errors.New("more calls than the ring holds")
				return
			}
			for i, c := range calls {
				if c.ID != latest-uint64(i) {
					readerDone <- errors.New("a list out of order")
					return
				}
			}
		}
	}()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				l.Add(context.Background(), Call{Path: PathAdmin, Server: "s", Tool: "t", Began: time.Now(), Outcome: OK, Args: []byte(`{"i":1}`)})
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-readerDone; err != nil {
		t.Fatal(err)
	}
	calls, latest := l.List(0, 0)
	if latest != writers*each || len(calls) != 64 || calls[0].ID != latest || calls[63].ID != latest-63 {
		t.Fatalf("latest %d, %d calls from %d", latest, len(calls), calls[0].ID)
	}
}

// With details off nothing of the arguments or result is kept; with details on both are,
// cut at DetailBytes and flagged.
func TestDetails(t *testing.T) {
	params := []byte(`{"name":"echo","arguments":{"text":"secret-argument"}}`)
	result := []byte(`{"content":[{"type":"text","text":"secret-result"}]}`)
	off := newLog(t, 2, false)
	off.Add(context.Background(), Call{Path: PathMCP, Tool: "echo", Began: time.Now(), Outcome: OK, Params: params, Result: result})
	off.Add(context.Background(), Call{Path: PathAdmin, Tool: "echo", Began: time.Now(), Outcome: OK, Args: []byte(`{"text":"secret-argument"}`), Result: result})
	calls, _ := off.List(0, 0)
	for _, c := range calls {
		if c.Arguments != "" || c.Result != "" || c.ArgumentsTruncated || c.ResultTruncated || off.Details() {
			t.Fatalf("details off kept %+v", c)
		}
	}

	on := newLog(t, 2, true)
	on.Add(context.Background(), Call{Path: PathMCP, Tool: "echo", Began: time.Now(), Outcome: OK, Params: params, Result: result})
	c, _ := on.List(0, 1)
	if c[0].Arguments != `{"text":"secret-argument"}` || c[0].Result != string(result) || c[0].ArgumentsTruncated || !on.Details() {
		t.Fatalf("details on: %+v", c[0])
	}
	long := []byte(`{"text":"` + strings.Repeat("é", DetailBytes) + `"}`)
	on.Add(context.Background(), Call{Path: PathChat, Tool: "echo", Began: time.Now(), Outcome: OK, Args: long, Result: long})
	c, _ = on.List(0, 1)
	if len(c[0].Arguments) > DetailBytes || len(c[0].Arguments) < DetailBytes-1 || !c[0].ArgumentsTruncated ||
		!c[0].ResultTruncated || !strings.HasPrefix(c[0].Result, `{"text":"é`) || strings.ContainsRune(c[0].Arguments, '\uFFFD') {
		t.Fatalf("cut: %d bytes, truncated %v/%v", len(c[0].Arguments), c[0].ArgumentsTruncated, c[0].ResultTruncated)
	}
	// The caller's buffer is copied, not kept.
	buf := []byte(`{"a":1}`)
	on.Add(context.Background(), Call{Path: PathChat, Tool: "echo", Began: time.Now(), Outcome: OK, Args: buf})
	buf[5] = '2'
	if c, _ = on.List(0, 1); c[0].Arguments != `{"a":1}` {
		t.Fatalf("kept the caller's buffer: %s", c[0].Arguments)
	}
}

func TestWhoAndFields(t *testing.T) {
	l := newLog(t, 8, false)
	key := "zest-test-key"
	ctx := NewCallers(keyauth.Keys{API: key}).Context(metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+key)))
	began := time.Now().Add(-30 * time.Millisecond)
	l.Add(ctx, Call{Path: PathMCP, Server: "srv", Tool: "echo", ChatName: "mcp_srv__echo", Preset: "p", Began: began, Outcome: Error, Err: errors.New(strings.Repeat("x", 1000))})
	l.Add(ctx, Call{Path: PathMCP, Server: "srv", Tool: "echo", ChatName: "echo", Began: began, Outcome: ToolError,
		Result: []byte(`{"isError":true,"content":[{"type":"text","text":"bad input"}]}`)})
	l.Add(context.Background(), Call{Path: PathChat, Server: "srv", Tool: "echo", Began: began, Outcome: Error, Err: errors.New("e"), Message: "the message"})
	calls, _ := l.List(0, 0)
	first, second, third := calls[2], calls[1], calls[0]
	if first.Who != Who(key) || len(first.Who) != 12 || strings.Contains(first.Who, key) || second.Who != first.Who {
		t.Errorf("who = %q, %q", first.Who, second.Who)
	}
	if third.Who != Anonymous {
		t.Errorf("no key: who = %q", third.Who)
	}
	if first.ChatName != "mcp_srv__echo" || second.ChatName != "" || first.Preset != "p" || first.Duration < 30*time.Millisecond || !first.Time.Equal(began) {
		t.Errorf("fields: %+v / %+v", first, second)
	}
	if len(first.Error) != MessageBytes || second.Error != "bad input" || third.Error != "the message" {
		t.Errorf("errors: %q / %q / %q", first.Error, second.Error, third.Error)
	}
}

func TestBuiltinServer(t *testing.T) {
	if BuiltinServer != serverconfig.LemonadeProvider {
		t.Fatalf("BuiltinServer %q, provider id %q", BuiltinServer, serverconfig.LemonadeProvider)
	}
}

func TestFromUpstream(t *testing.T) {
	want := map[string]string{upstream.OutcomeOK: OK, upstream.OutcomeIsError: ToolError, upstream.OutcomeInputRequired: InputRequired,
		upstream.OutcomeRPCError: Error, upstream.OutcomeFailed: Error, upstream.OutcomeTimeout: Error, upstream.OutcomeCanceled: Error}
	for in, out := range want {
		if got := FromUpstream(in); got != out {
			t.Errorf("FromUpstream(%s) = %s, want %s", in, got, out)
		}
	}
}

// A nil log records and lists nothing (a path built without one).
func TestNilLog(t *testing.T) {
	var l *Log
	l.Add(context.Background(), Call{Path: PathMCP})
	if calls, latest := l.List(0, 0); calls != nil || latest != 0 || l.Details() || l.Size() != 0 {
		t.Fatal("a nil log is not empty")
	}
}

// BenchmarkAdd is the cost a tools/call pays for its record with details off.
func BenchmarkAdd(b *testing.B) {
	l, _ := New(DefaultSize, false)
	ctx := NewCallers(keyauth.Keys{API: "zest-bench-key"}).Context(metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer zest-bench-key")))
	params := []byte(`{"name":"echo","arguments":{"text":"hi"}}`)
	b.ReportAllocs()
	for b.Loop() {
		l.Add(ctx, Call{Path: PathMCP, Server: "srv", Tool: "echo", Began: time.Now(), Outcome: OK, Params: params, Result: params})
	}
}

type sinkRecords struct {
	details bool
	got     []Record
}

func (s *sinkRecords) Details() bool                      { return s.details }
func (s *sinkRecords) Record(_ context.Context, r Record) { s.got = append(s.got, r) }

// TestSinkDetails: the sink gets every record, with arguments and results only when it asks
// for them, whatever the ring keeps; the ring keeps them only with its own details on.
func TestSinkDetails(t *testing.T) {
	for _, c := range []struct{ ring, sink bool }{{false, true}, {true, false}, {false, false}} {
		s := &sinkRecords{details: c.sink}
		l, _ := New(4, c.ring, WithSink(s))
		l.Add(t.Context(), Call{Path: PathMCP, Server: "s", Tool: "t", Began: time.Now(), Outcome: OK, Args: []byte(`{"a":1}`), Result: []byte(`{}`)})
		ring, _ := l.List(0, 0)
		if len(s.got) != 1 || (s.got[0].Arguments != "") != c.sink || (s.got[0].Result != "") != c.sink {
			t.Fatalf("%+v: sink got %+v", c, s.got)
		}
		if (ring[0].Arguments != "") != c.ring || s.got[0].Server != "s" {
			t.Fatalf("%+v: ring has %+v", c, ring[0])
		}
	}
}
