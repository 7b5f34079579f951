package mcpserve

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
			var b strings.Builder
			for _, rq := range tr.requests {
				b.WriteString("→ " + rq + "\n")
				ex, err := sendWith(t, c, sid, tr.header, rq)
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
					b.WriteString("← " + kind + " " + string(js) + "\n")
				}
				if len(ex.messages) == 0 {
					b.WriteString("← (nothing: HTTP 202)\n")
				}
			}
			path := filepath.Join("testdata", "transcripts", tr.name+".golden")
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
		})
	}
}

// TestAnswersQuoteNoDecoder: no answer in the transcripts quotes Go's JSON decoder or names
// a Go type (mcp-go's own messages for malformed params do both).
func TestAnswersQuoteNoDecoder(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "transcripts", "*.golden"))
	if err != nil || len(files) < len(transcripts) {
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
