// Package toolhostpipe is the client side of ToolHostService.Pipe: many concurrent calls
// multiplexed on one long-lived stream, which costs far less per call than a unary RPC. The
// stream opens on first use and again after it breaks; calls in flight when it breaks fail
// with codes.Unavailable.
package toolhostpipe

import (
	"context"
	"errors"
	"sync"

	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Pipe multiplexes calls to one tool host.
type Pipe struct {
	client toolhostv1.ToolHostServiceClient

	mu      sync.Mutex
	stream  *stream
	next    uint64
	closed  bool
	pending map[uint64]chan *toolhostv1.PipeResponse
}

type stream struct {
	s      toolhostv1.ToolHostService_PipeClient
	cancel context.CancelFunc
	sendMu sync.Mutex
}

// New returns a pipe over client; Close ends it.
func New(client toolhostv1.ToolHostServiceClient) *Pipe {
	return &Pipe{client: client, pending: map[uint64]chan *toolhostv1.PipeResponse{}}
}

// open returns the current stream, opening one if needed.
func (p *Pipe) open() (*stream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, status.Error(codes.Canceled, "pipe closed")
	}
	if p.stream != nil {
		return p.stream, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := p.client.Pipe(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	st := &stream{s: s, cancel: cancel}
	p.stream = st
	go p.recvLoop(st)
	return st, nil
}

func (p *Pipe) recvLoop(st *stream) {
	for {
		r, err := st.s.Recv()
		if err != nil {
			p.mu.Lock()
			if p.stream == st {
				p.stream = nil
			}
			fail := &toolhostv1.PipeResponse{Kind: &toolhostv1.PipeResponse_Failure{Failure: &toolhostv1.PipeFailure{
				Code: int32(codes.Unavailable), Message: "tool host pipe broke: " + status.Convert(err).Message()}}}
			for id, ch := range p.pending {
				delete(p.pending, id)
				ch <- fail
			}
			p.mu.Unlock()
			st.cancel()
			return
		}
		p.mu.Lock()
		ch := p.pending[r.GetCallId()]
		if r.GetNotification() == nil {
			delete(p.pending, r.GetCallId())
		}
		p.mu.Unlock()
		// One slot is kept for the answer, so this never blocks: a progress notification the
		// caller is too slow for is dropped, the answer never is.
		if ch != nil && (r.GetNotification() == nil || len(ch) < cap(ch)-1) {
			ch <- r
		}
	}
}

// Call runs one request. onProgress, when not nil, receives the call's progress
// notifications. Errors are gRPC statuses, as Call's would be.
func (p *Pipe) Call(ctx context.Context, req *toolhostv1.CallRequest, onProgress func([]byte)) (*toolhostv1.CallResponse, error) {
	st, err := p.open()
	if err != nil {
		return nil, err
	}
	ch := make(chan *toolhostv1.PipeResponse, 16)
	p.mu.Lock()
	p.next++
	id := p.next
	p.pending[id] = ch
	p.mu.Unlock()

	st.sendMu.Lock()
	err = st.s.Send(&toolhostv1.PipeRequest{CallId: id, Call: req, Progress: onProgress != nil})
	st.sendMu.Unlock()
	if err != nil {
		p.forget(id)
		return nil, status.Error(codes.Unavailable, "tool host pipe: "+err.Error())
	}
	for {
		select {
		case r := <-ch:
			switch k := r.GetKind().(type) {
			case *toolhostv1.PipeResponse_Notification:
				if onProgress != nil {
					onProgress(k.Notification)
				}
				continue
			case *toolhostv1.PipeResponse_Answer:
				return k.Answer, nil
			case *toolhostv1.PipeResponse_Failure:
				return nil, status.Error(codes.Code(k.Failure.GetCode()), k.Failure.GetMessage())
			}
			return nil, status.Error(codes.Internal, "tool host pipe: empty response")
		case <-ctx.Done():
			p.forget(id)
			st.sendMu.Lock()
			_ = st.s.Send(&toolhostv1.PipeRequest{CallId: id, Cancel: true})
			st.sendMu.Unlock()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, status.Error(codes.DeadlineExceeded, ctx.Err().Error())
			}
			return nil, status.Error(codes.Canceled, ctx.Err().Error())
		}
	}
}

func (p *Pipe) forget(id uint64) {
	p.mu.Lock()
	delete(p.pending, id)
	p.mu.Unlock()
}

// Close ends the stream; calls in flight fail.
func (p *Pipe) Close() {
	p.mu.Lock()
	p.closed = true
	st := p.stream
	p.mu.Unlock()
	if st != nil {
		st.cancel()
	}
}
