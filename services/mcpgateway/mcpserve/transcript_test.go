package mcpserve

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zestmcp/zest/services/mcpgateway/mcpserve/mcpservetest"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata/")

// transcripts are request sequences whose answers are kept as golden files: every JSON-RPC
// error case, and initialize at each protocol version. Each transcript runs in one session
// opened at the version its name starts with (or none for "initialize-*").
var transcripts = []struct {
	name     string
	version  string
	requests []string
	header   string // MCP-Protocol-Version sent with the requests
}{
	{"initialize-2025-11-25", "", []string{initReq("2025-11-25")}, ""},
	{"initialize-2025-06-18", "", []string{initReq("2025-06-18")}, ""},
	{"initialize-2025-03-26", "", []string{initReq("2025-03-26")}, ""},
	{"initialize-2024-11-05", "", []string{initReq("2024-11-05")}, ""},
	{"initialize-unknown-version", "", []string{initReq("1999-01-01")}, ""},
	{"error-parse", "2025-11-25", []string{`{"jsonrpc":"2.0","id":1,`}, ""},
	{"error-invalid-request", "2025-11-25", []string{`{"jsonrpc":"1.0","id":1,"method":"ping"}`}, ""},
	{"error-unknown-method", "2025-11-25", []string{`{"jsonrpc":"2.0","id":1,"method":"resources/list"}`}, ""},
	{"error-server-discover", "2025-11-25", []string{`{"jsonrpc":"2.0","id":1,"method":"server/discover"}`}, ""},
	{"error-bad-params", "2025-11-25", []string{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`}, ""},
	{"error-batch-outside-2025-03-26", "2025-11-25", []string{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`}, ""},
	{"batch-2025-03-26", "2025-03-26", []string{`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"nope"}]`}, ""},
	{"tool-error-is-a-result", "2025-11-25", []string{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"failing","arguments":{}}}`}, ""},
	{"logging-set-level", "2025-06-18", []string{`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`}, ""},
	{"notification-only", "2025-11-25", []string{`{"jsonrpc":"2.0","method":"notifications/initialized"}`}, ""},
	{"error-initialize-without-params", "", []string{`{"jsonrpc":"2.0","id":1,"method":"initialize"}`}, ""},
	{"error-initialize-bad-params", "", []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":20251125,"capabilities":{},"clientInfo":{"name":"golden","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"golden","version":"1"}}}`,
	}, ""},
	{"error-id-null", "2025-11-25", []string{`{"jsonrpc":"2.0","id":null,"method":"ping"}`}, ""},
	{"error-id-not-string-or-number", "2025-11-25", []string{`{"jsonrpc":"2.0","id":true,"method":"ping"}`, `{"jsonrpc":"2.0","id":{"n":1},"method":"ping"}`}, ""},
	{"error-method-missing-or-not-a-string", "2025-11-25", []string{`{"jsonrpc":"2.0","id":1}`, `{"jsonrpc":"2.0","id":2,"method":5}`}, ""},
	{"error-not-an-object", "2025-11-25", []string{`"ping"`, `null`}, ""},
	{"error-params-member-type", "2025-11-25", []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5,"arguments":{}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":5}}`,
		`{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":5}}`,
	}, ""},
	{"error-params-missing", "2025-11-25", []string{`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel"}`}, ""},
	{"error-notification-bad-params", "2025-11-25", []string{`{"jsonrpc":"2.0","method":"notifications/initialized","params":5}`}, ""},
	{"error-protocol-header-contradicts-session", "2025-11-25", []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}`}, "2025-06-18"},
	{"protocol-header-2025-03-26-is-no-header", "2025-11-25", []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}`}, "2025-03-26"},
}

func initReq(v string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + v + `","capabilities":{},"clientInfo":{"name":"golden","version":"1"}}}`
}

func TestTranscripts(t *testing.T) {
	c := client(t)
	for _, tr := range transcripts {
		t.Run(tr.name, func(t *testing.T) {
			sid := ""
			if tr.version != "" {
				sid = initialize(t, c, tr.version)
			}
			reqs := make([]*mcpservetest.Request, len(tr.requests))
			for i, rq := range tr.requests {
				reqs[i] = &mcpservetest.Request{SessionID: sid, ProtocolVersion: tr.header, Payload: []byte(rq)}
			}
			checkTranscript(t, c, tr.name, reqs)
		})
	}
}

// modernTranscripts are requests of protocol 2026-07-28 (no session): the checks of its
// transport and the answers of its methods. Each request is sent with the MCP-Protocol-Version
// header, Mcp-Method and Mcp-Name of the test case (headers), the _meta of meta.
var modernTranscripts = []struct {
	name     string
	requests []*mcpservetest.Request
}{
	{"2026-server-discover", []*mcpservetest.Request{modernReq(`"method":"server/discover","params":{"_meta":`+modernMeta+`}`, "server/discover", "")}},
	{"2026-tools-list", []*mcpservetest.Request{modernReq(`"method":"tools/list","params":{"_meta":`+modernMeta+`}`, "tools/list", "")}},
	{"2026-tools-call", []*mcpservetest.Request{
		modernReq(`"method":"tools/call","params":{"name":"failing","arguments":{},"_meta":`+modernMeta+`}`, "tools/call", "failing"),
	}},
	{"2026-log-level-from-meta", []*mcpservetest.Request{
		modernReq(`"method":"tools/call","params":{"name":"chatty","arguments":{},"_meta":`+modernMeta+`}`, "tools/call", "chatty"),
		modernReq(`"method":"tools/call","params":{"name":"chatty","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"info"}}`, "tools/call", "chatty"),
	}},
	{"2026-subscriptions-listen", []*mcpservetest.Request{
		modernReq(`"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":`+modernMeta+`}`, "subscriptions/listen", ""),
	}},
	{"2026-error-removed-methods", []*mcpservetest.Request{
		modernReq(`"method":"initialize","params":{"_meta":`+modernMeta+`}`, "initialize", ""),
		modernReq(`"method":"ping","params":{"_meta":`+modernMeta+`}`, "ping", ""),
		modernReq(`"method":"logging/setLevel","params":{"level":"debug","_meta":`+modernMeta+`}`, "logging/setLevel", ""),
		modernReq(`"method":"nope/nothing","params":{"_meta":`+modernMeta+`}`, "nope/nothing", ""),
	}},
	{"2026-error-headers", []*mcpservetest.Request{
		modernReq(`"method":"tools/list","params":{"_meta":`+modernMeta+`}`, "prompts/list", ""),
		modernReq(`"method":"tools/list","params":{"_meta":`+modernMeta+`}`, "", ""),
		modernReq(`"method":"tools/call","params":{"name":"failing","arguments":{},"_meta":`+modernMeta+`}`, "tools/call", "other"),
		modernReq(`"method":"tools/call","params":{"name":"failing","arguments":{},"_meta":`+modernMeta+`}`, "tools/call", ""),
		withVersion(modernReq(`"method":"tools/list","params":{"_meta":`+modernMeta+`}`, "tools/list", ""), ""),
		withVersion(modernReq(`"method":"tools/list","params":{"_meta":`+modernMeta+`}`, "tools/list", ""), "2025-11-25"),
	}},
	{"2026-error-meta", []*mcpservetest.Request{
		modernReq(`"method":"server/discover","params":{}`, "server/discover", ""),
		modernReq(`"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, "server/discover", ""),
		withVersion(modernReq(`"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}`, "server/discover", ""), "2099-01-01"),
	}},
	{"2026-error-client-response", []*mcpservetest.Request{
		{ProtocolVersion: "2026-07-28", Payload: []byte(`{"jsonrpc":"2.0","id":4,"result":{}}`)},
	}},
	{"2026-notification-accepted", []*mcpservetest.Request{
		{ProtocolVersion: "2026-07-28", McpMethod: "notifications/cancelled",
			Payload: []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9,"_meta":` + modernMeta + `}}`)},
	}},
	{"2026-session-header-ignored", []*mcpservetest.Request{
		withSession(modernReq(`"method":"tools/list","params":{"_meta":`+modernMeta+`}`, "tools/list", ""), "not-a-session"),
	}},
}

const modernMeta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"golden","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// modernReq is a request of 2026-07-28 with id 7, the given method and params (members), and
// the Mcp-Method and Mcp-Name headers as given (name is sent as is: plain text).
func modernReq(members, method, name string) *mcpservetest.Request {
	return &mcpservetest.Request{ProtocolVersion: "2026-07-28", McpMethod: method, McpName: name,
		Payload: []byte(`{"jsonrpc":"2.0","id":7,` + members + `}`)}
}

func withVersion(r *mcpservetest.Request, v string) *mcpservetest.Request {
	r.ProtocolVersion = v
	return r
}

func withSession(r *mcpservetest.Request, id string) *mcpservetest.Request {
	r.SessionID = id
	return r
}

func TestModernTranscripts(t *testing.T) {
	c := client(t)
	for _, tr := range modernTranscripts {
		t.Run(tr.name, func(t *testing.T) { checkTranscript(t, c, tr.name, tr.requests) })
	}
}

// checkTranscript sends reqs in order and compares what came back with the golden file of name.
func checkTranscript(t *testing.T, c *mcpservetest.Client, name string, reqs []*mcpservetest.Request) {
	t.Helper()
	var b strings.Builder
	for _, rq := range reqs {
		b.WriteString("→ " + string(rq.Payload) + "\n")
		if rq.McpMethod != "" || rq.McpName != "" {
			b.WriteString("  headers: MCP-Protocol-Version=" + rq.ProtocolVersion + " Mcp-Method=" + rq.McpMethod + " Mcp-Name=" + rq.McpName + "\n")
		}
		ex, err := sendReq(t, c, rq)
		if err != nil {
			b.WriteString("← gRPC error: " + err.Error() + "\n")
			continue
		}
		if ex.session != "" {
			b.WriteString("← session started\n")
		}
		for i, m := range ex.messages {
			if batch, ok := m["batch"]; ok {
				m = map[string]any{"batch": batch}
			}
			js, _ := json.Marshal(m) // keys sorted: stable across runs
			kind := "message"
			if ex.finals[i] {
				kind = "final"
			}
			if ex.malformed[i] {
				kind += " (HTTP 400)"
			}
			if ex.notFound[i] {
				kind += " (HTTP 404)"
			}
			b.WriteString("← " + kind + " " + string(js) + "\n")
		}
		if len(ex.messages) == 0 {
			b.WriteString("← (nothing: HTTP 202)\n")
		}
	}
	path := filepath.Join("testdata", "transcripts", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if b.String() != string(want) {
		t.Fatalf("transcript changed:\n--- got\n%s--- want\n%s", b.String(), want)
	}
}

// TestAnswersQuoteNoDecoder: no answer in the transcripts quotes Go's JSON decoder or names
// a Go type (mcp-go's own messages for malformed params do both).
func TestAnswersQuoteNoDecoder(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "transcripts", "*.golden"))
	if err != nil || len(files) < len(transcripts)+len(modernTranscripts) {
		t.Fatalf("transcripts: %v %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "←") {
				continue
			}
			for _, leak := range []string{"json:", "Go struct", "unmarshal", "unparsable", "mcp.", "proto:"} {
				if strings.Contains(line, leak) {
					t.Errorf("%s: an answer quotes the decoder (%q): %s", filepath.Base(f), leak, line)
				}
			}
		}
	}
}
