// Package admin serves AdminService, the registry operations behind /internal/mcp/*: it
// validates and stores server configs, connects them through the upstream manager and shows
// their tools under collision-free names.
package admin

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/catalog"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Service implements AdminService.
type Service struct {
	mcpgatewayv1.UnimplementedAdminServiceServer
	reg registry.Registry
	up  *upstream.Manager
	log *slog.Logger
	// upsertMu serializes upserts so that derived ids cannot race.
	upsertMu sync.Mutex
}

// New returns the admin service.
func New(reg registry.Registry, up *upstream.Manager, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{reg: reg, up: up, log: log}
}

// ListServers lists every registered server with its state.
func (s *Service) ListServers(ctx context.Context, _ *mcpgatewayv1.ListServersRequest) (*mcpgatewayv1.ListServersResponse, error) {
	cfgs, err := s.reg.ListServers(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &mcpgatewayv1.ListServersResponse{Servers: []*mcpgatewayv1.ServerState{}}
	for _, c := range cfgs {
		out.Servers = append(out.Servers, s.state(ctx, c))
	}
	return out, nil
}

// ListTools lists the tools of connected servers, ordered by chat_name.
func (s *Service) ListTools(ctx context.Context, _ *mcpgatewayv1.ListToolsRequest) (*mcpgatewayv1.ListToolsResponse, error) {
	cfgs, err := s.reg.ListServers(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &mcpgatewayv1.ListToolsResponse{Tools: []*mcpgatewayv1.ToolEntry{}}
	for _, c := range cfgs {
		out.Tools = append(out.Tools, s.entries(ctx, c)...)
	}
	sort.Slice(out.Tools, func(i, j int) bool { return out.Tools[i].GetChatName() < out.Tools[j].GetChatName() })
	return out, nil
}

// entries builds the catalog entries of a connected server.
func (s *Service) entries(ctx context.Context, c *mcpgatewayv1.ServerConfig) []*mcpgatewayv1.ToolEntry {
	if !s.up.State(c.GetId()).Connected {
		return nil
	}
	tools, err := s.up.Tools(ctx, c.GetId(), false)
	if err != nil {
		return nil
	}
	var out []*mcpgatewayv1.ToolEntry
	for _, raw := range tools {
		e, err := catalog.Entry(c.GetId(), c.GetName(), raw)
		if err != nil {
			s.log.Warn("skipping a malformed tool", "server", c.GetId(), "err", err)
			continue
		}
		out = append(out, e)
	}
	return out
}

// state is a config plus its connection state and tools.
func (s *Service) state(ctx context.Context, c *mcpgatewayv1.ServerConfig) *mcpgatewayv1.ServerState {
	st := s.up.State(c.GetId())
	out := &mcpgatewayv1.ServerState{
		Id: c.GetId(), Name: c.GetName(), Transport: c.GetTransport(), Command: c.GetCommand(), Args: c.GetArgs(),
		WorkingDir: c.GetWorkingDir(), Env: c.GetEnv(), Url: c.GetUrl(), BearerToken: c.GetBearerToken(),
		AllowInsecureHttp: c.GetAllowInsecureHttp(), Enabled: c.GetEnabled(), TimeoutMs: c.GetTimeoutMs(),
		Connected: st.Connected, LastError: st.LastError, ProtocolVersion: st.Info.ProtocolVersion,
		Tools: []*mcpgatewayv1.ToolEntry{},
	}
	if out.Args == nil {
		out.Args = []string{}
	}
	if out.Env == nil {
		out.Env = map[string]string{}
	}
	switch {
	case !c.GetEnabled():
		out.Status = "disabled"
	case st.Connected:
		out.Status = "connected"
	case st.LastError != "":
		out.Status = "error"
	default:
		out.Status = "disconnected"
	}
	if st.Connected {
		out.ServerInfo, _ = structpb.NewStruct(st.Info.ServerInfo)
		out.Capabilities, _ = structpb.NewStruct(st.Info.Capabilities)
		out.Tools = append(out.Tools, s.entries(ctx, c)...)
	}
	return out
}

// UpsertServer validates and stores a config. A changed config of a connected server
// disconnects it; it reconnects on next use.
func (s *Service) UpsertServer(ctx context.Context, req *mcpgatewayv1.UpsertServerRequest) (*mcpgatewayv1.UpsertServerResponse, error) {
	s.upsertMu.Lock()
	defer s.upsertMu.Unlock()
	cfg, err := serverconfig.Parse(req.GetBody(), func(id string) bool {
		_, err := s.reg.GetServer(ctx, id)
		return err == nil
	})
	if err != nil {
		return nil, toStatus(err)
	}
	old, err := s.reg.GetServer(ctx, cfg.GetId())
	if err != nil && !errors.Is(err, registry.ErrNotFound) {
		return nil, toStatus(err)
	}
	if err := s.reg.PutServer(ctx, cfg); err != nil {
		return nil, toStatus(err)
	}
	if old != nil && !proto.Equal(old, cfg) {
		_ = s.up.Disconnect(ctx, cfg.GetId())
	}
	s.log.Info("server registered", "id", cfg.GetId(), "transport", cfg.GetTransport())
	return &mcpgatewayv1.UpsertServerResponse{Server: cfg}, nil
}

// TestServer connects to a config without saving it, lists its tools and disconnects.
func (s *Service) TestServer(ctx context.Context, req *mcpgatewayv1.TestServerRequest) (*mcpgatewayv1.TestServerResponse, error) {
	cfg, err := serverconfig.Parse(req.GetBody(), nil)
	if err != nil {
		return nil, toStatus(err)
	}
	probe := proto.Clone(cfg).(*mcpgatewayv1.ServerConfig)
	if probe.GetTransport() == serverconfig.TransportStdio {
		// A throwaway id, so that a test never touches a registered server's child.
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		probe.Id = "zest-test-" + hex.EncodeToString(b)
	}
	info, tools, err := s.up.Test(ctx, probe)
	if err != nil {
		return nil, toStatus(err)
	}
	st := &mcpgatewayv1.ServerState{
		Id: cfg.GetId(), Name: cfg.GetName(), Transport: cfg.GetTransport(), Command: cfg.GetCommand(), Args: cfg.GetArgs(),
		WorkingDir: cfg.GetWorkingDir(), Env: cfg.GetEnv(), Url: cfg.GetUrl(), BearerToken: cfg.GetBearerToken(),
		AllowInsecureHttp: cfg.GetAllowInsecureHttp(), Enabled: cfg.GetEnabled(), TimeoutMs: cfg.GetTimeoutMs(),
		Status: "connected", Connected: true, ProtocolVersion: info.ProtocolVersion, TestOnly: proto.Bool(true),
		Tools: []*mcpgatewayv1.ToolEntry{},
	}
	st.ServerInfo, _ = structpb.NewStruct(info.ServerInfo)
	st.Capabilities, _ = structpb.NewStruct(info.Capabilities)
	for _, raw := range tools {
		if e, err := catalog.Entry(cfg.GetId(), cfg.GetName(), raw); err == nil {
			st.Tools = append(st.Tools, e)
		}
	}
	return &mcpgatewayv1.TestServerResponse{Server: st}, nil
}

// DeleteServer disconnects and forgets a server.
func (s *Service) DeleteServer(ctx context.Context, req *mcpgatewayv1.DeleteServerRequest) (*mcpgatewayv1.DeleteServerResponse, error) {
	if err := s.reg.DeleteServer(ctx, req.GetId()); err != nil {
		return nil, toStatus(err)
	}
	s.up.Forget(ctx, req.GetId())
	return &mcpgatewayv1.DeleteServerResponse{Removed: req.GetId()}, nil
}

// ConnectServer connects a server and lists its tools.
func (s *Service) ConnectServer(ctx context.Context, req *mcpgatewayv1.ConnectServerRequest) (*mcpgatewayv1.ConnectServerResponse, error) {
	cfg, err := s.reg.GetServer(ctx, req.GetId())
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.up.Connect(ctx, cfg); err != nil {
		return nil, toStatus(err)
	}
	return &mcpgatewayv1.ConnectServerResponse{Server: s.state(ctx, cfg)}, nil
}

// DisconnectServer closes a server's connection.
func (s *Service) DisconnectServer(ctx context.Context, req *mcpgatewayv1.DisconnectServerRequest) (*mcpgatewayv1.DisconnectServerResponse, error) {
	cfg, err := s.reg.GetServer(ctx, req.GetId())
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.up.Disconnect(ctx, cfg.GetId()); err != nil {
		s.log.Warn("disconnect failed", "id", cfg.GetId(), "err", err)
	}
	return &mcpgatewayv1.DisconnectServerResponse{Server: s.state(ctx, cfg)}, nil
}

// RefreshTools lists a server's tools again, connecting first if needed.
func (s *Service) RefreshTools(ctx context.Context, req *mcpgatewayv1.RefreshToolsRequest) (*mcpgatewayv1.RefreshToolsResponse, error) {
	cfg, err := s.reg.GetServer(ctx, req.GetId())
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.up.Connect(ctx, cfg); err != nil {
		return nil, toStatus(err)
	}
	if _, err := s.up.Tools(ctx, cfg.GetId(), true); err != nil {
		return nil, toStatus(err)
	}
	return &mcpgatewayv1.RefreshToolsResponse{Server: s.state(ctx, cfg)}, nil
}

// CallTool runs one tool of one server, connecting first if needed. The body and the answer
// are JSON bytes: the arguments go to the server, and its result comes back, without being
// decoded into anything on the way.
func (s *Service) CallTool(ctx context.Context, req *mcpgatewayv1.CallToolRequest) (*mcpgatewayv1.CallToolResponse, error) {
	name, args, timeout, err := parseCall(req.GetBody().GetData())
	if err != nil {
		return nil, toStatus(err)
	}
	cfg := s.up.Config(req.GetId())
	if cfg == nil {
		if cfg, err = s.reg.GetServer(ctx, req.GetId()); err != nil {
			return nil, toStatus(err)
		}
	}
	quoted, _ := json.Marshal(name)
	params := make([]byte, 0, len(args)+len(quoted)+24)
	params = append(append(append(append(params, `{"name":`...), quoted...), `,"arguments":`...), args...)
	params = append(params, '}')
	raw, err := s.up.CallTool(ctx, cfg, name, params, timeout)
	if err != nil {
		return nil, toStatus(err)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, toStatus(fmt.Errorf("%w: %q answered a result that is not a JSON object", upstream.ErrUpstream, cfg.GetId()))
	}
	id, _ := json.Marshal(cfg.GetId())
	out := make([]byte, 0, len(raw)+len(id)+len(quoted)+40)
	out = append(append(append(out, `{"server_id":`...), id...), `,"tool":`...)
	out = append(append(append(out, quoted...), `,"result":`...), raw...)
	out = append(out, '}')
	return &mcpgatewayv1.CallToolResponse{Body: &httpbody.HttpBody{ContentType: "application/json", Data: out}}, nil
}

// parseCall reads {"name":…, "arguments":{…}, "timeout_ms":…}; arguments stay raw.
func parseCall(body []byte) (name string, args json.RawMessage, timeout time.Duration, err error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", errBadRequest, fmt.Sprintf(format, a...))
	}
	var f map[string]json.RawMessage
	if err := json.Unmarshal(body, &f); err != nil || f == nil {
		return "", nil, 0, bad(`the body must be a JSON object such as {"name":"echo","arguments":{}}`)
	}
	if err := json.Unmarshal(f["name"], &name); err != nil || name == "" {
		return "", nil, 0, bad("name is required: the tool to call, as a string")
	}
	args = bytes.TrimSpace(f["arguments"])
	switch {
	case len(args) == 0 || string(args) == "null":
		args = json.RawMessage(`{}`)
	case args[0] != '{':
		return "", nil, 0, bad("arguments must be a JSON object")
	}
	t, tOK := f["timeout_ms"]
	if alt, ok := f["timeoutMs"]; ok {
		if tOK {
			return "", nil, 0, bad("timeout_ms and timeoutMs are the same field: send one of them")
		}
		t, tOK = alt, true
	}
	if tOK && string(t) != "null" {
		var ms float64
		if err := json.Unmarshal(t, &ms); err != nil {
			return "", nil, 0, bad("timeout_ms must be a number of milliseconds")
		}
		if ms != float64(int64(ms)) || ms < serverconfig.MinTimeoutMs || ms > serverconfig.MaxTimeoutMs {
			return "", nil, 0, bad("timeout_ms %v is out of range: use a whole number from %d to %d", ms, serverconfig.MinTimeoutMs, serverconfig.MaxTimeoutMs)
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	return name, args, timeout, nil
}
