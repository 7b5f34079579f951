package streamable

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zestmcp/zest/lib/httpexchange"
	"github.com/zestmcp/zest/lib/httpstatus"
	"github.com/zestmcp/zest/lib/jsonrpcerr"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// MCP's HTTP+SSE transport of protocol 2024-11-05, for the clients that speak only it
// (mcp-remote --transport sse-only, the SDKs' SSE client transports): GET <endpoint>/sse
// opens a stream whose first event, "endpoint", is the URL to POST messages to
// (<endpoint>/message?sessionId=<stream id>, the shape of mcp-proxy and supergateway); each
// POST is answered 202 before its work and its answers arrive as "message" events on that
// stream.
//
// Underneath, a stream is a session of the same endpoint, as a Streamable HTTP client has
// one: its POSTs are Exchanges (the session id that initialize returned kept by the stream,
// signed as any), the server's own messages come from the session's Listen, and the stream
// is held open as a GET stream is (admitted by the edge as one). The stream id is random and
// known only to this replica and to the caller that opened it: a POST must reach the replica
// holding the stream, with the same key.

// Paths of the legacy transport under each endpoint.
const (
	LegacySSEPath     = "/sse"
	LegacyMessagePath = "/message"
	// LegacyStreamParam is the query parameter of the message URL naming the stream.
	LegacyStreamParam = "sessionId"
)

// MaxLegacyInFlight is how many POSTed messages of one stream may run at once: a POST is
// answered 202 before its work, which the stream's bound counts instead of the edge's
// requests in flight. Past it, a POST is 429.
const MaxLegacyInFlight = 16

// legacyRetryMs is the Retry-After of a POST past MaxLegacyInFlight.
const legacyRetryMs = 1000

// MaxLegacyPending is how many messages may wait for a legacy stream's client to read them.
// A client that lets more pile up loses its stream (and its session): its POSTs are 404 from
// then on.
const MaxLegacyPending = 256

// legacyEndTimeout bounds ending a closed stream's session.
const legacyEndTimeout = 5 * time.Second

// legacyStreams are the legacy streams this replica holds, by stream id.
type legacyStreams struct {
	mu sync.Mutex
	m  map[string]*legacyStream
}

// legacyStream is one GET <endpoint>/sse.
type legacyStream struct {
	endpoint string   // the endpoint's path (/mcp, /mcp/servers/{id}, /mcp/presets/{preset})
	caller   [32]byte // SHA-256 of the authorization that opened it
	out      chan []byte
	ctx      context.Context // the GET's: ends with the stream
	fail     context.CancelFunc
	inFlight chan struct{} // a slot per POSTed message running (MaxLegacyInFlight)

	mu      sync.Mutex
	session string // the MCP session initialize created; empty before
}

func (s *legacyStreams) add(ls *legacyStream) string {
	id := rand.Text()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*legacyStream{}
	}
	s.m[id] = ls
	return id
}

func (s *legacyStreams) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// get is the stream id names, if it is open and caller opened it on this endpoint.
func (s *legacyStreams) get(id, endpoint string, caller [32]byte) *legacyStream {
	s.mu.Lock()
	ls := s.m[id]
	s.mu.Unlock()
	if ls == nil || ls.ctx.Err() != nil || ls.endpoint != endpoint || subtle.ConstantTimeCompare(ls.caller[:], caller[:]) != 1 {
		return nil
	}
	return ls
}

// send queues msg for the stream's client: false when the stream has ended, or has just
// ended because its client let MaxLegacyPending messages wait.
func (ls *legacyStream) send(msg []byte) bool {
	select {
	case <-ls.ctx.Done():
		return false
	default:
	}
	select {
	case ls.out <- msg:
		return true
	default:
		ls.fail()
		return false
	}
}

// acquire takes a slot of MaxLegacyInFlight: false when all are taken.
func (ls *legacyStream) acquire() bool {
	select {
	case ls.inFlight <- struct{}{}:
		return true
	default:
		return false
	}
}

func (ls *legacyStream) release() { <-ls.inFlight }

func (ls *legacyStream) sessionID() string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.session
}

// callerOf is the hash of the authorization of r's call (the key the edge checked).
func callerOf(r *http.Request) [32]byte {
	v := metadata.ValueFromIncomingContext(r.Context(), "authorization")
	return sha256.Sum256([]byte(strings.Join(v, "\n")))
}

// legacyEndpoint is the endpoint's path of a legacy request: its path less the suffix.
func legacyEndpoint(r *http.Request, suffix string) string {
	return strings.TrimSuffix(r.URL.Path, suffix)
}

// legacyOpen serves GET <endpoint>/sse.
func (h *Handler) legacyOpen(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		WriteError(w, http.StatusMethodNotAllowed, -32600, "Method Not Allowed: GET "+r.URL.Path+" opens the HTTP+SSE stream (protocol 2024-11-05); POST messages to the URL of its endpoint event")
		return
	}
	if !accepts(r.Header.Values("Accept"), "text/event-stream") {
		WriteError(w, http.StatusNotAcceptable, -32600, "Not Acceptable: the Accept header of GET "+r.URL.Path+" must include text/event-stream")
		return
	}
	if !httpexchange.Admit(r, &mcpgatewayv1.Admit{HeldOpen: true}) {
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	endpoint := legacyEndpoint(r, LegacySSEPath)
	ls := &legacyStream{endpoint: endpoint, caller: callerOf(r), out: make(chan []byte, MaxLegacyPending),
		ctx: ctx, fail: cancel, inFlight: make(chan struct{}, MaxLegacyInFlight)}
	id := h.legacy.add(ls)
	defer func() {
		h.legacy.remove(id)
		// The stream was the session's transport: its end ends the session.
		if sid := ls.sessionID(); sid != "" {
			ectx, stop := context.WithTimeout(context.WithoutCancel(r.Context()), legacyEndTimeout)
			defer stop()
			end := &mcphttp.Request{Header: http.Header{mcphttp.HeaderSession: {sid}}, ServerID: r.PathValue("id"), PresetID: r.PathValue("preset")}
			if err := h.MCP.EndSession(ectx, end); err != nil && status.Code(err) != codes.NotFound {
				h.log().WarnContext(r.Context(), "the session of a closed HTTP+SSE stream could not be ended", "err", err)
			}
		}
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	if _, err := io.WriteString(w, "event: endpoint\ndata: "+endpoint+LegacyMessagePath+"?"+LegacyStreamParam+"="+id+"\n\n"); err != nil {
		return
	}
	flush()
	keep := time.NewTicker(h.keepAlive())
	defer keep.Stop()
	for {
		select {
		case msg := <-ls.out:
			if _, err := io.WriteString(w, "event: message\ndata: "+string(msg)+"\n\n"); err != nil {
				return
			}
			flush()
		case <-keep.C:
			if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
				return
			}
			flush()
		case <-ctx.Done():
			if r.Context().Err() == nil {
				h.log().WarnContext(r.Context(), "an HTTP+SSE stream was closed: its client let messages wait unread past the bound", "max_pending", MaxLegacyPending)
			}
			return
		}
	}
}

// legacyListen relays the session's own messages (its Listen) to the stream until either
// ends.
func (h *Handler) legacyListen(ls *legacyStream, serverID, presetID, sid string) {
	// The stream's context carries the caller's key (the GET's metadata).
	req := &mcphttp.Request{Header: http.Header{mcphttp.HeaderSession: {sid}}, ServerID: serverID, PresetID: presetID}
	_ = h.MCP.Listen(req, legacyListenStream{ls})
}

// legacyListenStream is a session's Listen on its HTTP+SSE stream: the stream is open already.
type legacyListenStream struct{ ls *legacyStream }

func (s legacyListenStream) Context() context.Context { return s.ls.ctx }
func (s legacyListenStream) Open() error              { return nil }
func (s legacyListenStream) Message(msg []byte) error {
	if !s.ls.send(msg) {
		return errLegacyClosed
	}
	return nil
}

// errLegacyClosed is what an endpoint's write to a closed HTTP+SSE stream gets: nobody is
// there to answer.
var errLegacyClosed = errors.New("the HTTP+SSE stream ended")

// legacyPost serves POST <endpoint>/message?sessionId=<stream id>.
func (h *Handler) legacyPost(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		WriteError(w, http.StatusMethodNotAllowed, -32600, "Method Not Allowed: POST JSON-RPC messages to "+r.URL.Path+" (protocol 2024-11-05)")
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !isJSON(ct) {
		WriteError(w, http.StatusUnsupportedMediaType, -32600, "Unsupported Media Type: the Content-Type header of POST "+r.URL.Path+" must be application/json")
		return
	}
	endpoint := legacyEndpoint(r, LegacyMessagePath)
	id := r.URL.Query().Get(LegacyStreamParam)
	if id == "" {
		WriteError(w, http.StatusBadRequest, -32600, "Bad Request: the "+LegacyStreamParam+" query parameter is missing: POST to the URL of the endpoint event of GET "+endpoint+LegacySSEPath)
		return
	}
	ls := h.legacy.get(id, endpoint, callerOf(r))
	if ls == nil {
		// Unknown, ended, another caller's, another endpoint's, or held by another replica:
		// the same answer, which tells nothing of the others.
		WriteError(w, http.StatusNotFound, -32600, "Not Found: no HTTP+SSE stream "+LegacyStreamParam+"="+id+" of yours is open on "+endpoint+
			" at this mcpgateway replica; open GET "+endpoint+LegacySSEPath+" again (a stream's messages must reach the replica that holds it)")
		return
	}
	body, ok := readMessages(w, r)
	if !ok {
		return
	}
	if !ls.acquire() {
		w.Header().Set("Retry-After", strconv.Itoa(legacyRetryMs/1000))
		WriteLimited(w, "Too Many Requests: "+strconv.Itoa(MaxLegacyInFlight)+" messages of this HTTP+SSE stream are in flight (streamable.MaxLegacyInFlight); POST again once answers arrive", legacyRetryMs)
		return
	}
	// Accepted now, answered on the stream: a client that POSTs one message at a time (the
	// Python SDK's) can send the next — a relayed request's answer, a cancellation — while
	// this one runs. The work runs in the stream's context (it ends with the stream) with
	// this POST's metadata (its key, its request id).
	md, _ := metadata.FromIncomingContext(r.Context())
	ctx := metadata.NewIncomingContext(ls.ctx, md)
	header := http.Header{}
	if sid := ls.sessionID(); sid != "" {
		header.Set(mcphttp.HeaderSession, sid)
	}
	if v := r.Header.Get(mcphttp.HeaderProtocol); v != "" {
		header.Set(mcphttp.HeaderProtocol, v)
	}
	req := &mcphttp.Request{Header: header, Body: body, ServerID: r.PathValue("id"), PresetID: r.PathValue("preset")}
	go func() {
		defer ls.release()
		h.legacyExchange(ctx, ls, req)
	}()
	w.WriteHeader(http.StatusAccepted)
}

// legacyExchange runs one POSTed message in its stream's session and queues what comes back
// on the stream; an error before any answer is queued as the request's JSON-RPC error.
func (h *Handler) legacyExchange(ctx context.Context, ls *legacyStream, req *mcphttp.Request) {
	a := &legacyAnswer{h: h, ctx: ctx, ls: ls, req: req}
	err := h.MCP.Exchange(req, a)
	queued := a.queued.Load()
	if errors.Is(err, errLegacyClosed) {
		return // the stream ended: nobody to answer
	}
	err = statusOf(err)
	if err == nil || status.Code(err) == codes.Canceled {
		return
	}
	h.log().WarnContext(ctx, "a message of an HTTP+SSE stream failed", "err", err, "answers_sent", queued)
	code, msg := jsonrpcerr.InternalError, brokenMsg(err)
	if st := status.Convert(err); !queued {
		// As the POST would have been answered (writeStatus), on the stream.
		code, msg = jsonrpcerr.InvalidRequest, st.Message()
		if httpstatus.FromCode(st.Code()) >= 500 {
			code, msg = jsonrpcerr.InternalError, "mcpgateway failed ("+st.Code().String()+"): "+msg
		}
	}
	if b := brokenJSON(req.Body, code, msg); b != nil {
		ls.send(b)
	}
}

// legacyAnswer is the ExchangeStream of one POSTed message: what the endpoint writes is
// queued on the HTTP+SSE stream, whatever its status (the POST was answered 202); the
// session initialize starts becomes the stream's.
type legacyAnswer struct {
	h      *Handler
	ctx    context.Context
	ls     *legacyStream
	req    *mcphttp.Request
	queued atomic.Bool // a message was queued
}

func (a *legacyAnswer) Context() context.Context { return a.ctx }

func (a *legacyAnswer) Session(id, _ string) error {
	a.ls.mu.Lock()
	a.ls.session = id
	a.ls.mu.Unlock()
	go a.h.legacyListen(a.ls, a.req.ServerID, a.req.PresetID, id)
	return nil
}

func (a *legacyAnswer) Message(msg []byte) error {
	if !a.ls.send(msg) {
		return errLegacyClosed
	}
	a.queued.Store(true)
	return nil
}

func (a *legacyAnswer) Final(msg []byte, _ int) error { return a.Message(msg) }
