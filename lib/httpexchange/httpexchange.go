// Package httpexchange is both ends of HttpService (proto/zest/mcpgateway/v1/http.proto), the
// generic HTTP exchange between the edge and mcpgateway. Proxy is the edge's end: it hands a
// request over whole (its body read within the edge's bound), answers the admissions
// mcpgateway asks for with the edge's budgets, and writes the response as it streams,
// flushing each chunk (a whole answer, once the exchange ended). Server is mcpgateway's: it
// runs an http.Handler for each call. The exchange knows no protocol: a handler asks the edge
// to count its request (Admit) and may leave the bytes the edge ends a broken response with
// (IfBroken); everything else is plain HTTP.
package httpexchange

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// hopByHop are the headers of one connection, never passed on (RFC 9110 §7.6.1).
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
}

// Headers converts HTTP headers for the exchange, less the hop-by-hop ones and those in skip
// (canonical names).
func Headers(h http.Header, skip ...string) []*mcpgatewayv1.HttpHeader {
	out := make([]*mcpgatewayv1.HttpHeader, 0, len(h))
outer:
	for name, values := range h {
		if hopByHop[name] {
			continue
		}
		for _, s := range skip {
			if s == name {
				continue outer
			}
		}
		out = append(out, &mcpgatewayv1.HttpHeader{Name: name, Values: values})
	}
	return out
}

// SetHeaders adds the exchange's headers to h.
func SetHeaders(h http.Header, in []*mcpgatewayv1.HttpHeader) {
	for _, f := range in {
		name := http.CanonicalHeaderKey(f.GetName())
		if hopByHop[name] {
			continue
		}
		h[name] = append(h[name], f.GetValues()...)
	}
}

// Server serves HttpService with one http.Handler.
type Server struct {
	mcpgatewayv1.UnimplementedHttpServiceServer
	h http.Handler
}

// NewServer serves each Exchange with h.
func NewServer(h http.Handler) *Server { return &Server{h: h} }

// Exchange reads the request, runs the handler on it and streams its response. The request's
// context is the call's: the edge cancelling the call cancels the request.
func (s *Server) Exchange(stream mcpgatewayv1.HttpService_ExchangeServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	in := first.GetRequest()
	if in == nil {
		return status.Error(codes.InvalidArgument, "the first item of an exchange must be its request")
	}
	r, err := Request(stream.Context(), in)
	if err != nil {
		return err
	}
	w := &writer{stream: stream, method: r.Method, header: http.Header{}}
	r = r.WithContext(context.WithValue(r.Context(), admitterKey{}, w))
	s.h.ServeHTTP(w, r)
	return w.finish()
}

// Request builds the http.Request of an exchange's request.
func Request(ctx context.Context, in *mcpgatewayv1.HttpRequest) (*http.Request, error) {
	u, err := url.ParseRequestURI(in.GetPath())
	if err != nil || u.Path == "" {
		return nil, status.Errorf(codes.InvalidArgument, "request path %q: want an absolute path", in.GetPath())
	}
	u.RawQuery = in.GetRawQuery()
	body := in.GetBody()
	r := (&http.Request{Method: in.GetMethod(), URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: make(http.Header, len(in.GetHeaders())), Body: io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)), RequestURI: u.RequestURI()}).WithContext(ctx)
	if r.Method == "" {
		r.Method = http.MethodGet
	}
	SetHeaders(r.Header, in.GetHeaders())
	return r, nil
}

// Admit asks the edge to count r as a.Admit says, before the handler does the work: false
// means the edge refused (it answers the client itself) and the handler must return.
// Outside an exchange (a handler served directly, in tests) every request is admitted.
func Admit(r *http.Request, a *mcpgatewayv1.Admit) bool {
	w, ok := r.Context().Value(admitterKey{}).(*writer)
	if !ok {
		return true
	}
	return w.admit(a)
}

// IfBroken leaves with the edge the bytes it writes at the end of the body if the exchange
// breaks after the head (this replica died): the handler's last word for a response it can
// no longer finish. Call it before the first Write or Flush.
func IfBroken(w http.ResponseWriter, b []byte) {
	if ew, ok := w.(*writer); ok {
		ew.ifBroken = b
	}
}

type admitterKey struct{}

// writer is the http.ResponseWriter of an exchange. As net/http's, it holds what the handler
// writes until a Flush, the next Write or the handler's end: the head goes with the first
// Write's bytes, and a handler that wrote once and returned (a whole JSON answer) sends one
// message whose head carries its Content-Length: the edge writes it in one piece when the
// exchange ends, where it wrote a chunked body, flushed, then its end. After the head each Write is one body item (the edge writes
// and flushes each). A handler that streams flushes, as it must under net/http.
type writer struct {
	stream   mcpgatewayv1.HttpService_ExchangeServer
	method   string
	header   http.Header
	status   int    // set by WriteHeader, the head not yet sent
	held     []byte // the first Write's bytes, the head not yet sent
	headSent bool   // the head went
	ifBroken []byte
	err      error
}

func (w *writer) Header() http.Header { return w.header }

func (w *writer) WriteHeader(code int) {
	if w.status != 0 || w.headSent {
		return
	}
	w.status = code
}

// sendHead sends the head, with body as the body's first chunk.
func (w *writer) sendHead(body []byte) {
	if w.headSent || w.err != nil {
		return
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.headSent, w.held = true, nil
	w.send(&mcpgatewayv1.HttpServiceExchangeResponse{Kind: &mcpgatewayv1.HttpServiceExchangeResponse_Head{Head: &mcpgatewayv1.HttpResponseHead{
		Status: int32(w.status), Headers: Headers(w.header), IfBroken: w.ifBroken, Body: body}}})
}

func (w *writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	switch {
	case len(p) == 0:
	case !w.headSent && w.held == nil:
		w.held = append(make([]byte, 0, len(p)), p...) // p is the handler's once Write returns
	case !w.headSent:
		w.sendHead(append(w.held, p...))
	default:
		w.send(&mcpgatewayv1.HttpServiceExchangeResponse{Kind: &mcpgatewayv1.HttpServiceExchangeResponse_Body{Body: p}})
	}
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

// Flush sends the head, with what was held, if it has not gone (after the head each Write is
// sent at once).
func (w *writer) Flush() { w.sendHead(w.held) }

// finish sends the head of a handler that has not flushed: its whole body, with its length.
func (w *writer) finish() error {
	if !w.headSent && w.header.Get("Content-Length") == "" && w.header.Get("Transfer-Encoding") == "" &&
		w.method != http.MethodHead && bodyAllowed(w.status) {
		w.header.Set("Content-Length", strconv.Itoa(len(w.held)))
	}
	w.sendHead(w.held)
	return w.err
}

// bodyAllowed reports whether a response of status may have a body (RFC 9110 §6.4.1); 0 is
// the 200 a handler that never called WriteHeader answers.
func bodyAllowed(status int) bool {
	return status == 0 || status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

func (w *writer) send(m *mcpgatewayv1.HttpServiceExchangeResponse) {
	if err := w.stream.Send(m); err != nil && w.err == nil {
		w.err = err
	}
}

// errRefused ends an exchange whose admission the edge refused (the edge has answered).
var errRefused = status.Error(codes.ResourceExhausted, "the edge refused the request's admission")

func (w *writer) admit(a *mcpgatewayv1.Admit) bool {
	if w.err != nil || w.headSent {
		return w.err == nil
	}
	w.send(&mcpgatewayv1.HttpServiceExchangeResponse{Kind: &mcpgatewayv1.HttpServiceExchangeResponse_Admit{Admit: a}})
	if w.err != nil {
		return false
	}
	in, err := w.stream.Recv()
	if err != nil || in.GetAdmission() == nil {
		if err == nil {
			err = status.Error(codes.InvalidArgument, "an admit must be answered with an admission")
		}
		if w.err = err; errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled {
			w.err = errRefused
		}
		return false
	}
	return true
}
