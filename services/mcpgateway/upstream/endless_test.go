package upstream

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/zestmcp/zest/lib/logging/logtest"
)

// endlessServer is a session-era Streamable HTTP MCP server whose tools/call answers with an
// event stream that never ends its first line; it stops writing once it has sent limit bytes
// of it or the client went away. sent counts what it wrote.
func endlessServer(t *testing.T, limit int, sent *atomic.Int64) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed) // no GET stream
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&msg)
		answer := func(result string) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Mcp-Session-Id", "s1")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":`+result+`}`)
		}
		switch msg.Method {
		case "initialize":
			answer(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"endless","version":"1"}}`)
		case "tools/list":
			answer(`{"tools":[{"name":"endless","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":{"content":[{"type":"text","text":"`)
			piece := strings.Repeat("a", 64<<10)
			for sent.Load() < int64(limit) {
				n, err := io.WriteString(w, piece)
				sent.Add(int64(n))
				if err != nil {
					return
				}
			}
		case "server/discover":
			w.WriteHeader(http.StatusBadRequest) // a session-era server
		default:
			w.WriteHeader(http.StatusAccepted) // notifications
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestEndlessEventLineFailsTheCall: an HTTP server whose answer is an event stream with an
// endless line fails the call after the bound of it (MaxEventBytes; 1 MiB here, so that
// reaching it takes no time on a busy machine), with a warning that names the server and the
// limit, instead of mcp-go gathering the line for ever.
func TestEndlessEventLineFailsTheCall(t *testing.T) {
	const bound = 1 << 20
	var sent atomic.Int64
	u := endlessServer(t, 64*bound, &sent) // far past the bound and what sockets buffer
	var logs logtest.Buffer
	m := New(nil, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	m.maxEventBytes = bound
	cfg := httpConfig("endless", u.URL)
	if err := m.Connect(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Disconnect(t.Context(), "endless") })
	res, err := m.DispatchToolCall(t.Context(), cfg, json.RawMessage(`{"name":"endless","arguments":{}}`), 0, Hooks{})
	if err == nil {
		t.Fatalf("an endless line answered the call with %d bytes", len(res))
	}
	if n := sent.Load(); n >= 64*bound {
		t.Errorf("the server sent all of its %d bytes: nothing stopped reading", n)
	}
	if l := logs.String(); !strings.Contains(l, "server=endless") || !strings.Contains(l, "limit_bytes=1048576") {
		t.Errorf("no warning names the server and the limit:\n%s", l)
	}
}
