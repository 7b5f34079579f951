package host

import (
	"context"
	"errors"
	"io"
	"sync"

	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"google.golang.org/grpc/status"
)

// Pipe implements ToolHostService: calls multiplexed on one stream. Each call runs on a
// goroutine of the host's pool (lib/workpool); answers are sent as they come, in any order.
func (h *Host) Pipe(stream toolhostv1.ToolHostService_PipeServer) error {
	ctx, cancelAll := context.WithCancel(stream.Context())
	defer cancelAll()
	// Sends are serialized by a mutex rather than handed to a sender goroutine: one goroutine
	// handoff less per call (measured: about 0.03 ms of p50 at concurrency 1).
	var (
		sendMu  sync.Mutex
		sendErr error
	)
	send := func(r *toolhostv1.PipeResponse) {
		sendMu.Lock()
		defer sendMu.Unlock()
		if sendErr == nil {
			sendErr = stream.Send(r)
		}
	}

	var (
		mu      sync.Mutex
		cancels = map[uint64]context.CancelFunc{}
		wg      sync.WaitGroup
	)
	type recv struct {
		req *toolhostv1.PipeRequest
		err error
	}
	reqs := make(chan recv)
	go func() {
		for {
			req, err := stream.Recv()
			select {
			case reqs <- recv{req, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var recvErr error
loop:
	for {
		var req *toolhostv1.PipeRequest
		select {
		case <-h.draining: // shutting down: answer what is in flight, then end the stream
			break loop
		case r := <-reqs:
			if r.err != nil {
				if !errors.Is(r.err, io.EOF) {
					recvErr = r.err
				}
				break loop
			}
			req = r.req
		}
		id := req.GetCallId()
		if req.GetCancel() {
			mu.Lock()
			if c := cancels[id]; c != nil {
				c()
			}
			mu.Unlock()
			continue
		}
		cctx, cancel := context.WithCancel(ctx)
		mu.Lock()
		cancels[id] = cancel
		mu.Unlock()
		wg.Add(1)
		h.pool.Go(func() {
			defer wg.Done()
			var onProgress func([]byte)
			if req.GetProgress() {
				onProgress = func(n []byte) {
					send(&toolhostv1.PipeResponse{CallId: id, Kind: &toolhostv1.PipeResponse_Notification{Notification: n}})
				}
			}
			answer, err := h.call(cctx, req.GetCall(), onProgress)
			mu.Lock()
			delete(cancels, id)
			mu.Unlock()
			cancel()
			resp := &toolhostv1.PipeResponse{CallId: id}
			if err != nil {
				st := status.Convert(err)
				resp.Kind = &toolhostv1.PipeResponse_Failure{Failure: &toolhostv1.PipeFailure{Code: int32(st.Code()), Message: st.Message()}}
			} else {
				resp.Kind = &toolhostv1.PipeResponse_Answer{Answer: answer}
			}
			send(resp)
		})
	}
	// The client closed its side: let the calls in flight answer (a cancelled client
	// context has cancelled them already), then close.
	wg.Wait()
	if sendErr != nil {
		return sendErr
	}
	return recvErr
}
