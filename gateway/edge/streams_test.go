package edge

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
)

func TestStreamsInAll(t *testing.T) {
	room := func(nofile int) int { return nofile - DescriptorReserve - wsMaxConns - wsMaxPending }
	for _, c := range []struct {
		setting, nofile, want int
		bad                   string
	}{
		{0, 0, DefaultMaxStreams, ""},       // the limit unknown
		{0, 1 << 20, DefaultMaxStreams, ""}, // a high limit: the default
		{0, 1024, room(1024), ""},           // a low one: what it leaves
		{100, 1024, 100, ""},                // a setting within it
		{room(1024), 1024, room(1024), ""},  // exactly what it leaves
		{room(1024) + 1, 1024, 0, fmt.Sprintf("leaves room for %d streams", room(1024))}, // more than it leaves
		{0, DescriptorReserve + wsMaxConns + wsMaxPending + MinStreams - 1, 0, "the edge needs at least 16"},
		{-1, 0, 0, "ZEST_MAX_STREAMS"},
	} {
		got, err := streamsInAll(c.setting, c.nofile)
		if c.bad == "" && (err != nil || got != c.want) || c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad)) {
			t.Errorf("streamsInAll(%d, %d) = %d, %v; want %d %q", c.setting, c.nofile, got, err, c.want, c.bad)
		}
	}
	cfg := DefaultConfig()
	cfg.StreamsPerKey = 0
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "streams-per-key (ZEST_STREAMS_PER_KEY) 0: want 1 to") {
		t.Errorf("streams-per-key 0: %v", err)
	}
}

// TestStreamBounds: the MCP streams are bounded per session, per caller and in all, each
// refusal a 429 in /mcp's shape with Retry-After naming its setting; the admin routes and
// /live still answer; a stream that ends frees its place; a 2026-07-28 subscriptions/listen
// POST is a stream too.
func TestStreamBounds(t *testing.T) {
	te := startEdge(t, func(c *Config) { c.StreamsPerSession, c.StreamsPerKey, c.MaxStreams = 1, 2, 3 })
	open := func(session, key string) (int, string, func()) {
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, "GET", te.url+"/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			defer cancel()
			defer resp.Body.Close()
			b := make([]byte, 4096)
			n, _ := resp.Body.Read(b)
			return resp.StatusCode, resp.Header.Get("Retry-After") + " " + string(b[:n]), nil
		}
		t.Cleanup(cancel)
		return 200, "", func() { cancel(); resp.Body.Close() }
	}
	want429 := func(what string, code int, body, msg string) {
		t.Helper()
		if code != 429 || !strings.HasPrefix(body, "1 ") || !strings.Contains(body, `"code":-32029`) || !strings.Contains(body, msg) {
			t.Fatalf("%s: %d %s; want 429 naming %q", what, code, body, msg)
		}
	}
	first, _, closeFirst := open("s1", "")
	if first != 200 {
		t.Fatalf("the first stream: %d", first)
	}
	code, body, _ := open("s1", "")
	want429("a second stream of one session", code, body, "this session holds 1 GET streams open, its limit (ZEST_STREAMS_PER_SESSION)")
	if code, body, _ := open("s2", ""); code != 200 {
		t.Fatalf("a stream of a second session: %d %s", code, body)
	}
	code, body, _ = open("s3", "")
	want429("a third stream of one address", code, body, "the address 127.0.0.1 holds 2 streams open, its limit (ZEST_STREAMS_PER_KEY)")
	if code, body, _ := open("s4", adminKey); code != 200 {
		t.Fatalf("a stream of the admin key: %d %s", code, body)
	}
	code, body, _ = open("s5", adminKey)
	want429("a fourth stream in all", code, body, "the edge holds 3 streams open, its limit (ZEST_MAX_STREAMS")
	a := do(t, "POST", te.url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{}}`,
		append(mcpPost, "Mcp-Method", "subscriptions/listen", "MCP-Protocol-Version", "2026-07-28", "Authorization", "Bearer "+adminKey)...)
	want429("a subscriptions/listen POST beside 3 streams", a.status, a.header.Get("Retry-After")+" "+a.body, "the edge holds 3 streams open")
	if a := do(t, "GET", te.url+"/live", ""); a.status != 200 {
		t.Fatalf("/live beside the streams: %d", a.status)
	}
	if a := do(t, "GET", te.url+"/internal/mcp/servers", "", "Authorization", "Bearer "+adminKey); a.status != 200 {
		t.Fatalf("an admin route beside the streams: %d %s", a.status, a.body)
	}
	if cfg := do(t, "GET", te.url+"/internal/config", "", "Authorization", "Bearer "+adminKey).json(t); cfg["max_streams"] != 3.0 || cfg["streams_per_key"] != 2.0 {
		t.Fatalf("/internal/config: %v", cfg)
	}
	closeFirst() // its place is free once the edge sees it gone
	waitfor.NoError(t, 10*time.Second, func() error {
		if code, body, _ := open("s3", ""); code != 200 {
			return fmt.Errorf("a stream after one closed: %d %s", code, body)
		}
		return nil
	})
}
