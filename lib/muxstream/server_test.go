package muxstream

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/workpool"
)

// fakeServerStream feeds requests from in and records what is sent.
type fakeServerStream struct {
	ctx  context.Context
	in   chan req
	mu   sync.Mutex
	sent []resp
	got  chan resp
}

func (f *fakeServerStream) Context() context.Context { return f.ctx }
func (f *fakeServerStream) Recv() (req, error) {
	select {
	case r, ok := <-f.in:
		if !ok {
			return req{}, io.EOF
		}
		return r, nil
	case <-f.ctx.Done():
		return req{}, f.ctx.Err()
	}
}
func (f *fakeServerStream) Send(r resp) error {
	f.mu.Lock()
	f.sent = append(f.sent, r)
	f.mu.Unlock()
	f.got <- r
	return nil
}

// handled calls answer with their id; id 100 and up wait for their context and report why
// it ended on ended.
func newServer(drain chan struct{}, ended chan error) *Server[req, resp] {
	return &Server[req, resp]{
		CallID:   func(r req) uint64 { return r.id },
		IsCancel: func(r req) bool { return r.cancel },
		Timeout: func(r req) time.Duration {
			if r.id == 200 {
				return 50 * time.Millisecond
			}
			return 0
		},
		Handle: func(ctx context.Context, r req, send func(resp) error) {
			if r.id >= 100 {
				<-ctx.Done()
				ended <- ctx.Err()
				return
			}
			_ = send(resp{id: r.id, last: true})
		},
		Duplicate: func(id uint64) resp { return resp{id: id, last: true, err: errors.New("duplicate")} },
		Pool:      workpool.New(4),
		Drain:     drain,
		Drained:   errors.New("drained"),
	}
}

func TestServerCallsCancelTimeoutAndEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	st := &fakeServerStream{ctx: ctx, in: make(chan req, 16), got: make(chan resp, 16)}
	ended := make(chan error, 4)
	s := newServer(nil, ended)
	done := make(chan error, 1)
	go func() { done <- s.Serve(st) }()

	st.in <- req{id: 1}
	st.in <- req{id: 2}
	seen := map[uint64]bool{}
	for range 2 {
		r := <-st.got
		seen[r.id] = true
	}
	if !seen[1] || !seen[2] {
		t.Fatalf("answers %v", seen)
	}
	st.in <- req{id: 100}
	st.in <- req{id: 100} // the same id while in flight
	if r := <-st.got; r.id != 100 || r.err == nil {
		t.Fatalf("a duplicate id: %+v", r)
	}
	st.in <- req{id: 100, cancel: true}
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call ended with %v", err)
	}
	st.in <- req{id: 200}
	if err := <-ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call past its timeout ended with %v", err)
	}
	st.in <- req{id: 101}
	cancel() // the stream breaks: the call in flight is cancelled, Serve returns after it
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("call on a broken stream ended with %v", err)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve = %v", err)
	}
}

func TestServerDrain(t *testing.T) {
	st := &fakeServerStream{ctx: context.Background(), in: make(chan req, 16), got: make(chan resp, 16)}
	drain := make(chan struct{})
	s := newServer(drain, make(chan error, 4))
	done := make(chan error, 1)
	go func() { done <- s.Serve(st) }()
	st.in <- req{id: 1}
	<-st.got
	close(drain)
	select {
	case err := <-done:
		if err == nil || err.Error() != "drained" {
			t.Fatalf("Serve = %v, want Drained", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a drained stream stayed open")
	}
	st.in <- req{id: 2} // after the drain: dropped, nothing sent
	time.Sleep(50 * time.Millisecond)
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.sent) != 1 {
		t.Fatalf("sent after the drain: %+v", st.sent)
	}
}
