// Package admin serves AdminService, the registry operations behind /internal/mcp/*: it
// validates and stores server configs, connects them through the upstream manager and shows
// and calls the tools their filters expose, under collision-free names.
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
	"math"
	"sync"
	"time"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/activity"
	"github.com/zestmcp/zest/services/mcpgateway/approval"
	"github.com/zestmcp/zest/services/mcpgateway/audit"
	"github.com/zestmcp/zest/services/mcpgateway/catalog"
	"github.com/zestmcp/zest/services/mcpgateway/follow"
	"github.com/zestmcp/zest/services/mcpgateway/oauthclient"
	"github.com/zestmcp/zest/services/mcpgateway/pins"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"github.com/zestmcp/zest/services/mcpgateway/toolcall"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Service implements AdminService.
type Service struct {
	mcpgatewayv1.UnimplementedAdminServiceServer
	reg   registry.Registry
	up    *upstream.Manager
	tools *toolcall.Pipeline
	cat   *catalog.Catalog
	log   *slog.Logger
	// audit is the audit trail ListAudit and ExportAudit read (nil: the trail is off).
	audit *audit.Log
	// activity is what ListActivity lists (nil lists nothing).
	activity *activity.Log
	// changes applies each write of a server or preset to the replica's live state.
	changes *follow.Replica
	// approvals lists and decides the tool calls that wait for approval (nil: none are held).
	approvals *approval.Gate
	// pins lists and decides the held tool definitions (nil: none are held).
	pins *pins.Gate
	// models checks a preset's model when it is saved (nil: not checked).
	models inferencev1.InferenceServiceClient
	// upsertMu serializes upserts so that derived ids cannot race.
	upsertMu sync.Mutex
}

// Option configures a Service.
type Option func(*Service)

// WithModels is the inference service a preset's model is checked against when it is saved
// (without it, a preset may name any model).
func WithModels(infer inferencev1.InferenceServiceClient) Option {
	return func(s *Service) { s.models = infer }
}

// WithAudit is the audit trail ListAudit and ExportAudit read (without it, or nil, the trail
// is off). Its interceptor records the admin changes; the activity feeds it the tool calls.
func WithAudit(trail *audit.Log) Option { return func(s *Service) { s.audit = trail } }

// WithActivity is what ListActivity lists: the tool calls of every path, which the tool-call
// pipeline records in it (without it, nothing).
func WithActivity(calls *activity.Log) Option { return func(s *Service) { s.activity = calls } }

// WithChanges applies each write of a server or preset to the replica's live state (its
// connections, its sessions): the same path as another replica's writes, seen by the
// registry's watch. Without it, New's closes and forgets connections; mcpgateway's tells the
// sessions too.
func WithChanges(changes *follow.Replica) Option { return func(s *Service) { s.changes = changes } }

// WithApprovals lists and decides the tool calls that wait for approval (the pipeline's gate;
// without it, or nil, none are held).
func WithApprovals(gate *approval.Gate) Option { return func(s *Service) { s.approvals = gate } }

// WithCatalog is the tool catalog the service answers from, shared with the process's other
// readers of it (tool search); without it, New makes its own.
func WithCatalog(cat *catalog.Catalog) Option { return func(s *Service) { s.cat = cat } }

// New returns the admin service. reg is the registry every write of a server goes through
// (configcache.Registry in mcpgateway, so that reads on the hot paths need no registry read).
// tools is the tool-call pipeline CallTool goes through.
func New(reg registry.Registry, up *upstream.Manager, tools *toolcall.Pipeline, log *slog.Logger, opts ...Option) *Service {
	if log == nil {
		log = slog.Default()
	}
	s := &Service{reg: reg, up: up, tools: tools, log: log}
	for _, o := range opts {
		o(s)
	}
	if s.cat == nil {
		s.cat = catalog.New(reg, up, log)
	}
	if s.changes == nil {
		s.changes = follow.New(up, log)
	}
	return s
}

// Catalog is the tool catalog the service answers from: its snapshot is shared by every
// reader of the catalog (the tool list, the servers' states), and its Codec sends the
// snapshot's tool list with the encoding kept when it was built.
func (s *Service) Catalog() *catalog.Catalog { return s.cat }

// ListServers lists every registered server with its state.
func (s *Service) ListServers(ctx context.Context, _ *mcpgatewayv1.ListServersRequest) (*mcpgatewayv1.ListServersResponse, error) {
	snap, err := s.cat.Snapshot(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	cfgs, err := s.reg.ListServers(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &mcpgatewayv1.ListServersResponse{Servers: []*mcpgatewayv1.ServerState{}}
	for _, c := range cfgs {
		out.Servers = append(out.Servers, s.stateIn(ctx, snap, c))
	}
	return out, nil
}

// ListTools lists the tools of connected servers, ordered by chat_name: the catalog's
// snapshot, shared (gRPC sends it with the encoding the snapshot kept).
func (s *Service) ListTools(ctx context.Context, _ *mcpgatewayv1.ListToolsRequest) (*mcpgatewayv1.ListToolsResponse, error) {
	snap, err := s.cat.Snapshot(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return snap.ListTools(), nil
}

// stateOf is the state of the server of config c before its connection is looked at: c, with
// approval, approval_by and pin_tools shown as what they mean when the server sets none.
func stateOf(c *mcpgatewayv1.ServerConfig) *mcpgatewayv1.ServerState {
	if c.Approval == nil || c.ApprovalBy == nil || c.PinTools == nil {
		c = proto.CloneOf(c)
		if c.Approval == nil {
			c.Approval = proto.String(serverconfig.ApprovalNone)
		}
		if c.ApprovalBy == nil {
			c.ApprovalBy = proto.String(serverconfig.ApprovalBy(c))
		}
		if c.PinTools == nil {
			c.PinTools = proto.Bool(serverconfig.PinsTools(c))
		}
	}
	return &mcpgatewayv1.ServerState{Config: c, Tools: []*mcpgatewayv1.ToolEntry{}}
}

// state is a config plus its connection state and tools, from the catalog as it is now.
func (s *Service) state(ctx context.Context, c *mcpgatewayv1.ServerConfig) (*mcpgatewayv1.ServerState, error) {
	snap, err := s.cat.Snapshot(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return s.stateIn(ctx, snap, c), nil
}

// stateIn is a config plus its connection state, and its tools in snap.
func (s *Service) stateIn(ctx context.Context, snap *catalog.Snapshot, c *mcpgatewayv1.ServerConfig) *mcpgatewayv1.ServerState {
	st := s.up.State(c.GetId())
	out := stateOf(c)
	out.Connected, out.LastError, out.ProtocolVersion = st.Connected, st.LastError, st.Info.ProtocolVersion
	out.Placement = s.up.ToolHost(c)
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
	if c.GetOauth() != nil {
		out.OauthState = s.up.OAuth().State(ctx, c) // never a token
	}
	if st.Connected {
		out.ServerInfo, _ = structpb.NewStruct(st.Info.ServerInfo)
		out.Capabilities, _ = structpb.NewStruct(st.Info.Capabilities)
		out.Tools = append(out.Tools, snap.Server(c.GetId())...)
	}
	return out
}

// UpsertServer validates and stores a config: a new server as sent (with the defaults), a
// registered one with its Lemonade fields replaced and the Zest fields the request leaves out
// kept (serverconfig.Upsert). A changed config of a connected server disconnects it; it
// reconnects on next use. A change of its tool filters, approvals or limits alone does not:
// they apply at once to what the open connection listed.
func (s *Service) UpsertServer(ctx context.Context, req *mcpgatewayv1.UpsertServerRequest) (*mcpgatewayv1.UpsertServerResponse, error) {
	s.upsertMu.Lock()
	defer s.upsertMu.Unlock()
	var old *mcpgatewayv1.ServerConfig
	if id := req.GetServer().GetId(); id != "" {
		var err error
		if old, err = s.reg.GetServer(ctx, id); err != nil && !errors.Is(err, registry.ErrNotFound) {
			return nil, toStatus(err)
		}
	}
	in, err := serverconfig.Upsert(old, req.GetServer(), req.GetUpdateMask().GetPaths())
	if err != nil {
		return nil, toStatus(err)
	}
	cfg, err := serverconfig.Parse(in, func(id string) bool {
		_, err := s.reg.GetServer(ctx, id)
		return err == nil
	})
	if err == nil && !proto.Equal(old.GetOauth(), cfg.GetOauth()) {
		err = oauthclient.CheckClientKey(cfg) // the file is mcpgateway's to read
	}
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.store(ctx, old, cfg); err != nil {
		return nil, err
	}
	return &mcpgatewayv1.UpsertServerResponse{Server: cfg}, nil
}

// store writes cfg, the config of a server whose stored one was old (nil when new), notes the
// fields it changed for the audit trail and applies the change to the replica's live state.
func (s *Service) store(ctx context.Context, old, cfg *mcpgatewayv1.ServerConfig) error {
	if err := s.reg.PutServer(ctx, cfg); err != nil {
		return toStatus(err)
	}
	audit.NoteChanged(ctx, audit.Changed(old, cfg))
	if old != nil && s.pins != nil && !serverconfig.SameProgram(old, cfg) {
		// Another program under this id: its first listing is pinned (before it connects).
		if err := s.pins.Forget(ctx, cfg.GetId()); err != nil {
			s.log.WarnContext(ctx, "forgetting the tool pins of a server pointed at another program failed", "server", cfg.GetId(), "err", err)
		}
	}
	s.changes.Changed(ctx, registry.Change{Kind: registry.ServerPut, ID: cfg.GetId(), Server: cfg}, old)
	s.log.Info("server registered", "id", cfg.GetId(), "transport", cfg.GetTransport())
	return nil
}

// UpdateServer changes the fields of a registered server that the request's mask names and
// keeps every other (serverconfig.Update), checked as an upsert is; an unknown id is NotFound.
func (s *Service) UpdateServer(ctx context.Context, req *mcpgatewayv1.UpdateServerRequest) (*mcpgatewayv1.UpdateServerResponse, error) {
	s.upsertMu.Lock()
	defer s.upsertMu.Unlock()
	id := req.GetServer().GetId()
	if id == "" {
		return nil, toStatus(fmt.Errorf("%w: server.id is required: the id of the server to update", serverconfig.ErrInvalid))
	}
	old, err := s.reg.GetServer(ctx, id)
	if err != nil {
		return nil, toStatus(err)
	}
	in, err := serverconfig.Update(old, req.GetServer(), req.GetUpdateMask().GetPaths())
	if err != nil {
		return nil, toStatus(err)
	}
	cfg, err := serverconfig.Parse(in, nil)
	if err == nil && !proto.Equal(old.GetOauth(), cfg.GetOauth()) {
		err = oauthclient.CheckClientKey(cfg)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.store(ctx, old, cfg); err != nil {
		return nil, err
	}
	return &mcpgatewayv1.UpdateServerResponse{Server: cfg}, nil
}

// TestServer connects to a config without saving it, lists its tools and disconnects.
func (s *Service) TestServer(ctx context.Context, req *mcpgatewayv1.TestServerRequest) (*mcpgatewayv1.TestServerResponse, error) {
	cfg, err := serverconfig.Parse(req.GetServer(), nil)
	if err == nil {
		err = oauthclient.CheckClientKey(cfg)
	}
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
	st := stateOf(cfg)
	st.Status, st.Connected, st.ProtocolVersion, st.TestOnly = "connected", true, info.ProtocolVersion, proto.Bool(true)
	st.ServerInfo, _ = structpb.NewStruct(info.ServerInfo)
	st.Capabilities, _ = structpb.NewStruct(info.Capabilities)
	st.Tools = catalog.Entries(cfg, tools, nil)
	return &mcpgatewayv1.TestServerResponse{Server: st}, nil
}

// DeleteServer disconnects and forgets a server.
func (s *Service) DeleteServer(ctx context.Context, req *mcpgatewayv1.DeleteServerRequest) (*mcpgatewayv1.DeleteServerResponse, error) {
	old, _ := s.reg.GetServer(ctx, req.GetId())
	if err := s.reg.DeleteServer(ctx, req.GetId()); err != nil {
		return nil, toStatus(err)
	}
	if signer := s.up.OAuth(); signer != nil {
		// A server registered again under the id signs in again.
		if err := signer.Forget(ctx, req.GetId()); err != nil {
			s.log.Warn("the OAuth tokens of a deleted server could not be forgotten", "server", req.GetId(), "err", err)
		}
	}
	s.changes.Changed(ctx, registry.Change{Kind: registry.ServerDeleted, ID: req.GetId()}, old)
	if s.pins != nil {
		// One registered again under this id starts over: its first listing is pinned.
		if err := s.pins.Forget(ctx, req.GetId()); err != nil {
			s.log.WarnContext(ctx, "forgetting a deleted server's tool pins failed", "server", req.GetId(), "err", err)
		}
	}
	return &mcpgatewayv1.DeleteServerResponse{Removed: req.GetId()}, nil
}

// ConnectServer connects a server and lists its tools.
func (s *Service) ConnectServer(ctx context.Context, req *mcpgatewayv1.ConnectServerRequest) (*mcpgatewayv1.ConnectServerResponse, error) {
	cfg, err := s.reg.GetServer(ctx, req.GetId())
	if err != nil {
		return nil, toStatus(err)
	}
	if cfg.GetEnabled() {
		s.up.Release(cfg.GetId()) // an administrator's connect ends their disconnect
	}
	if err := s.up.Connect(ctx, cfg); err != nil {
		return nil, toStatus(err)
	}
	st, err := s.state(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &mcpgatewayv1.ConnectServerResponse{Server: st}, nil
}

// DisconnectServer closes a server's connection, and keeps it closed until ConnectServer.
func (s *Service) DisconnectServer(ctx context.Context, req *mcpgatewayv1.DisconnectServerRequest) (*mcpgatewayv1.DisconnectServerResponse, error) {
	cfg, err := s.reg.GetServer(ctx, req.GetId())
	if err != nil {
		return nil, toStatus(err)
	}
	// The disconnect holds: no call connects the server again until ConnectServer.
	if err := s.up.Hold(ctx, cfg.GetId()); err != nil {
		s.log.Warn("disconnect failed", "id", cfg.GetId(), "err", err)
	}
	st, err := s.state(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &mcpgatewayv1.DisconnectServerResponse{Server: st}, nil
}

// RefreshTools lists a server's tools again, connecting first if needed.
func (s *Service) RefreshTools(ctx context.Context, req *mcpgatewayv1.RefreshToolsRequest) (*mcpgatewayv1.RefreshToolsResponse, error) {
	cfg, err := s.reg.GetServer(ctx, req.GetId())
	if err != nil {
		return nil, toStatus(err)
	}
	if _, err := s.up.ListTools(ctx, cfg, true); err != nil {
		return nil, toStatus(err)
	}
	st, err := s.state(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &mcpgatewayv1.RefreshToolsResponse{Server: st}, nil
}

// GetServer shows one server: its config, connection state and tools, and for a stdio
// server the tool host's view of its process (state, pid, restarts, last error, stderr tail).
func (s *Service) GetServer(ctx context.Context, req *mcpgatewayv1.GetServerRequest) (*mcpgatewayv1.GetServerResponse, error) {
	cfg, err := s.reg.GetServer(ctx, req.GetId())
	if err != nil {
		return nil, toStatus(err)
	}
	st, err := s.state(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if cfg.GetTransport() == serverconfig.TransportStdio {
		p, err := s.up.Process(ctx, cfg)
		if err != nil {
			p = &mcpgatewayv1.ProcessState{State: "unknown", LastError: err.Error()}
		}
		st.Process = p
	}
	return &mcpgatewayv1.GetServerResponse{Server: st}, nil
}

// CallTool runs one tool of one server through the tool-call pipeline, connecting first if
// needed, and returns the server's CallToolResult as it answered it. A tool that needs
// approval waits for an administrator's decision (the server's approval_by does not matter:
// the admin API has no MCP client to ask), and a refusal says why (FailedPrecondition with
// ErrorInfo APPROVAL_NOT_GIVEN). A tool the server's filters do not expose is refused
// (FailedPrecondition, TOOL_FILTERED) without reaching the server.
func (s *Service) CallTool(ctx context.Context, req *mcpgatewayv1.CallToolRequest) (*mcpgatewayv1.CallToolResponse, error) {
	if req.GetName() == "" {
		return nil, toStatus(fmt.Errorf("%w: name is required: the tool to call, as a string", errBadRequest))
	}
	var timeout time.Duration
	if req.TimeoutMs != nil {
		ms := req.GetTimeoutMs()
		if ms < serverconfig.MinTimeoutMs || ms > serverconfig.MaxTimeoutMs {
			return nil, toStatus(fmt.Errorf("%w: timeout_ms %d is out of range: use a whole number from %d to %d", errBadRequest, ms, serverconfig.MinTimeoutMs, serverconfig.MaxTimeoutMs))
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	args := []byte(`{}`)
	if a := req.GetArguments(); a != nil {
		b, err := protojson.Marshal(a)
		if err != nil {
			return nil, toStatus(fmt.Errorf("%w: arguments: %v", errBadRequest, err))
		}
		args = b
	}
	quoted, _ := json.Marshal(req.GetName())
	params := make([]byte, 0, len(args)+len(quoted)+24)
	params = append(append(append(append(params, `{"name":`...), quoted...), `,"arguments":`...), args...)
	params = append(params, '}')
	// The one door: resolve, filters, approval (held for an administrator), limits, the call,
	// the output cap, the records.
	raw, err := s.tools.Invoke(ctx, &toolcall.Call{Entry: toolcall.EntryAdmin, Server: req.GetId(), Tool: req.GetName(), Params: params, Timeout: timeout})
	result := &structpb.Struct{}
	if err == nil {
		if raw = bytes.TrimSpace(raw); len(raw) == 0 || raw[0] != '{' || protojson.Unmarshal(raw, result) != nil {
			err = fmt.Errorf("%w: %q answered a result that is not a JSON object", upstream.ErrUpstream, req.GetId())
		}
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &mcpgatewayv1.CallToolResponse{ServerId: req.GetId(), Tool: req.GetName(), Result: result}, nil
}

// Limits of ListActivity.
const (
	// DefaultActivityLimit is how many calls ListActivity answers when the request says 0.
	DefaultActivityLimit = 100
)

// ListActivity lists the latest tool calls of this replica, newest first: at most limit
// (DefaultActivityLimit when 0), only those with an id above after.
func (s *Service) ListActivity(_ context.Context, req *mcpgatewayv1.ListActivityRequest) (*mcpgatewayv1.ListActivityResponse, error) {
	limit := int(req.GetLimit())
	switch {
	case limit < 0 || limit > activity.MaxSize:
		return nil, toStatus(fmt.Errorf("%w: limit %d is out of range: use a whole number from 1 to %d (0: %d)", errBadRequest, limit, activity.MaxSize, DefaultActivityLimit))
	case limit == 0:
		limit = DefaultActivityLimit
	}
	calls, latest := s.activity.List(req.GetAfter(), limit)
	out := &mcpgatewayv1.ListActivityResponse{Calls: make([]*mcpgatewayv1.ActivityCall, 0, len(calls)), Latest: latest,
		Details: s.activity.Details(), Size: int32(s.activity.Size())}
	for _, c := range calls {
		out.Calls = append(out.Calls, &mcpgatewayv1.ActivityCall{
			Id: c.ID, Time: c.Time.UTC().Format(activity.TimeLayout), Path: c.Path, Who: c.Who, ServerId: c.Server, Tool: c.Tool,
			ChatName: c.ChatName, PresetId: c.Preset, DurationMs: int32(min(c.Duration.Milliseconds(), math.MaxInt32)),
			Outcome: c.Outcome, Error: c.Error, Arguments: c.Arguments, ArgumentsTruncated: c.ArgumentsTruncated,
			Result: c.Result, ResultTruncated: c.ResultTruncated,
		})
	}
	return out, nil
}
