// Package pins pins the tool definitions of MCP servers (issue 25, "rug pull" protection,
// OWASP MCP03): the first complete listing of a server that pins its tools (pin_tools, true
// unless set false) records a hash of each tool's definition; a later listing — after
// notifications/tools/list_changed, a reconnect, a refresh — that carries a changed
// definition or a new tool holds it. A held tool is left out of every list (Gate.Admit, which
// upstream.Manager applies to every tool list it reads: its cache, which the catalog, the
// chat loop and presets read, and the tools/list pages it forwards) and refused on every call
// (Gate.Check, a link of the tool-call pipeline) until an administrator accepts it
// (Gate.Decide: the admin API, zestctl servers pins, the console).
//
// A definition is name, title, description, inputSchema, outputSchema and annotations, as
// the server sent them; its hash is the hex SHA-256 of their canonical JSON (keys sorted, no
// spaces, numbers as written). The registry keeps, per server, the pinned definitions and
// the held ones (registry.Pins, on bbolt and etcd).
package pins

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/activity"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// States of a held change.
const (
	// StatePending: the change waits for an administrator.
	StatePending = "pending"
	// StateRefused: an administrator refused this definition; it stays hidden, and only
	// another definition is held again.
	StateRefused = "refused"
	// StateUnlisted: a call of a tool that no listing of its server showed, so none pinned
	// it (a server may answer a call of a tool it never listed). It is not recorded: a tool
	// is held, and then accepted, only as a listing shows it.
	StateUnlisted = "unlisted"
)

// FirstListing is the pinned_by of the definitions pinned by a server's first listing.
const FirstListing = "first listing"

// Fields are the members of a tool that its definition (and so its hash) covers.
var Fields = []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations"}

// Definition is the canonical JSON of the definition of raw, a tool as a server listed it,
// and its name. A tool that is not a JSON object or has no name has none.
func Definition(raw json.RawMessage) (name string, canonical []byte, err error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var all map[string]any
	if err := d.Decode(&all); err != nil {
		return "", nil, fmt.Errorf("a tool is not a JSON object: %w", err)
	}
	name, _ = all["name"].(string)
	if name == "" {
		return "", nil, errors.New("a tool has no name")
	}
	def := make(map[string]any, len(Fields))
	for _, f := range Fields {
		if v, ok := all[f]; ok {
			def[f] = v
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(def); err != nil { // map keys sorted, at every depth
		return "", nil, err
	}
	return name, bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Hash is the hex SHA-256 of a canonical definition.
func Hash(canonical []byte) string {
	h := sha256.Sum256(canonical)
	return hex.EncodeToString(h[:])
}

// Servers are where the configs are read (the registry's cache).
type Servers interface {
	GetServer(ctx context.Context, id string) (*mcpgatewayv1.ServerConfig, error)
}

// Gate holds the changed tool definitions of the servers that pin their tools.
type Gate struct {
	store   registry.Pins
	servers Servers
	log     *slog.Logger
	now     func() time.Time

	mu sync.Mutex // one read-modify-write of the store at a time, in this replica
	// heldMu guards held; it is never held across I/O, so that a call's Check does not wait
	// for another server's listing.
	heldMu sync.RWMutex
	// held are the names each server had held at the last read or write of its pins here:
	// Check reads the store again only for these (another replica may have decided them).
	held map[string]map[string]bool
	// pinned are the names each server had pinned then: Check reads the store again for any
	// other name (another replica may have pinned it).
	pinned map[string]map[string]bool
	// list lists a server's tools (its first listing, which pins them) for a call that comes
	// before it (ListWith).
	list func(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) error
	// changed is told of every decision, with the server's id (Relist).
	changed func(ctx context.Context, server string)
}

// New returns the gate over store, reading pin_tools from servers. log (nil: slog.Default())
// is told of every change held.
func New(store registry.Pins, servers Servers, log *slog.Logger) *Gate {
	if log == nil {
		log = slog.Default()
	}
	return &Gate{store: store, servers: servers, log: log, now: time.Now, held: map[string]map[string]bool{}, pinned: map[string]map[string]bool{}}
}

// OnDecision sets f to be called after each decision, with the server's id: the server's
// tools are to be listed again (and its clients told), since what is served changed.
func (g *Gate) OnDecision(f func(ctx context.Context, server string)) { g.changed = f }

// ListWith sets f to list the tools of a server that pins its tools and has no pins yet when
// one of its tools is called: the listing pins them (Admit), and the call is checked against
// it. Without it, such a call is refused.
func (g *Gate) ListWith(f func(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) error) {
	g.list = f
}

// stamp is a time as the pins keep it.
func (g *Gate) stamp() string { return g.now().UTC().Format(activity.TimeLayout) }

// load reads the pins of server (nil: none yet) and notes what it holds.
func (g *Gate) load(ctx context.Context, server string) (*mcpgatewayv1.ToolPins, error) {
	p, err := g.store.GetToolPins(ctx, server)
	if errors.Is(err, registry.ErrNotFound) {
		g.note(server, nil)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	g.note(server, p)
	return p, nil
}

// note remembers the held and the pinned names of p (nil: none).
func (g *Gate) note(server string, p *mcpgatewayv1.ToolPins) {
	held := map[string]bool{}
	for _, h := range p.GetHeld() {
		held[h.GetName()] = true
	}
	pinned := make(map[string]bool, len(p.GetPinned()))
	for _, t := range p.GetPinned() {
		pinned[t.GetName()] = true
	}
	g.heldMu.Lock()
	g.held[server], g.pinned[server] = held, pinned
	observe(server, p) // under heldMu: the last note is the gauge's value
	g.heldMu.Unlock()
}

// pins reports whether the server of id pins its tools; a server that is not registered (a
// TestServer's throwaway id) does not.
func (g *Gate) pins(ctx context.Context, id string) (bool, error) {
	cfg, err := g.servers.GetServer(ctx, id)
	if errors.Is(err, registry.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return serverconfig.PinsTools(cfg), nil
}

// Admit returns the tools of server that are served: all of them when it does not pin its
// tools; else those whose definition is the pinned one. A changed definition, or a tool not
// pinned, is held (recorded, and told to the log once) and left out. complete says tools is
// the server's whole list (not one page of it): a server with no pins yet gets its tools
// pinned by its first complete listing, and every tool of it is served. When the pins cannot
// be read or written, no tool of the server is served (fail closed).
func (g *Gate) Admit(ctx context.Context, server string, tools []json.RawMessage, complete bool) []json.RawMessage {
	on, err := g.pins(ctx, server)
	if err != nil {
		g.log.ErrorContext(ctx, "reading a server's config for its tool pins failed: none of its tools is served", "server", server, "err", err)
		return nil
	}
	if !on {
		return tools
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	p, err := g.load(ctx, server)
	if err != nil {
		g.log.ErrorContext(ctx, "reading a server's tool pins failed: none of its tools is served", "server", server, "err", err)
		return nil
	}
	if p == nil && !complete {
		return tools // a page before the first listing: that listing pins them
	}
	first := p == nil
	if first {
		p = &mcpgatewayv1.ToolPins{ServerId: server}
	}
	pinned := make(map[string]*mcpgatewayv1.PinnedTool, len(p.GetPinned()))
	for _, t := range p.GetPinned() {
		pinned[t.GetName()] = t
	}
	held := make(map[string]*mcpgatewayv1.HeldTool, len(p.GetHeld()))
	for _, h := range p.GetHeld() {
		held[h.GetName()] = h
	}
	dirty := first
	kept := make([]json.RawMessage, 0, len(tools))
	for _, raw := range tools {
		name, def, err := Definition(raw)
		if err != nil {
			continue // no client could use it; the catalog says why
		}
		sum := Hash(def)
		if first {
			if _, dup := pinned[name]; !dup {
				pinned[name] = &mcpgatewayv1.PinnedTool{Name: name, Sha256: sum, Definition: structOf(def), PinnedAt: g.stamp(), PinnedBy: FirstListing}
			}
		}
		if pin := pinned[name]; pin != nil && pin.GetSha256() == sum {
			if held[name] != nil { // the server went back to the pinned definition
				delete(held, name)
				dirty = true
			}
			kept = append(kept, raw)
			continue
		}
		if h := held[name]; h != nil && h.GetNewSha256() == sum {
			continue // held already (pending or refused)
		}
		h := &mcpgatewayv1.HeldTool{Name: name, State: StatePending, NewSha256: sum, NewDefinition: structOf(def), HeldAt: g.stamp()}
		if pin := pinned[name]; pin != nil {
			h.OldSha256, h.OldDefinition = pin.GetSha256(), pin.GetDefinition()
		}
		held[name], dirty = h, true
		g.log.WarnContext(ctx, "a tool's definition changed since it was pinned: held until an administrator accepts it",
			"server", server, "tool", name, "old_sha256", h.GetOldSha256(), "new_sha256", sum)
	}
	if !dirty {
		return kept
	}
	p.Pinned, p.Held = sorted(pinned), sorted(held)
	if err := g.store.PutToolPins(ctx, p); err != nil {
		g.log.ErrorContext(ctx, "writing a server's tool pins failed: none of its tools is served", "server", server, "err", err)
		return nil
	}
	g.note(server, p)
	if first {
		g.log.InfoContext(ctx, "pinned a server's tool definitions at its first listing", "server", server, "tools", len(p.Pinned))
	}
	return kept
}

// sorted is the values of m by name.
func sorted[T interface{ GetName() string }](m map[string]T) []T {
	out := make([]T, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b T) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

// structOf is a canonical definition as a Struct (it is a JSON object).
func structOf(def []byte) *structpb.Struct {
	s := &structpb.Struct{}
	_ = s.UnmarshalJSON(def)
	return s
}

// Check is the pipeline's pinning link: nil when tool (its own name on the server of cfg) is
// pinned and not held, else a *HeldError — held (pending or refused), or not pinned at all
// (StateUnlisted: no listing of the server showed it, so nobody approved its definition). A
// server with no pins yet (its first listing has not completed) is listed first (ListWith),
// which pins its tools; a call is never let through on a definition nobody saw. Check reads
// the store only for a name this replica did not see pinned and unheld, or for a server it
// never looked at.
func (g *Gate) Check(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, tool string) error {
	if g == nil || !serverconfig.PinsTools(cfg) {
		return nil
	}
	id := cfg.GetId()
	g.heldMu.RLock()
	ok := g.pinned[id][tool] && !g.held[id][tool]
	g.heldMu.RUnlock()
	if ok {
		return nil
	}
	p, err := g.load(ctx, id)
	if err != nil {
		return fmt.Errorf("reading the tool pins of MCP server %q: %w", id, err)
	}
	if p == nil && g.list != nil {
		if err := g.list(ctx, cfg); err != nil {
			return err // the manager's error names the server and the fix (disabled, not reachable)
		}
		if p, err = g.load(ctx, id); err != nil {
			return fmt.Errorf("reading the tool pins of MCP server %q: %w", id, err)
		}
	}
	for _, h := range p.GetHeld() {
		if h.GetName() == tool {
			return &HeldError{Server: id, Tool: tool, State: h.GetState()}
		}
	}
	for _, t := range p.GetPinned() {
		if t.GetName() == tool {
			return nil
		}
	}
	return &HeldError{Server: id, Tool: tool, State: StateUnlisted}
}

// List returns the pins of server, or of every server when server is "".
func (g *Gate) List(ctx context.Context, server string) ([]*mcpgatewayv1.ToolPins, error) {
	if server == "" {
		return g.store.ListToolPins(ctx)
	}
	p, err := g.store.GetToolPins(ctx, server)
	if err != nil {
		return nil, err
	}
	return []*mcpgatewayv1.ToolPins{p}, nil
}

// Decide accepts (accept) or refuses the held changes of server that tools names — every
// pending one when tools is empty (a refused one is accepted by its name only) — on behalf
// of the caller of ctx. Accepted definitions are pinned; refused ones stay held, as refused.
// A server or a name with no held change is ErrNotHeld. It returns the pins as stored and the
// changes decided, as they were held.
func (g *Gate) Decide(ctx context.Context, server string, tools []string, accept bool) (*mcpgatewayv1.ToolPins, []*mcpgatewayv1.HeldTool, error) {
	p, decided, err := g.decide(ctx, server, tools, accept)
	if err != nil {
		return nil, nil, err
	}
	if g.changed != nil {
		g.changed(ctx, server)
	}
	return p, decided, nil
}

func (g *Gate) decide(ctx context.Context, server string, tools []string, accept bool) (*mcpgatewayv1.ToolPins, []*mcpgatewayv1.HeldTool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, err := g.load(ctx, server)
	if err != nil {
		return nil, nil, err
	}
	if len(p.GetHeld()) == 0 {
		return nil, nil, fmt.Errorf("MCP server %q: %w (GET /internal/mcp/pins lists what is held)", server, ErrNotHeld)
	}
	pick := map[string]bool{}
	for _, t := range tools {
		if !slices.ContainsFunc(p.GetHeld(), func(h *mcpgatewayv1.HeldTool) bool { return h.GetName() == t }) {
			return nil, nil, fmt.Errorf("tool %q of MCP server %q: %w (GET /internal/mcp/pins?server_id=%s lists what is held)", t, server, ErrNotHeld, server)
		}
		pick[t] = true
	}
	who := activity.WhoOf(ctx)
	p = proto.Clone(p).(*mcpgatewayv1.ToolPins)
	var decided []*mcpgatewayv1.HeldTool
	keep := p.Held[:0]
	pinned := map[string]*mcpgatewayv1.PinnedTool{}
	for _, t := range p.GetPinned() {
		pinned[t.GetName()] = t
	}
	for _, h := range p.GetHeld() {
		chosen := pick[h.GetName()] || (len(tools) == 0 && h.GetState() == StatePending)
		if !chosen {
			keep = append(keep, h)
			continue
		}
		decided = append(decided, proto.Clone(h).(*mcpgatewayv1.HeldTool))
		if accept {
			pinned[h.GetName()] = &mcpgatewayv1.PinnedTool{Name: h.GetName(), Sha256: h.GetNewSha256(), Definition: h.GetNewDefinition(), PinnedAt: g.stamp(), PinnedBy: who}
			continue
		}
		h.State, h.DecidedBy = StateRefused, who
		keep = append(keep, h)
	}
	if len(decided) == 0 {
		return nil, nil, fmt.Errorf("MCP server %q: %w pending (a refused change is accepted by its name)", server, ErrNotHeld)
	}
	p.Held, p.Pinned = keep, sorted(pinned)
	if err := g.store.PutToolPins(ctx, p); err != nil {
		return nil, nil, err
	}
	g.note(server, p)
	return p, decided, nil
}

// Forget drops the pins of a server (deleted: one registered again under its id starts over).
func (g *Gate) Forget(ctx context.Context, server string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.heldMu.Lock()
	delete(g.held, server)
	delete(g.pinned, server)
	unobserve(server)
	g.heldMu.Unlock()
	return g.store.DeleteToolPins(ctx, server)
}
