// Package mcphttp is the contract between MCP's HTTP transport in mcpgateway (package
// streamable: Streamable HTTP and HTTP+SSE) and the endpoints that serve MCP behind it (/mcp:
// mcpserve, /mcp/servers/{id}: federate, /mcp/presets/{id}: aggregate, routed by
// mcpserve.Routes): the transport calls an Endpoint in-process with the request's parts
// (Request: its headers, its body, its path values; nothing copied, no message encoded), and
// the endpoint writes its answer to the transport (ExchangeStream, ListenStream), which
// writes it through to the HTTP response.
package mcphttp

import (
	"context"
	"net/http"
)

// Header names of MCP's HTTP transports that the endpoints read (the transport, package
// streamable, sets the session's on the answer to initialize).
const (
	HeaderSession  = "Mcp-Session-Id"
	HeaderProtocol = "MCP-Protocol-Version"
	// The headers of protocol 2026-07-28 that mirror the body (SEP-2243): package mcpera
	// checks them against it.
	HeaderMethod      = "Mcp-Method"
	HeaderName        = "Mcp-Name"
	HeaderParamPrefix = "Mcp-Param-"
)

// Request is one HTTP request to an MCP endpoint as the transport (package streamable) hands
// it over, in-process and uncopied: its headers as sent (an endpoint reads those MCP defines:
// a new one touches the package that reads it, not the transport), its body read whole, and
// the path's values. A GET stream or a DELETE has no body.
type Request struct {
	Header http.Header
	Body   []byte
	// ServerID is the {id} of /mcp/servers/{id}; empty on the other endpoints.
	ServerID string
	// PresetID is the {id} of /mcp/presets/{id}; empty on the other endpoints.
	PresetID string
}

// SessionID is the Mcp-Session-Id header (empty on initialize and in protocol 2026-07-28).
func (r *Request) SessionID() string { return r.Header.Get(HeaderSession) }

// ProtocolVersion is the MCP-Protocol-Version header, if any.
func (r *Request) ProtocolVersion() string { return r.Header.Get(HeaderProtocol) }

// ExchangeStream is where an endpoint writes its answer to one POST: the transport writes
// each call through to the HTTP response (JSON when the answer is the only message, SSE when
// messages precede it). The calls are serialized by the endpoint; one made after the
// exchange returned fails.
type ExchangeStream interface {
	// Context is the request's: cancelled when the client goes away; it carries the caller's
	// key as incoming metadata.
	Context() context.Context
	// Session announces the session initialize started, before the answer (the
	// Mcp-Session-Id header).
	Session(id, protocolVersion string) error
	// Message sends one message before the answer: a notification, or a request to the
	// client.
	Message(msg []byte) error
	// Final sends the answer that completes the POST (a response, or a batch of them) with
	// its HTTP status: http.StatusOK, or StatusBadRequest for a message that could not be
	// accepted, or StatusNotFound for a method protocol 2026-07-28 does not have.
	Final(msg []byte, status int) error
}

// ListenStream is where an endpoint writes a GET stream of server-to-client messages.
type ListenStream interface {
	// Context is the request's: cancelled when the client goes away.
	Context() context.Context
	// Open says the session is valid: the transport answers 200 and starts the SSE stream.
	// An error returned before Open is answered as the request's HTTP error.
	Open() error
	// Message sends one server-to-client message on the open stream.
	Message(msg []byte) error
}

// Endpoint serves the requests of one kind of endpoint (mcpserve.Routes routes them): the
// built-in tools of /mcp (mcpserve.Handler), the registered servers of /mcp/servers/{id}
// (package federate), the presets of /mcp/presets/{id} (package aggregate). Refusals are
// gRPC statuses, which the transport maps to HTTP (lib/httpstatus).
type Endpoint interface {
	// Exchange answers one POST.
	Exchange(req *Request, out ExchangeStream) error
	// Listen serves a GET: the session's server-to-client stream, until the client leaves or
	// the session ends or expires.
	Listen(req *Request, out ListenStream) error
	// EndSession serves a DELETE: the session id is refused from then on, by every replica.
	EndSession(ctx context.Context, req *Request) error
}
