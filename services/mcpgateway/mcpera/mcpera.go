// Package mcpera is MCP's protocol eras as every endpoint of mcpgateway serves them (/mcp,
// /mcp/servers/{id}, /mcp/presets/{id}): the session era (2024-11-05 to 2025-11-25:
// initialize, an Mcp-Session-Id, server-to-client messages on a GET stream) and 2026-07-28,
// the revision without sessions. It holds the versions served (Versions, Supported), which
// era a request belongs to and the refusal of a version not served (Of, Classify), the
// transport checks a request of 2026-07-28 must pass (Request.Check, CheckParamHeaders, read
// off the request's own headers), the HTTP status of its answer (Status, Final), what its
// results carry (Decorate), and subscriptions/listen (Subscription). The endpoints serve both
// eras side by side: the era is decided per request, never per connection.
//
// The name says what the package is about — the eras, both of them — where "stateless" named
// one era only and the endpoints' files called the same era "modern".
//
// Per the specification's versioning section, a request belongs to 2026-07-28 (or a later
// revision) when its MCP-Protocol-Version header or its params._meta
// "io.modelcontextprotocol/protocolVersion" names that version or a later one; anything else
// (no header, an older version, no _meta) is a request of the session era.
package mcpera

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/services/mcpgateway/jsonrpc"
	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Version is the revision without sessions.
const Version = mcp.ProtocolVersion20260728

// Versions are the session-era protocol versions served (negotiated by initialize),
// preferred first.
var Versions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// Supported are every protocol version served, newest first: 2026-07-28 (no sessions, each
// request stands alone) and the session era's Versions. server/discover lists them, and a
// modern request naming another is refused with them.
var Supported = append([]string{Version}, Versions...)

// ErrBadProtocolHeader means MCP-Protocol-Version names no supported version (400).
var ErrBadProtocolHeader = errors.New("unsupported MCP-Protocol-Version header")

// Of is the era of req, classified from its MCP-Protocol-Version header and its body
// (Classify); a request of the session era whose header names a version not served is
// refused (InvalidArgument: HTTP 400).
func Of(req *mcphttp.Request) (Request, error) {
	r := Classify(req.ProtocolVersion(), req.Body)
	if v := req.ProtocolVersion(); v != "" && !r.Modern && !slices.Contains(Versions, v) {
		return r, status.Errorf(codes.InvalidArgument, "%v %q: send one of %v", ErrBadProtocolHeader, v, Versions)
	}
	return r, nil
}

// Final sends the answer to a request of 2026-07-28 with its HTTP status (Status).
func Final(out mcphttp.ExchangeStream, msg []byte) error { return out.Final(msg, Status(msg)) }

// metaVersionKey is quoted as it appears in a body, for the cheap test that keeps the
// classification off the session era's hot path.
var metaVersionKey = []byte(`"` + mcp.MetaKeyProtocolVersion + `"`)

// Request is what classification read of one exchange.
type Request struct {
	// Modern reports a request of 2026-07-28 or later.
	Modern bool
	// HeaderVersion is the MCP-Protocol-Version header; MetaVersion the version in _meta.
	HeaderVersion, MetaVersion string
	// Meta is params._meta as sent (nil when absent or not an object).
	Meta map[string]json.RawMessage
	// Params is the request's params as sent.
	Params json.RawMessage
}

// Classify decides the era of one POST body from its header and its _meta. A batch (a JSON
// array) belongs to the session era: 2026-07-28 has none.
func Classify(headerVersion string, payload []byte) Request {
	r := Request{HeaderVersion: headerVersion}
	if !mcp.IsModernProtocol(headerVersion) && !bytes.Contains(payload, metaVersionKey) && bytes.IndexByte(payload, '\\') < 0 {
		// The session era's requests pay a byte scan, no decoding. A body with a backslash
		// may spell the key with JSON escapes ("io.modelcontextprotocol\/protocolVersion"):
		// it is decoded, since the key is the same once decoded.
		return r
	}
	p := bytes.TrimSpace(payload)
	if len(p) == 0 || p[0] != '{' {
		r.Modern = mcp.IsModernProtocol(headerVersion) && len(p) > 0 && p[0] != '['
		return r
	}
	var env struct {
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(p, &env) == nil {
		r.Params = env.Params
		var params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		if json.Unmarshal(env.Params, &params) == nil {
			r.Meta = params.Meta
			_ = json.Unmarshal(params.Meta[mcp.MetaKeyProtocolVersion], &r.MetaVersion)
		}
	}
	r.Modern = mcp.IsModernProtocol(headerVersion) || mcp.IsModernProtocol(r.MetaVersion)
	return r
}

// Removed are the requests of the session era that 2026-07-28 removed: a modern request for
// one of them is answered as an unknown method (HTTP 404, -32601).
var Removed = []string{"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}

// Check applies the transport rules of 2026-07-28 to a modern request with id and method:
// the protocol version stated in the header and in _meta, equal, and served (supported);
// the client's capabilities in _meta; the Mcp-Method and Mcp-Name headers mirroring the body.
// It returns the error response to send, with the request's id, or nil.
func (r Request) Check(header http.Header, id json.RawMessage, method string, supported []string) []byte {
	switch {
	case r.HeaderVersion == "":
		return jsonrpc.ErrorResponse(id, mcp.HEADER_MISMATCH, fmt.Sprintf("Header mismatch: the %s header is required on a request whose _meta names protocol %s; send the same version in both",
			mcp.HeaderProtocolVersion, r.MetaVersion))
	case r.MetaVersion == "":
		return jsonrpc.ErrorResponse(id, mcp.INVALID_PARAMS, fmt.Sprintf("Invalid params: params._meta[%q] is required in protocol %s (the header says %s)",
			mcp.MetaKeyProtocolVersion, r.HeaderVersion, r.HeaderVersion))
	case r.HeaderVersion != r.MetaVersion:
		return jsonrpc.ErrorResponse(id, mcp.HEADER_MISMATCH, fmt.Sprintf("Header mismatch: the %s header says %q, params._meta[%q] says %q; send the same version in both",
			mcp.HeaderProtocolVersion, r.HeaderVersion, mcp.MetaKeyProtocolVersion, r.MetaVersion))
	case !slices.Contains(supported, r.MetaVersion):
		return jsonrpc.ErrorResponseData(id, mcp.UNSUPPORTED_PROTOCOL_VERSION, fmt.Sprintf("Unsupported protocol version %q: send one of %v", r.MetaVersion, supported),
			mcp.UnsupportedProtocolVersionData{Supported: supported, Requested: r.MetaVersion})
	}
	var caps map[string]json.RawMessage
	if json.Unmarshal(r.Meta[mcp.MetaKeyClientCapabilities], &caps) != nil || caps == nil {
		return jsonrpc.ErrorResponse(id, mcp.INVALID_PARAMS, fmt.Sprintf("Invalid params: params._meta[%q] is required in protocol %s (an empty object declares none)",
			mcp.MetaKeyClientCapabilities, r.MetaVersion))
	}
	// Only the headers that mirror the body are checked here (the version was, above).
	mirrored := func(name string) string {
		if name != mcp.HeaderMethod && name != mcp.HeaderName {
			return ""
		}
		return strings.TrimSpace(header.Get(name))
	}
	if err := mcp.ValidateStandardHeaders(mirrored,
		r.MetaVersion, mcp.MCPMethod(method), r.Params); err != nil {
		return jsonrpc.ErrorResponse(id, mcp.HEADER_MISMATCH, "Header mismatch: "+strings.TrimPrefix(err.Error(), "header mismatch: "))
	}
	return nil
}

// LogLevel is the least level of notifications/message the request asked for in _meta
// ("" asks for none: 2026-07-28 sends no log messages to a request that did not ask).
func (r Request) LogLevel() string {
	var l string
	_ = json.Unmarshal(r.Meta[mcp.MetaKeyLogLevel], &l)
	return l
}

// ClientCapabilities is the client's capabilities the request declared in _meta.
func (r Request) ClientCapabilities() map[string]json.RawMessage {
	var caps map[string]json.RawMessage
	_ = json.Unmarshal(r.Meta[mcp.MetaKeyClientCapabilities], &caps)
	return caps
}

// Admit is what every endpoint checks first of a request of 2026-07-28 (r, classified from
// req): the JSON-RPC envelope (jsonrpc.Check), that it is not a response (the revision has no
// server requests, so a client posts none), the transport rules of Request.Check, and that
// its method was not removed by the revision. It returns the message, and the answer that
// ends the exchange when the request cannot go further (send it with Final). With no answer,
// a message that is not a request is a notification, accepted (HTTP 202);
// notifications/cancelled does nothing: a modern request has no session to name it by, so
// closing its connection is how it is cancelled.
func Admit(req *mcphttp.Request, r Request) (jsonrpc.Message, []byte) {
	msg, code, problem := jsonrpc.Check(req.Body)
	switch {
	case problem != "":
		return msg, jsonrpc.ErrorResponse(msg.ID, code, problem)
	case msg.Method == "":
		return msg, jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_REQUEST,
			"Invalid Request: in protocol 2026-07-28 a server sends no requests, so a client posts no responses; answer an input_required result by sending the request again with its inputResponses")
	case msg.JSONRPC != mcp.JSONRPC_VERSION:
		return msg, jsonrpc.ErrorResponse(msg.ID, mcp.INVALID_REQUEST, `Invalid Request: "jsonrpc" must be "2.0"`)
	}
	if bad := r.Check(req.Header, msg.ID, msg.Method, Supported); bad != nil {
		return msg, bad
	}
	if msg.IsRequest() && slices.Contains(Removed, msg.Method) {
		return msg, jsonrpc.ErrorResponse(msg.ID, mcp.METHOD_NOT_FOUND, "Method not found: "+msg.Method+" was removed in protocol 2026-07-28")
	}
	return msg, nil
}

// Status is the HTTP status of a modern exchange's answer, which 2026-07-28 ties to the
// error code (-32601 is 404; a malformed request, a header mismatch, a missing client
// capability or an unsupported version are 400; everything else is 200).
func Status(msg []byte) int {
	switch errorCode(msg) {
	case mcp.METHOD_NOT_FOUND:
		return http.StatusNotFound
	case mcp.HEADER_MISMATCH, mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, mcp.UNSUPPORTED_PROTOCOL_VERSION,
		mcp.INVALID_REQUEST, mcp.INVALID_PARAMS, mcp.PARSE_ERROR:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// errorCode is the code of a JSON-RPC error response, 0 for anything else.
func errorCode(msg []byte) int {
	if !bytes.Contains(msg, []byte(`"error"`)) {
		return 0
	}
	var e struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(msg, &e) != nil || e.Error == nil {
		return 0
	}
	return e.Error.Code
}

// cacheable are the results 2026-07-28 gives caching hints (ttlMs, cacheScope).
var cacheable = []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"}

// Decorate adds to a result what 2026-07-28 asks of every result and that a session-era
// server does not send: resultType "complete", the server's identity in
// _meta["io.modelcontextprotocol/serverInfo"], and on lists and reads ttlMs 0 with
// cacheScope "private" (reuse needs revalidation, and only by this caller). Members already
// there are kept; a result that is not an object is returned as it is.
func Decorate(method string, result json.RawMessage, serverInfo any) json.RawMessage {
	return decorate(method, result, serverInfo, false)
}

// DecorateAs is Decorate for an endpoint that speaks for others (a preset): its serverInfo
// replaces the one a provider's result carries, so that every result of the endpoint names
// one server, the one server/discover named.
func DecorateAs(method string, result json.RawMessage, serverInfo any) json.RawMessage {
	return decorate(method, result, serverInfo, true)
}

func decorate(method string, result json.RawMessage, serverInfo any, replace bool) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(result, &obj) != nil || obj == nil {
		return result
	}
	if _, ok := obj["resultType"]; !ok {
		obj["resultType"] = json.RawMessage(`"` + mcp.ResultTypeComplete + `"`)
	}
	if slices.Contains(cacheable, method) {
		if _, ok := obj["ttlMs"]; !ok {
			obj["ttlMs"] = json.RawMessage(`0`)
		}
		if _, ok := obj["cacheScope"]; !ok {
			obj["cacheScope"] = json.RawMessage(`"private"`)
		}
	}
	if m, ok := serverInfo.(map[string]any); ok && m == nil {
		serverInfo = nil // a server that gave no serverInfo: nothing to add
	}
	if serverInfo != nil {
		var meta map[string]json.RawMessage
		_ = json.Unmarshal(obj["_meta"], &meta)
		if meta == nil {
			meta = map[string]json.RawMessage{}
		}
		if _, ok := meta[mcp.MetaKeyServerInfo]; !ok || replace {
			if b, err := json.Marshal(serverInfo); err == nil {
				meta[mcp.MetaKeyServerInfo] = b
				obj["_meta"], _ = json.Marshal(meta)
			}
		}
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return result
	}
	return out
}

// Discover is an endpoint's answer to server/discover (request id): the versions served,
// its capabilities (an empty object when it has none) and instructions (left out when
// empty), decorated as every result with serverInfo (Decorate).
func Discover(id json.RawMessage, caps map[string]any, instructions string, serverInfo any) ([]byte, error) {
	if caps == nil {
		caps = map[string]any{}
	}
	res := map[string]any{"supportedVersions": Supported, "capabilities": caps}
	if instructions != "" {
		res["instructions"] = instructions
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("encode the server/discover result: %w", err)
	}
	return jsonrpc.Result(id, Decorate("server/discover", b, serverInfo)), nil
}

// ParamsFor are the params a server of protocolVersion is forwarded of a modern client's
// request: a server of 2026-07-28 gets the client's _meta as it came (its capabilities decide
// what the server may ask of it); a session-era one none of the revision's members
// (StripMeta).
func ParamsFor(protocolVersion string, params json.RawMessage) json.RawMessage {
	if mcp.IsModernProtocol(protocolVersion) {
		return params
	}
	return StripMeta(params)
}

// StripMeta removes from params the _meta members of 2026-07-28
// (io.modelcontextprotocol/protocolVersion, clientInfo, clientCapabilities, logLevel), for a
// request forwarded to a server of the session era, which would read them as a modern
// request. Every other member (a progressToken, a trace context) stays.
func StripMeta(params json.RawMessage) json.RawMessage {
	if !bytes.Contains(params, []byte(`"io.modelcontextprotocol/`)) {
		return params
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(params, &obj) != nil || obj == nil {
		return params
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(obj["_meta"], &meta) != nil || meta == nil {
		return params
	}
	for _, k := range []string{mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientInfo, mcp.MetaKeyClientCapabilities, mcp.MetaKeyLogLevel} {
		delete(meta, k)
	}
	if len(meta) == 0 {
		delete(obj, "_meta")
	} else {
		obj["_meta"], _ = json.Marshal(meta)
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return params
	}
	return out
}

// Tool finds the tool called name among the tools of a tools/list result, with its input
// schema as sent (nil when it is not there): what the x-mcp-header rules read.
func Tool(tools []json.RawMessage, name string) *mcp.Tool {
	for _, t := range tools {
		var tl struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if json.Unmarshal(t, &tl) == nil && tl.Name == name && name != "" {
			return &mcp.Tool{Name: tl.Name, RawInputSchema: tl.InputSchema}
		}
	}
	return nil
}

// CheckParamHeaders checks the Mcp-Param-* headers of a tools/call against the x-mcp-header
// annotations of tool's input schema (each annotated argument sent is mirrored in its header,
// Base64-wrapped when it must be, and no header names an argument that was not sent). It
// returns the -32020 response to send, or nil (also when tool is nil: unknown tools are the
// server's to refuse).
func (r Request) CheckParamHeaders(header http.Header, id json.RawMessage, tool *mcp.Tool) []byte {
	if tool == nil {
		return nil
	}
	err := mcp.ValidateParamHeadersLookup(func(name string) (string, bool) {
		v, ok := paramHeader(header, name)
		return strings.TrimSpace(v), ok
	}, tool, r.Params)
	if err != nil {
		return jsonrpc.ErrorResponse(id, mcp.HEADER_MISMATCH, "Header mismatch: "+strings.TrimPrefix(err.Error(), "header mismatch: "))
	}
	return nil
}

// paramHeader is the first value of the Mcp-Param-* header called name, matched without
// regard to case (a name an argument gives need not be canonical), and whether it was sent.
func paramHeader(header http.Header, name string) (string, bool) {
	if v, ok := header[name]; ok && len(v) > 0 {
		return v[0], true
	}
	for k, v := range header {
		if len(v) > 0 && strings.EqualFold(k, name) {
			return v[0], true
		}
	}
	return "", false
}
