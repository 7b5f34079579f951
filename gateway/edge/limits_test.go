package edge

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/ratelimit"
)

const apiKey = "api-key-for-tests"

var mcpPost = []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}

// TestOverTheLimitIs429InTheFamilyShape: a caller over its rate gets 429 with Retry-After
// (whole seconds, rounded up) in its route's shape — OpenAI's rate_limit_exceeded, a JSON-RPC
// error with ratelimit.JSONRPCCode and data.retry_after_ms, the admin shape — before any
// service sees the call; the other key keeps its own budget.
func TestOverTheLimitIs429InTheFamilyShape(t *testing.T) {
	te := startEdge(t, func(c *Config) { c.Keys.API, c.RateLimit = apiKey, "2/h" }) // a token every 1800 s
	api := []string{"Authorization", "Bearer " + apiKey}
	admin := []string{"Authorization", "Bearer " + adminKey}
	began := time.Now() // the API key's bucket is drawn from here on
	for range 2 {
		if a := do(t, "GET", te.url+"/api/v1/health", "", api...); a.status != 200 {
			t.Fatalf("within the limit: %d %s", a.status, a.body)
		}
	}
	a := do(t, "GET", te.url+"/api/v1/health", "", api...)
	e, _ := a.json(t)["error"].(map[string]any)
	if a.status != 429 || shape(t, a) != "openai" || !retryAfterWithin(a, 1800, began) || e["code"] != "rate_limit_exceeded" ||
		!strings.Contains(a.body, "the API key (LEMONADE_API_KEY) may make 2 requests per hour (ZEST_RATE_LIMIT); retry after") {
		t.Fatalf("OpenAI route over the limit: %d %v %s", a.status, a.header, a.body)
	}
	a = do(t, "POST", te.url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, append(mcpPost, api...)...)
	e, _ = a.json(t)["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	if a.status != 429 || shape(t, a) != "jsonrpc" || !retryAfterWithin(a, 1800, began) || e["code"] != float64(ratelimit.JSONRPCCode) ||
		data["retry_after_ms"].(float64) < float64(1800_000-time.Since(began).Milliseconds()-1000) || te.mcp.count() != 0 {
		t.Fatalf("/mcp over the limit: %d %v %s (%d exchanges)", a.status, a.header, a.body, te.mcp.count())
	}
	// The admin key has its own budget, on every route.
	began = time.Now()
	for range 2 {
		if a := do(t, "GET", te.url+"/internal/mcp/servers", "", admin...); a.status != 200 {
			t.Fatalf("the admin key, within its limit: %d %s", a.status, a.body)
		}
	}
	a = do(t, "GET", te.url+"/internal/mcp/servers", "", admin...)
	if a.status != 429 || shape(t, a) != "admin" || !retryAfterWithin(a, 1800, began) || !strings.Contains(a.body, "the admin key") {
		t.Fatalf("admin route over the limit: %d %v %s", a.status, a.header, a.body)
	}
	if n := len(te.admin.calls()); n != 2 {
		t.Fatalf("mcpgateway saw %d admin calls; want the 2 admitted", n)
	}
	// A browser reads the Retry-After of a 429 (CORS exposes it).
	a = do(t, "GET", te.url+"/api/v1/health", "", append(api, "Origin", "http://localhost:3000")...)
	if a.status != 429 || !strings.Contains(a.header.Get("Access-Control-Expose-Headers"), "Retry-After") {
		t.Fatalf("a browser's 429: %d %v", a.status, a.header)
	}
	// A wrong key is refused (401) before it is counted, and counts for no one.
	if a := do(t, "GET", te.url+"/api/v1/health", "", "Authorization", "Bearer wrong"); a.status != 401 {
		t.Fatalf("a wrong key: %d", a.status)
	}
}

// TestAnonymousCallersAreLimitedByAddress: without keys every caller is anonymous, counted by
// its address; a token that is no configured key buys no budget of its own.
func TestAnonymousCallersAreLimitedByAddress(t *testing.T) {
	te := startEdge(t, func(c *Config) { c.Keys, c.RateLimit = keyauth.Keys{}, "1/h" })
	if a := do(t, "GET", te.url+"/api/v1/health", ""); a.status != 200 {
		t.Fatalf("first call: %d", a.status)
	}
	a := do(t, "GET", te.url+"/api/v1/health", "", "Authorization", "Bearer made-up")
	if a.status != 429 || !strings.Contains(a.body, "the address 127.0.0.1") {
		t.Fatalf("a made-up token from the same address: %d %s", a.status, a.body)
	}
}

// TestOverridesPerKey: ZEST_RATE_LIMIT_KEYS names a key by its hash (as the activity log
// shows it) or by role; "off" lifts the limit of that key.
func TestOverridesPerKey(t *testing.T) {
	te := startEdge(t, func(c *Config) {
		c.Keys.API, c.RateLimit, c.RateLimitKeys = apiKey, "1/h", keyHash(apiKey)+"=3/h,admin=off"
	})
	for i := range 3 {
		if a := do(t, "GET", te.url+"/v1/health", "", "Authorization", "Bearer "+apiKey); a.status != 200 {
			t.Fatalf("API key call %d of its 3: %d %s", i+1, a.status, a.body)
		}
	}
	if a := do(t, "GET", te.url+"/v1/health", "", "Authorization", "Bearer "+apiKey); a.status != 429 || !strings.Contains(a.body, "3 requests per hour (ZEST_RATE_LIMIT_KEYS)") {
		t.Fatalf("API key's 4th call: %d %s", a.status, a.body)
	}
	for range 10 {
		if a := do(t, "GET", te.url+"/v1/health", "", "Authorization", "Bearer "+adminKey); a.status != 200 {
			t.Fatalf("admin=off still limits: %d %s", a.status, a.body)
		}
	}
}

func TestKeyLimitSettingsNameTheFix(t *testing.T) {
	keys := keyauth.Keys{API: apiKey, Admin: adminKey}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{RateLimit: "20 per second"}, "ZEST_RATE_LIMIT"},
		{Config{RateLimit: "20/s", ConcurrencyLimit: -1}, "ZEST_CONCURRENCY_LIMIT"},
		{Config{RateLimitKeys: "api=5"}, "ZEST_RATE_LIMIT_KEYS"},
		{Config{Keys: keyauth.Keys{Admin: adminKey}, RateLimitKeys: "api=5/s"}, "names LEMONADE_API_KEY, which is not set"},
		{Config{Keys: keyauth.Keys{API: apiKey}, RateLimitKeys: "admin=5/s"}, "names LEMONADE_ADMIN_API_KEY, which is not set"},
		{Config{Keys: keys, RateLimitKeys: "0123456789ab=5/s"}, "neither a role"},
		{Config{Keys: keys, RateLimitKeys: "anonymous=5/s"}, "take ZEST_ANONYMOUS_RATE_LIMIT"},
		{Config{AnonymousRateLimit: "5 a second"}, "ZEST_ANONYMOUS_RATE_LIMIT"},
		{Config{AnonymousConcurrencyLimit: MaxConcurrencyLimit + 1}, "ZEST_ANONYMOUS_CONCURRENCY_LIMIT"},
		{Config{Keys: keys, RateLimitKeys: "api=5/s," + keyHash(apiKey) + "=1/s"}, "named twice"},
	} {
		if c.cfg.Keys == (keyauth.Keys{}) && c.want != "" && strings.HasPrefix(c.want, "ZEST") {
			c.cfg.Keys = keys
		}
		_, err := parseKeyLimits(&c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want an error naming %s", c.cfg, err, c.want)
		}
	}
	cfg := DefaultConfig()
	cfg.Keys = keys
	if _, err := parseKeyLimits(&cfg); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	cfg.RateLimit, cfg.RateLimitKeys, cfg.AnonymousRateLimit = "off", "admin=off, "+keyHash(apiKey)+"=10/m:20", "5/s"
	if _, err := parseKeyLimits(&cfg); err != nil {
		t.Fatalf("a full setting: %v", err)
	}
}

// TestConcurrencyPerKey: a caller with ZEST_CONCURRENCY_LIMIT calls in flight gets 429 and
// Retry-After: 1 for the next; its GET stream of /mcp does not count (it stays open for hours).
func TestConcurrencyPerKey(t *testing.T) {
	te := startEdge(t, func(c *Config) { c.ConcurrencyLimit = 1 })
	release, entered := make(chan struct{}), make(chan struct{}, 4)
	te.mcp.setExchange(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			answerJSON(w, r) // held open
			return
		}
		entered <- struct{}{}
		<-release
		answerJSON(w, r)
	})
	// A GET stream held open: not a call in flight.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", te.url+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", "s1")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		defer resp.Body.Close()
	}
	first := make(chan answer, 1)
	go func() {
		first <- do(t, "POST", te.url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, mcpPost...)
	}()
	<-entered
	a := do(t, "POST", te.url+"/mcp", `{"jsonrpc":"2.0","id":2,"method":"ping"}`, mcpPost...)
	if a.status != 429 || a.header.Get("Retry-After") != "1" || !strings.Contains(a.body, "1 requests in flight") {
		t.Fatalf("a second call in flight: %d %v %s", a.status, a.header, a.body)
	}
	close(release)
	if a := <-first; a.status != 200 {
		t.Fatalf("the first call: %d %s", a.status, a.body)
	}
	if a := do(t, "POST", te.url+"/mcp", `{"jsonrpc":"2.0","id":3,"method":"ping"}`, mcpPost...); a.status != 200 {
		t.Fatalf("after the first ended: %d %s", a.status, a.body)
	}
}

// retryAfterWithin: a's Retry-After is what is left of a wait of full seconds that began at
// began, rounded up: full at once, less by the seconds a busy machine took since.
func retryAfterWithin(a answer, full int, began time.Time) bool {
	n, err := strconv.Atoi(a.header.Get("Retry-After"))
	return err == nil && n <= full && n >= full-int(time.Since(began).Seconds())-1
}

// TestServerLimitIs429: mcpgateway's ResourceExhausted (a server over its rate_limit or
// max_concurrency) on the admin tools/call is 429 with its RetryInfo as Retry-After (1.5 s → 2).
func TestServerLimitIs429(t *testing.T) {
	te := startEdge(t, nil)
	a := do(t, "POST", te.url+"/internal/mcp/servers/s/tools/call", `{"name":"busy"}`, "Content-Type", "application/json", "Authorization", "Bearer "+adminKey)
	if a.status != 429 || shape(t, a) != "admin" || a.header.Get("Retry-After") != "2" || !strings.Contains(a.body, "rate_limit") {
		t.Fatalf("%d %v %s", a.status, a.header, a.body)
	}
}

// TestCallerTableIsBounded: callers from a thousand addresses leave at most the cap of
// entries; once the table is full of busy callers the new ones share one budget (and are
// told so), and once idle the entries are evicted. In a synctest bubble: the second that
// fills every bucket again passes on the bubble's clock.
func TestCallerTableIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := parseKeyLimits(&Config{AnonymousRateLimit: "1/s", RateLimitMaxCallers: 10})
		if err != nil {
			t.Fatal(err)
		}
		h := l.wrap(openAILimited, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
		call := func(addr string) *httptest.ResponseRecorder {
			r := httptest.NewRequest("GET", "/api/v1/health", nil)
			r.RemoteAddr = addr
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w
		}
		shared := 0
		for i := range 1000 {
			w := call(fmt.Sprintf("10.0.%d.%d:5555", i/256, i%256))
			if w.Code == 429 && strings.Contains(w.Body.String(), "share one budget") {
				shared++
			}
			if n := l.table.Len(); n > 10 {
				t.Fatalf("%d callers tracked, over the cap of 10", n)
			}
		}
		if shared < 900 {
			t.Fatalf("only %d of the 990 callers past the cap shared the overflow budget", shared)
		}
		time.Sleep(1100 * time.Millisecond) // the bubble's clock: every bucket full again (1/s), all idle
		if w := call("10.9.9.9:1"); w.Code != 204 {
			t.Fatalf("a new caller after the others went idle: %d %s", w.Code, w.Body)
		}
		if n := l.table.Len(); n != 1 {
			t.Fatalf("%d callers tracked after the idle ones were evicted", n)
		}
	})
}

func TestClientAddr(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:5000":             "127.0.0.1",
		"[::1]:80":                   "::/64",
		"[2001:db8:1:2:aaaa::1]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:bbbb::9]:443": "2001:db8:1:2::/64",
		"[::ffff:192.0.2.1]:1":       "192.0.2.1",
		"not-an-address":             "not-an-address",
	} {
		if got := httpguard.ClientAddr(in); got != want {
			t.Errorf("ClientAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLimitsOff: with every limit off the routes are served without the check (no caller is
// tracked); one override that sets a rate turns it on.
func TestLimitsOff(t *testing.T) {
	l, err := parseKeyLimits(&Config{Keys: keyauth.Keys{API: apiKey}, RateLimit: "off", AnonymousRateLimit: "off", RateLimitKeys: "api=off"})
	if err != nil || !l.off() {
		t.Fatalf("all off: %v", err)
	}
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	if fmt.Sprintf("%p", l.wrap(openAILimited, next)) != fmt.Sprintf("%p", next) {
		t.Fatal("the check wraps the routes although every limit is off")
	}
	if l, _ := parseKeyLimits(&Config{Keys: keyauth.Keys{API: apiKey}, RateLimit: "off", RateLimitKeys: "api=5/s"}); l.off() {
		t.Fatal("an override's rate is ignored")
	}
	if l, _ := parseKeyLimits(&Config{AnonymousConcurrencyLimit: 3}); l.off() {
		t.Fatal("the anonymous limits are ignored")
	}
}

// TestBatchCountsEachMessage: a request mcpgateway weighs n (a JSON-RPC batch of n) takes n
// of its caller's rate (the first as the request, the rest when mcpgateway asks, before it
// does the work); over the rate it is refused in /mcp's shape and mcpgateway goes no further.
func TestBatchCountsEachMessage(t *testing.T) {
	te := startEdge(t, func(c *Config) { c.Keys.API, c.RateLimit = apiKey, "10/h" })
	api := append(append([]string{}, mcpPost...), "Authorization", "Bearer "+apiKey)
	batch := func(n int) string {
		items := make([]string, n)
		for i := range items {
			items[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i+1)
		}
		return "[" + strings.Join(items, ",") + "]"
	}
	if a := do(t, "POST", te.url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, api...); a.status != 200 {
		t.Fatalf("a request: %d %s", a.status, a.body)
	}
	if a := do(t, "POST", te.url+"/mcp", batch(5), api...); a.status != 200 { // 1 + 5 of 10 taken
		t.Fatalf("a batch of 5: %d %s", a.status, a.body)
	}
	a := do(t, "POST", te.url+"/mcp", batch(5), api...) // 7 taken, 4 more wanted, 3 left
	e, _ := a.json(t)["error"].(map[string]any)
	if a.status != 429 || e["code"] != float64(ratelimit.JSONRPCCode) || a.header.Get("Retry-After") == "" ||
		!strings.Contains(a.body, "a batch counts each of its 5 messages") || te.mcp.count() != 2 {
		t.Fatalf("a batch of 5 over the rate: %d %v %s (%d exchanges)", a.status, a.header, a.body, te.mcp.count())
	}
	if a := do(t, "POST", te.url+"/mcp", batch(3), api...); a.status != 200 { // 10 taken
		t.Fatalf("a batch of 3 within what is left: %d %s", a.status, a.body)
	}
	if a := do(t, "POST", te.url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, api...); a.status != 429 {
		t.Fatalf("a request after the batches took the 10: %d %s", a.status, a.body)
	}
	// More than the burst can never pass: the message says how many a batch may hold.
	te = startEdge(t, func(c *Config) { c.Keys.API, c.RateLimit = apiKey, "5/s" })
	if a := do(t, "POST", te.url+"/mcp", batch(6), api...); a.status != 429 || !strings.Contains(a.body, "a batch of 6 messages is more than the 5 requests") ||
		!strings.Contains(a.body, "send at most 5 per batch") {
		t.Fatalf("a batch over the burst: %d %s", a.status, a.body)
	}
}

// TestDefaultsLimitOnlyAnonymousCallers: under the defaults the API key, the admin key and a
// keyless caller on loopback are not limited — 128 calls in flight at once and 1000 in a row
// all pass (before, 64 and 200) — while a keyless caller from another address is held to
// DefaultAnonymousConcurrencyLimit in flight and DefaultAnonymousRateLimit, told which setting.
func TestDefaultsLimitOnlyAnonymousCallers(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Keys = keyauth.Keys{API: apiKey, Admin: adminKey}
	l, err := parseKeyLimits(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var entered sync.WaitGroup
	h := l.wrap(openAILimited, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			entered.Done()
			<-release
		}
		w.WriteHeader(204)
	}))
	call := func(path, remote, key string) int {
		r := httptest.NewRequest("GET", path, nil)
		r.RemoteAddr = remote
		if key != "" {
			r.Header.Set("Authorization", "Bearer "+key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for _, c := range []struct{ name, remote, key string }{
		{"the API key", "192.0.2.7:1", apiKey}, {"the admin key", "192.0.2.7:2", adminKey}, {"loopback", "127.0.0.1:3", ""}, {"IPv6 loopback", "[::1]:4", ""},
	} {
		const inFlight = 128
		entered.Add(inFlight)
		codes := make(chan int, inFlight)
		for range inFlight {
			go func() { codes <- call("/hold", c.remote, c.key) }()
		}
		entered.Wait() // all 128 are in the handler at once
		close(release)
		for range inFlight {
			if code := <-codes; code != 204 {
				t.Fatalf("%s, 128 in flight: %d", c.name, code)
			}
		}
		release = make(chan struct{})
		for i := range 1000 {
			if code := call("/", c.remote, c.key); code != 204 {
				t.Fatalf("%s, call %d of 1000 in a row: %d", c.name, i+1, code)
			}
		}
	}
	// A keyless caller from another address: 64 in flight, then a 429 naming its setting.
	entered.Add(DefaultAnonymousConcurrencyLimit)
	codes := make(chan int, DefaultAnonymousConcurrencyLimit)
	for range DefaultAnonymousConcurrencyLimit {
		go func() { codes <- call("/hold", "192.0.2.9:5", "") }()
	}
	entered.Wait()
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.9:6"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 429 || !strings.Contains(w.Body.String(), "the address 192.0.2.9 has 64 requests in flight, its limit (ZEST_ANONYMOUS_CONCURRENCY_LIMIT)") {
		t.Fatalf("a 65th anonymous call in flight: %d %s", w.Code, w.Body)
	}
	close(release)
	for range DefaultAnonymousConcurrencyLimit {
		<-codes
	}
	w = httptest.NewRecorder()
	for range 200 {
		w = httptest.NewRecorder()
		h.ServeHTTP(w, r)
	}
	if w.Code != 429 || !strings.Contains(w.Body.String(), "(ZEST_ANONYMOUS_RATE_LIMIT)") {
		t.Fatalf("an anonymous caller past its burst: %d %s", w.Code, w.Body)
	}
}
