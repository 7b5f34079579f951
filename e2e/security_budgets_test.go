package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/zestmcp/zest/lib/waitfor"
)

// TestDefaultsServeAMachinesOwnWork: under the default limits an evaluation harness with the
// API key holds 128 chat completions in flight at once against its own machine, and every one
// is answered 200. (Before, the defaults held every key to 64 in flight: the rest got 429,
// which Lemonade never answers.) The requests are held in flight by their bodies, sent in two
// halves: the second halves go once the edge counts all 128 in flight.
func TestDefaultsServeAMachinesOwnWork(t *testing.T) {
	const key, inFlight = "harness-api-key", 128
	s := startSuite(t, "LEMONADE_API_KEY="+key, "ZEST_EDGE_METRICS_ADDR=127.0.0.1:0", "ZEST_LOG_LEVEL=info")
	body := `{"model":"builtin-llm","messages":[{"role":"user","content":"hello from the harness"}]}`
	half := len(body) / 2
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: inFlight}, Timeout: time.Minute}
	type result struct {
		status int
		body   string
		err    error
	}
	results := make(chan result, inFlight)
	writers := make([]*io.PipeWriter, inFlight)
	for i := range writers {
		pr, pw := io.Pipe()
		writers[i] = pw
		req, _ := http.NewRequestWithContext(t.Context(), "POST", s.URL+"/api/v1/chat/completions", pr)
		req.ContentLength = int64(len(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		go func() {
			resp, err := client.Do(req)
			if err != nil {
				results <- result{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			results <- result{resp.StatusCode, string(b), err}
		}()
		if _, err := io.WriteString(pw, body[:half]); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	waitfor.NoError(t, 20*time.Second, func() error {
		if len(results) > 0 { // none can be answered before its second half: this one was refused
			r := <-results
			t.Fatalf("a completion answered before its body was whole: %d %v %.300s", r.status, r.err, r.body)
		}
		n, err := edgeGauge(t, s, "zest_http_requests_in_flight")
		if err == nil && n < inFlight {
			err = fmt.Errorf("%v requests in flight at the edge, want %d", n, inFlight)
		}
		return err
	})
	for _, pw := range writers {
		io.WriteString(pw, body[half:])
		pw.Close()
	}
	for range inFlight {
		r := <-results
		if r.err != nil || r.status != 200 || !strings.Contains(r.body, `"chat.completion"`) {
			t.Fatalf("a completion of the 128: %d %v %.300s", r.status, r.err, r.body)
		}
	}
}

// batchOf is a JSON-RPC batch of n copies of a request of method (ids 1…n).
func batchOf(n int, method string) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q}`, i+1, method)
	}
	return "[" + strings.Join(items, ",") + "]"
}

// TestBatchIsCappedAndEachMessageCounts: with a key held to 30 requests an hour (the admin
// key, whose budget the suite's health polls leave alone), a 2025-03-26 session's batch of 51
// is refused (400, a JSON-RPC error naming the limit of 50) and runs nothing, and a batch of n
// takes n of the key's rate: 20 pass, 10 more are refused with 429 when 7 are left, 7 pass,
// and the next request is over. (Before, a batch of any length counted as one request.)
func TestBatchIsCappedAndEachMessageCounts(t *testing.T) {
	const key = "batch-admin-key"
	s := startSuite(t, "LEMONADE_API_KEY=batch-api-key", "LEMONADE_ADMIN_API_KEY="+key, "ZEST_RATE_LIMIT=30/h")
	auth := "Authorization: Bearer " + key
	session, _ := mcpInit(t, s, "2025-03-26", auth) // 1 of 30
	answers := func(r Response) []map[string]any {
		var out []map[string]any
		if err := json.Unmarshal(r.Body, &out); err != nil {
			t.Fatalf("a batch's answer is not an array: %d %s", r.Status, r.Body)
		}
		return out
	}
	r := mcpCall(t, s, session, batchOf(51, "ping"), auth) // 2
	if e, _ := r.JSON(t)["error"].(map[string]any); r.Status != 400 || e["code"] != -32600.0 ||
		!strings.Contains(fmt.Sprint(e["message"]), "a JSON-RPC batch holds at most 50 messages; this one holds 51") {
		t.Fatalf("a batch of 51: %d %s", r.Status, r.Body)
	}
	if r = mcpCall(t, s, session, batchOf(20, "ping"), auth); r.Status != 200 || len(answers(r)) != 20 { // 22
		t.Fatalf("a batch of 20: %d %s", r.Status, r.Body)
	}
	r = mcpCall(t, s, session, batchOf(10, "ping"), auth) // 23: 9 more wanted, 7 left
	if e, _ := r.JSON(t)["error"].(map[string]any); r.Status != 429 || e["code"] != -32029.0 || r.Header.Get("Retry-After") == "" ||
		!strings.Contains(fmt.Sprint(e["message"]), "may make 30 requests per hour (ZEST_RATE_LIMIT), and a batch counts each of its 10 messages") {
		t.Fatalf("a batch of 10 with 7 left: %d %v %s", r.Status, r.Header, r.Body)
	}
	if r = mcpCall(t, s, session, batchOf(7, "ping"), auth); r.Status != 200 || len(answers(r)) != 7 { // 30
		t.Fatalf("a batch of 7 with 7 left: %d %s", r.Status, r.Body)
	}
	if r = mcpCall(t, s, session, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, auth); r.Status != 429 {
		t.Fatalf("a request once the batches took all 30: %d %s", r.Status, r.Body)
	}
}

// TestBatchAnswerStopsAtTheMessageLimit: with a 4 MiB gRPC message limit, a 2025-03-26
// batch of 30 tools/list of a server whose list is 300 kB (9 MB of answers) is answered
// within the limit: the lists that fit, then an error for the one that did not (it ran) and
// for each one after it (not run), each naming ZEST_GRPC_MAX_MESSAGE_BYTES. (Before, the whole
// answer was built and its send failed: no answer at all.)
func TestBatchAnswerStopsAtTheMessageLimit(t *testing.T) {
	const limit = 4 << 20
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey, fmt.Sprintf("ZEST_GRPC_MAX_MESSAGE_BYTES=%d", limit), "ZEST_MAX_BODY_BYTES=1048576")
	registerServer(t, s, map[string]any{"id": "wide", "command": "node", "args": []string{nodeScript(t, "wide-server.mjs"), "300000"}})
	session, _ := fedInit(t, s, "wide", "2025-03-26")
	r := fedCall(t, s, "wide", session, batchOf(30, "tools/list"))
	var out []struct {
		ID     int             `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if r.Status != 200 || json.Unmarshal(r.Body, &out) != nil || len(out) != 30 {
		t.Fatalf("a batch of 30 tools/list of 300 kB: %d %.300s", r.Status, r.Body)
	}
	lists := 0
	for lists < len(out) && out[lists].Result != nil {
		lists++
	}
	t.Logf("%d bytes answer the batch: %d lists, then errors; mcpgateway's peak RSS %d MiB", len(r.Body), lists, peakRSS(t, s, "zest-mcpgateway"))
	if lists < 5 || lists == len(out) || len(r.Body) > limit {
		t.Fatalf("%d lists in an answer of %d bytes; want some, not all, within %d", lists, len(r.Body), limit)
	}
	for i, o := range out[lists:] {
		want := "Not run: this batch's answer reached its limit"
		if i == 0 {
			want = "This request ran, but its answer of"
		}
		if o.ID != lists+i+1 || o.Error.Code != -32603 || !strings.HasPrefix(o.Error.Message, want) || !strings.Contains(o.Error.Message, "ZEST_GRPC_MAX_MESSAGE_BYTES") {
			t.Fatalf("answer %d: %+v; want %q", lists+i+1, o, want)
		}
	}
}

// TestDiagnosticsStayOnLoopback: the profiler and the metrics port answer anyone who reaches
// them without a key, so every binary refuses to start (exit 2, before anything listens) when
// one is set to an address other than loopback, naming the setting and the one that allows it
// (ZEST_PPROF_PUBLIC, ZEST_METRICS_PUBLIC); with that setting, or on loopback, it starts.
func TestDiagnosticsStayOnLoopback(t *testing.T) {
	for bin, listenVar := range listenVars {
		env := append(os.Environ(), "ZEST_SERVICE_KEY="+serviceKey, listenVar+"="+unusedAddr(t))
		for _, c := range []struct {
			vars []string
			want string // in the refusal; "" when the binary must start
		}{
			{[]string{"ZEST_PPROF_ADDR=0.0.0.0:16060"}, "ZEST_PPROF_PUBLIC=true"},
			{[]string{"ZEST_PPROF_ADDR=:16060"}, "ZEST_PPROF_PUBLIC=true"},
			{[]string{metricsVars[bin] + "=0.0.0.0:16061"}, "ZEST_METRICS_PUBLIC=true"},
			{[]string{"ZEST_PPROF_ADDR=0.0.0.0:16060", "ZEST_PPROF_PUBLIC=true"}, ""},
			{[]string{metricsVars[bin] + "=0.0.0.0:16061", "ZEST_METRICS_PUBLIC=true"}, ""},
			{[]string{"ZEST_PPROF_ADDR=127.0.0.1:16060", metricsVars[bin] + "=127.0.0.1:16061"}, ""},
		} {
			code, out := runHealthcheck(t, bin, append(env, c.vars...))
			switch {
			case c.want != "" && (code != 2 || !strings.Contains(out, "is not a loopback address") || !strings.Contains(out, c.want)):
				t.Errorf("%s with %v: exit %d, %q; want 2 naming %s", bin, c.vars, code, out, c.want)
			case c.want == "" && code == 2:
				t.Errorf("%s with %v: refused: %s", bin, c.vars, out)
			}
		}
	}
}

// clientFrom is an HTTP client whose connections come from the loopback address ip (Linux
// routes all of 127.0.0.0/8 to lo): the edge sees callers of different addresses.
func clientFrom(ip string, keepAlive bool) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: !keepAlive, MaxConnsPerHost: 1}}
}

// TestWrongKeysAreSlowedGoodKeysAreNot: an address that presented ZEST_AUTH_FAILURE_LIMIT's
// burst of wrong keys (5 here) gets 429 with Retry-After for any key it presents on a new
// connection — the right one too, so that a guess is never confirmed faster — on every route
// and the WebSocket upgrade; a client that proved the API key on its connection before goes
// on from the same address, and another address is not slowed at all. (Before, every wrong
// key was a 401, about 8 000 a second.)
func TestWrongKeysAreSlowedGoodKeysAreNot(t *testing.T) {
	const key = "slowed-api-key"
	s := startSuite(t, "LEMONADE_API_KEY="+key, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_AUTH_FAILURE_LIMIT=5/h")
	get := func(c *http.Client, path, key string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", s.URL+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
	}
	proven, guesser := clientFrom("127.0.0.2", true), clientFrom("127.0.0.2", false)
	if code, _, body := get(proven, "/api/v1/models", key); code != 200 {
		t.Fatalf("the good client from 127.0.0.2: %d %s", code, body)
	}
	for i := range 5 {
		if code, _, body := get(guesser, "/api/v1/models", fmt.Sprint("guess-", i)); code != 401 {
			t.Fatalf("wrong key %d of 5: %d %s", i+1, code, body)
		}
	}
	for _, path := range []string{"/api/v1/models", "/mcp", "/internal/mcp/servers", "/v1/health"} {
		code, retry, body := get(guesser, path, "guess-5")
		if code != 429 || retry != "720" || !strings.Contains(body, "Too many failed authentications from 127.0.0.2") {
			t.Fatalf("a 6th wrong key on %s: %d %q %s", path, code, retry, body)
		}
	}
	if code, _, body := get(guesser, "/api/v1/models", key); code != 429 {
		t.Fatalf("the right key on a new connection from the throttled address: %d %s; want 429 (unchecked)", code, body)
	}
	if code, _, body := get(guesser, "/logs/stream?api_key=guess-6", ""); code != 429 {
		t.Fatalf("a WebSocket upgrade with a wrong key from the throttled address: %d %s", code, body)
	}
	for range 3 {
		if code, _, body := get(proven, "/api/v1/models", key); code != 200 {
			t.Fatalf("the client that proved its key on its connection: %d %s", code, body)
		}
	}
	other := clientFrom("127.0.0.1", false)
	if code, _, body := get(other, "/api/v1/models", key); code != 200 {
		t.Fatalf("the right key from another address: %d %s", code, body)
	}
	if code, _, body := get(other, "/api/v1/models", "guess-7"); code != 401 {
		t.Fatalf("a wrong key from another address: %d %s; want 401 (its own budget)", code, body)
	}
}

// streamClient opens MCP GET streams: each holds its own connection, and the answer's headers
// must come within 5 s (an edge out of descriptors never answers).
var streamClient = &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: 5 * time.Second}}

// openMCPStream opens the GET stream of session at url; an answer other than 200 is read whole
// and returned with its Retry-After. The stream stays open until the test ends or close.
func openMCPStream(t *testing.T, url, session string, headers ...string) (status int, body string, close func(), err error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := streamClient.Do(req)
	if err != nil {
		cancel()
		return 0, "", nil, err
	}
	if resp.StatusCode != 200 {
		defer cancel()
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After") + " " + string(b), nil, nil
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return 200, "", func() { cancel(); resp.Body.Close() }, nil
}

// want429Stream checks a stream's refusal: 429, Retry-After, /mcp's JSON-RPC error -32029
// naming the bound.
func want429Stream(t *testing.T, what string, code int, body string, err error, msg string) {
	t.Helper()
	if err != nil || code != 429 || !strings.HasPrefix(body, "1 ") || !strings.Contains(body, `"code":-32029`) || !strings.Contains(body, msg) {
		t.Fatalf("%s: %d %v %s; want 429 naming %q", what, code, err, body, msg)
	}
}

// TestStreamsAreBoundedPerSessionKeyAndInAll: with small bounds (1 GET stream a session, 2 a
// key, 3 in all) the stream past each bound is refused — 429, Retry-After, a JSON-RPC error
// naming its setting — on /mcp and a federated endpoint alike, while the admin routes and
// /live answer; a closed stream frees its place. (Before, one key opened 20 000 and the edge
// ran out of descriptors.)
func TestStreamsAreBoundedPerSessionKeyAndInAll(t *testing.T) {
	const key = "streams-api-key"
	s := startSuite(t, "LEMONADE_API_KEY="+key, "LEMONADE_ADMIN_API_KEY="+adminKey,
		"ZEST_STREAMS_PER_SESSION=1", "ZEST_STREAMS_PER_KEY=2", "ZEST_MAX_STREAMS=3")
	registerServer(t, s, map[string]any{"id": "echo", "command": "node", "args": []string{filepath.Join(peersDir(t), "echo-server.mjs")}})
	api, adm := "Authorization: Bearer "+key, adminAuth
	a, _ := mcpInit(t, s, "2025-11-25", api)
	b, _ := mcpInit(t, s, "2025-11-25", api)
	c, _ := mcpInit(t, s, "2025-11-25", api)
	d, _ := mcpInit(t, s, "2025-11-25", adm)
	e, _ := fedInit(t, s, "echo", "2025-11-25", adm)

	code, body, closeA, err := openMCPStream(t, s.URL+"/mcp", a, api)
	if err != nil || code != 200 {
		t.Fatalf("the first stream: %d %v %s", code, err, body)
	}
	code, body, _, err = openMCPStream(t, s.URL+"/mcp", a, api)
	want429Stream(t, "a second stream of one session", code, body, err, "this session holds 1 GET streams open, its limit (ZEST_STREAMS_PER_SESSION)")
	if code, body, _, err := openMCPStream(t, s.URL+"/mcp", b, api); err != nil || code != 200 {
		t.Fatalf("a second session's stream: %d %v %s", code, err, body)
	}
	code, body, _, err = openMCPStream(t, s.URL+"/mcp", c, api)
	want429Stream(t, "a third stream of the API key", code, body, err, "the API key (LEMONADE_API_KEY) holds 2 streams open, its limit (ZEST_STREAMS_PER_KEY)")
	if code, body, _, err := openMCPStream(t, s.URL+"/mcp", d, adm); err != nil || code != 200 {
		t.Fatalf("the admin key's stream: %d %v %s", code, err, body)
	}
	code, body, _, err = openMCPStream(t, fedURL(s, "echo"), e, adm)
	want429Stream(t, "a fourth stream in all (federated)", code, body, err, "the edge holds 3 streams open, its limit (ZEST_MAX_STREAMS")
	if r := do(t, "GET", s.URL+"/live", ""); r.Status != 200 {
		t.Fatalf("/live beside the streams: %d", r.Status)
	}
	if r := admin(t, s, "GET", "/servers", ""); r.Status != 200 {
		t.Fatalf("an admin route beside the streams: %d %s", r.Status, r.Body)
	}
	closeA()
	waitfor.NoError(t, 10*time.Second, func() error {
		if code, body, _, err := openMCPStream(t, s.URL+"/mcp", c, api); err != nil || code != 200 {
			return fmt.Errorf("a stream once one closed: %d %v %s", code, err, body)
		}
		return nil
	})
}

// TestStreamsLeaveDescriptorsForTheAdminRoutes: an edge started with 500 descriptors (prlimit)
// holds streams until its bound in all — what the open-file limit leaves after the
// descriptors it keeps for everything else, as /internal/config says — then refuses the next
// with 429, and /live, the admin routes and an ordinary call still answer. (Before, the streams
// took every descriptor: the edge accepted no connection at all, the admin's included.)
func TestStreamsLeaveDescriptorsForTheAdminRoutes(t *testing.T) {
	const nofile = 500
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Fatalf("prlimit (util-linux) is needed: %v", err)
	}
	// ZEST_RATE_LIMIT=off is the default; said here so that the test measures the descriptors
	// on an edge whose default was 100 requests a second too.
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_RATE_LIMIT=off")
	s.Kill("zest-gateway", syscall.SIGTERM)
	cmd := exec.Command(prlimit, fmt.Sprintf("--nofile=%d:%d", nofile, nofile), filepath.Join(binDir, "zest-gateway"))
	cmd.Env = s.Env
	s.procs["zest-gateway"] = startProc(t, "zest-gateway", cmd, false)
	s.WaitHealthy()

	opened, session := 0, ""
	var refusal string
	for opened < nofile {
		if opened%2 == 0 { // two GET streams a session, its default bound
			session, _ = mcpInit(t, s, "2025-11-25")
		}
		code, body, _, err := openMCPStream(t, s.URL+"/mcp", session)
		if err != nil {
			t.Fatalf("stream %d: %v (the edge ran out of descriptors?)", opened+1, err)
		}
		if code != 200 {
			want429Stream(t, fmt.Sprintf("stream %d", opened+1), code, body, err, "the edge holds")
			refusal = body
			break
		}
		opened++
	}
	t.Logf("%d streams held with %d descriptors; then: %s", opened, nofile, refusal)
	quick := &http.Client{Timeout: 5 * time.Second}
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/live", ""}, {"GET", "/internal/mcp/servers", ""}, {"GET", "/internal/config", ""},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), c.method, s.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+adminKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		resp, err := quick.Do(req)
		if err != nil {
			t.Fatalf("%s %s beside %d streams: %v", c.method, c.path, opened, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s beside %d streams: %d %s", c.method, c.path, opened, resp.StatusCode, b)
		}
		if c.path == "/internal/config" {
			var cfg map[string]any
			if json.Unmarshal(b, &cfg) != nil || cfg["max_streams"] != float64(opened) {
				t.Fatalf("/internal/config says max_streams %v; %d were held", cfg["max_streams"], opened)
			}
		}
	}
}

// TestKeylessSocketsLeaveTheKeyedSlots: 64 span sockets opened without a key (which may send
// it in a first message) from 16 addresses get the 16 places of their own pool (4 an address;
// the rest 429 with Retry-After), and a GUI with the key still opens its log and span sockets
// and is served. (Before, the 64 keyless sockets took every slot: the GUI got 503.)
func TestKeylessSocketsLeaveTheKeyedSlots(t *testing.T) {
	const key = "sockets-api-key"
	s := startSuite(t, "LEMONADE_API_KEY="+key)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ws := "ws" + strings.TrimPrefix(s.URL, "http")
	opened, refused := 0, 0
	for i := range 64 {
		from := fmt.Sprintf("127.0.0.%d", 1+i/4)
		c, resp, err := websocket.Dial(ctx, ws+"/spans/stream?client_session_id=x", &websocket.DialOptions{HTTPClient: clientFrom(from, true)})
		switch {
		case err == nil:
			opened++
			t.Cleanup(func() { c.CloseNow() })
		case resp != nil && resp.StatusCode == 429 && resp.Header.Get("Retry-After") == "1":
			refused++
		default:
			t.Fatalf("keyless socket %d from %s: %v %v", i+1, from, err, resp)
		}
	}
	if opened != 16 || refused != 48 {
		t.Fatalf("64 keyless span sockets: %d opened, %d refused 429; want 16 and 48", opened, refused)
	}
	var msg map[string]any
	logs, _, err := websocket.Dial(ctx, ws+"/logs/stream?api_key="+key+"&client_session_id=x", nil)
	if err != nil {
		t.Fatalf("the GUI's log socket beside them: %v", err)
	}
	defer logs.CloseNow()
	if err := wsjson.Write(ctx, logs, map[string]any{"type": "logs.subscribe", "after_seq": nil}); err != nil {
		t.Fatal(err)
	}
	if err := wsjson.Read(ctx, logs, &msg); err != nil || msg["type"] != "logs.snapshot" {
		t.Fatalf("the GUI's log socket: %v %v", err, msg)
	}
	spans, _, err := websocket.Dial(ctx, ws+"/spans/stream?api_key="+key+"&client_session_id=x", nil)
	if err != nil {
		t.Fatalf("the GUI's span socket beside them: %v", err)
	}
	defer spans.CloseNow()
	_ = wsjson.Write(ctx, spans, map[string]any{"type": "auth", "token": key})
	if err := wsjson.Read(ctx, spans, &msg); err != nil || msg["type"] != "auth.ok" {
		t.Fatalf("the GUI's span socket: %v %v", err, msg)
	}
}

// TestEdgeAdministrationNeedsTheAdminKey: /internal/set, POST log-level and /internal/config
// take the admin key once one is set — the API key is refused, and no key at all where only
// the admin key is set — and a change made with it is in the audit trail (who, which edge,
// which setting). (Before, the API key, or no key beside an admin key, set the log level to
// fatal, and /internal/config was readable without a key.)
func TestEdgeAdministrationNeedsTheAdminKey(t *testing.T) {
	const key = "settings-api-key"
	s := startSuite(t, "LEMONADE_API_KEY="+key, "LEMONADE_ADMIN_API_KEY="+adminKey)
	api := "Authorization: Bearer " + key
	for _, c := range []struct{ method, path, body, auth string }{
		{"POST", "/internal/set", `{"log_level":"fatal"}`, api}, {"POST", "/internal/set", `{"log_level":"fatal"}`, ""},
		{"POST", "/api/v1/log-level", `{"level":"fatal"}`, api}, {"GET", "/internal/config", "", api}, {"GET", "/internal/config", "", ""},
	} {
		if r := do(t, c.method, s.URL+c.path, c.body, "Content-Type: application/json", c.auth); r.Status != 401 {
			t.Errorf("%s %s with %q: %d %s; want 401", c.method, c.path, c.auth, r.Status, r.Body)
		}
	}
	if r := do(t, "GET", s.URL+"/api/v1/log-level", "", api); r.Status != 200 || r.JSON(t)["level"] != "warning" {
		t.Fatalf("GET log-level with the API key: %d %s", r.Status, r.Body)
	}
	if r := do(t, "POST", s.URL+"/internal/set", `{"log_level":"error"}`, "Content-Type: application/json", adminAuth); r.Status != 200 {
		t.Fatalf("set with the admin key: %d %s", r.Status, r.Body)
	}
	if r := do(t, "GET", s.URL+"/internal/config", "", adminAuth); r.Status != 200 || r.JSON(t)["log_level"] != "error" {
		t.Fatalf("/internal/config with the admin key: %d %s", r.Status, r.Body)
	}
	a := waitAudit(t, s, "?kind=admin", 1)
	if len(a.Entries) != 1 {
		t.Fatalf("admin entries: %s", summary(a.Entries))
	}
	e := a.Entries[0]
	if e.Action != "set_edge_settings" || e.Who != who(adminKey) || e.Outcome != "ok" || strings.Join(e.Changed, ",") != "log_level" ||
		!strings.HasSuffix(e.Target, "/"+strings.TrimPrefix(s.URL, "http://")) {
		t.Fatalf("the entry of the change: %+v", e)
	}

	only := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	if r := do(t, "POST", only.URL+"/internal/set", `{"log_level":"fatal"}`, "Content-Type: application/json"); r.Status != 401 {
		t.Fatalf("keyless set beside an admin key alone: %d %s", r.Status, r.Body)
	}
}
