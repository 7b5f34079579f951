package toolsearch_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/catalog"
	"github.com/zestmcp/zest/services/mcpgateway/toolsearch"
	"github.com/zestmcp/zest/services/mcpgateway/toolshape"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// source is a registry and an upstream in memory for catalog.New: two servers and what they
// listed, with a version that a list_changed bumps.
type source struct {
	mu      sync.Mutex
	cfgs    []*mcpgatewayv1.ServerConfig
	tools   map[string][]json.RawMessage
	version uint64
}

func (s *source) ListServers(context.Context) ([]*mcpgatewayv1.ServerConfig, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfgs, nil
}

func (s *source) Listed(id string) ([]json.RawMessage, uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tools[id]
	return t, s.version, ok
}

// listChanged makes server id list tools anew, as after its list_changed.
func (s *source) listChanged(id string, tools ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tools[id] = raws(tools...)
	s.version++
}

func raws(tools ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(tools))
	for i, t := range tools {
		out[i] = json.RawMessage(t)
	}
	return out
}

func newSource() *source {
	cfg := func(id string, deny ...string) *mcpgatewayv1.ServerConfig {
		return &mcpgatewayv1.ServerConfig{Id: id, Name: id, Enabled: proto.Bool(true), ToolsDeny: deny}
	}
	return &source{
		cfgs: []*mcpgatewayv1.ServerConfig{cfg("fs", "delete_file"), cfg("gh")},
		tools: map[string][]json.RawMessage{
			"fs": raws(`{"name":"read_file","description":"Read the complete contents of a file.","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}`,
				`{"name":"delete_file","description":"Delete a file for good."}`),
			"gh": raws(`{"name":"create_issue","description":"Create a new issue in a GitHub repository.","inputSchema":{"type":"object","properties":{"title":{"type":"string"}}}}`),
		},
	}
}

func names(found []toolsearch.Found) []string {
	var out []string
	for _, f := range found {
		out = append(out, f.Name)
	}
	return out
}

// TestSharedOneBuildPerChange: 100 sessions searching at once build the index once; a
// list_changed builds it once more, and the new tool is found.
func TestSharedOneBuildPerChange(t *testing.T) {
	src := newSource()
	s := toolsearch.NewShared(catalog.New(src, src, nil), nil)
	const sessions = 100
	search := func(query string) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, sessions)
		for range sessions {
			wg.Go(func() {
				if _, err := s.Search(t.Context(), toolsearch.SearchArgs{Query: query, Limit: 5}, []string{"fs", "gh"}, nil); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	search("read a file")
	if n := s.Builds(); n != 1 {
		t.Fatalf("%d sessions built the index %d times, want 1", sessions, n)
	}
	search("read a file")
	if n := s.Builds(); n != 1 {
		t.Fatalf("an unchanged catalog built the index again: %d builds", n)
	}
	src.listChanged("gh", `{"name":"merge_pull_request","description":"Merge a pull request."}`)
	search("merge the pull request")
	if n := s.Builds(); n != 2 {
		t.Fatalf("after one list_changed, %d builds, want 2", n)
	}
	answer, err := s.Search(t.Context(), toolsearch.SearchArgs{Query: "merge the pull request", Limit: 5}, []string{"fs", "gh"}, nil)
	found := answer.Tools
	if err != nil || len(found) == 0 || found[0].Name != catalog.ChatName("gh", "merge_pull_request") {
		t.Fatalf("after list_changed: %v %v", names(found), err)
	}
}

// replay gives the snapshots of snaps in turn, as a catalog gives callers that read it
// across a change: one read before the change asks for the old version after the new one.
type replay struct {
	mu    sync.Mutex
	snaps []*catalog.Snapshot
}

func (r *replay) Snapshot(context.Context) (*catalog.Snapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.snaps[0]
	r.snaps = r.snaps[1:]
	return s, nil
}

// TestSharedKeepsTheVersionBefore: callers that ask for two versions in turn (the catalog's
// old one, read before a change, and its new one) build each once. Under load a stress run
// built the index 7 times over 5 versions: Shared kept only the last version it built, and a
// late reader of the old one built it again, then the next reader of the new one too.
func TestSharedKeepsTheVersionBefore(t *testing.T) {
	src := newSource()
	cat := catalog.New(src, src, nil)
	before, err := cat.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	src.listChanged("gh", `{"name":"merge_pull_request","description":"Merge a pull request."}`)
	after, err := cat.Snapshot(t.Context())
	if err != nil || after == before {
		t.Fatalf("no new version after list_changed: %v", err)
	}
	s := toolsearch.NewShared(&replay{snaps: []*catalog.Snapshot{before, after, before, after, before, after}}, nil)
	for range 6 {
		if _, err := s.Index(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Builds(); n != 2 {
		t.Fatalf("two versions asked for in turn built the index %d times, want 2", n)
	}
}

// TestSharedSearchNarrows: a search sees only the caller's servers, a server filter only its
// server, a denied tool never; a filter on a server the caller cannot use is refused.
func TestSharedSearchNarrows(t *testing.T) {
	src := newSource()
	s := toolsearch.NewShared(catalog.New(src, src, nil), nil)
	ctx := t.Context()
	answer, err := s.Search(ctx, toolsearch.SearchArgs{Query: "file issue", Limit: 5}, []string{"gh"}, nil)
	found := answer.Tools
	if err != nil || len(found) != 1 || found[0].Server != "gh" {
		t.Fatalf("only gh's tools: %v %v", names(found), err)
	}
	answer, _ = s.Search(ctx, toolsearch.SearchArgs{Query: "delete a file", Limit: 5}, []string{"fs", "gh"}, nil)
	found = answer.Tools
	for _, f := range found {
		if f.Name == catalog.ChatName("fs", "delete_file") {
			t.Fatalf("a denied tool was found: %v", names(found))
		}
	}
	answer, _ = s.Search(ctx, toolsearch.SearchArgs{Query: "file issue", Server: "fs", Limit: 5}, []string{"fs", "gh"}, nil)
	found = answer.Tools
	if len(found) != 1 || found[0].Name != catalog.ChatName("fs", "read_file") || found[0].InputSchema["properties"] == nil {
		t.Fatalf("server filter fs: %+v", found)
	}
	if _, err := s.Search(ctx, toolsearch.SearchArgs{Query: "file", Server: "fs", Limit: 5}, []string{"gh"}, nil); !errors.Is(err, toolsearch.ErrUnknownServer) {
		t.Fatalf("a filter on a server the caller cannot use: %v", err)
	}
}

func TestParseMetaArguments(t *testing.T) {
	for name, c := range map[string]struct {
		args  string
		limit int
		bad   string
	}{
		"default limit":  {`{"query":"x"}`, toolsearch.DefaultLimit, ""},
		"max limit":      {`{"query":"x","limit":20}`, toolsearch.MaxLimit, ""},
		"past the max":   {`{"query":"x","limit":21}`, 0, "limit must be 1 to 20"},
		"negative limit": {`{"query":"x","limit":-1}`, 0, "limit must be 1 to 20"},
		"no query":       {`{}`, 0, "query is required"},
		"blank query":    {`{"query":"  "}`, 0, "query is required"},
		"no arguments":   {``, 0, "query is required"},
		"wrong type":     {`{"query":3}`, 0, "invalid arguments"},
	} {
		t.Run(name, func(t *testing.T) {
			a, err := toolsearch.ParseSearch(json.RawMessage(c.args))
			if c.bad != "" {
				if !errors.Is(err, toolsearch.ErrBadArguments) || !contains(err.Error(), c.bad) {
					t.Fatalf("err = %v, want %q", err, c.bad)
				}
				return
			}
			if err != nil || a.Limit != c.limit {
				t.Fatalf("%+v %v", a, err)
			}
		})
	}
	if _, err := toolsearch.ParseCall(json.RawMessage(`{"arguments":{}}`)); err == nil || !contains(err.Error(), "name is required") {
		t.Fatalf("call_tool without a name: %v", err)
	}
	if _, err := toolsearch.ParseCall(json.RawMessage(`{"name":"x","arguments":[1]}`)); err == nil || !contains(err.Error(), "arguments must be an object") {
		t.Fatalf("call_tool with an array: %v", err)
	}
	if a, err := toolsearch.ParseCall(json.RawMessage(`{"name":"x","arguments":{"a":1}}`)); err != nil || a.Name != "x" || string(a.Arguments) != `{"a":1}` {
		t.Fatalf("call_tool: %+v %v", a, err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestSharedSearchShaped: a preset's shape applies to what the shared index finds — a tool it
// hides is left out before the limit (the next one is answered in its place), a renamed one is
// answered by its new name and description with its fixed argument out of the schema.
func TestSharedSearchShaped(t *testing.T) {
	src := newSource()
	s := toolsearch.NewShared(catalog.New(src, src, nil), nil)
	ctx := t.Context()
	args := toolsearch.SearchArgs{Query: "read a file", Limit: 1}
	answer, err := s.Search(ctx, args, []string{"fs", "gh"}, nil)
	first := answer.Tools
	if err != nil || len(first) != 1 || first[0].Name != catalog.ChatName("fs", "read_file") {
		t.Fatalf("unshaped: %v %v", names(first), err)
	}
	shape := toolshape.New([]*mcpgatewayv1.PresetTool{
		{Tool: catalog.ChatName("fs", "read_file"), Hidden: true},
		{Tool: catalog.ChatName("gh", "create_issue"), Name: "open_issue", Description: "Open an issue.", Arguments: &mcpgatewayv1.PresetToolArguments{
			Fixed: map[string]*structpb.Value{"title": structpb.NewStringValue("from the preset")}}},
	})
	answer, err = s.Search(ctx, toolsearch.SearchArgs{Query: "read a file issue", Limit: 1}, []string{"fs", "gh"}, shape)
	found := answer.Tools
	if err != nil || len(found) != 1 {
		t.Fatalf("shaped, limit 1: %v %v, want the hidden tool left out before the limit", names(found), err)
	}
	f := found[0]
	if props, _ := f.InputSchema["properties"].(map[string]any); f.Name != "open_issue" || f.Description != "Open an issue." || f.Server != "gh" || props["title"] != nil {
		t.Fatalf("shaped: %+v, want open_issue, described anew, without its fixed title", f)
	}
	if n := s.Builds(); n != 1 {
		t.Fatalf("a shaped search built the index again: %d builds", n)
	}
}
