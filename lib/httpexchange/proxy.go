package httpexchange

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/zestmcp/zest/lib/httpstatus"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Proxy serves requests by HttpService.Exchange.
type Proxy struct {
	Client mcpgatewayv1.HttpServiceClient
	Log    *slog.Logger
	// Admit counts the request as a says (a weight, a stream held open) before mcpgateway
	// does the work: release undoes it when the response ends; false means it wrote the
	// refusal. Nil admits everything.
	Admit func(w http.ResponseWriter, r *http.Request, a *mcpgatewayv1.Admit) (release func(), ok bool)
	// WriteError writes an error the edge answers in mcpgateway's place (the body could not
	// be read, mcpgateway cannot be reached) in the route family's shape.
	WriteError func(w http.ResponseWriter, code int, msg string)
	// WriteLimited writes a ResourceExhausted refusal in the family's shape (Retry-After set).
	WriteLimited func(w http.ResponseWriter, msg string, retryAfterMs int64)
	// WriteKeyError writes a key or permission refusal (401, 403) in the edge's own shape: the
	// same answer whichever of the edge and mcpgateway refused.
	WriteKeyError func(w http.ResponseWriter, code int, msg string)
	// ReadBody reads the body within the edge's bound; BodyError answers a body it could not
	// read (413 past the bound).
	ReadBody  func(r *http.Request) ([]byte, error)
	BodyError func(w http.ResponseWriter, err error)
}

// ServeHTTP reads the body (within the edge's bound), sends the request and relays the answer.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := p.ReadBody(r)
	if err != nil {
		p.BodyError(w, err)
		return
	}
	ctx, cancel := context.WithCancel(outgoing(r))
	defer cancel()
	stream, err := p.Client.Exchange(ctx)
	if err == nil {
		err = stream.Send(&mcpgatewayv1.HttpServiceExchangeRequest{Kind: &mcpgatewayv1.HttpServiceExchangeRequest_Request{Request: &mcpgatewayv1.HttpRequest{
			Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery,
			Headers: Headers(r.Header, "Authorization"), // the key goes as the call's metadata
			Body:    body}}})
		if errors.Is(err, io.EOF) {
			// mcpgateway ended the call before reading the request (it refused it: the
			// key, a limit): its status comes with Recv, below, not with Send.
			err = nil
		}
	}
	if err != nil {
		p.writeStatus(w, r, err)
		return
	}
	var (
		head     *mcpgatewayv1.HttpResponseHead
		releases []func()
	)
	defer func() {
		for _, release := range releases {
			release()
		}
	}()
	flusher, _ := w.(http.Flusher)
	for {
		item, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			if head == nil {
				p.writeStatus(w, r, status.Error(codes.Internal, "mcpgateway ended the exchange without a response"))
			}
			return
		}
		if err != nil {
			if head == nil {
				p.writeStatus(w, r, err)
				return
			}
			if status.Code(err) != codes.Canceled {
				p.log().WarnContext(r.Context(), "exchange broke after the response started", "err", err)
				if b := head.GetIfBroken(); len(b) > 0 {
					if _, err := w.Write(b); err == nil && flusher != nil {
						flusher.Flush()
					}
				}
			}
			return
		}
		switch k := item.GetKind().(type) {
		case *mcpgatewayv1.HttpServiceExchangeResponse_Admit:
			if head != nil {
				p.writeStatus(w, r, status.Error(codes.Internal, "mcpgateway asked for an admission after its response started"))
				return
			}
			if p.Admit != nil {
				release, ok := p.Admit(w, r, k.Admit)
				if !ok {
					return // written; cancel ends the exchange
				}
				releases = append(releases, release)
			}
			if err := stream.Send(&mcpgatewayv1.HttpServiceExchangeRequest{Kind: &mcpgatewayv1.HttpServiceExchangeRequest_Admission{Admission: &mcpgatewayv1.Admission{}}}); err != nil {
				p.writeStatus(w, r, err)
				return
			}
		case *mcpgatewayv1.HttpServiceExchangeResponse_Head:
			head = k.Head
			SetHeaders(w.Header(), head.GetHeaders())
			whole := isWhole(w.Header(), head.GetBody())
			if whole {
				// Written when the handler returns, after the releases, so a client that
				// has read its answer finds its budgets free; net/http sets the length
				// (or chunks a long body, ended then).
				w.Header().Del("Content-Length")
			}
			w.WriteHeader(int(head.GetStatus()))
			if b := head.GetBody(); len(b) > 0 {
				if _, err := w.Write(b); err != nil {
					return // the client went away; cancel ends the exchange
				}
			}
			if flusher != nil && !whole {
				flusher.Flush()
			}
		case *mcpgatewayv1.HttpServiceExchangeResponse_Body:
			if head == nil {
				head = &mcpgatewayv1.HttpResponseHead{Status: http.StatusOK}
			}
			if _, err := w.Write(k.Body); err != nil {
				return // the client went away; cancel ends the exchange
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
}

// isWhole reports whether a head carries its whole body: its Content-Length is the body's
// length (the exchange's writer says so of a handler that wrote its answer and returned).
func isWhole(h http.Header, body []byte) bool {
	v := h.Values("Content-Length")
	return len(v) == 1 && v[0] == strconv.Itoa(len(body))
}

// outgoing carries the caller's key to mcpgateway as the call's metadata.
func outgoing(r *http.Request) context.Context {
	ctx := r.Context()
	if a := r.Header.Get("Authorization"); a != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", a)
	}
	return ctx
}

func (p *Proxy) log() *slog.Logger {
	if p.Log == nil {
		return slog.Default()
	}
	return p.Log
}

// writeStatus writes a gRPC error of the exchange itself (mcpgateway refused the call, or
// cannot be reached) with the status of the one table (httpstatus). Key and permission
// refusals keep the edge's own shape (the same answer whichever of the edge and mcpgateway
// refused); a call its client cancelled is not answered.
func (p *Proxy) writeStatus(w http.ResponseWriter, r *http.Request, err error) {
	st := status.Convert(err)
	code, msg := httpstatus.FromCode(st.Code()), st.Message()
	httpstatus.SetHeaders(w.Header(), st)
	switch st.Code() {
	case codes.Canceled:
		return
	case codes.Unauthenticated, codes.PermissionDenied:
		p.WriteKeyError(w, code, msg) // the edge adds WWW-Authenticate to a 401
		return
	case codes.Unavailable:
		p.log().WarnContext(r.Context(), "mcpgateway unavailable", "err", err)
		msg = "Service Unavailable: mcpgateway cannot be reached; try again shortly"
	case codes.DeadlineExceeded:
		msg = "Gateway Timeout: mcpgateway did not answer in time"
	case codes.ResourceExhausted:
		p.WriteLimited(w, msg, max(1, httpstatus.RetryDelay(st).Milliseconds()))
		return
	}
	p.WriteError(w, code, msg)
}
