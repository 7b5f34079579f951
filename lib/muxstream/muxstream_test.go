package muxstream

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"
)

type req struct {
	id     uint64
	cancel bool
	n      int // how many non-last responses to answer with
}

type resp struct {
	id   uint64
	last bool
	n    int
	err  error
}

// fakeStream echoes each request as n non-last responses and one last response.
type fakeStream struct {
	out    chan resp
	mu     sync.Mutex
	sent   []req
	broken chan struct{}
}

func (f *fakeStream) Send(r req) error {
	f.mu.Lock()
	f.sent = append(f.sent, r)
	f.mu.Unlock()
	if r.cancel {
		return nil
	}
	go func() {
		for i := range r.n {
			f.out <- resp{id: r.id, n: i}
		}
		f.out <- resp{id: r.id, last: true, n: r.n}
	}()
	return nil
}

func (f *fakeStream) Recv() (resp, error) {
	select {
	case r := <-f.out:
		return r, nil
	case <-f.broken:
		return resp{}, io.ErrUnexpectedEOF
	}
}

func newClient(keep bool) (*Client[req, resp], *fakeStream, *int) {
	f := &fakeStream{out: make(chan resp, 1024), broken: make(chan struct{})}
	opens := 0
	c := New(Config[req, resp]{
		Open:   func(context.Context) (Stream[req, resp], error) { opens++; return f, nil },
		CallID: func(r resp) uint64 { return r.id },
		Last:   func(r resp) bool { return r.last },
		Keep:   func(resp) bool { return keep },
		Broken: func(err error) resp { return resp{last: true, err: err} },
		Cancel: func(id uint64) req { return req{id: id, cancel: true} },
	})
	return c, f, &opens
}

func TestCallsGetTheirOwnResponses(t *testing.T) {
	c, _, opens := newClient(true)
	defer c.Close()
	var wg sync.WaitGroup
	for g := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, ch, err := c.Call(func(id uint64) req { return req{id: id, n: g % 5} }, 8)
			if err != nil {
				t.Error(err)
				return
			}
			for i := 0; ; i++ {
				r := <-ch
				if r.id != id || r.n != i {
					t.Errorf("call %d got %+v at %d", id, r, i)
					return
				}
				if r.last {
					if i != g%5 {
						t.Errorf("call %d ended after %d responses, want %d", id, i, g%5)
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	if *opens != 1 {
		t.Fatalf("opened %d streams, want 1", *opens)
	}
}

func TestSlowCallerFailsWithoutStallingOthers(t *testing.T) {
	c, f, _ := newClient(true)
	defer c.Close()
	slowID, slow, _ := c.Call(func(id uint64) req { return req{id: id, n: 10} }, 4) // never read until the end
	_, fast, _ := c.Call(func(id uint64) req { return req{id: id, n: 0} }, 4)
	select {
	case r := <-fast:
		if !r.last {
			t.Fatalf("fast got %+v", r)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a slow caller stalled the stream")
	}
	var last resp
	for r := range slow {
		last = r
		if r.last {
			break
		}
	}
	if !errors.Is(last.err, ErrSlowCaller) {
		t.Fatalf("slow caller ended with %+v", last)
	}
	time.Sleep(10 * time.Millisecond)
	f.mu.Lock()
	defer f.mu.Unlock()
	found := false
	for _, s := range f.sent {
		found = found || (s.cancel && s.id == slowID)
	}
	if !found {
		t.Fatal("the server was not told to cancel the slow call")
	}
}

func TestBrokenStreamFailsCallsInFlightAndReopens(t *testing.T) {
	c, f, opens := newClient(true)
	defer c.Close()
	f.out = make(chan resp) // nothing answers
	_, ch, _ := c.Call(func(id uint64) req { return req{id: id, n: 0, cancel: true} }, 4)
	close(f.broken)
	select {
	case r := <-ch:
		if !r.last || !errors.Is(r.err, io.ErrUnexpectedEOF) {
			t.Fatalf("got %+v", r)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("call not failed when the stream broke")
	}
	time.Sleep(10 * time.Millisecond)
	f.broken = make(chan struct{})
	f.out = make(chan resp, 16)
	_, ch, err := c.Call(func(id uint64) req { return req{id: id} }, 4)
	if err != nil || !(<-ch).last || *opens != 2 {
		t.Fatalf("reopen: %v, opens %d", err, *opens)
	}
}
