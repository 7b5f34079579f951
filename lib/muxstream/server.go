package muxstream

import (
	"context"
	"sync"
	"time"

	"github.com/zestmcp/zest/lib/workpool"
)

// ServerStream is the server side of a bidirectional stream.
type ServerStream[Req, Resp any] interface {
	Send(Resp) error
	Recv() (Req, error)
	Context() context.Context
}

// Server serves the calls of one stream at a time: each request starts a call (or cancels
// one), calls run at once on Pool, their responses are sent as they come. It is the server
// side of Client, shared by every multiplexed stream in Zest.
type Server[Req, Resp any] struct {
	// CallID is the call a request belongs to.
	CallID func(Req) uint64
	// IsCancel reports whether a request abandons its call rather than starting one.
	IsCancel func(Req) bool
	// Timeout is the call's deadline as a timeout (0: none); nil means none.
	Timeout func(Req) time.Duration
	// Handle runs one call and sends its responses through send, which serializes them on
	// the stream. Once ctx is done nothing more should be sent: the client has given the
	// call up or the stream is gone.
	Handle func(ctx context.Context, req Req, send func(Resp) error)
	// Duplicate is the response to a request whose call id is already in flight.
	Duplicate func(id uint64) Resp
	// Pool runs the calls.
	Pool *workpool.Pool
	// Drain, when it closes (the server's shutdown), ends every stream once its calls in
	// flight have answered: a gRPC server's graceful stop waits for its streams, and a
	// client would otherwise keep them open. Calls that arrive meanwhile are dropped (their
	// client fails them when the stream ends).
	Drain <-chan struct{}
	// Drained is what Serve returns after a drain.
	Drained error
}

type served[Req, Resp any] struct {
	stream ServerStream[Req, Resp]
	sendMu sync.Mutex

	mu       sync.Mutex
	calls    map[uint64]context.CancelFunc
	draining bool
	wg       sync.WaitGroup
}

func (p *served[Req, Resp]) send(r Resp) error {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	return p.stream.Send(r)
}

// Serve serves stream until the client closes it (nil), it breaks (its context's error), or
// the server drains (Drained). Calls in flight when the stream ends have their contexts
// cancelled; Serve returns once every call has ended, so nothing is sent after it returns.
func (s *Server[Req, Resp]) Serve(stream ServerStream[Req, Resp]) error {
	p := &served[Req, Resp]{stream: stream, calls: map[uint64]context.CancelFunc{}}
	recvDone := make(chan error, 1)
	go func() { recvDone <- s.recvLoop(p) }()
	select {
	case err := <-recvDone:
		return err
	case <-s.Drain: // nil when never set: blocks forever
		p.mu.Lock()
		p.draining = true // calls that arrive now are dropped
		p.mu.Unlock()
		p.wg.Wait()
		return s.Drained
	}
}

func (s *Server[Req, Resp]) recvLoop(p *served[Req, Resp]) error {
	ctx := p.stream.Context()
	defer func() {
		p.mu.Lock()
		for _, cancel := range p.calls {
			cancel()
		}
		p.mu.Unlock()
		p.wg.Wait()
	}()
	for {
		req, err := p.stream.Recv()
		if err != nil {
			return ctx.Err() // nil when the client closed its side (io.EOF)
		}
		id := s.CallID(req)
		if s.IsCancel(req) {
			p.mu.Lock()
			if cancel := p.calls[id]; cancel != nil {
				cancel()
			}
			p.mu.Unlock()
			continue
		}
		var callCtx context.Context
		var cancel context.CancelFunc
		if t := time.Duration(0); s.Timeout != nil {
			if t = s.Timeout(req); t > 0 {
				callCtx, cancel = context.WithTimeout(ctx, t)
			}
		}
		if callCtx == nil {
			callCtx, cancel = context.WithCancel(ctx)
		}
		p.mu.Lock()
		if p.draining { // Serve is returning: nothing may be sent on the stream any more
			p.mu.Unlock()
			cancel()
			continue
		}
		if _, dup := p.calls[id]; dup {
			p.mu.Unlock()
			cancel()
			_ = p.send(s.Duplicate(id))
			continue
		}
		p.calls[id] = cancel
		p.wg.Add(1) // under p.mu, before draining is set: Wait never races an Add
		p.mu.Unlock()
		s.Pool.Go(func() {
			defer p.wg.Done()
			s.Handle(callCtx, req, p.send)
			p.mu.Lock()
			delete(p.calls, id)
			p.mu.Unlock()
			cancel()
		})
	}
}
