// Package streamable is MCP's Streamable HTTP transport of /mcp, /mcp/servers/{id} and
// /mcp/presets/{preset}, in mcpgateway: the edge hands it each request through the generic
// HTTP exchange (lib/httpexchange), having checked the key, the limits and the body's size,
// and knows nothing of MCP. Each request goes to its endpoint (mcpserve.Routes, a
// mcphttp.Endpoint) as a call in-process with the request's parts (mcphttp.Request), and
// the endpoint writes its answer here (answer.go): one JSON response, or an SSE stream when
// messages precede the result (every one flushed before the result).
// Notifications-only POSTs get 202. The errors this package answers itself are JSON-RPC error
// bodies (lib/jsonrpcerr), except the key and permission refusals, which keep the edge's
// {"error":"…"} shape and status. What the edge counts beyond the request line — a batch's
// messages, a stream held open — it asks the edge to admit (httpexchange.Admit) before the
// work.
//
// Streams are not resumable: a GET stream carries no event ids, and a client that reconnects
// (with or without Last-Event-ID) gets a new stream.
//
// Under each endpoint, the package also serves the HTTP+SSE transport of protocol 2024-11-05
// (<endpoint>/sse and <endpoint>/message, legacy.go) over the same sessions.
package streamable

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/zestmcp/zest/lib/httpexchange"
	"github.com/zestmcp/zest/lib/httpstatus"
	"github.com/zestmcp/zest/lib/jsonrpcerr"
	"github.com/zestmcp/zest/lib/mcpbatch"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultKeepAlive is the interval of SSE comment lines on an idle GET stream when the
// Handler is given none.
const DefaultKeepAlive = 25 * time.Second

// Handler serves the three MCP endpoints (Mux routes them).
type Handler struct {
	// MCP answers the requests: mcpserve.Routes, called in-process.
	MCP mcphttp.Endpoint
	Log *slog.Logger
	// KeepAlive is the interval of SSE comment lines on an idle GET stream.
	KeepAlive time.Duration

	legacy legacyStreams // the HTTP+SSE streams this replica holds (legacy.go)
}

// Mux routes the three MCP endpoints to h: /mcp, /mcp/servers/{id} (the path value "id") and
// /mcp/presets/{preset}; under each, the HTTP+SSE transport of protocol 2024-11-05
// (<endpoint>/sse and <endpoint>/message, legacy.go). Any other path is 404 in the
// endpoints' error shape.
func Mux(h *Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		jsonrpcerr.WriteStatus(w, http.StatusNotFound, "No route for "+r.Method+" "+r.URL.Path)
	})
	for _, endpoint := range []string{"/mcp", "/mcp/servers/{id}", "/mcp/presets/{preset}"} {
		mux.Handle(endpoint, h)
		mux.HandleFunc(endpoint+LegacySSEPath, h.legacyOpen)
		mux.HandleFunc(endpoint+LegacyMessagePath, h.legacyPost)
	}
	return mux
}

// IsStream reports whether r opens a stream its client holds open: a GET, the session's
// stream of server messages, or a POST subscriptions/listen of protocol 2026-07-28 (its
// Mcp-Method header, which that protocol requires and mcpgateway checks against the body).
func IsStream(r *http.Request) bool {
	return r.Method == http.MethodGet || r.Method == http.MethodPost && r.Header.Get(mcphttp.HeaderMethod) == "subscriptions/listen"
}

// hold asks the edge to admit r's stream (httpexchange.Admit): counted against the stream
// budgets, a GET also against its session's; false means the edge refused and answered.
func (h *Handler) hold(r *http.Request) bool {
	a := &mcpgatewayv1.Admit{HeldOpen: true}
	if r.Method == http.MethodGet {
		a.HoldGroup = r.Header.Get(mcphttp.HeaderSession)
	}
	return httpexchange.Admit(r, a)
}

// ServeHTTP dispatches on the method.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost && modern(r) {
		// Protocol 2026-07-28 has no sessions: no stream to open, no session to end
		// (server-to-client messages come on a subscriptions/listen POST).
		w.Header().Set("Allow", "POST")
		WriteError(w, http.StatusMethodNotAllowed, -32600, "Method Not Allowed: protocol "+r.Header.Get(mcphttp.HeaderProtocol)+
			" has no sessions; POST requests, and POST subscriptions/listen for server-to-client notifications")
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r)
	case http.MethodGet:
		h.listen(w, r)
	case http.MethodDelete:
		h.end(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		WriteError(w, http.StatusMethodNotAllowed, -32600, "Method Not Allowed. Use POST, GET or DELETE for this endpoint")
	}
}

// listen serves GET: the session's server-to-client SSE stream, kept alive by comments.
func (h *Handler) listen(w http.ResponseWriter, r *http.Request) {
	if !accepts(r.Header.Values("Accept"), "text/event-stream") {
		WriteError(w, http.StatusNotAcceptable, -32600, "Not Acceptable: the Accept header of GET /mcp must include text/event-stream")
		return
	}
	if !h.hold(r) {
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// Last-Event-ID is not passed on: nothing is replayed, a reconnecting client gets a new
	// stream.
	s := &listenStream{w: w, ctx: ctx, fail: cancel, every: h.keepAlive()}
	err := h.MCP.Listen(request(r, nil), s)
	if !s.close() {
		if err == nil {
			err = status.Error(codes.Internal, "the endpoint ended the stream before opening it")
		}
		h.writeStatus(w, r, err)
	}
}

// end serves DELETE: the session ends; its id gets 404 from then on.
func (h *Handler) end(w http.ResponseWriter, r *http.Request) {
	if err := h.MCP.EndSession(r.Context(), request(r, nil)); err != nil {
		h.writeStatus(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (h *Handler) post(w http.ResponseWriter, r *http.Request) {
	// The Streamable HTTP transport: "The client MUST include an Accept header, listing both
	// application/json and text/event-stream". A request without Accept accepts anything
	// (RFC 9110), and so does */*.
	if !accepts(r.Header.Values("Accept"), "application/json", "text/event-stream") {
		WriteError(w, http.StatusNotAcceptable, -32600, "Not Acceptable: the Accept header of POST /mcp must include application/json and text/event-stream")
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !isJSON(ct) {
		WriteError(w, http.StatusUnsupportedMediaType, -32600, "Unsupported Media Type: the Content-Type header of POST /mcp must be application/json")
		return
	}
	if IsStream(r) && !h.hold(r) {
		return
	}
	body, ok := readMessages(w, r)
	if !ok {
		return
	}
	a := &postAnswer{w: w, ctx: r.Context(), body: body}
	err := h.MCP.Exchange(request(r, body), a)
	final, wrote := a.close()
	switch {
	case err == nil:
	case final:
		// The answer was sent: nothing of the error can reach the client.
		h.log().WarnContext(r.Context(), "an MCP endpoint failed after its answer", "err", err)
	case !wrote:
		h.writeStatus(w, r, err)
		return
	default:
		err = statusOf(err)
		h.log().WarnContext(r.Context(), "mcp stream broke after the response started", "err", err)
		if c := status.Code(err); c != codes.Canceled {
			h.writeBroken(w, body, err)
		}
		return
	}
	if !wrote { // only notifications or responses were posted
		w.WriteHeader(http.StatusAccepted)
	}
}

// request is r as its endpoint takes it: the request's own headers (not copied), its body
// (nil for a GET or DELETE) and the path's values.
func request(r *http.Request, body []byte) *mcphttp.Request {
	return &mcphttp.Request{Header: r.Header, Body: body,
		ServerID: r.PathValue("id"),     // /mcp/servers/{id}; empty on /mcp
		PresetID: r.PathValue("preset"), // /mcp/presets/{preset}
	}
}

// modern reports a request of protocol 2026-07-28 or later by its header (versions are dates:
// they compare as strings).
func modern(r *http.Request) bool {
	return r.Header.Get(mcphttp.HeaderProtocol) >= "2026-07-28"
}

func (h *Handler) log() *slog.Logger {
	if h.Log == nil {
		return slog.Default()
	}
	return h.Log
}

// keepAlive is the interval of SSE comment lines on an idle stream.
func (h *Handler) keepAlive() time.Duration {
	if h.KeepAlive <= 0 {
		return DefaultKeepAlive
	}
	return h.KeepAlive
}

// statusOf is err as a gRPC status: nil, a status, or the status of a context's error (an
// endpoint's refusals are statuses; a context's end is the client's going away or a
// deadline).
func statusOf(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Unknown, err.Error())
}

// writeStatus writes a gRPC error from mcpgateway as a JSON-RPC error (id null; -32600 for a
// refusal, -32603 for a failure) with the status of the one table (httpstatus). Key and
// permission refusals keep the edge's own shape (the same answer whichever of the edge and
// mcpgateway refused); transport failures are logged and answered with a fixed message. A
// call its client cancelled is not answered.
func (h *Handler) writeStatus(w http.ResponseWriter, r *http.Request, err error) {
	st := status.Convert(statusOf(err))
	code, msg := httpstatus.FromCode(st.Code()), st.Message()
	httpstatus.SetHeaders(w.Header(), st)
	switch st.Code() {
	case codes.Canceled:
		return // the client went away
	case codes.Unauthenticated, codes.PermissionDenied:
		writeJSON(w, code, map[string]string{"error": msg}) // the edge's shape for its own refusals
		return
	case codes.Unavailable:
		h.log().WarnContext(r.Context(), "mcpgateway unavailable", "err", err)
		msg = "Service Unavailable: mcpgateway cannot be reached; try again shortly"
	case codes.DeadlineExceeded:
		msg = "Gateway Timeout: mcpgateway did not answer in time"
	case codes.ResourceExhausted:
		WriteLimited(w, msg, max(1, httpstatus.RetryDelay(st).Milliseconds()))
		return
	}
	rpc := -32600
	if code >= 500 {
		rpc = -32603
	}
	WriteError(w, code, rpc, msg)
}

// brokenAnswer is what ends an SSE answer whose exchange breaks before the response: this
// replica died after a notification was sent (the edge writes it: httpexchange.IfBroken), or
// the stream from the endpoint failed (writeBroken). The request gets a JSON-RPC error on the
// stream, so that its client does not wait for an answer that cannot come (no event ids: the
// client cannot resume). Only a single request is answered so (nil otherwise): a batch
// (2025-03-26) may have had some of its responses sent already.
func brokenAnswer(body []byte, msg string) []byte {
	b := brokenJSON(body, jsonrpcerr.InternalError, msg)
	if b == nil {
		return nil
	}
	return []byte("event: message\ndata: " + string(b) + "\n\n")
}

// brokenJSON is the JSON-RPC error (code, msg) answering body, nil when body is not a single
// request.
func brokenJSON(body []byte, code int, msg string) []byte {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(body, &req) != nil || req.Method == "" || len(req.ID) == 0 || string(req.ID) == "null" {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": code, "message": msg}})
	return b
}

// msgDied is the error of a request whose replica died after its answer started.
const msgDied = "Service Unavailable: mcpgateway failed before answering; the request may have run (a tool call is never sent twice)"

// brokenMsg is the error of a request whose stream from the endpoint failed after its answer
// started.
func brokenMsg(err error) string {
	if c := status.Code(err); c != codes.Unavailable {
		return "mcpgateway failed before answering (" + c.String() + "): " + status.Convert(err).Message()
	}
	return msgDied
}

// writeBroken ends an SSE answer whose stream from the endpoint failed after it started.
func (h *Handler) writeBroken(w http.ResponseWriter, body []byte, err error) {
	if b := brokenAnswer(body, brokenMsg(err)); b != nil {
		if _, err := w.Write(b); err == nil {
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
	}
}

// The JSON-RPC error bodies of the endpoints (lib/jsonrpcerr: the edge writes the same).
var (
	WriteError          = jsonrpcerr.Write
	WriteLimited        = jsonrpcerr.WriteLimited
	WriteInvalidRequest = jsonrpcerr.WriteInvalidRequest
)

// accepts reports whether an Accept header (all its values) accepts every one of types: a
// missing header accepts anything (RFC 9110), "type/*" and "*/*" count, the most specific
// range decides, and q=0 refuses. Each range is parsed once, whatever the number of types.
func accepts(header []string, types ...string) bool {
	type mediaRange struct {
		typ string
		q   float64
	}
	var (
		ranges []mediaRange
		sent   bool // a range was sent, parsable or not
	)
	for _, v := range header {
		for _, r := range strings.Split(v, ",") {
			if r = strings.TrimSpace(r); r == "" {
				continue
			}
			sent = true
			mt, params, err := mime.ParseMediaType(r)
			if err != nil {
				continue
			}
			q := 1.0
			if v, ok := params["q"]; ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					q = f
				}
			}
			ranges = append(ranges, mediaRange{mt, q})
		}
	}
	if !sent {
		return true
	}
	for _, t := range types {
		major, _, _ := strings.Cut(t, "/")
		best, q := -1, 0.0
		for _, r := range ranges {
			spec := -1
			switch r.typ {
			case t:
				spec = 2
			case major + "/*":
				spec = 1
			case "*/*":
				spec = 0
			}
			if spec > best {
				best, q = spec, r.q
			}
		}
		if best < 0 || q <= 0 {
			return false
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// readMessages reads a POST's body (whole: the edge read it within its bound) and admits a
// batch: refused past mcpbatch.MaxMessages before it is read, and each of its messages counted
// as a request against its caller's rate (the edge admits it). false: the answer is written.
// Streamable HTTP's POST and the legacy transport's message POST both take it.
func readMessages(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		WriteError(w, http.StatusBadRequest, jsonrpcerr.ParseError, "Parse error: the body could not be read whole")
		return nil, false
	}
	if n, batch := mcpbatch.Count(body); batch {
		if n > mcpbatch.MaxMessages {
			WriteInvalidRequest(w, http.StatusBadRequest, mcpbatch.TooLong(n))
			return nil, false
		}
		if n > 1 && !httpexchange.Admit(r, &mcpgatewayv1.Admit{Weight: int32(n)}) {
			return nil, false
		}
	}
	return body, true
}
