package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
)

// Client-side balancing (lib/grpcdial) seen from outside: replicas of one service behind
// another, one replica killed with SIGKILL under steady load through the edge and restarted a
// second later. Reads never fail (retried on another replica); a call that must not be sent
// twice fails only when it was in flight on the killed replica, with an error its client can
// act on; the restarted replica is used again.

// loadKind is one kind of call of the load.
type loadKind struct {
	name    string
	safe    bool                     // a read: retried, so it never fails
	workers int                      // goroutines calling it back to back
	do      func() (bool, string)    // makes one call: ok, else its status and body
	clear   func(answer string) bool // a failure its client can act on (kinds not safe)
}

// loadCalls is how many calls of each kind killUnderLoad makes before the kill, and after the
// killed replica serves again.
const loadCalls = 10

// loadCall is one call of the load, as its client saw it.
type loadCall struct {
	kind       string
	safe       bool
	start, end time.Time
	ok         bool
	answer     string
}

// killUnderLoad runs kinds until each has made loadCalls calls, kills a replica (kill),
// restarts it a second later (restart), waits until served says it serves again, runs until
// each kind has made loadCalls calls more, then checks and reports the calls.
func killUnderLoad(t *testing.T, kinds []loadKind, kill, restart func(), served func() int) {
	t.Helper()
	var (
		mu    sync.Mutex
		calls []loadCall
		wg    sync.WaitGroup
	)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	for _, k := range kinds {
		for range k.workers {
			wg.Go(func() {
				for ctx.Err() == nil {
					c := loadCall{kind: k.name, safe: k.safe, start: time.Now()}
					c.ok, c.answer = k.do()
					c.end = time.Now()
					if !c.ok && !k.safe && k.clear(c.answer) {
						c.answer = "clear " + c.answer
					}
					mu.Lock()
					calls = append(calls, c)
					mu.Unlock()
				}
			})
		}
	}
	// made reports whether every kind has made loadCalls calls begun after since.
	made := func(since time.Time) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			n := map[string]int{}
			for _, c := range calls {
				if c.start.After(since) {
					n[c.kind]++
				}
			}
			for _, k := range kinds {
				if n[k.name] < loadCalls {
					return false
				}
			}
			return true
		}
	}
	waitfor.True(t, 10*time.Second, "every kind of call under way", made(time.Time{}))
	killed := time.Now()
	kill()
	// Down for a second, as a process that takes that long to restart: a sleep kept on
	// purpose, for the downtime is the scenario (the clients' reconnect backoff grows meanwhile).
	time.Sleep(time.Second)
	restarted := time.Now()
	restart()
	// A new process: its counters start from 0.
	waitfor.True(t, 5*time.Second, "a call served by the restarted replica", func() bool { return served() > 0 })
	rejoined := time.Since(restarted)
	waitfor.True(t, 10*time.Second, "every kind of call made after the rejoin", made(time.Now()))
	stop()
	wg.Wait()

	total, failed := map[string]int{}, map[string]int{}
	inFlight, readsInFlight, nFailed := 0, 0, 0
	var longest time.Duration
	var lastFailure time.Time
	shown := map[string]bool{}
	for _, c := range calls {
		total[c.kind]++
		longest = max(longest, c.end.Sub(c.start))
		if c.start.Before(killed) && c.end.After(killed) {
			if c.safe {
				readsInFlight++
			} else {
				inFlight++
			}
		}
		if c.ok {
			continue
		}
		failed[c.kind]++
		nFailed++
		if c.end.After(lastFailure) {
			lastFailure = c.end
		}
		if !shown[c.kind] {
			shown[c.kind] = true
			t.Logf("a %s failure: %.300s", c.kind, c.answer)
		}
		switch {
		case c.safe:
			t.Errorf("a %s call failed (a read is retried on another replica): %s", c.kind, c.answer)
		case !c.start.Before(killed.Add(100 * time.Millisecond)):
			t.Errorf("a %s call started %v after the kill failed: %s", c.kind, c.start.Sub(killed).Round(time.Millisecond), c.answer)
		case !strings.HasPrefix(c.answer, "clear "):
			t.Errorf("a %s call failed without an error its client can act on: %s", c.kind, c.answer)
		}
	}
	var names, figures []string
	for k := range total {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		figures = append(figures, fmt.Sprintf("%s %d/%d", k, failed[k], total[k]))
	}
	last := "none failed"
	if nFailed > 0 {
		last = fmt.Sprintf("the last failure ended %v after the kill", lastFailure.Sub(killed).Round(time.Millisecond))
	}
	t.Logf("failed/calls: %s", strings.Join(figures, ", "))
	t.Logf("in flight at the kill: %d reads (none failed), %d others, of which %d failed; %s; the restarted replica served again %v after its start; longest call %v",
		readsInFlight, inFlight, nFailed, last, rejoined.Round(time.Millisecond), longest.Round(time.Millisecond))
	if nFailed > inFlight {
		t.Errorf("%d calls failed, more than the %d in flight when the replica died", nFailed, inFlight)
	}
	if longest > 5*time.Second {
		t.Errorf("a call took %v: something hung", longest)
	}
	if rejoined > 3*time.Second {
		t.Errorf("the restarted replica served again after %v, want within 3 s", rejoined)
	}
}

// servedBy returns how many gRPC calls (health aside) the service of p has started, read from
// its /metrics, whose address it logs at info (0 until it serves).
func servedBy(p func() *proc) func() int {
	return func() int {
		m := metricsServing.FindStringSubmatch(p().logs.String())
		if m == nil {
			return 0
		}
		return grpcStarted(m[1])
	}
}

// metricsAtInfo has a service serve /metrics on a port of its own choosing and log it.
var metricsAtInfo = []string{"ZEST_LOG_LEVEL=info"}

// TestInferenceReplicaKilledUnderLoad: two inference nodes behind one mcpgateway and one edge
// (ZEST_INFERENCE_ADDR lists both); every path to inference under load; node 0 killed.
func TestInferenceReplicaKilledUnderLoad(t *testing.T) {
	inf := []string{freeAddr(t), freeAddr(t)}
	mg, th, edge := freeAddr(t), freeAddr(t), freeAddr(t)
	base := append(os.Environ(), "ZEST_LOG_LEVEL=warn", "LEMONADE_API_KEY=", "LEMONADE_ADMIN_API_KEY=",
		"ZEST_SERVICE_KEY="+serviceKey, "ZEST_TOOLHOST_ADDR="+th)
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	var nodes []*service
	for i := range inf {
		nodes = append(nodes, runService(t, "zest-inference", with(append(metricsAtInfo, "ZEST_INFERENCE_ADDR="+inf[i],
			"ZEST_INFERENCE_METRICS_ADDR=127.0.0.1:0", "ZEST_BUILTIN_TOKEN_INTERVAL=25ms")...)))
	}
	both := strings.Join(inf, ",")
	runService(t, "zest-toolhost", base)
	runService(t, "zest-mcpgateway", with("ZEST_MCPGATEWAY_ADDR="+mg, "ZEST_INFERENCE_ADDR="+both,
		"ZEST_DATA_DIR="+filepath.Join(t.TempDir(), "data")))
	runService(t, "zest-gateway", with("ZEST_EDGE_ADDR="+edge, "ZEST_MCPGATEWAY_ADDR="+mg, "ZEST_INFERENCE_ADDR="+both))
	s := &Suite{URL: "http://" + edge, t: t}
	s.WaitHealthy()
	session, _ := mcpInit(t, s, "2025-11-25")

	kinds := []loadKind{
		// edge → inference ListModels
		{name: "models", safe: true, workers: 2, do: func() (bool, string) {
			return httpCall("GET", s.URL+"/api/v1/models", "", "builtin-llm")
		}},
		// edge → inference Chat
		{name: "chat", workers: 3, do: func() (bool, string) {
			return httpCall("POST", s.URL+"/api/v1/chat/completions", loadChat("}"), "heard")
		}, clear: jsonError(503)},
		{name: "chat-stream", workers: 2, do: func() (bool, string) {
			ok, answer := httpCall("POST", s.URL+"/api/v1/chat/completions", loadChat(`,"stream":true}`), "heard")
			return ok && strings.Contains(answer, "data: [DONE]") && !strings.Contains(answer, `data: {"error"`), answer
		}, clear: func(a string) bool {
			// Killed before the stream began, the answer is a 503 with OpenAI's error, as
			// OpenAI answers a stream that cannot start; killed after, the stream ends on an
			// error event and [DONE]. Which one depends on when the kill lands.
			return jsonError(503)(a) ||
				strings.Contains(a, `data: {"error":{`) && strings.HasSuffix(strings.TrimSpace(a), "data: [DONE]")
		}},
		// edge → mcpgateway → inference ListModels
		{name: "mcp-list-models", safe: true, workers: 2, do: func() (bool, string) {
			return mcpToolCall(s.URL, session, "lemonade_list_models", `{}`, "builtin-llm")
		}},
		// edge → mcpgateway → inference Chat
		{name: "mcp-chat", workers: 3, do: func() (bool, string) {
			return mcpToolCall(s.URL, session, "lemonade_chat", `{"messages":[{"role":"user","content":"one two three four five six seven eight"}]}`, "heard")
		}, clear: mcpError},
	}
	// Both nodes serve before the load starts (each client connects to both on its first call).
	waitAllServe(t, kinds, nodes)
	killUnderLoad(t, kinds, func() { nodes[0].stop(syscall.SIGKILL) }, nodes[0].start, servedBy(func() *proc { return nodes[0].p }))
}

// TestMcpgatewayReplicaKilledUnderLoad: two mcpgateways behind one edge (its
// ZEST_MCPGATEWAY_ADDR lists both; one ZEST_SESSION_KEY); MCP tool calls, tool-loop chats
// and admin reads under load; mcpgateway 0 killed.
func TestMcpgatewayReplicaKilledUnderLoad(t *testing.T) {
	mgs := []string{freeAddr(t), freeAddr(t)}
	inf, th, edge := freeAddr(t), freeAddr(t), freeAddr(t)
	base := append(os.Environ(), "ZEST_LOG_LEVEL=warn", "LEMONADE_API_KEY=", "LEMONADE_ADMIN_API_KEY="+adminKey,
		"ZEST_SERVICE_KEY="+serviceKey, "ZEST_TOOLHOST_ADDR="+th, "ZEST_INFERENCE_ADDR="+inf,
		"ZEST_SESSION_KEY="+replicaSessionKey)
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	runService(t, "zest-inference", with("ZEST_BUILTIN_TOKEN_INTERVAL=25ms"))
	runService(t, "zest-toolhost", base)
	var gws []*service
	for i := range mgs {
		gws = append(gws, runService(t, "zest-mcpgateway", with(append(metricsAtInfo, "ZEST_MCPGATEWAY_ADDR="+mgs[i],
			"ZEST_MCPGATEWAY_METRICS_ADDR=127.0.0.1:0", "ZEST_DATA_DIR="+filepath.Join(t.TempDir(), "data"))...)))
	}
	runService(t, "zest-gateway", with("ZEST_EDGE_ADDR="+edge, "ZEST_MCPGATEWAY_ADDR="+strings.Join(mgs, ",")))
	s := &Suite{URL: "http://" + edge, t: t}
	s.WaitHealthy()
	session, _ := mcpInit(t, s, "2025-11-25")

	kinds := []loadKind{
		// edge → mcpgateway AdminService reads
		{name: "admin-servers", safe: true, workers: 2, do: func() (bool, string) {
			return httpCall("GET", s.URL+"/internal/mcp/servers", "", `"servers"`, adminAuth)
		}},
		{name: "admin-presets", safe: true, workers: 1, do: func() (bool, string) {
			return httpCall("GET", s.URL+"/internal/mcp/presets", "", `"presets"`, adminAuth)
		}},
		// edge → mcpgateway Exchange (a tool call: never sent twice)
		{name: "mcp-list-models", workers: 2, do: func() (bool, string) {
			return mcpToolCall(s.URL, session, "lemonade_list_models", `{}`, "builtin-llm")
		}, clear: mcpError},
		{name: "mcp-chat", workers: 3, do: func() (bool, string) {
			return mcpToolCall(s.URL, session, "lemonade_chat", `{"messages":[{"role":"user","content":"one two three four five six seven eight"}]}`, "heard")
		}, clear: mcpError},
	}
	waitAllServe(t, kinds, gws)
	killUnderLoad(t, kinds, func() { gws[0].stop(syscall.SIGKILL) }, gws[0].start, servedBy(func() *proc { return gws[0].p }))
}

// waitAllServe waits until every kind of call answers and every replica has served a call.
func waitAllServe(t *testing.T, kinds []loadKind, replicas []*service) {
	t.Helper()
	waitfor.NoError(t, 5*time.Second, func() error {
		for _, k := range kinds {
			if ok, answer := k.do(); !ok {
				return fmt.Errorf("%s: %s", k.name, answer)
			}
		}
		for i, r := range replicas {
			if servedBy(func() *proc { return r.p })() == 0 {
				return fmt.Errorf("%s %d served nothing yet", r.name, i)
			}
		}
		return nil
	})
}

func loadChat(rest string) string {
	return `{"model":"builtin-llm","messages":[{"role":"user","content":"one two three four five six seven eight"}]` + rest
}

// jsonError accepts status with OpenAI's JSON error.
func jsonError(status int) func(string) bool {
	return func(a string) bool {
		return strings.HasPrefix(a, strconv.Itoa(status)+" ") && strings.Contains(a, `"error":{`)
	}
}

// mcpError accepts an MCP error: a JSON-RPC error (on any status) or a tool result isError.
func mcpError(a string) bool {
	return strings.Contains(a, `"jsonrpc":"2.0"`) && (strings.Contains(a, `"error":{`) || strings.Contains(a, `"isError":true`))
}

var loadClient = &http.Client{Timeout: 10 * time.Second}

// httpCall makes one request and says whether it answered 200 with want in its body, with its
// status and body. It never fails the test (it runs in the load's goroutines).
func httpCall(method, url, body, want string, headers ...string) (bool, string) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return false, err.Error()
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(k, strings.TrimSpace(v))
	}
	resp, err := loadClient.Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	answer := strconv.Itoa(resp.StatusCode) + " " + string(b)
	if err != nil {
		return false, answer + " (" + err.Error() + ")"
	}
	return resp.StatusCode == http.StatusOK && strings.Contains(string(b), want), answer
}

// mcpToolCall calls tool on /mcp in session and says whether its result has want and no error.
func mcpToolCall(url, session, tool, args, want string) (bool, string) {
	ok, answer := httpCall("POST", url+"/mcp", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`}}`,
		want, append(mcpHeaders, "Mcp-Session-Id: "+session)...)
	return ok && !mcpError(answer), answer
}

// grpcStarted is the number of gRPC calls a service has started (health aside), from its
// /metrics at addr (0 when it does not answer).
func grpcStarted(addr string) int {
	resp, err := loadClient.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n := 0
	for _, m := range startedLine.FindAllStringSubmatch(string(b), -1) {
		if strings.Contains(m[0], "grpc.health.v1") {
			continue
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		n += int(v)
	}
	return n
}

var startedLine = regexp.MustCompile(`(?m)^grpc_server_started_total\{[^}]*\} ([0-9.e+]+)$`)
