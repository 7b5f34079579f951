// Package pipeserve is the server side of PipeService.Pipe: the edge's POST /mcp exchanges,
// many at once over one stream. Each is authorized on its own (its caller's Authorization
// value, McpService's rule: the API key), runs on a reused goroutine, and answers with items
// that name it; the last item of an exchange is marked. A cancel request, or the stream
// ending, cancels the exchanges' contexts; a draining server ends its streams once their
// exchanges in flight have answered.
package pipeserve

import (
	"context"

	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/muxstream"
	"github.com/zestmcp/zest/lib/workpool"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Exchanger answers one POST /mcp body, sending its items to send (McpService.Exchange).
type Exchanger interface {
	ExchangeTo(ctx context.Context, req *mcpgatewayv1.ExchangeRequest, send func(*mcpgatewayv1.ExchangeResponse) error) error
}

// Server implements PipeService.
type Server struct {
	mcpgatewayv1.UnimplementedPipeServiceServer
	guard    keyauth.Guard
	exchange Exchanger
	mux      muxstream.Server[*mcpgatewayv1.PipeRequest, *mcpgatewayv1.PipeResponse]
}

// New returns a server whose exchanges are checked by guard's keys and run on pool; its
// streams end (after their exchanges in flight) when drain closes.
func New(guard keyauth.Guard, exchange Exchanger, pool *workpool.Pool, drain <-chan struct{}) *Server {
	s := &Server{guard: guard, exchange: exchange}
	s.mux = muxstream.Server[*mcpgatewayv1.PipeRequest, *mcpgatewayv1.PipeResponse]{
		CallID:   (*mcpgatewayv1.PipeRequest).GetCallId,
		IsCancel: (*mcpgatewayv1.PipeRequest).GetCancel,
		Handle:   s.serve,
		Duplicate: func(id uint64) *mcpgatewayv1.PipeResponse {
			return failure(id, status.Errorf(codes.InvalidArgument, "pipe: call id %d is already in flight", id))
		},
		Pool:    pool,
		Drain:   drain,
		Drained: status.Error(codes.Unavailable, "pipe: mcpgateway is shutting down"),
	}
	return s
}

// Pipe serves one stream (lib/muxstream.Server).
func (s *Server) Pipe(stream mcpgatewayv1.PipeService_PipeServer) error { return s.mux.Serve(stream) }

// serve runs one exchange and sends its items; the last one is marked.
func (s *Server) serve(ctx context.Context, req *mcpgatewayv1.PipeRequest, send func(*mcpgatewayv1.PipeResponse) error) {
	id := req.GetCallId()
	switch k := req.GetKind().(type) {
	case *mcpgatewayv1.PipeRequest_Exchange:
		if err := s.guard.Authorize(req.GetAuthorization(), false); err != nil {
			_ = send(failure(id, err))
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
			return send(&mcpgatewayv1.PipeResponse{CallId: id, Kind: &mcpgatewayv1.PipeResponse_Exchange{Exchange: item}, Last: ended})
		})
		switch {
		case ctx.Err() != nil:
			// cancelled: the client forgot the call, or the stream is gone
		case err != nil && !ended:
			_ = send(failure(id, err))
		case !ended:
			_ = send(&mcpgatewayv1.PipeResponse{CallId: id, Last: true}) // no response (a notification)
		}
	default:
		_ = send(failure(id, status.Error(codes.InvalidArgument, "pipe: a request with neither exchange nor cancel")))
	}
}

func failure(id uint64, err error) *mcpgatewayv1.PipeResponse {
	st := status.Convert(err)
	return &mcpgatewayv1.PipeResponse{CallId: id, Last: true,
		Kind: &mcpgatewayv1.PipeResponse_Failure{Failure: &mcpgatewayv1.PipeStatus{Code: int32(st.Code()), Message: st.Message()}}}
}
