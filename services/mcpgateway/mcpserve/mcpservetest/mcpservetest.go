// Package mcpservetest drives the MCP endpoints (/mcp, /mcp/servers/{id}, /mcp/presets/{id}:
// an mcphttp.Endpoint) as the transport does, for the tests of the endpoints: a Client runs
// each call on its own goroutine so that a test can read what the endpoint writes as it
// comes (a relayed request it must answer, a progress notification) — the transport writes
// it through to the HTTP response instead.
package mcpservetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"
	"google.golang.org/grpc/metadata"
)

// WithKey returns ctx with the bearer key the edge passes on.
func WithKey(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
}

// Request is one request to an endpoint as a test writes it: the headers MCP reads, by name.
type Request struct {
	SessionID       string // Mcp-Session-Id
	ProtocolVersion string // MCP-Protocol-Version
	McpMethod       string // Mcp-Method (2026-07-28)
	McpName         string // Mcp-Name (2026-07-28)
	// ParamHeaders are Mcp-Param-* headers (2026-07-28) by name.
	ParamHeaders map[string]string
	Payload      []byte
	ServerID     string // /mcp/servers/{id}
	PresetID     string // /mcp/presets/{id}
}

// HTTP is r as the transport hands it to an endpoint.
func (r *Request) HTTP() *mcphttp.Request {
	h := http.Header{}
	for name, v := range map[string]string{mcphttp.HeaderSession: r.SessionID, mcphttp.HeaderProtocol: r.ProtocolVersion,
		mcphttp.HeaderMethod: r.McpMethod, mcphttp.HeaderName: r.McpName} {
		if v != "" {
			h.Set(name, v)
		}
	}
	for name, v := range r.ParamHeaders {
		h.Set(name, v)
	}
	return &mcphttp.Request{Header: h, Body: r.Payload, ServerID: r.ServerID, PresetID: r.PresetID}
}

// Item is one thing an endpoint wrote: the session initialize started, or a message (the
// answer when Final, with its HTTP status). A GET stream's first item is empty: the stream
// opened.
type Item struct {
	Session string
	Message []byte
	Final   bool
	Status  int
}

// Malformed reports an answer the transport sends with HTTP 400.
func (i *Item) Malformed() bool { return i.Final && i.Status == http.StatusBadRequest }

// MethodNotFound reports an answer the transport sends with HTTP 404 (2026-07-28).
func (i *Item) MethodNotFound() bool { return i.Final && i.Status == http.StatusNotFound }

// Client calls an endpoint in-process, with the context a call reaches it with: the caller's
// metadata incoming, as the edge's exchange brings it, and whatever enter adds (a gRPC
// server's interceptors do that in mcpgateway).
type Client struct {
	ep    mcphttp.Endpoint
	enter func(context.Context) context.Context
}

// NewClient drives ep; enter, if not nil, is applied to each call's context.
func NewClient(ep mcphttp.Endpoint, enter func(context.Context) context.Context) *Client {
	return &Client{ep: ep, enter: enter}
}

// context is ctx as the endpoint sees it: its outgoing metadata arrived.
func (c *Client) context(ctx context.Context) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx)
	ctx = metadata.NewIncomingContext(ctx, md)
	if c.enter != nil {
		ctx = c.enter(ctx)
	}
	return ctx
}

// Stream is what one call writes, as it comes.
type Stream struct {
	ctx   context.Context
	items chan *Item
	done  chan struct{}
	err   error
}

// Recv is the next item; io.EOF once the call returned and everything it wrote was read.
func (s *Stream) Recv() (*Item, error) {
	select {
	case it := <-s.items:
		return it, nil
	case <-s.done:
		if s.err != nil {
			return nil, s.err
		}
		return nil, io.EOF
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

// run starts call on its own goroutine, writing to the stream it returns.
func run(ctx context.Context, call func(writer) error) *Stream {
	s := &Stream{ctx: ctx, items: make(chan *Item), done: make(chan struct{})}
	go func() {
		err := call(writer{s})
		s.err = err
		close(s.done)
	}()
	return s
}

// put hands it to the reader; it waits until the reader takes it or the call's context ends.
func (s *Stream) put(it *Item) error {
	select {
	case s.items <- it:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

// writer is a Stream as the endpoint writes to it (its ExchangeStream and ListenStream).
type writer struct{ s *Stream }

func (w writer) Context() context.Context   { return w.s.ctx }
func (w writer) Session(id, _ string) error { return w.s.put(&Item{Session: id}) }
func (w writer) Message(msg []byte) error   { return w.s.put(&Item{Message: msg}) }
func (w writer) Final(msg []byte, status int) error {
	return w.s.put(&Item{Message: msg, Final: true, Status: status})
}
func (w writer) Open() error { return w.s.put(&Item{}) }

var _ interface {
	mcphttp.ExchangeStream
	mcphttp.ListenStream
} = writer{}

// Exchange posts req: its items come on the stream.
func (c *Client) Exchange(ctx context.Context, req *Request) (*Stream, error) {
	ctx = c.context(ctx)
	return run(ctx, func(w writer) error { return c.ep.Exchange(req.HTTP(), w) }), nil
}

// Listen opens req's GET stream: its first item is empty (the stream opened), then the
// session's messages.
func (c *Client) Listen(ctx context.Context, req *Request) (*Stream, error) {
	ctx = c.context(ctx)
	return run(ctx, func(w writer) error { return c.ep.Listen(req.HTTP(), w) }), nil
}

// EndSession ends req's session, as DELETE does.
func (c *Client) EndSession(ctx context.Context, req *Request) error {
	return c.ep.EndSession(c.context(ctx), req.HTTP())
}

// Exchange sends one POST body and returns the session id it started (if any) and the
// messages of the answer.
func Exchange(ctx context.Context, c *Client, req *Request) (string, [][]byte, error) {
	stream, err := c.Exchange(ctx, req)
	if err != nil {
		return "", nil, err
	}
	started := ""
	var msgs [][]byte
	for {
		item, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return started, msgs, nil
		}
		if err != nil {
			return started, msgs, err
		}
		if item.Session != "" {
			started = item.Session
			continue
		}
		msgs = append(msgs, item.Message)
	}
}

// Initialize sends an initialize body and returns the session id it started and the
// result; an answer without both is an error that quotes it.
func Initialize(ctx context.Context, c *Client, req *Request) (string, map[string]any, error) {
	sess, msgs, err := Exchange(ctx, c, req)
	if err != nil {
		return "", nil, err
	}
	var resp struct {
		Result map[string]any `json:"result"`
	}
	if sess == "" || len(msgs) != 1 || json.Unmarshal(msgs[0], &resp) != nil || resp.Result == nil {
		return "", nil, fmt.Errorf("initialize answered session %q, messages %q", sess, msgs)
	}
	return sess, resp.Result, nil
}

// Listen opens a GET stream, waits for its first item (the session is valid and the stream
// registered) and returns its messages as they come; the channel closes when the stream ends.
func Listen(ctx context.Context, c *Client, req *Request) (<-chan string, error) {
	stream, err := c.Listen(ctx, req)
	if err != nil {
		return nil, err
	}
	if _, err := stream.Recv(); err != nil {
		return nil, err
	}
	out := make(chan string, 16)
	go func() {
		defer close(out)
		for {
			it, err := stream.Recv()
			if err != nil {
				return
			}
			out <- string(it.Message)
		}
	}()
	return out, nil
}

// ProgressThenResult checks the messages of a call made with progress token token: one
// notifications/progress or more, each with that token, then the answer, which must hold
// every string of want.
func ProgressThenResult(msgs [][]byte, token any, want ...string) error {
	if len(msgs) < 2 {
		return fmt.Errorf("messages %q: want progress, then the answer", msgs)
	}
	last := string(msgs[len(msgs)-1])
	for _, w := range want {
		if !strings.Contains(last, w) {
			return fmt.Errorf("the answer %s lacks %s", last, w)
		}
	}
	for _, m := range msgs[:len(msgs)-1] {
		var n struct {
			Method string
			Params struct {
				ProgressToken any `json:"progressToken"`
			}
		}
		if json.Unmarshal(m, &n) != nil || n.Method != "notifications/progress" || n.Params.ProgressToken != token {
			return fmt.Errorf("notification %s: want progress with the token %v", m, token)
		}
	}
	return nil
}
