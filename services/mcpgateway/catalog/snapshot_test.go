package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// fakeSource is a registry and an upstream in memory: configs by id, and what each connected
// server listed with its version.
type fakeSource struct {
	mu      sync.Mutex
	cfgs    []*mcpgatewayv1.ServerConfig
	tools   map[string][]json.RawMessage
	version map[string]uint64
	next    uint64
	lists   int // ListServers calls
}

func newFake() *fakeSource {
	return &fakeSource{tools: map[string][]json.RawMessage{}, version: map[string]uint64{}}
}

func (f *fakeSource) ListServers(context.Context) ([]*mcpgatewayv1.ServerConfig, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	return slices.Clone(f.cfgs), nil
}

func (f *fakeSource) Listed(id string) ([]json.RawMessage, uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.version[id]
	return f.tools[id], v, ok
}

// put registers cfg (replacing the config of its id), keeping id order.
func (f *fakeSource) put(cfg *mcpgatewayv1.ServerConfig) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cfgs = slices.DeleteFunc(f.cfgs, func(c *mcpgatewayv1.ServerConfig) bool { return c.GetId() == cfg.GetId() })
	f.cfgs = append(f.cfgs, cfg)
	slices.SortFunc(f.cfgs, func(a, b *mcpgatewayv1.ServerConfig) int { return strings.Compare(a.GetId(), b.GetId()) })
}

func (f *fakeSource) remove(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cfgs = slices.DeleteFunc(f.cfgs, func(c *mcpgatewayv1.ServerConfig) bool { return c.GetId() == id })
	f.disconnect(id)
}

// list makes id connected with tools named names (a new list, as a refresh or a list_changed
// keeps one).
func (f *fakeSource) list(id string, names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	raws := []json.RawMessage{}
	for _, n := range names {
		raws = append(raws, json.RawMessage(fmt.Sprintf(`{"name":%q,"description":"d","inputSchema":{"type":"object","properties":{"x":{"type":"string","enum":["a","b"]}}}}`, n)))
	}
	f.next++
	f.tools[id], f.version[id] = raws, f.next
}

func (f *fakeSource) disconnect(id string) {
	delete(f.tools, id)
	delete(f.version, id)
}

func chatNames(es []*mcpgatewayv1.ToolEntry) string {
	var out []string
	for _, e := range es {
		out = append(out, e.GetChatName())
	}
	return strings.Join(out, ",")
}

func snapshot(t *testing.T, c *Catalog) *Snapshot {
	t.Helper()
	s, err := c.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Every change a catalog reader must see shows in the next snapshot: a server registered,
// connected, listing other tools, its filters edited, disconnected, reconnected, deleted.
// Nothing changed, the same snapshot is served again.
func TestSnapshotFollowsChanges(t *testing.T) {
	f := newFake()
	c := New(f, f, nil)
	a := &mcpgatewayv1.ServerConfig{Id: "a", Name: "A", Enabled: proto.Bool(true)}
	b := &mcpgatewayv1.ServerConfig{Id: "b", Name: "B", Enabled: proto.Bool(true)}
	f.put(a)
	f.put(b)
	steps := []struct {
		name   string
		change func()
		want   string // ListTools' chat names
	}{
		{"registered, not connected", func() {}, ""},
		{"connected", func() { f.list("a", "zeta", "alpha"); f.list("b", "mid") },
			"mcp_a__alpha,mcp_a__zeta,mcp_b__mid"},
		{"list_changed adds a tool", func() { f.list("a", "zeta", "alpha", "beta") },
			"mcp_a__alpha,mcp_a__beta,mcp_a__zeta,mcp_b__mid"},
		{"the same names listed again", func() { f.list("b", "mid") },
			"mcp_a__alpha,mcp_a__beta,mcp_a__zeta,mcp_b__mid"},
		{"tools_deny edited", func() {
			f.put(&mcpgatewayv1.ServerConfig{Id: "a", Name: "A", Enabled: proto.Bool(true), ToolsDeny: []string{"a*"}})
		}, "mcp_a__beta,mcp_a__zeta,mcp_b__mid"},
		{"tools_allow edited", func() {
			f.put(&mcpgatewayv1.ServerConfig{Id: "a", Name: "A", Enabled: proto.Bool(true), ToolsAllow: []string{"z*"}})
		}, "mcp_a__zeta,mcp_b__mid"},
		{"disconnected", func() { f.mu.Lock(); f.disconnect("b"); f.mu.Unlock() }, "mcp_a__zeta"},
		{"reconnected with other tools", func() { f.list("b", "new") }, "mcp_a__zeta,mcp_b__new"},
		{"deleted", func() { f.remove("a") }, "mcp_b__new"},
	}
	prev := snapshot(t, c)
	for _, st := range steps {
		st.change()
		s := snapshot(t, c)
		if got := chatNames(s.ListTools().GetTools()); got != st.want {
			t.Fatalf("%s: ListTools = %q, want %q", st.name, got, st.want)
		}
		if again := snapshot(t, c); again != s {
			t.Fatalf("%s: a second read with nothing changed built another snapshot", st.name)
		}
		if st.name != "registered, not connected" && s == prev {
			t.Fatalf("%s: the change did not make a new snapshot", st.name)
		}
		prev = s
	}
}

// A change of one server rebuilds that server's entries only; the others' are reused.
func TestSnapshotRebuildsOnlyChangedServers(t *testing.T) {
	f := newFake()
	c := New(f, f, nil)
	for _, id := range []string{"a", "b"} {
		f.put(&mcpgatewayv1.ServerConfig{Id: id, Name: id, Enabled: proto.Bool(true)})
		f.list(id, "t1", "t2")
	}
	s1 := snapshot(t, c)
	f.list("b", "t1", "t2", "t3")
	s2 := snapshot(t, c)
	if &s1.Server("a")[0] != &s2.Server("a")[0] {
		t.Fatal("the unchanged server's entries were built again")
	}
	if s1.Server("b")[0] == s2.Server("b")[0] || len(s2.Server("b")) != 3 {
		t.Fatalf("the changed server's entries: %q", chatNames(s2.Server("b")))
	}
	// An equal config under another pointer (a registry that decodes on every read) is
	// no change.
	f.put(&mcpgatewayv1.ServerConfig{Id: "a", Name: "a", Enabled: proto.Bool(true)})
	if s3 := snapshot(t, c); s3 != s2 {
		t.Fatal("an equal config made a new snapshot")
	}
}

// The views: one server's entries in its order, a preset's servers by chat_name; ids that
// are not connected servers (the built-in "lemonade", an unknown id) add nothing.
func TestSnapshotViews(t *testing.T) {
	f := newFake()
	c := New(f, f, nil)
	for _, id := range []string{"a", "b", "c"} {
		f.put(&mcpgatewayv1.ServerConfig{Id: id, Name: id, Enabled: proto.Bool(true)})
	}
	f.list("a", "zeta", "alpha")
	f.list("b", "mid")
	s := snapshot(t, c)
	if got := chatNames(s.Server("a")); got != "mcp_a__zeta,mcp_a__alpha" {
		t.Fatalf("Server(a) = %q", got)
	}
	if s.Server("c") != nil || s.Server("nope") != nil {
		t.Fatal("a server that is not connected has entries")
	}
	if got := chatNames(s.Servers([]string{"b", "lemonade", "a", "nope", "a"})); got != "mcp_a__alpha,mcp_a__zeta,mcp_b__mid" {
		t.Fatalf("Servers = %q", got)
	}
	if got := chatNames(s.Servers([]string{"b"})); got != "mcp_b__mid" {
		t.Fatalf("Servers(b) = %q", got)
	}
}

// The encoding the snapshot keeps decodes to its ListTools answer, and the codec sends it for
// that answer only: any other message (an older snapshot's answer included) is encoded as
// gRPC's proto codec does. A ListServers answer made of the snapshot's entries, or of other
// ones, decodes to itself.
func TestCodecSendsTheKeptEncoding(t *testing.T) {
	f := newFake()
	c := New(f, f, nil)
	f.put(&mcpgatewayv1.ServerConfig{Id: "a", Name: "A", Enabled: proto.Bool(true)})
	f.list("a", "one", "two")
	old := snapshot(t, c)
	f.list("a", "one", "two", "three")
	s := snapshot(t, c)
	codec := c.Codec()
	info, _ := structpb.NewStruct(map[string]any{"name": "srv", "nested": map[string]any{"list": []any{1, "x", nil}}})
	state := func(tools []*mcpgatewayv1.ToolEntry) *mcpgatewayv1.ServerState {
		return &mcpgatewayv1.ServerState{Config: &mcpgatewayv1.ServerConfig{Id: "a", Name: "A", Args: []string{"x", "y"}, Env: map[string]string{"K": "${K}", "J": "${J}"},
			TimeoutMs: proto.Int32(5000), ToolsDeny: []string{"z*"}}, Connected: true, ServerInfo: info, Tools: tools, TestOnly: proto.Bool(false),
			Process: &mcpgatewayv1.ProcessState{State: "ready", Pid: 7}}
	}
	servers := []proto.Message{
		&mcpgatewayv1.ListServersResponse{},
		// the snapshot's own entries: their kept encodings are appended
		&mcpgatewayv1.ListServersResponse{Servers: []*mcpgatewayv1.ServerState{state(s.Server("a")), {Config: &mcpgatewayv1.ServerConfig{Id: "b"}}}},
		// an older snapshot's entries of the server: encoded here
		&mcpgatewayv1.ListServersResponse{Servers: []*mcpgatewayv1.ServerState{state(old.Server("a")), state(nil)}},
	}
	for _, m := range append([]proto.Message{s.ListTools(), old.ListTools(), &mcpgatewayv1.ListToolsRequest{}}, servers...) {
		data, err := codec.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got := m.ProtoReflect().New().Interface()
		if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data.Materialize())}, got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, m) {
			t.Fatalf("%T decoded to %v, want %v", m, got, m)
		}
	}
	if _, kept := c.Encoded(s.ListTools()); !kept {
		t.Fatal("the current answer has no kept encoding")
	}
	if _, kept := c.Encoded(old.ListTools()); kept {
		t.Fatal("an older snapshot's answer was sent with the current encoding")
	}
}
