package toolsearch

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/catalog"
)

// Snapshots gives the tool catalog as it is now (catalog.Catalog): the same Snapshot until a
// server is registered, edited, connected or lists other tools (a list_changed).
type Snapshots interface {
	Snapshot(ctx context.Context) (*catalog.Snapshot, error)
}

// Shared is the search index of the catalog's current version, shared by every session,
// preset and chat of the process: built once per catalog Snapshot, when a search first needs
// it, never per session. A search narrows it to what its caller may see (Options.Allow).
type Shared struct {
	snaps Snapshots
	extra []*mcpgatewayv1.ToolEntry // tools that are in no catalog (the built-in provider's)

	mu     sync.Mutex // one build at a time; guards kept
	cur    atomic.Pointer[version]
	kept   []*version // the last KeptVersions built, oldest first
	builds atomic.Int64

	emb      Embedder   // nil: BM25 alone
	bg       *embedding // the background embedding of each version, with emb
	log      *slog.Logger
	embedded atomic.Int64
}

// KeptVersions is how many catalog versions' indexes Shared keeps. A caller that read the
// catalog just before a change asks for the old version after others asked for the new one
// (the catalog gives each the snapshot of what it read): it finds that index kept rather than
// building it again, and the next caller of the new version too.
const KeptVersions = 4

// version is the index of one catalog snapshot.
type version struct {
	snap *catalog.Snapshot
	ix   *Index
}

// NewShared returns the index of snaps' catalog, with extra (fixed tools no catalog holds:
// the built-in provider's, under the names a preset serves them by) beside it.
func NewShared(snaps Snapshots, extra []*mcpgatewayv1.ToolEntry, opts ...SharedOption) *Shared {
	s := &Shared{snaps: snaps, extra: extra, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(s)
	}
	if s.emb != nil {
		s.startEmbedding()
	}
	return s
}

// Index is the index of the catalog as it is now: the last one built while the catalog has
// not changed since, else a new one (one build per change, whatever the number of callers).
func (s *Shared) Index(ctx context.Context) (*Index, error) {
	snap, err := s.snaps.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if v := s.cur.Load(); v != nil && v.snap == snap {
		return v.ix, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.kept { // built meanwhile by another caller, or a version before the last
		if v.snap == snap {
			s.cur.Store(v)
			return v.ix, nil
		}
	}
	tools := snap.ListTools().GetTools()
	entries := make([]*mcpgatewayv1.ToolEntry, 0, len(tools)+len(s.extra))
	entries = append(append(entries, tools...), s.extra...)
	ix := Build(Docs(entries))
	v := &version{snap: snap, ix: ix}
	s.kept = append(s.kept, v)
	if len(s.kept) > KeptVersions {
		s.kept = slices.Delete(s.kept, 0, 1)
	}
	s.cur.Store(v)
	s.builds.Add(1)
	buildsMetric.Inc()
	s.wantVectors()
	return ix, nil
}

// Builds is how many indexes were built (for tests and metrics).
func (s *Shared) Builds() int64 { return s.builds.Load() }

// Docs are the index's documents of catalog entries, keyed by chat_name: the arguments are
// the input schema's top-level properties. Each Doc keeps its entry, which a search answers
// with (name, description, input schema).
func Docs(entries []*mcpgatewayv1.ToolEntry) []Doc {
	docs := make([]Doc, 0, len(entries))
	for _, e := range entries {
		d := Doc{Key: e.GetChatName(), Server: e.GetServerId(), Name: e.GetName(), Title: e.GetTitle(),
			Description: e.GetDescription(), Entry: e}
		props := e.GetInputSchema().GetFields()["properties"].GetStructValue().GetFields()
		for _, name := range slices.Sorted(maps.Keys(props)) { // in name order: the same sums in every build
			desc := props[name].GetStructValue().GetFields()["description"].GetStringValue()
			d.Params = append(d.Params, Param{Name: name, Description: desc})
		}
		docs = append(docs, d)
	}
	return docs
}

// OwnNames are the entries of tools served under their own names (the built-in provider's:
// a preset serves them as /mcp does), for NewShared's extra; a malformed tool is left out.
func OwnNames(server string, raws []json.RawMessage) []*mcpgatewayv1.ToolEntry {
	out := make([]*mcpgatewayv1.ToolEntry, 0, len(raws))
	for _, raw := range raws {
		e, err := catalog.Entry(server, server, raw)
		if err != nil {
			continue
		}
		e.ChatName = e.GetName() // a new entry: no snapshot shares it
		out = append(out, e)
	}
	return out
}
