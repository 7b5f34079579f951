package catalog

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Servers lists the registered servers, in id order (configcache.Registry: from memory, the
// same config pointers until a write replaces one).
type Servers interface {
	ListServers(ctx context.Context) ([]*mcpgatewayv1.ServerConfig, error)
}

// Lister tells what a connected server listed last, without I/O (upstream.Manager.Listed):
// version changes whenever another list is kept; ok is false when the server is not connected.
type Lister interface {
	Listed(id string) (tools []json.RawMessage, version uint64, ok bool)
}

// Catalog keeps the tool catalog of the connected servers as an immutable Snapshot, rebuilt
// when a reader finds it out of date: a server registered, edited (its filters too) or
// deleted, connected or disconnected, or listing other tools (a refresh, a list_changed, a
// reconnect). Finding that out costs a look at each server's config pointer and list version;
// a rebuild builds the entries of the changed servers only.
type Catalog struct {
	servers Servers
	lister  Lister
	log     *slog.Logger

	cur atomic.Pointer[Snapshot]
	mu  sync.Mutex // one rebuild at a time
}

// New returns a catalog of the servers of servers, with the tools lister says they listed.
// log (nil: slog.Default()) is told of tools left out as malformed, once per list.
func New(servers Servers, lister Lister, log *slog.Logger) *Catalog {
	if log == nil {
		log = slog.Default()
	}
	return &Catalog{servers: servers, lister: lister, log: log}
}

// Snapshot is the catalog at one moment. It is immutable and shared by every reader: nothing
// it returns may be modified.
type Snapshot struct {
	servers []*serverView // in the registry's (id) order
	byID    map[string]*serverView
	list    *mcpgatewayv1.ListToolsResponse // every entry, by chat_name
	wire    []byte                          // proto encoding of list
}

// serverView is one registered server in a snapshot.
type serverView struct {
	cfg     *mcpgatewayv1.ServerConfig
	version uint64
	listed  bool
	entries []*mcpgatewayv1.ToolEntry // the tools its filters expose, in its order
	wires   [][]byte                  // the proto encoding of each entry
}

// Snapshot returns the catalog as it is now: the same Snapshot as the last call when nothing
// changed since, else a new one. Every caller gets a snapshot of the configs and lists it read
// itself, so it sees every change that came before its call; two callers that read across a
// change may each build one (the later reader's wins at the next call).
func (c *Catalog) Snapshot(ctx context.Context) (*Snapshot, error) {
	cfgs, err := c.servers.ListServers(ctx)
	if err != nil {
		return nil, err
	}
	state := make([]listing, len(cfgs))
	for i, cfg := range cfgs {
		state[i].tools, state[i].version, state[i].ok = c.lister.Listed(cfg.GetId())
	}
	if s := c.cur.Load(); s.current(cfgs, state) {
		return s, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	prev := c.cur.Load()
	if prev.current(cfgs, state) { // another reader rebuilt it meanwhile
		return prev, nil
	}
	s := c.build(prev, cfgs, state)
	c.cur.Store(s)
	return s, nil
}

// listing is what a server listed, as Lister tells it.
type listing struct {
	tools   []json.RawMessage
	version uint64
	ok      bool
}

// current tells whether s was built from these configs and listings.
func (s *Snapshot) current(cfgs []*mcpgatewayv1.ServerConfig, state []listing) bool {
	if s == nil || len(s.servers) != len(cfgs) {
		return false
	}
	for i, v := range s.servers {
		if !v.same(cfgs[i], state[i]) {
			return false
		}
	}
	return true
}

// same tells whether v was built from cfg and l.
func (v *serverView) same(cfg *mcpgatewayv1.ServerConfig, l listing) bool {
	return v.listed == l.ok && v.version == l.version && (v.cfg == cfg || proto.Equal(v.cfg, cfg))
}

// build makes the snapshot of cfgs and state, reusing the views of prev that did not change.
func (c *Catalog) build(prev *Snapshot, cfgs []*mcpgatewayv1.ServerConfig, state []listing) *Snapshot {
	s := &Snapshot{servers: make([]*serverView, len(cfgs)), byID: make(map[string]*serverView, len(cfgs))}
	type item struct {
		e    *mcpgatewayv1.ToolEntry
		wire []byte
	}
	var all []item
	for i, cfg := range cfgs {
		var v *serverView
		if old := prev.view(cfg.GetId()); old != nil && old.same(cfg, state[i]) {
			v = old
		} else {
			v = c.view(cfg, state[i])
		}
		s.servers[i], s.byID[cfg.GetId()] = v, v
		for j, e := range v.entries {
			all = append(all, item{e, v.wires[j]})
		}
	}
	// By chat_name; a tie (a server listing one name twice) keeps the registry's order.
	slices.SortStableFunc(all, func(a, b item) int { return strings.Compare(a.e.GetChatName(), b.e.GetChatName()) })
	s.list = &mcpgatewayv1.ListToolsResponse{Tools: make([]*mcpgatewayv1.ToolEntry, len(all))}
	size := 0
	for _, it := range all {
		size += protowire.SizeTag(listToolsField.Number()) + protowire.SizeBytes(len(it.wire))
	}
	s.wire = make([]byte, 0, size)
	for i, it := range all {
		s.list.Tools[i] = it.e
		s.wire = appendEntry(s.wire, listToolsField, it.wire)
	}
	return s
}

// view builds the view of one server: its entries and their encodings.
func (c *Catalog) view(cfg *mcpgatewayv1.ServerConfig, l listing) *serverView {
	v := &serverView{cfg: cfg, version: l.version, listed: l.ok}
	if !l.ok {
		return v
	}
	v.entries = Entries(cfg, l.tools, func(err error) {
		c.log.Warn("skipping a malformed tool", "server", cfg.GetId(), "err", err)
	})
	v.wires = make([][]byte, len(v.entries))
	for i, e := range v.entries {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(e)
		if err != nil { // not seen: an entry holds strings and Structs built from JSON
			c.log.Warn("skipping a tool that does not encode", "server", cfg.GetId(), "tool", e.GetName(), "err", err)
			b = nil
		}
		v.wires[i] = b
	}
	return v
}

func (s *Snapshot) view(id string) *serverView {
	if s == nil {
		return nil
	}
	return s.byID[id]
}

// ListTools is the tools of every connected server, ordered by chat_name (AdminService's
// ListTools answer). Shared: do not modify it.
func (s *Snapshot) ListTools() *mcpgatewayv1.ListToolsResponse { return s.list }

// Server is the entries of the tools server id exposes, in the server's order: nil when it is
// not registered or not connected. Shared: do not modify them.
func (s *Snapshot) Server(id string) []*mcpgatewayv1.ToolEntry {
	if v := s.view(id); v != nil {
		return v.entries
	}
	return nil
}

// Servers is the entries of the tools the servers ids expose (a preset's providers), ordered
// by chat_name; an id that is not a connected server (such as "lemonade") adds nothing.
// The slice is new; the entries are shared: do not modify them.
func (s *Snapshot) Servers(ids []string) []*mcpgatewayv1.ToolEntry {
	var out []*mcpgatewayv1.ToolEntry
	seen := make(map[string]bool, len(ids))
	for _, v := range s.servers { // the registry's order, so that ties sort as in ListTools
		if id := v.cfg.GetId(); slices.Contains(ids, id) && !seen[id] {
			seen[id] = true
			out = append(out, v.entries...)
		}
	}
	slices.SortStableFunc(out, func(a, b *mcpgatewayv1.ToolEntry) int { return strings.Compare(a.GetChatName(), b.GetChatName()) })
	return out
}

// Encoded is the proto encoding of m when m is the current snapshot's ListTools answer,
// kept since it was built (see Codec).
func (c *Catalog) Encoded(m any) ([]byte, bool) {
	if s := c.cur.Load(); s != nil && m == any(s.list) {
		return s.wire, true
	}
	return nil, false
}
