// Package pipeserve is the server side of PipeService.Pipe: the edge's POST /mcp exchanges,
// many at once over one stream. Each is authorized on its own (its caller's Authorization
// value, McpService's rule: the API key), runs on a reused goroutine, and answers with items
// that name it; the last item of an exchange is marked. A cancel request, or the stream
// ending, cancels the exchanges' contexts; a draining server ends its streams once their
// exchanges in flight have answered.
package pipeserve

import (
	"context"
	"sync"

	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/workpool"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Exchanger answers one POST /mcp body, sending its items to send (McpService.Exchange).
type Exchanger interface {
	ExchangeTo(ctx context.Context, req *mcpgatewayv1.ExchangeRequest, send func(*mcpgatewayv1.ExchangeResponse) error) error
}

// Workers is how many goroutines are kept to run calls (lib/workpool).
const Workers = 256

// Server implements PipeService.
type Server struct {
	mcpgatewayv1.UnimplementedPipeServiceServer
	guard    keyauth.Guard
	exchange Exchanger
	pool     *workpool.Pool
	drain    <-chan struct{}
}

// New returns a server whose calls are checked by guard's keys; its streams end (after their
// calls in flight) when drain closes.
func New(guard keyauth.Guard, exchange Exchanger, drain <-chan struct{}) *Server {
	return &Server{guard: guard, exchange: exchange, pool: workpool.New(Workers), drain: drain}
}

// pipe is one open stream.
type pipe struct {
	stream mcpgatewayv1.PipeService_PipeServer
	sendMu sync.Mutex

	mu       sync.Mutex
	calls    map[uint64]context.CancelFunc
	draining bool
	wg       sync.WaitGroup
}

func (p *pipe) send(r *mcpgatewayv1.PipeResponse) error {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	return p.stream.Send(r)
}

// Pipe serves one stream until the client closes it, it breaks, or the server drains (its
// calls in flight answer first: the graceful stop waits for streams).
func (s *Server) Pipe(stream mcpgatewayv1.PipeService_PipeServer) error {
	p := &pipe{stream: stream, calls: map[uint64]context.CancelFunc{}}
	recvDone := make(chan error, 1)
	go func() { recvDone <- s.recvLoop(stream.Context(), p) }()
	select {
	case err := <-recvDone:
		return err
	case <-s.drain: // nil when not draining ever: blocks forever
		p.mu.Lock()
		p.draining = true
		p.mu.Unlock()
		p.wg.Wait()
		return status.Error(codes.Unavailable, "pipe: mcpgateway is shutting down")
	}
}

func (s *Server) recvLoop(ctx context.Context, p *pipe) error {
	defer func() {
		p.mu.Lock()
		for _, cancel := range p.calls {
			cancel()
		}
		p.mu.Unlock()
		p.wg.Wait() // a handler never outlives its stream
	}()
	for {
		req, err := p.stream.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			return nil // the client closed its side (io.EOF) or the stream broke
		}
		id := req.GetCallId()
		if req.GetCancel() {
			p.mu.Lock()
			if cancel := p.calls[id]; cancel != nil {
				cancel()
			}
			p.mu.Unlock()
			continue
		}
		callCtx, cancel := context.WithCancel(ctx)
		p.mu.Lock()
		if p.draining {
			// Pipe is returning (or has returned): nothing may be sent on the stream any
			// more. The edge fails this exchange with Unavailable when the stream ends.
			p.mu.Unlock()
			cancel()
			continue
		}
		if _, dup := p.calls[id]; dup {
			p.mu.Unlock()
			cancel()
			_ = p.send(failure(id, status.Errorf(codes.InvalidArgument, "pipe: call id %d is already in flight", id)))
			continue
		}
		p.calls[id] = cancel
		p.wg.Add(1) // under p.mu, before draining is set: Wait never races an Add
		p.mu.Unlock()
		s.pool.Go(func() {
			defer p.wg.Done()
			s.serve(callCtx, p, id, req)
			p.mu.Lock()
			delete(p.calls, id)
			p.mu.Unlock()
			cancel()
		})
	}
}

// serve runs one call and sends its items; the last one is marked.
func (s *Server) serve(ctx context.Context, p *pipe, id uint64, req *mcpgatewayv1.PipeRequest) {
	switch k := req.GetKind().(type) {
	case *mcpgatewayv1.PipeRequest_Exchange:
		if err := s.guard.Authorize(req.GetAuthorization(), false); err != nil {
			_ = p.send(failure(id, err))
			return
		}
		ended := false
		err := s.exchange.ExchangeTo(ctx, k.Exchange, func(item *mcpgatewayv1.ExchangeResponse) error {
			if ended {
				return status.Error(codes.Internal, "pipe: an item after the final one")
			}
			ended = item.GetFinal()
			if err := ctx.Err(); err != nil {
				return status.FromContextError(err).Err()
			}
			return p.send(&mcpgatewayv1.PipeResponse{CallId: id, Kind: &mcpgatewayv1.PipeResponse_Exchange{Exchange: item}, Last: ended})
		})
		switch {
		case ctx.Err() != nil:
			// cancelled: the client forgot the call, or the stream is gone
		case err != nil && !ended:
			_ = p.send(failure(id, err))
		case !ended:
			_ = p.send(&mcpgatewayv1.PipeResponse{CallId: id, Last: true}) // no response (a notification)
		}
	default:
		_ = p.send(failure(id, status.Error(codes.InvalidArgument, "pipe: a request with neither exchange nor cancel")))
	}
}

func failure(id uint64, err error) *mcpgatewayv1.PipeResponse {
	st := status.Convert(err)
	return &mcpgatewayv1.PipeResponse{CallId: id, Last: true,
		Kind: &mcpgatewayv1.PipeResponse_Failure{Failure: &mcpgatewayv1.PipeStatus{Code: int32(st.Code()), Message: st.Message()}}}
}
