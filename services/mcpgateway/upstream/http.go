package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/lib/envref"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// ProtocolVersion is the version offered to HTTP upstreams.
const ProtocolVersion = "2025-11-25"

// httpSession is a Streamable HTTP server reached directly.
type httpSession struct {
	cfg     *mcpgatewayv1.ServerConfig
	headers map[string]string
	log     *slog.Logger
	nextID  atomic.Int64

	mu     sync.Mutex
	cl     *client.Client
	tr     *transport.StreamableHTTP
	inf    Info
	cached []json.RawMessage
}

func openHTTP(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, lookupEnv func(string) (string, bool), log *slog.Logger) (*httpSession, error) {
	s := &httpSession{cfg: cfg, log: log, headers: map[string]string{}}
	if ref := cfg.GetBearerToken(); ref != "" {
		name, err := envref.Variable(ref)
		if err != nil {
			return nil, fmt.Errorf("%w: bearer_token %w", ErrUpstream, err)
		}
		v, ok := lookupEnv(name)
		if !ok {
			return nil, fmt.Errorf("%w: %w: %s", ErrUpstream, envref.ErrNotSet, name)
		}
		s.headers["Authorization"] = "Bearer " + v
	}
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	if _, err := s.tools(ctx, true); err != nil {
		s.close(ctx)
		return nil, err
	}
	return s, nil
}

// connect opens a new MCP session: initialize, then notifications/initialized.
func (s *httpSession) connect(ctx context.Context) error {
	tr, err := transport.NewStreamableHTTP(s.cfg.GetUrl(), transport.WithHTTPHeaders(s.headers), transport.WithHTTPLogger(s.log))
	if err != nil {
		return fmt.Errorf("%w: %q: %v", ErrUpstream, s.cfg.GetId(), err)
	}
	cl := client.NewClient(tr, client.WithProtocolVersion(ProtocolVersion))
	if err := cl.Start(ctx); err != nil {
		return fmt.Errorf("%w: %q: start: %v", ErrUpstream, s.cfg.GetId(), err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = ProtocolVersion
	req.Params.ClientInfo = mcp.Implementation{Name: "zest-mcpgateway", Version: "0.1.0"}
	res, err := cl.Initialize(ctx, req)
	if err != nil {
		cl.Close()
		return fmt.Errorf("%w: %q: initialize: %v", ErrUpstream, s.cfg.GetId(), err)
	}
	inf := Info{ProtocolVersion: res.ProtocolVersion, ServerInfo: toMap(res.ServerInfo), Capabilities: toMap(res.Capabilities)}
	s.mu.Lock()
	old := s.cl
	s.cl, s.tr, s.inf = cl, tr, inf
	s.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	return nil
}

func toMap(v any) map[string]any {
	b, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func (s *httpSession) info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inf
}

const maxToolPages = 100

func (s *httpSession) tools(ctx context.Context, refresh bool) ([]json.RawMessage, error) {
	s.mu.Lock()
	cached := s.cached
	s.mu.Unlock()
	if cached != nil && !refresh {
		return cached, nil
	}
	var all []json.RawMessage
	cursor := ""
	for range maxToolPages {
		params := json.RawMessage(`{}`)
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		raw, err := s.call(ctx, "tools/list", params, 0)
		if err != nil {
			return nil, err
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("%w: %q: tools/list result: %v", ErrUpstream, s.cfg.GetId(), err)
		}
		all = append(all, page.Tools...)
		if page.NextCursor == "" {
			s.mu.Lock()
			s.cached = all
			s.mu.Unlock()
			return all, nil
		}
		cursor = page.NextCursor
	}
	return nil, fmt.Errorf("%w: %q: tools/list has more than %d pages", ErrUpstream, s.cfg.GetId(), maxToolPages)
}

// call sends one request as raw JSON and returns the raw result; a session the server has
// forgotten (404) is initialized again and the request sent once more.
func (s *httpSession) call(ctx context.Context, method string, params json.RawMessage, timeout time.Duration) (json.RawMessage, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	resp, err := s.send(ctx, method, params)
	if errors.Is(err, transport.ErrSessionTerminated) {
		s.log.Info("upstream session expired; initializing again", "server", s.cfg.GetId())
		if err := s.connect(ctx); err != nil {
			return nil, err
		}
		resp, err = s.send(ctx, method, params)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w: %q: %s timed out: %w", ErrUpstream, s.cfg.GetId(), method, err)
		}
		return nil, fmt.Errorf("%w: %q: %s: %v", ErrUpstream, s.cfg.GetId(), method, err)
	}
	if resp.Error != nil {
		data, _ := json.Marshal(resp.Error.Data)
		return nil, &RPCError{Code: resp.Error.Code, Message: resp.Error.Message, Data: data}
	}
	return resp.Result, nil
}

func (s *httpSession) send(ctx context.Context, method string, params json.RawMessage) (*transport.JSONRPCResponse, error) {
	s.mu.Lock()
	tr := s.tr
	s.mu.Unlock()
	req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(fmt.Sprintf("zest-%d", s.nextID.Add(1))), Method: method}
	if len(params) > 0 {
		req.Params = params
	}
	return tr.SendRequest(ctx, req)
}

// close ends the session (mcp-go sends DELETE with the session id).
func (s *httpSession) close(context.Context) error {
	s.mu.Lock()
	cl := s.cl
	s.cl = nil
	s.mu.Unlock()
	if cl == nil {
		return nil
	}
	return cl.Close()
}
