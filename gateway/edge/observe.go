package edge

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/zestmcp/zest/lib/metrics"
	"github.com/zestmcp/zest/lib/requestid"
	"github.com/zestmcp/zest/lib/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// root wraps the edge's routes with what every request gets, whatever answers it:
//
//   - a request id: the client's X-Request-Id when requestid.Valid accepts it, else a new
//     one; it is set on the response before anything is written (errors included) and put in
//     the request's context, from which the gRPC clients forward it as x-request-id and the
//     logger adds it to every line logged with that context;
//   - a deadline for the body (bodyDeadline);
//   - one access line when the response ends (for an SSE stream, when the stream ends):
//     method, route pattern, status, duration_ms, bytes and request_id. It never carries a
//     header value, a key or a body; the raw path only when no route matched.
func (e *Edge) root(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := requestid.Ensure(r.Header.Get(requestid.Header))
		w.Header().Set(requestid.Header, id)
		rt := &route{}
		ctx := requestid.With(context.WithValue(r.Context(), routeKey{}, rt), id)
		ctx, span := startSpan(ctx, r, id)
		r = r.WithContext(ctx)
		resp := &response{ResponseWriter: w, challenge: "Bearer"}
		if e.challenge != nil {
			if c := e.challenge(r.URL.Path); c != "" {
				resp.challenge = c
			}
		}
		e.bodyDeadline(w, resp, r)
		metrics.HTTPInFlight.Inc()
		defer metrics.HTTPInFlight.Dec() // deferred: net/http recovers a handler's panic
		next.ServeHTTP(resp, r)
		d := time.Since(start)
		endSpan(span, r, rt, resp)
		// The same route template as the access line: bounded by the routes, never the path.
		metrics.ObserveHTTP(r.Method, rt.name(), resp.statusOrOK(), d)
		e.accessLine(ctx, r, rt, resp, d)
	})
}

// startSpan starts the request's server span when tracing is on (lib/tracing): a child of the
// client's traceparent when it sent one, else a trace's root. Its name is the method until the
// route is known (endSpan). The gRPC calls the request makes are its children, and every line
// logged with the request's context carries its trace id.
func startSpan(ctx context.Context, r *http.Request, id string) (context.Context, trace.Span) {
	if !tracing.Enabled() {
		return ctx, nil
	}
	ctx = tracing.Extract(ctx, propagation.HeaderCarrier(r.Header))
	ctx, span := tracing.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer))
	span.SetAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path),
		attribute.String("zest.request_id", id))
	return ctx, span
}

// endSpan names the span after the route template that answered ("POST /mcp/servers/{id}",
// "POST /internal/mcp/servers/{id}/tools/call"): the path's ids stay out of the name, as
// OpenTelemetry's HTTP conventions ask. A 5xx marks it failed.
func endSpan(span trace.Span, r *http.Request, rt *route, resp *response) {
	if span == nil {
		return
	}
	status := resp.status
	if status == 0 {
		status = http.StatusOK
	}
	if route := rt.name(); route != "" {
		name := r.Method + " " + route
		if strings.Contains(route, " ") { // a pattern with its method ("GET /x")
			name = route
		}
		span.SetName(name)
		span.SetAttributes(attribute.String("http.route", route))
	}
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if status >= 500 {
		tracing.Fail(span, http.StatusText(status))
	}
	span.End()
}

// statusOrOK is the status sent: what net/http sends for a handler that wrote nothing is 200.
func (r *response) statusOrOK() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

func (e *Edge) accessLine(ctx context.Context, r *http.Request, rt *route, resp *response, d time.Duration) {
	if !e.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	status := resp.statusOrOK()
	attrs := make([]slog.Attr, 0, 7)
	attrs = append(attrs, slog.String("method", r.Method))
	if route := rt.name(); route == "" {
		attrs = append(attrs, slog.String("route", ""), slog.String("path", r.URL.Path))
	} else {
		attrs = append(attrs, slog.String("route", route))
	}
	attrs = append(attrs, slog.Int("status", status), slog.Float64("duration_ms", float64(d.Microseconds())/1000),
		slog.Int64("bytes", resp.bytes))
	e.log.LogAttrs(ctx, slog.LevelInfo, "http request", attrs...)
}

// route is where a handler says which route answered, for the access line: the ServeMux
// pattern (routed) says it for most routes, grpc-gateway's template for the admin routes
// (adminRoute), and the not-found handlers say no route matched.
type route struct {
	pattern string // a handler's own, more precise than mux's
	mux     string
	none    bool
}

// routed notes the ServeMux pattern that matched. It reads Request.Pattern from the request
// the mux was given (ServeMux sets it there), so a middleware between the root handler and
// the mux may replace the request without hiding the route.
func routed(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r)
		if rt, ok := r.Context().Value(routeKey{}).(*route); ok {
			rt.mux = r.Pattern
		}
	})
}

// name is the route that answered: a handler's own pattern, else the mux's; "" when none did.
func (rt *route) name() string {
	switch {
	case rt.none:
		return ""
	case rt.pattern != "":
		return rt.pattern
	}
	return rt.mux
}

type routeKey struct{}

func setRoute(ctx context.Context, pattern string) {
	if rt, ok := ctx.Value(routeKey{}).(*route); ok {
		rt.pattern = pattern
	}
}

func noRoute(ctx context.Context) {
	if rt, ok := ctx.Value(routeKey{}).(*route); ok {
		rt.none = true
	}
}

// bodyDeadline bounds the time the request's body may take to arrive (BodyReadTimeout,
// counted from the end of the headers, which ReadHeaderTimeout bounds). A body that does not
// arrive in time gets 408, in the shape of its route, and its connection is closed; when the
// response has already started, the connection is closed.
//
// Why not http.Server.ReadTimeout: it would bound bodies too, and it would not cut long
// responses (net/http lifts the connection's read deadline once a request's body is read,
// and before the handler runs for a request without one, so GET /mcp streams and streamed
// answers outlive it; TestResponseOutlivesTheBodyDeadline holds this middleware to the
// same). But a body that times out under ReadTimeout reaches the handlers as a bare i/o
// error, and each route answered it its own way: 400 in three shapes, one quoting socket
// addresses. Setting the deadline here, per request that has a body, through
// http.ResponseController, lets the edge see the timeout and give one answer for every
// route.
func (e *Edge) bodyDeadline(w http.ResponseWriter, resp *response, r *http.Request) {
	if e.cfg.BodyReadTimeout <= 0 || r.Body == nil || r.Body == http.NoBody {
		return
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(e.cfg.BodyReadTimeout)) != nil {
		return // not a net/http connection (a test's recorder)
	}
	r.Body = &timedBody{ReadCloser: r.Body, rc: rc, resp: resp, timeout: e.cfg.BodyReadTimeout, answer: errorWriter(r.URL.Path)}
}

// errBodyTimeout is what reading a body past its deadline returns.
var errBodyTimeout = errors.New("the request body did not arrive in time")

// timedBody lifts the body's read deadline at the end of the body, and answers 408 when the
// deadline passes first. Handlers read bodies on their own goroutine, so the 408 is written
// from there, before the handler writes anything of its own.
type timedBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	resp    *response
	timeout time.Duration
	answer  writeErrorFunc
	done    bool
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == nil || b.done {
		return n, err
	}
	b.done = true
	if errors.Is(err, os.ErrDeadlineExceeded) {
		b.resp.answerFirst(b.answer, http.StatusRequestTimeout,
			"Request Timeout: the request body did not arrive within "+b.timeout.String()+"; send it whole without pausing")
		return n, errBodyTimeout
	}
	// The body is read: no deadline for the response (net/http lifts it as well when it
	// starts watching the connection for the client leaving; this does not depend on that).
	_ = b.rc.SetReadDeadline(time.Time{})
	return n, err
}

// response records what the access line reports, and lets the edge answer in the handler's
// place (answerFirst).
type response struct {
	http.ResponseWriter
	status int
	bytes  int64
	sealed bool // the edge answered: the handler's own writes are dropped
	// challenge is the WWW-Authenticate of a 401 that names none: Bearer, or with an issuer
	// configured an MCP endpoint's (where its protected-resource metadata is).
	challenge string
}

// errAnswered is what a handler's write returns after the edge answered in its place.
var errAnswered = errors.New("the edge already answered this request")

// WriteHeader records the status. A 401 that names no challenge gets WWW-Authenticate:
// Bearer (RFC 9110 requires one on every 401), on an MCP endpoint with an issuer configured
// with its resource_metadata and scope (RFC 9728): the one place for the edge's key and token
// checks and the 401s relayed from a service alike.
func (r *response) WriteHeader(code int) {
	if r.sealed {
		return
	}
	if code >= 100 && code < 200 || r.status != 0 {
		r.ResponseWriter.WriteHeader(code)
		return
	}
	r.status = code
	if code == http.StatusUnauthorized && r.Header().Get("WWW-Authenticate") == "" {
		r.Header().Set("WWW-Authenticate", r.challenge)
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *response) Write(b []byte) (int, error) {
	if r.sealed {
		return 0, errAnswered
	}
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Flush sends what was written so far (SSE); it starts the response when nothing was.
func (r *response) Flush() {
	if r.sealed {
		return
	}
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (r *response) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// answerFirst writes an error answer in the handler's place, unless the response has
// started, and closes the connection after it.
func (r *response) answerFirst(write writeErrorFunc, code int, msg string) {
	if r.sealed || r.status != 0 {
		return // nothing can be added; net/http closes a connection whose body was not read
	}
	r.Header().Set("Connection", "close")
	write(r, code, msg)
	r.sealed = true
}
