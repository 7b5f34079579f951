package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/waitfor"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const guiOrigin = "http://localhost:5173"

// TestCORSOnEveryAnswer: a 404 anywhere and a preflight of any path carry CORS for an
// allowed origin (a 404 without it reads in GUI3 as "Could not reach … lemond"), and
// preflights allow X-Client-Session-Id.
func TestCORSOnEveryAnswer(t *testing.T) {
	te := startEdge(t, nil)
	for _, p := range []string{"/nowhere", "/api/v1/nowhere", "/v0/nowhere", "/internal/nowhere", "/api/v1/models/x/files"} {
		a := do(t, http.MethodGet, te.url+p, "", "Origin", guiOrigin)
		if a.status != http.StatusNotFound || a.header.Get("Access-Control-Allow-Origin") != guiOrigin {
			t.Errorf("GET %s: %d, Allow-Origin %q", p, a.status, a.header.Get("Access-Control-Allow-Origin"))
		}
		a = do(t, http.MethodOptions, te.url+p, "", "Origin", guiOrigin, "Access-Control-Request-Method", "POST",
			"Access-Control-Request-Headers", "x-client-session-id, content-type")
		if a.status != http.StatusNoContent || a.header.Get("Access-Control-Allow-Origin") != guiOrigin ||
			!strings.Contains(strings.ToLower(a.header.Get("Access-Control-Allow-Headers")), "x-client-session-id") {
			t.Errorf("OPTIONS %s: %d %v", p, a.status, a.header)
		}
	}
	if a := do(t, http.MethodGet, te.url+"/nowhere", "", "Origin", "http://evil.example"); a.status != http.StatusForbidden {
		t.Errorf("foreign origin on a 404 path: %d", a.status)
	}
}

func TestInternalConfigAndSet(t *testing.T) {
	te := startEdge(t, nil)
	admin := []string{"Authorization", "Bearer " + adminKey}
	cfg := do(t, http.MethodGet, te.url+"/internal/config", "", admin...).json(t)
	for _, k := range []string{"log_level", "host", "port", "max_body_bytes", "allowed_origins", "models_dir"} {
		if _, ok := cfg[k]; !ok {
			t.Errorf("config lacks %q: %v", k, cfg)
		}
	}
	if cfg["log_level"] != "info" {
		t.Errorf("log_level %v", cfg["log_level"])
	}
	a := do(t, http.MethodPost, te.url+"/internal/set", `{"log_level":"debug"}`, "Content-Type", "application/json", "Authorization", "Bearer "+adminKey)
	if m := a.json(t); a.status != 200 || m["status"] != "success" || m["updated"].(map[string]any)["log_level"] != "debug" {
		t.Fatalf("set: %d %s", a.status, a.body)
	}
	if lv := do(t, http.MethodGet, te.url+"/api/v1/log-level", "").json(t)["level"]; lv != "debug" {
		t.Errorf("level after set: %v", lv)
	}
	for body, param := range map[string]string{
		`{"models_dir":"/x"}`:                   "models_dir",
		`{"max_body_bytes":1}`:                  "max_body_bytes",
		`{"log_level":"loud"}`:                  "log_level",
		`{"log_level":3}`:                       "log_level",
		`{"nonsense":1}`:                        "nonsense",
		`{"log_level":"info","models_dir":"x"}`: "models_dir", // checked before any is applied
	} {
		a := do(t, http.MethodPost, te.url+"/internal/set", body, admin...)
		e, _ := a.json(t)["error"].(map[string]any)
		if a.status != 400 || e["param"] != param || !strings.Contains(e["message"].(string), param) {
			t.Errorf("%s: %d %s", body, a.status, a.body)
		}
	}
	if lv := do(t, http.MethodGet, te.url+"/internal/config", "", admin...).json(t)["log_level"]; lv != "debug" {
		t.Errorf("a refused set changed the level: %v", lv)
	}
	for _, body := range []string{``, `[]`, `{}`, `nope`} {
		if a := do(t, http.MethodPost, te.url+"/internal/set", body, admin...); a.status != 400 {
			t.Errorf("%q: %d", body, a.status)
		}
	}
	if a := do(t, http.MethodPost, te.url+"/internal/set", `{"log_level":"`+strings.Repeat("x", maxSettingsBody)+`"}`, admin...); a.status != 413 {
		t.Errorf("oversized: %d %s", a.status, a.body)
	}
	if a := do(t, http.MethodGet, te.url+"/internal/set", "", admin...); a.status != 405 {
		t.Errorf("GET set: %d", a.status)
	}
}

// TestLogLevelChangesWhatTheEdgeWrites: POST log-level really changes the edge's level.
func TestLogLevelChangesWhatTheEdgeWrites(t *testing.T) {
	te := startEdge(t, nil)
	admin := []string{"Authorization", "Bearer " + adminKey}
	for _, p := range Prefixes {
		a := do(t, http.MethodPost, te.url+p+"log-level", `{"level":"error"}`, admin...)
		if m := a.json(t); a.status != 200 || m["status"] != "success" || m["level"] != "error" {
			t.Fatalf("%s: %d %s", p, a.status, a.body)
		}
	}
	n := len(te.log.lines(t))
	do(t, http.MethodGet, te.url+"/live", "")
	if got := len(te.log.lines(t)); got != n {
		t.Errorf("at error, an access line (info) was written: %d → %d", n, got)
	}
	do(t, http.MethodPost, te.url+"/v1/log-level", `{"level":"info"}`, admin...)
	do(t, http.MethodGet, te.url+"/live", "")
	waitfor.True(t, 5*time.Second, "an access line at info", func() bool { return len(te.log.lines(t)) > n+1 })
	for _, body := range []string{`{}`, `{"level":1}`, `{"level":"loud"}`} {
		a := do(t, http.MethodPost, te.url+"/api/v0/log-level", body, admin...)
		if e, _ := a.json(t)["error"].(map[string]any); a.status != 400 || e["param"] != "level" {
			t.Errorf("%s: %d %s", body, a.status, a.body)
		}
	}
}

func TestDownloads(t *testing.T) {
	te := startEdge(t, nil)
	for _, p := range Prefixes {
		if a := do(t, http.MethodGet, te.url+p+"downloads", ""); a.status != 200 || strings.TrimSpace(a.body) != "[]" {
			t.Errorf("%s downloads: %d %s", p, a.status, a.body)
		}
	}
	a := do(t, http.MethodPost, te.url+"/api/v1/downloads/control", `{"id":"model:x","action":"remove"}`)
	if m := a.json(t); a.status != 200 || m["status"] != "ok" || m["missing"] != true {
		t.Errorf("remove: %d %s", a.status, a.body)
	}
	for body, want := range map[string]struct {
		code  int
		param string
	}{
		`{"id":"model:x","action":"cancel"}`: {404, "id"},
		`{"id":"model:x","action":"pause"}`:  {404, "id"},
		`{"id":"model:x","action":"boom"}`:   {400, "action"},
		`{"action":"cancel"}`:                {400, "id"},
		`{"id":"model:x"}`:                   {400, "action"},
		`{"id":1,"action":"cancel"}`:         {400, "id"},
	} {
		a := do(t, http.MethodPost, te.url+"/v1/downloads/control", body)
		if e, _ := a.json(t)["error"].(map[string]any); a.status != want.code || e["param"] != want.param {
			t.Errorf("%s: %d %s", body, a.status, a.body)
		}
	}
}

func TestSystemStats(t *testing.T) {
	te := startEdge(t, nil)
	for i := 0; i < 2; i++ {
		m := do(t, http.MethodGet, te.url+"/api/v1/system-stats", "").json(t)
		for _, k := range []string{"cpu_percent", "memory_gb", "gpu_percent", "vram_gb", "npu_percent"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("no %q: %v", k, m)
			}
		}
		if _, err := os.Stat("/proc/meminfo"); err == nil {
			if gb, ok := m["memory_gb"].(float64); !ok || gb <= 0 {
				t.Errorf("memory_gb %v", m["memory_gb"])
			}
			if p, ok := m["cpu_percent"].(float64); !ok || p < 0 || p > 100 {
				t.Errorf("cpu_percent %v", m["cpu_percent"])
			}
		}
	}
}

func TestProcParsers(t *testing.T) {
	dir := t.TempDir()
	stat := filepath.Join(dir, "stat")
	write := func(s string) {
		if err := os.WriteFile(stat, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 2 3\n")
	c := &cpuSampler{path: stat}
	if p, ok := c.percent(); !ok || p != 0 {
		t.Fatalf("first sample: %v %v", p, ok)
	}
	write("cpu  200 0 200 1400 200 0 0 0 0 0\n") // +1000 ticks, 800 idle
	if p, ok := c.percent(); !ok || p != 20 {
		t.Fatalf("second sample: %v", p)
	}
	write("intr 1 2\n")
	if _, ok := c.percent(); ok {
		t.Error("a file without a cpu line was read")
	}
	mem := filepath.Join(dir, "meminfo")
	if err := os.WriteFile(mem, []byte("MemTotal:       16777216 kB\nMemFree: 1 kB\nMemAvailable:    8388608 kB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if gb, ok := memoryUsedGBFrom(mem); !ok || gb != 8 {
		t.Errorf("memory %v %v", gb, ok)
	}
	if _, ok := memoryUsedGBFrom(filepath.Join(dir, "none")); ok {
		t.Error("a missing file was read")
	}
}

func TestOptionsRefusesWrites(t *testing.T) {
	te := startEdge(t, nil)
	for _, m := range []string{http.MethodPost, http.MethodDelete} {
		a := do(t, m, te.url+"/api/v1/models/any/options", `{}`, "Origin", guiOrigin)
		if a.status != 405 || !strings.Contains(a.body, "model file") || a.header.Get("Access-Control-Allow-Origin") != guiOrigin {
			t.Errorf("%s: %d %s", m, a.status, a.body)
		}
	}
}

func wsURL(te *testEdge, path string) string { return "ws://" + te.addr + path }

// TestLogStream: the edge's own lines reach /logs/stream as Lemonade's messages: a
// snapshot after logs.subscribe, then one logs.entry per new line; after_seq skips older.
func TestLogStream(t *testing.T) {
	te := startEdge(t, func(c *Config) { c.Keys = keyauth.Keys{API: "api-key", Admin: adminKey} })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// Refused without the key, and from a foreign origin.
	if _, resp, err := websocket.Dial(ctx, wsURL(te, "/logs/stream"), nil); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("without a key: %v %v", err, resp)
	}
	if _, resp, err := websocket.Dial(ctx, wsURL(te, "/logs/stream?api_key=api-key"), &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"http://evil.example"}}}); err == nil || resp.StatusCode != 403 {
		t.Fatalf("foreign origin: %v", err)
	}
	do(t, http.MethodGet, te.url+"/live", "", "Authorization", "Bearer api-key") // one access line at least
	c, _, err := websocket.Dial(ctx, wsURL(te, "/logs/stream?api_key=api-key&client_session_id=x"), &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {guiOrigin}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := wsjson.Write(ctx, c, map[string]any{"type": "logs.subscribe", "after_seq": nil}); err != nil {
		t.Fatal(err)
	}
	var snap struct {
		Type    string           `json:"type"`
		Entries []map[string]any `json:"entries"`
	}
	if err := wsjson.Read(ctx, c, &snap); err != nil || snap.Type != "logs.snapshot" || len(snap.Entries) == 0 {
		t.Fatalf("snapshot: %v %+v", err, snap)
	}
	last := snap.Entries[len(snap.Entries)-1]
	for _, k := range []string{"seq", "timestamp", "severity", "tag", "line"} {
		if _, ok := last[k]; !ok {
			t.Fatalf("entry lacks %q: %v", k, last)
		}
	}
	do(t, http.MethodGet, te.url+"/live?marker=abc123", "", "Authorization", "Bearer api-key")
	for {
		var msg struct {
			Type  string         `json:"type"`
			Entry map[string]any `json:"entry"`
		}
		if err := wsjson.Read(ctx, c, &msg); err != nil {
			t.Fatalf("no entry for the new request: %v", err)
		}
		if msg.Type == "logs.entry" && strings.Contains(msg.Entry["line"].(string), "/live") && msg.Entry["seq"].(float64) > last["seq"].(float64) {
			if msg.Entry["severity"] != "info" || msg.Entry["tag"] != "zest-gateway" {
				t.Errorf("entry %v", msg.Entry)
			}
			break
		}
	}
	// A second socket subscribing after the last seq gets an empty-or-newer snapshot.
	c2, _, err := websocket.Dial(ctx, wsURL(te, "/api/v1/logs/stream?api_key=api-key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.CloseNow()
	_ = wsjson.Write(ctx, c2, map[string]any{"type": "logs.subscribe", "after_seq": 1 << 40})
	if err := wsjson.Read(ctx, c2, &snap); err != nil || snap.Type != "logs.snapshot" || len(snap.Entries) != 0 {
		t.Fatalf("after_seq: %v %+v", err, snap)
	}
	// An oversized message closes the socket (the read limit).
	c3, _, err := websocket.Dial(ctx, wsURL(te, "/v1/logs/stream?api_key=api-key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.CloseNow()
	_ = c3.Write(ctx, websocket.MessageText, []byte(`{"type":"`+strings.Repeat("x", wsReadLimit)+`"}`))
	var any json.RawMessage
	for err == nil {
		err = wsjson.Read(ctx, c3, &any)
	}
	if websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Errorf("oversized message: %v", err)
	}
}

// TestSpanStream: GUI3's Inspect view authenticates and gets auth.ok; then nothing (no
// spans yet) and the socket stays open.
func TestSpanStream(t *testing.T) {
	te := startEdge(t, func(c *Config) { c.Keys = keyauth.Keys{API: "api-key", Admin: adminKey} })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, wsURL(te, "/spans/stream?client_session_id=x"), &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {guiOrigin}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	var msg map[string]any
	_ = wsjson.Write(ctx, c, map[string]any{"type": "auth", "token": "wrong"})
	if err := wsjson.Read(ctx, c, &msg); err != nil || msg["type"] != "error" {
		t.Fatalf("wrong key: %v %v", err, msg)
	}
	_ = wsjson.Write(ctx, c, map[string]any{"type": "auth", "token": "api-key", "client_session_id": "x"})
	if err := wsjson.Read(ctx, c, &msg); err != nil || msg["type"] != "auth.ok" {
		t.Fatalf("auth: %v %v", err, msg)
	}
	rctx, rcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer rcancel()
	if err := wsjson.Read(rctx, c, &msg); err == nil {
		t.Fatalf("a span was sent: %v", msg)
	}
}

// TestWebSocketSlots: keyless span sockets (which send their key in a first message) have a
// pool of their own, 4 per address and 16 in all, so that they never take a keyed caller's
// slot; keyed sockets are bounded per key (16) and in all (64); a pending socket that proves
// its key moves to the keyed pool; each refusal is 429 with Retry-After naming the bound. (Before,
// 64 keyless sockets of any address took every slot: a keyed GUI got 503.)
func TestWebSocketSlots(t *testing.T) {
	te := startEdge(t, func(c *Config) { c.Keys = keyauth.Keys{API: apiKey, Admin: adminKey} })
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	dial := func(path, from string) (*websocket.Conn, int, string) {
		t.Helper()
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, resp, err := websocket.Dial(ctx, wsURL(te, path), &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}})
		if err != nil {
			if resp == nil {
				t.Fatalf("%s from %s: %v", path, from, err)
			}
			return nil, resp.StatusCode, resp.Header.Get("Retry-After")
		}
		t.Cleanup(func() { c.CloseNow() })
		return c, 101, ""
	}
	var pending []*websocket.Conn
	for range wsPendingPerAddr {
		c, code, _ := dial("/spans/stream", "127.0.0.1")
		if c == nil {
			t.Fatalf("a keyless span socket within the bound: %d", code)
		}
		pending = append(pending, c)
	}
	if c, code, retry := dial("/spans/stream", "127.0.0.1"); c != nil || code != 429 || retry != "1" {
		t.Fatalf("a 5th keyless span socket of one address: %d %q", code, retry)
	}
	for i := 2; i <= 4; i++ { // three more addresses fill the pending pool of 16
		for range wsPendingPerAddr {
			if c, code, _ := dial("/spans/stream", fmt.Sprintf("127.0.0.%d", i)); c == nil {
				t.Fatalf("a keyless span socket from 127.0.0.%d: %d", i, code)
			}
		}
	}
	if c, code, _ := dial("/spans/stream", "127.0.0.5"); c != nil || code != 429 {
		t.Fatalf("a 17th keyless span socket: %d", code)
	}
	// The keyed pool is untouched: the API key's sockets up to its 16, then 429; the admin key's.
	var msg map[string]any
	_ = wsjson.Write(ctx, pending[0], map[string]any{"type": "auth", "token": apiKey})
	if err := wsjson.Read(ctx, pending[0], &msg); err != nil || msg["type"] != "auth.ok" {
		t.Fatalf("a pending socket proving its key: %v %v", err, msg)
	}
	for i := 1; i < wsPerKey; i++ { // the promoted socket holds the first of the 16
		if c, code, _ := dial("/logs/stream?api_key="+apiKey, "127.0.0.1"); c == nil {
			t.Fatalf("the API key's socket %d of %d: %d", i+1, wsPerKey, code)
		}
	}
	if c, code, _ := dial("/logs/stream?api_key="+apiKey, "127.0.0.6"); c != nil || code != 429 {
		t.Fatalf("the API key's 17th socket: %d", code)
	}
	if c, code, _ := dial("/logs/stream?api_key="+adminKey, "127.0.0.1"); c == nil {
		t.Fatalf("the admin key's socket beside them: %d", code)
	}
	// The promoted socket left the pending pool: one keyless place is free again.
	waitfor.NoError(t, 10*time.Second, func() error {
		if c, code, _ := dial("/spans/stream", "127.0.0.1"); c == nil {
			return fmt.Errorf("a keyless socket once one was promoted: %d", code)
		}
		return nil
	})
}

// TestWebSocketSlotsInAll: where no key is needed every socket is keyed by its address, 16 an
// address, 64 in all.
func TestWebSocketSlotsInAll(t *testing.T) {
	te := startEdge(t, nil) // the admin key alone: the log and span sockets need none
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	dial := func(from string) int {
		t.Helper()
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, resp, err := websocket.Dial(ctx, wsURL(te, "/logs/stream"), &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}})
		if err != nil {
			if resp == nil {
				t.Fatal(err)
			}
			b := make([]byte, 512)
			n, _ := resp.Body.Read(b)
			if !strings.Contains(string(b[:n]), "its limit") {
				t.Errorf("refusal: %s", b[:n])
			}
			return resp.StatusCode
		}
		t.Cleanup(func() { c.CloseNow() })
		return 101
	}
	for i := range wsMaxConns {
		from := fmt.Sprintf("127.0.0.%d", 1+i/wsPerKey)
		if i == wsPerKey { // one address full, the edge not
			if code := dial("127.0.0.1"); code != 429 {
				t.Fatalf("a 17th socket of one address: %d", code)
			}
		}
		if code := dial(from); code != 101 {
			t.Fatalf("socket %d from %s: %d", i+1, from, code)
		}
	}
	if code := dial("127.0.0.9"); code != 429 {
		t.Fatalf("a 65th socket: %d", code)
	}
}

// TestEdgeSettingsNeedTheAdminKey: /internal/set, POST log-level and /internal/config take the
// admin key once one is set (the API key does not do, nor no key where only the admin key is
// set), as lemond asks on /internal/*; GET log-level reads with the API key. A change is
// recorded in mcpgateway's audit trail (RecordEdgeChange, with the admin's key) before it
// applies, and is not applied when it cannot be. With no key at all, the settings are open,
// as lemond's.
func TestEdgeSettingsNeedTheAdminKey(t *testing.T) {
	te := startEdge(t, func(c *Config) { c.Keys = keyauth.Keys{API: apiKey, Admin: adminKey} })
	api, admin := []string{"Authorization", "Bearer " + apiKey}, []string{"Authorization", "Bearer " + adminKey}
	for _, c := range []struct {
		method, path, body string
		auth               []string
	}{
		{"POST", "/internal/set", `{"log_level":"fatal"}`, api}, {"POST", "/internal/set", `{"log_level":"fatal"}`, nil},
		{"POST", "/api/v1/log-level", `{"level":"fatal"}`, api}, {"POST", "/v0/log-level", `{"level":"fatal"}`, nil},
		{"GET", "/internal/config", "", api}, {"GET", "/internal/config", "", nil},
	} {
		if a := do(t, c.method, te.url+c.path, c.body, c.auth...); a.status != 401 || !strings.Contains(a.body, "admin API key") {
			t.Errorf("%s %s with %v: %d %s; want 401", c.method, c.path, c.auth, a.status, a.body)
		}
	}
	if len(te.admin.recorded()) != 0 {
		t.Fatalf("a refused change was recorded: %v", te.admin.recorded())
	}
	if a := do(t, "GET", te.url+"/api/v1/log-level", "", api...); a.status != 200 || a.json(t)["level"] != "info" {
		t.Fatalf("GET log-level with the API key: %d %s", a.status, a.body)
	}
	if a := do(t, "POST", te.url+"/internal/set", `{"log_level":"debug"}`, admin...); a.status != 200 {
		t.Fatalf("set with the admin key: %d %s", a.status, a.body)
	}
	rec := te.admin.recorded()
	if len(rec) != 1 || !strings.HasSuffix(rec[0].GetEdge(), "/127.0.0.1:0") || strings.Join(rec[0].GetSettings(), ",") != "log_level" {
		t.Fatalf("recorded: %v", rec)
	}
	if md := te.admin.calls(); md[len(md)-1].Get("authorization")[0] != "Bearer "+adminKey {
		t.Fatalf("recorded with %v, not the admin's key", md[len(md)-1])
	}
	// The trail cannot record it: not applied, 503 saying why.
	te.admin.mu.Lock()
	te.admin.failRecord = status.Error(codes.Unavailable, "no replica")
	te.admin.mu.Unlock()
	if a := do(t, "POST", te.url+"/api/v1/log-level", `{"level":"fatal"}`, admin...); a.status != 503 || !strings.Contains(a.body, "The change was not applied") {
		t.Fatalf("log-level when the trail cannot record: %d %s", a.status, a.body)
	}
	if lv := do(t, "GET", te.url+"/internal/config", "", admin...).json(t)["log_level"]; lv != "debug" {
		t.Fatalf("a change the trail did not record applied: %v", lv)
	}

	// The admin key alone: no key is no admin.
	only := startEdge(t, nil)
	if a := do(t, "POST", only.url+"/internal/set", `{"log_level":"fatal"}`); a.status != 401 {
		t.Fatalf("keyless set beside an admin key: %d %s", a.status, a.body)
	}
	// No key at all: open, as lemond, and nothing to record.
	open := startEdge(t, func(c *Config) { c.Keys = keyauth.Keys{} })
	if a := do(t, "POST", open.url+"/internal/set", `{"log_level":"debug"}`); a.status != 200 || len(open.admin.recorded()) != 0 {
		t.Fatalf("set with no key configured: %d %s (%d recorded)", a.status, a.body, len(open.admin.recorded()))
	}
}
