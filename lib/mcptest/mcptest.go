// Package mcptest serves, for tests, a Streamable HTTP MCP server on 127.0.0.1 that is as
// demanding of its client as strict real servers are: it checks Mcp-Session-Id and
// MCP-Protocol-Version on every request after initialize (the client's answers to its own
// requests included); while answering tools/list it sends the client a ping with the same
// id as that tools/list, and other requests of its own (roots/list by default), and sends
// the tools only once the client has answered ping with {} and every other request with
// -32601, aborting the stream otherwise; it answers the server/discover probe of a client of
// MCP 2026-07-28 with 400, as a session-era server does; it can forget the session on the next tools/call
// (HTTP 404), tell a test when initialize arrives and hold it until the test lets it go. It
// lists echo, any more tools its options name, and ask (Options.Ask), which sends the client
// a request on the call's SSE stream and answers with the client's answer, and log
// (Options.Log), which sends log messages on the call's SSE stream before its answer. It counts
// initializes, records the methods it saw, the tools called, the client's answers, and every
// rule the client broke.
package mcptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// ProtocolVersion is the version the server negotiates unless Options say otherwise.
const ProtocolVersion = "2025-11-25"

// Options shape the server.
type Options struct {
	// ProtocolVersion answered to initialize and expected on later requests (default
	// ProtocolVersion).
	ProtocolVersion string
	// Requests are the methods of the requests sent to the client, besides the ping with the
	// tools/list's own id, while a tools/list is answered; each must be answered -32601.
	// nil means roots/list; an empty non-nil slice sends none.
	Requests []string
	// AnswerTimeout bounds the wait for the client's answers (default 5 s).
	AnswerTimeout time.Duration
	// InitializeGate, when set, holds every initialize until it is closed.
	InitializeGate <-chan struct{}
	// OnInitialize, when set, runs as each initialize arrives, before InitializeGate holds
	// it: a test learns that a connect is under way without polling.
	OnInitialize func()
	// Tools are more tools listed after echo; each answers "<name>:<text>".
	Tools []string
	// Ask lists the tool ask {method, params}: it sends the client a request of that method
	// on the call's SSE stream (params default to {"asked": method}), waits for the answer
	// (AnswerTimeout) and returns it as its text.
	Ask bool
	// Log lists the tool log {n}: it sends n notifications/message on the call's SSE stream,
	// then its answer, "logged <n>".
	Log bool
}

// Upstream is a running server.
type Upstream struct {
	// URL is the MCP endpoint, http://127.0.0.1:port/mcp.
	URL string

	opts Options
	srv  *httptest.Server
	stop chan struct{}

	mu          sync.Mutex
	initializes int
	discovers   int // server/discover probes (answered 400, as a session-era server does)
	session     string
	expireNext  bool
	methods     []string
	answers     []json.RawMessage
	violations  []string
	pending     map[string]chan json.RawMessage
	deletes     int
	toolCalls   []string
	asks        int
}

// Start serves a new server until the test ends.
func Start(t testing.TB, opts Options) *Upstream {
	t.Helper()
	if opts.ProtocolVersion == "" {
		opts.ProtocolVersion = ProtocolVersion
	}
	if opts.Requests == nil {
		opts.Requests = []string{"roots/list"}
	}
	if opts.AnswerTimeout <= 0 {
		opts.AnswerTimeout = 5 * time.Second
	}
	u := &Upstream{opts: opts, stop: make(chan struct{}), pending: map[string]chan json.RawMessage{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", u.serve)
	u.srv = httptest.NewServer(mux) // 127.0.0.1
	u.URL = u.srv.URL + "/mcp"
	t.Cleanup(func() {
		close(u.stop)
		u.srv.Close()
	})
	return u
}

// Discovers is how many server/discover probes arrived (without a session).
func (u *Upstream) Discovers() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.discovers
}

// Initializes is how many initialize requests arrived.
func (u *Upstream) Initializes() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.initializes
}

// Deletes is how many DELETEs ended the session.
func (u *Upstream) Deletes() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.deletes
}

// Methods are the methods of the client's requests and notifications, in order.
func (u *Upstream) Methods() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.methods...)
}

// ToolCalls are the names of the tools the client called, in order.
func (u *Upstream) ToolCalls() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.toolCalls...)
}

// Answers are the client's answers to the server's requests, as received.
func (u *Upstream) Answers() []json.RawMessage {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]json.RawMessage(nil), u.answers...)
}

// Violations are the rules the client broke, in order.
func (u *Upstream) Violations() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.violations...)
}

// ExpireOnNextToolCall makes the next tools/call answer HTTP 404 and forget the session.
func (u *Upstream) ExpireOnNextToolCall() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.expireNext = true
}

func (u *Upstream) violate(format string, a ...any) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.violations = append(u.violations, fmt.Sprintf(format, a...))
}

// message is any JSON-RPC message.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any, header ...string) {
	w.Header().Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		w.Header().Set(header[i], header[i+1])
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (u *Upstream) serve(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		u.mu.Lock()
		if u.session == "" || r.Header.Get("Mcp-Session-Id") != u.session {
			u.violations = append(u.violations, fmt.Sprintf("DELETE with session %q, the active one is %q", r.Header.Get("Mcp-Session-Id"), u.session))
		} else {
			u.session = ""
			u.deletes++
		}
		u.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		return
	default: // no GET stream: the specification allows 405
		w.Header().Set("Allow", "POST, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(r.Body)
	var msg message
	if err == nil {
		err = json.Unmarshal(body, &msg)
	}
	if err != nil {
		u.violate("a POST body that is not one JSON-RPC message: %v", err)
		writeJSON(w, http.StatusBadRequest, map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32700, "message": "Parse error"}})
		return
	}
	if msg.Method == "server/discover" && r.Header.Get("Mcp-Session-Id") == "" {
		// The probe of a client of MCP 2026-07-28: answered as a strict session-era server
		// answers any request without its session (the TypeScript SDK's words), which the
		// client must take as "initialize instead".
		u.mu.Lock()
		u.discovers++
		u.mu.Unlock()
		writeJSON(w, http.StatusBadRequest, map[string]any{"jsonrpc": "2.0", "id": nil,
			"error": map[string]any{"code": -32000, "message": "Bad Request: No valid session ID provided"}})
		return
	}
	label := msg.Method
	if label == "" {
		label = "a JSON-RPC response"
	}
	if msg.Method != "initialize" {
		u.mu.Lock()
		sid := u.session
		u.mu.Unlock()
		if got := r.Header.Get("Mcp-Session-Id"); sid == "" || got != sid {
			u.violate("%s carried Mcp-Session-Id %q, the active session is %q", label, got, sid)
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": label + " without the active session id"})
			return
		}
		if got := r.Header.Get("MCP-Protocol-Version"); got != u.opts.ProtocolVersion {
			u.violate("%s carried MCP-Protocol-Version %q, want %q", label, got, u.opts.ProtocolVersion)
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": label + " without MCP-Protocol-Version"})
			return
		}
	}
	if msg.Method == "" {
		u.answer(w, r.Header.Get("Mcp-Session-Id"), msg, body)
		return
	}
	u.mu.Lock()
	u.methods = append(u.methods, msg.Method)
	u.mu.Unlock()
	switch msg.Method {
	case "initialize":
		u.initialize(w, r, msg)
	case "notifications/initialized", "notifications/cancelled":
		w.WriteHeader(http.StatusAccepted)
	case "tools/list":
		u.toolsList(w, r, msg)
	case "tools/call":
		if u.opts.Ask && strings.Contains(string(msg.Params), `"name":"ask"`) {
			u.ask(w, r, msg)
			return
		}
		if u.opts.Log && strings.Contains(string(msg.Params), `"name":"log"`) {
			u.log(w, msg)
			return
		}
		u.toolsCall(w, msg)
	default:
		if len(msg.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{"code": -32601, "message": "Method not found: " + msg.Method}})
	}
}

// answer takes the client's answer to one of the server's requests.
func (u *Upstream) answer(w http.ResponseWriter, sid string, msg message, body []byte) {
	if len(msg.ID) == 0 || msg.Result == nil && msg.Error == nil {
		u.violate("a message with neither method nor result/error: %s", body)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	key := sessionKey(sid, msg.ID)
	u.mu.Lock()
	u.answers = append(u.answers, json.RawMessage(body))
	ch := u.pending[key]
	delete(u.pending, key)
	u.mu.Unlock()
	if ch == nil {
		u.violate("an answer to no request of the server: id %s", key)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	ch <- json.RawMessage(body)
	w.WriteHeader(http.StatusAccepted)
}

// sessionKey names a request of the server: its session, and its id in one spelling
// whatever the spacing or escapes the client's answer gives it.
func sessionKey(sid string, id json.RawMessage) string {
	var v any
	if json.Unmarshal(id, &v) == nil {
		id, _ = json.Marshal(v)
	}
	return sid + " " + string(id)
}

func (u *Upstream) initialize(w http.ResponseWriter, r *http.Request, msg message) {
	if f := u.opts.OnInitialize; f != nil {
		f()
	}
	if g := u.opts.InitializeGate; g != nil {
		select {
		case <-g:
		case <-r.Context().Done():
			return
		case <-u.stop:
			return
		}
	}
	u.mu.Lock()
	u.initializes++
	u.session = fmt.Sprintf("mcptest-session-%d", u.initializes)
	sid := u.session
	u.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": map[string]any{
		"protocolVersion": u.opts.ProtocolVersion,
		"capabilities":    map[string]any{"tools": map[string]any{"listChanged": false}},
		"serverInfo":      map[string]any{"name": "mcptest", "version": "1.0.0"},
	}}, "Mcp-Session-Id", sid)
}

// toolsList answers on an SSE stream, after the client has answered the server's requests.
func (u *Upstream) toolsList(w http.ResponseWriter, r *http.Request, msg message) {
	type ask struct {
		method string
		id     json.RawMessage
		answer chan json.RawMessage
	}
	u.mu.Lock()
	sid, n := u.session, u.initializes
	asks := []ask{{method: "ping", id: msg.ID}} // the id of the outstanding tools/list
	for i, m := range u.opts.Requests {
		id, _ := json.Marshal(fmt.Sprintf("mcptest-%d-%d-%s", n, i, strings.Trim(string(msg.ID), `"`)))
		asks = append(asks, ask{method: m, id: id})
	}
	for i := range asks {
		asks[i].answer = make(chan json.RawMessage, 1)
		u.pending[sessionKey(sid, asks[i].id)] = asks[i].answer
	}
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		for _, a := range asks {
			if k := sessionKey(sid, a.id); u.pending[k] == a.answer {
				delete(u.pending, k)
			}
		}
		u.mu.Unlock()
	}()

	event := openSSE(w, sid)
	for _, a := range asks {
		req := map[string]any{"jsonrpc": "2.0", "id": a.id, "method": a.method}
		if a.method != "ping" {
			req["params"] = map[string]any{}
		}
		event(req)
	}
	timeout := time.NewTimer(u.opts.AnswerTimeout)
	defer timeout.Stop()
	for _, a := range asks {
		var got json.RawMessage
		select {
		case got = <-a.answer:
		case <-timeout.C:
			u.violate("no answer to the server's %s (id %s) within %v", a.method, a.id, u.opts.AnswerTimeout)
			panic(http.ErrAbortHandler) // the stream breaks off, as a server giving up does
		case <-r.Context().Done():
			return
		}
		var m message
		_ = json.Unmarshal(got, &m)
		switch {
		case a.method == "ping" && (m.Error != nil || !bytes.Equal(bytes.TrimSpace(m.Result), []byte("{}"))):
			u.violate("ping was answered %s, want the result {}", got)
			panic(http.ErrAbortHandler)
		case a.method != "ping" && (m.Error == nil || m.Error.Code != -32601):
			u.violate("%s was answered %s, want the error -32601", a.method, got)
			panic(http.ErrAbortHandler)
		}
	}
	schema := map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []string{"text"}}
	tools := []any{map[string]any{"name": "echo", "title": "HTTP Echo", "description": "Echo text through Streamable HTTP.", "inputSchema": schema}}
	for _, name := range u.opts.Tools {
		tools = append(tools, map[string]any{"name": name, "description": "Answer " + name + ":<text>.", "inputSchema": schema})
	}
	if u.opts.Log {
		tools = append(tools, map[string]any{"name": "log", "description": "Send n log messages on the call's stream, then answer.",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}}})
	}
	if u.opts.Ask {
		tools = append(tools, map[string]any{"name": "ask", "description": "Send the client a request of method; answer its answer.",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"method": map[string]any{"type": "string"}, "params": map[string]any{"type": "object"}}, "required": []string{"method"}}})
	}
	event(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": map[string]any{"tools": tools}})
	// The stream stays open after the answer, as lazy servers leave it; the client must
	// not wait for its end.
	select {
	case <-r.Context().Done():
	case <-u.stop:
	case <-time.After(15 * time.Second):
	}
}

func (u *Upstream) toolsCall(w http.ResponseWriter, msg message) {
	u.mu.Lock()
	expire := u.expireNext
	sid := u.session
	if expire {
		u.expireNext, u.session = false, ""
	}
	u.mu.Unlock()
	if expire {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "MCP session expired"})
		return
	}
	var p struct {
		Name      string `json:"name"`
		Arguments struct {
			Text string `json:"text"`
		} `json:"arguments"`
	}
	_ = json.Unmarshal(msg.Params, &p)
	u.mu.Lock()
	u.toolCalls = append(u.toolCalls, p.Name)
	u.mu.Unlock()
	prefix := "http-echo:"
	if p.Name != "echo" {
		if !slices.Contains(u.opts.Tools, p.Name) {
			writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{"code": -32602, "message": "Unknown tool: " + p.Name}}, "Mcp-Session-Id", sid)
			return
		}
		prefix = p.Name + ":"
	}
	writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": map[string]any{
		"content": []any{map[string]any{"type": "text", "text": prefix + p.Arguments.Text}},
	}}, "Mcp-Session-Id", sid)
}

// ask answers a tools/call of ask on an SSE stream: the request to the client first, then,
// once the client answered it, the answer as the tool's text.
func (u *Upstream) ask(w http.ResponseWriter, r *http.Request, msg message) {
	var p struct {
		Arguments struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		} `json:"arguments"`
	}
	_ = json.Unmarshal(msg.Params, &p)
	params := p.Arguments.Params
	if len(params) == 0 {
		params, _ = json.Marshal(map[string]string{"asked": p.Arguments.Method})
	}
	u.mu.Lock()
	sid := u.session
	u.toolCalls = append(u.toolCalls, "ask")
	u.asks++
	id, _ := json.Marshal(fmt.Sprintf("mcptest-ask-%d", u.asks))
	answer := make(chan json.RawMessage, 1)
	u.pending[sessionKey(sid, id)] = answer
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		delete(u.pending, sessionKey(sid, id))
		u.mu.Unlock()
	}()
	event := openSSE(w, sid)
	event(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": p.Arguments.Method, "params": params})
	var got json.RawMessage
	select {
	case got = <-answer:
	case <-time.After(u.opts.AnswerTimeout):
		u.violate("no answer to the server's %s (id %s) within %v", p.Arguments.Method, id, u.opts.AnswerTimeout)
		panic(http.ErrAbortHandler)
	case <-r.Context().Done():
		return
	}
	event(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": string(got)}}}})
}

// log answers a tools/call of log on an SSE stream: n notifications/message, then the answer.
func (u *Upstream) log(w http.ResponseWriter, msg message) {
	var p struct {
		Arguments struct {
			N int `json:"n"`
		} `json:"arguments"`
	}
	_ = json.Unmarshal(msg.Params, &p)
	u.mu.Lock()
	sid := u.session
	u.toolCalls = append(u.toolCalls, "log")
	u.mu.Unlock()
	event := openSSE(w, sid)
	for i := range p.Arguments.N {
		event(map[string]any{"jsonrpc": "2.0", "method": "notifications/message",
			"params": map[string]any{"level": "info", "data": fmt.Sprintf("log %d of %d", i+1, p.Arguments.N)}})
	}
	event(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("logged %d", p.Arguments.N)}}}})
}

// openSSE answers a POST of session sid with an SSE stream, and returns the function that
// sends one JSON-RPC message on it as an event.
func openSSE(w http.ResponseWriter, sid string) func(v any) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Mcp-Session-Id", sid)
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	return func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
}
