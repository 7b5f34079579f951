package toolcall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/ratelimit"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/activity"
	"github.com/zestmcp/zest/services/mcpgateway/approval"
	"github.com/zestmcp/zest/services/mcpgateway/oauthclient"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

var testKeys = keyauth.Keys{API: "api-key", Admin: "admin-key"}

// fakeUp is the servers' side of the chain: it answers each dispatched call with answer and
// counts them, and lists tools.
type fakeUp struct {
	mu     sync.Mutex
	calls  []string // the params of each dispatched call
	answer func(params json.RawMessage) (json.RawMessage, error)
	listed []json.RawMessage
	// callerTokens are the callers' access tokens the dispatched calls' contexts held.
	callerTokens []string
}

func (f *fakeUp) DispatchToolCall(ctx context.Context, cfg *mcpgatewayv1.ServerConfig, params json.RawMessage, _ time.Duration, _ upstream.Hooks) (json.RawMessage, error) {
	f.mu.Lock()
	f.calls = append(f.calls, cfg.GetId()+" "+string(params))
	if tok, ok := keyauth.CallerTokenOf(ctx); ok {
		f.callerTokens = append(f.callerTokens, tok.Reveal())
	}
	answer := f.answer
	f.mu.Unlock()
	if answer == nil {
		return json.RawMessage(`{"content":[{"type":"text","text":"ran"}]}`), nil
	}
	return answer(params)
}

func (f *fakeUp) ResumeToolCall(_ context.Context, cfg *mcpgatewayv1.ServerConfig, call string, _ []upstream.ClientAnswer, _ upstream.Hooks) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, cfg.GetId()+" resume "+call)
	return json.RawMessage(`{"content":[]}`), nil
}

func (f *fakeUp) Listed(string) ([]json.RawMessage, uint64, bool) {
	return f.listed, 1, f.listed != nil
}

func (f *fakeUp) dispatched() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// fakeBuiltin runs the built-in tools: "lemonade_echo" only.
type fakeBuiltin struct{ calls int }

func (b *fakeBuiltin) CallBuiltin(context.Context, json.RawMessage) (json.RawMessage, error) {
	b.calls++
	return json.RawMessage(`{"content":[{"type":"text","text":"builtin"}]}`), nil
}
func (b *fakeBuiltin) IsBuiltin(name string) bool { return name == "lemonade_echo" }

// fixture is a pipeline over a bbolt registry holding servers.
type fixture struct {
	p     *Pipeline
	reg   *registry.Bolt
	up    *fakeUp
	gate  *approval.Gate
	calls *activity.Log
	logs  *bytes.Buffer
}

func newFixture(t *testing.T, servers ...*mcpgatewayv1.ServerConfig) *fixture {
	t.Helper()
	reg, err := registry.Open(filepath.Join(t.TempDir(), "registry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	for _, s := range servers {
		if err := reg.PutServer(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{reg: reg, up: &fakeUp{}, gate: approval.New(reg, time.Minute, nil), logs: &bytes.Buffer{}}
	f.calls, _ = activity.New(100, true)
	f.p = New(Config{MaxOutputBytes: 2048}, reg, f.up, testKeys, WithBuiltin(&fakeBuiltin{}), WithApprovals(f.gate), WithActivity(f.calls),
		WithLogger(slog.New(slog.NewJSONHandler(f.logs, nil))))
	return f
}

func as(ctx context.Context, key string) context.Context {
	if key == "" {
		return ctx
	}
	return metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+key))
}

func params(tool, args string) json.RawMessage {
	return json.RawMessage(`{"name":"` + tool + `","arguments":` + args + `}`)
}

func server(id string, set func(*mcpgatewayv1.ServerConfig)) *mcpgatewayv1.ServerConfig {
	cfg := &mcpgatewayv1.ServerConfig{Id: id, Name: id, Transport: "streamable-http", Url: "http://127.0.0.1:1/mcp", Enabled: proto.Bool(true), Expose: proto.Bool(true)}
	if set != nil {
		set(cfg)
	}
	return cfg
}

// TestAHiddenServerDoesNotExist: for a caller without the admin key, a server with expose
// false, a disabled one and one never registered are the same unknown server on every entry
// point but the admin API's, with the same words; the admin key reaches the hidden one; the
// chain stops there, before any dispatch.
func TestAHiddenServerDoesNotExist(t *testing.T) {
	f := newFixture(t, server("open", nil), server("hidden", func(c *mcpgatewayv1.ServerConfig) { c.Expose = proto.Bool(false) }),
		server("off", func(c *mcpgatewayv1.ServerConfig) { c.Enabled = proto.Bool(false) }))
	for _, e := range Entries {
		if e == EntryAdmin {
			continue
		}
		for _, key := range []string{"", "api-key"} {
			words := map[string]string{}
			for _, id := range []string{"hidden", "off", "absent"} {
				_, err := f.p.Invoke(as(t.Context(), key), &Call{Entry: e, Server: id, Tool: "exec", Params: params("exec", `{}`)})
				var unknown *UnknownServerError
				if !errors.As(err, &unknown) || !errors.Is(err, registry.ErrNotFound) {
					t.Fatalf("%s %s (key %q): %v", e, id, key, err)
				}
				words[id] = strings.ReplaceAll(err.Error(), id, "ID")
			}
			if words["hidden"] != words["absent"] || words["off"] != words["absent"] {
				t.Fatalf("%s: a hidden server reads %q, an absent one %q", e, words["hidden"], words["absent"])
			}
		}
		if _, err := f.p.Invoke(as(t.Context(), "admin-key"), &Call{Entry: e, Server: "hidden", Tool: "exec", Params: params("exec", `{}`)}); err != nil {
			t.Fatalf("%s: the admin key does not reach the hidden server: %v", e, err)
		}
	}
	if _, err := f.p.Invoke(t.Context(), &Call{Entry: EntryAdmin, Server: "hidden", Tool: "exec", Params: params("exec", `{}`)}); err != nil {
		t.Fatalf("the admin API does not reach the hidden server: %v", err)
	}
	if got := f.up.dispatched(); len(got) != len(Entries) {
		t.Fatalf("dispatched %d calls, want one per entry point (the admin key's): %v", len(got), got)
	}
}

// TestTheChainRefusesBeforeTheServer: the tool filters, the limits and the output cap hold
// on every entry point, each call counted; a refused call never reaches the server.
func TestTheChainRefusesBeforeTheServer(t *testing.T) {
	f := newFixture(t, server("fs", func(c *mcpgatewayv1.ServerConfig) {
		c.ToolsDeny, c.RateLimit, c.MaxOutputBytes = []string{"rm"}, proto.String(fmt.Sprintf("%d/h", len(Entries))), proto.Int32(1024)
	}))
	big := json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("a", 2000) + `"}]}`)
	f.up.answer = func(p json.RawMessage) (json.RawMessage, error) {
		if bytes.Contains(p, []byte(`"big"`)) {
			return big, nil
		}
		return json.RawMessage(`{"content":[]}`), nil
	}
	for _, e := range Entries {
		_, err := f.p.Invoke(t.Context(), &Call{Entry: e, Server: "fs", Tool: "rm", Params: params("rm", `{}`)})
		var filtered *serverconfig.ToolFilteredError
		if !errors.As(err, &filtered) {
			t.Fatalf("%s: a denied tool: %v", e, err)
		}
	}
	if got := f.up.dispatched(); len(got) != 0 {
		t.Fatalf("a filtered tool reached the server: %v", got)
	}
	// One call per entry point passes the rate of that many per hour, whichever entry point;
	// the next is refused.
	for i, e := range Entries {
		res, err := f.p.Invoke(t.Context(), &Call{Entry: e, Server: "fs", Tool: "ls", Params: params("ls", `{"big":true}`)})
		if err != nil || !bytes.Contains(res, []byte(`"isError":true`)) || !bytes.Contains(res, []byte("(max_output_bytes 1024)")) {
			t.Fatalf("call %d (%s) over the output cap: %s %v", i, e, res, err)
		}
	}
	_, err := f.p.Invoke(t.Context(), &Call{Entry: EntryServer, Server: "fs", Tool: "ls", Params: params("ls", `{}`)})
	var limited *LimitError
	var rpcErr *upstream.RPCError
	if !errors.As(err, &limited) || limited.Reason != ratelimit.ReasonRate || !errors.As(err, &rpcErr) || rpcErr.Code != ratelimit.JSONRPCCode {
		t.Fatalf("the sixth call: %v", err)
	}
	if got := f.up.dispatched(); len(got) != len(Entries) {
		t.Fatalf("the server got %d calls, want %d", len(got), len(Entries))
	}
}

// TestOnBehalfOfTheCaller: a server called on behalf of each caller (oauth.grant
// token_exchange) is refused, naming the setting, on every entry point to a caller without an
// OAuth access token — before approval and limits, never reaching the server — and a caller
// with one is dispatched with its token in the call's context (for the upstream's transport),
// which no log line holds.
func TestOnBehalfOfTheCaller(t *testing.T) {
	f := newFixture(t, server("tx", func(c *mcpgatewayv1.ServerConfig) {
		c.RateLimit = proto.String("1/h")
		c.Oauth = &mcpgatewayv1.UpstreamOAuth{ClientId: "zest", Grant: serverconfig.GrantTokenExchange}
	}))
	for _, e := range Entries {
		_, err := f.p.Invoke(as(t.Context(), "admin-key"), &Call{Entry: e, Server: "tx", Tool: "ls", Params: params("ls", `{}`)})
		var ob *oauthclient.OnBehalfError
		if !errors.As(err, &ob) || !strings.Contains(err.Error(), "oauth.grant is token_exchange") {
			t.Fatalf("%s, a caller by key: %v", e, err)
		}
	}
	if got := f.up.dispatched(); len(got) != 0 {
		t.Fatalf("a caller without a token reached the server: %v", got)
	}
	// The refusals counted nothing: the one call of the hour goes through.
	ctx := keyauth.WithCallerToken(t.Context(), "caller.access.token")
	if _, err := f.p.Invoke(ctx, &Call{Entry: EntryPreset, Server: "tx", Tool: "ls", Params: params("ls", `{}`)}); err != nil {
		t.Fatal(err)
	}
	if len(f.up.callerTokens) != 1 || f.up.callerTokens[0] != "caller.access.token" {
		t.Fatalf("the dispatch's context held %v", f.up.callerTokens)
	}
	if strings.Contains(f.logs.String(), "caller.access.token") {
		t.Fatalf("the caller's token was logged:\n%s", f.logs)
	}
}

// TestTheBuiltinProviderTakesTheChain: the built-in tools are a provider of /mcp, presets
// and chats, held to the operator's output cap and recorded; the admin API and
// /mcp/servers/{id} do not serve them.
func TestTheBuiltinProviderTakesTheChain(t *testing.T) {
	f := newFixture(t)
	for _, e := range []Entry{EntryMCP, EntryPreset, EntryChat} {
		res, err := f.p.Invoke(t.Context(), &Call{Entry: e, Server: serverconfig.LemonadeProvider, Tool: "lemonade_echo", Params: params("lemonade_echo", `{}`)})
		if err != nil || !bytes.Contains(res, []byte("builtin")) {
			t.Fatalf("%s: %s %v", e, res, err)
		}
	}
	for _, e := range []Entry{EntryAdmin, EntryServer} {
		if _, err := f.p.Invoke(t.Context(), &Call{Entry: e, Server: serverconfig.LemonadeProvider, Tool: "lemonade_echo"}); !errors.Is(err, registry.ErrNotFound) {
			t.Fatalf("%s served the built-in tools: %v", e, err)
		}
	}
	if calls, _ := f.calls.List(0, 10); len(calls) != 5 || calls[4].Path != activity.PathMCP || calls[0].Path != activity.PathMCP || calls[2].Path != activity.PathChat {
		t.Fatalf("records %+v", calls)
	}
}

// TestEveryCallIsRecordedOnce: whatever link ends a call, it has one activity record, one
// log line (never its arguments) and, in the metrics, its tool's name only when the server
// listed that tool.
func TestEveryCallIsRecordedOnce(t *testing.T) {
	f := newFixture(t, server("fs", func(c *mcpgatewayv1.ServerConfig) { c.ToolsDeny = []string{"rm"} }))
	f.up.listed = []json.RawMessage{json.RawMessage(`{"name":"ls"}`)}
	for _, tool := range []string{"ls", "rm", "made-up"} {
		_, _ = f.p.Invoke(t.Context(), &Call{Entry: EntryServer, Server: "fs", Tool: tool, Params: params(tool, `{"secret":"argument-secret"}`)})
	}
	_, _ = f.p.Invoke(t.Context(), &Call{Entry: EntryChat, Server: "absent", Tool: "x", Params: params("x", `{}`)})
	calls, _ := f.calls.List(0, 10)
	if len(calls) != 4 {
		t.Fatalf("%d records, want 4: %+v", len(calls), calls)
	}
	outcomes := []string{}
	for _, c := range calls {
		outcomes = append(outcomes, c.Tool+":"+c.Outcome)
	}
	if strings.Join(outcomes, ",") != "x:error,made-up:ok,rm:error,ls:ok" {
		t.Fatalf("records %v", outcomes)
	}
	if n := strings.Count(f.logs.String(), `"msg":"tool call"`); n != 4 || strings.Contains(f.logs.String(), "argument-secret") {
		t.Fatalf("%d log lines (want 4), or arguments logged:\n%s", n, f.logs)
	}
	if !f.p.listed.has(f.p, "fs", "ls") || f.p.listed.has(f.p, "fs", "made-up") || !f.p.listed.has(f.p, serverconfig.LemonadeProvider, "lemonade_echo") {
		t.Fatal("the metrics' tool names are not the listed tools")
	}
}

// TestArgumentsHash: the same arguments in another order or spacing hash alike; any other
// difference, a number's spelling included, does not.
func TestArgumentsHash(t *testing.T) {
	a := ArgumentsHash(json.RawMessage(`{"cmd":"echo harmless","opts":{"b":1,"a":[1,2]}}`))
	if b := ArgumentsHash(json.RawMessage(" { \"opts\" : {\"a\":[1, 2],\"b\":1}, \"cmd\":\"echo harmless\" } ")); a != b {
		t.Fatal("the same arguments in another order hash differently")
	}
	for _, other := range []string{`{"cmd":"rm -rf /","opts":{"b":1,"a":[1,2]}}`, `{"cmd":"echo harmless","opts":{"b":1.0,"a":[1,2]}}`,
		`{"cmd":"echo harmless","opts":{"b":1,"a":[2,1]}}`, `{"cmd":"echo harmless"}`} {
		if ArgumentsHash(json.RawMessage(other)) == a {
			t.Fatalf("%s hashes as the approved arguments", other)
		}
	}
	if string(Arguments(json.RawMessage(`{"name":"x"}`))) != "{}" || string(Arguments(json.RawMessage(`{"name":"x","arguments":null}`))) != "{}" {
		t.Fatal("absent arguments are not {}")
	}
}

// FuzzArgumentsHash: any input hashes without a panic, and a valid JSON document hashes as its
// own canonical form does.
func FuzzArgumentsHash(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[true,null,"x"]}`, `{"b":{"d":1e3,"c":-0.5}}`, `"\u00e9"`, `[`, ``, `{"a":"\ud800"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h := ArgumentsHash(json.RawMessage(s))
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil || dec.More() {
			return
		}
		canon, err := json.Marshal(v)
		if err != nil {
			return
		}
		if ArgumentsHash(canon) != h {
			t.Fatalf("%q and its canonical form %q hash differently", s, canon)
		}
	})
}
