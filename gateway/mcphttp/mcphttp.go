// Package mcphttp is the Streamable HTTP transport of /mcp at the edge. It owns HTTP only:
// each POST body goes to mcpgateway's McpService.Exchange, and what comes back is written as
// one JSON response, or as an SSE stream when notifications accompany the result (every one
// flushed before the result). Notifications-only POSTs get 202.
package mcphttp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/zestmcp/zest/gateway/httpguard"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Header names of the transport.
const (
	HeaderSession  = "Mcp-Session-Id"
	HeaderProtocol = "MCP-Protocol-Version"
)

// Handler serves /mcp.
type Handler struct {
	MCP mcpgatewayv1.McpServiceClient
	Log *slog.Logger
	// KeepAlive is the interval of SSE comment lines on an idle GET stream.
	KeepAlive time.Duration
}

// ServeHTTP dispatches on the method.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		h.post(w, r)
	case http.MethodGet:
		h.listen(w, r)
	case http.MethodDelete:
		h.end(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		httpguard.WriteError(w, http.StatusMethodNotAllowed, "Method Not Allowed. Use POST, GET or DELETE for this endpoint")
	}
}

func outgoing(r *http.Request) context.Context {
	ctx := r.Context()
	if a := r.Header.Get("Authorization"); a != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", a)
	}
	return ctx
}

// listen serves GET: the session's server-to-client SSE stream, kept alive by comments.
func (h *Handler) listen(w http.ResponseWriter, r *http.Request) {
	if a := r.Header.Get("Accept"); a != "" && !strings.Contains(a, "text/event-stream") && !strings.Contains(a, "*/*") {
		writeRPCError(w, http.StatusNotAcceptable, -32600, "Not Acceptable: GET /mcp answers text/event-stream")
		return
	}
	ctx, cancel := context.WithCancel(outgoing(r))
	defer cancel()
	stream, err := h.MCP.Listen(ctx, &mcpgatewayv1.ListenRequest{
		SessionId: r.Header.Get(HeaderSession), LastEventId: r.Header.Get("Last-Event-ID"),
	})
	if err != nil {
		writeStatus(w, err)
		return
	}
	if _, err := stream.Recv(); err != nil { // the first item says the session is valid
		writeStatus(w, err)
		return
	}
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
	_, _ = io.WriteString(w, ": stream open\n\n")
	flush()

	items := make(chan *mcpgatewayv1.ListenResponse)
	go func() {
		defer close(items)
		for {
			it, err := stream.Recv()
			if err != nil {
				return
			}
			select {
			case items <- it:
			case <-ctx.Done():
				return
			}
		}
	}()
	keep := time.NewTicker(h.KeepAlive)
	defer keep.Stop()
	for {
		select {
		case it, ok := <-items:
			if !ok {
				return // the session ended or expired
			}
			if _, err := io.WriteString(w, "id: "+it.GetEventId()+"\nevent: message\ndata: "+string(it.GetMessage())+"\n\n"); err != nil {
				return
			}
			flush()
		case <-keep.C:
			if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
				return
			}
			flush()
		case <-r.Context().Done():
			return
		}
	}
}

// end serves DELETE: the session ends; its id gets 404 from then on.
func (h *Handler) end(w http.ResponseWriter, r *http.Request) {
	if _, err := h.MCP.EndSession(outgoing(r), &mcpgatewayv1.EndSessionRequest{SessionId: r.Header.Get(HeaderSession)}); err != nil {
		writeStatus(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (h *Handler) post(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !isJSON(ct) {
		writeRPCError(w, http.StatusUnsupportedMediaType, -32600, "Invalid Request: Content-Type must be application/json")
		return
	}
	body, err := httpguard.ReadBody(r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			WriteTooLarge(w, httpguard.TooLargeMessage(tooBig.Limit))
			return
		}
		writeRPCError(w, http.StatusBadRequest, -32700, "Parse error: could not read the body")
		return
	}
	stream, err := h.MCP.Exchange(outgoing(r), &mcpgatewayv1.ExchangeRequest{
		SessionId: r.Header.Get(HeaderSession), ProtocolVersion: r.Header.Get(HeaderProtocol), Payload: body,
	})
	if err != nil {
		writeStatus(w, err)
		return
	}
	sse := false
	wrote := false
	flusher, _ := w.(http.Flusher)
	for {
		item, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if !wrote {
				writeStatus(w, err)
			} else {
				h.Log.Warn("mcp stream broke after the response started", "err", err)
			}
			return
		}
		if s := item.GetSession(); s != nil {
			w.Header().Set(HeaderSession, s.GetSessionId())
			continue
		}
		msg := item.GetMessage()
		if item.GetFinal() && !sse {
			w.Header().Set("Content-Type", "application/json")
			status := http.StatusOK
			if item.GetMalformed() {
				status = http.StatusBadRequest
			}
			w.WriteHeader(status)
			_, _ = w.Write(msg)
			return
		}
		if !sse {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.Header().Set("X-Accel-Buffering", "no")
			w.WriteHeader(http.StatusOK)
			sse, wrote = true, true
		}
		if _, err := io.WriteString(w, "event: message\ndata: "+string(msg)+"\n\n"); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
	if !wrote { // only notifications or responses were posted
		w.WriteHeader(http.StatusAccepted)
	}
}

// writeStatus maps a gRPC error from mcpgateway to HTTP, in one place.
func writeStatus(w http.ResponseWriter, err error) {
	st := status.Convert(err)
	code := http.StatusInternalServerError
	switch st.Code() {
	case codes.InvalidArgument:
		code = http.StatusBadRequest
	case codes.NotFound:
		code = http.StatusNotFound
	case codes.Unauthenticated:
		httpguard.WriteError(w, http.StatusUnauthorized, st.Message())
		return
	case codes.PermissionDenied:
		httpguard.WriteError(w, http.StatusForbidden, st.Message())
		return
	case codes.Unimplemented:
		code = http.StatusMethodNotAllowed
	case codes.Unavailable:
		code = http.StatusServiceUnavailable
	case codes.DeadlineExceeded:
		code = http.StatusGatewayTimeout
	case codes.Canceled:
		return // the client went away
	}
	rpc := -32600
	if code >= 500 {
		rpc = -32603
	}
	writeRPCError(w, code, rpc, st.Message())
}

// WriteTooLarge answers a body over the limit (413) in JSON-RPC's error shape, for the
// body limit in front of /mcp as for the handler's own reading.
func WriteTooLarge(w http.ResponseWriter, msg string) {
	writeRPCError(w, http.StatusRequestEntityTooLarge, -32600, msg)
}

func writeRPCError(w http.ResponseWriter, httpStatus, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatus)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}
