package e2e

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
)

// TestNoisyClientCannotStarveAnother: one client (the API key, ZEST_RATE_LIMIT=20/s) sends
// 10× its rate limit, many requests at once, at a fixed pace; it gets 429 with Retry-After
// for what is over, while another client (the admin key: Lemonade has two keys, and both
// clients come from 127.0.0.1, so by address they would be one; its own limit raised with
// ZEST_RATE_LIMIT_KEYS=admin=1000/s, as an operator would for a trusted poller) keeps its
// median latency within 20 % of its figure before the noise.
//
// The noise is paced (a request every 5 ms), not a tight loop: the test measures the edge's
// limit, not how fast a loop can burn the CI machine's two cores. Rounds without and with
// the noise alternate; medians of 360 samples each: a slow sample or two (a GC, the
// scheduler) does not move them.
func TestNoisyClientCannotStarveAnother(t *testing.T) {
	const (
		apiKey, adminKey = "noisy-api-key", "quiet-admin-key"
		limit            = 20 // per second, the noisy key's
		noiseEvery       = 5 * time.Millisecond
		samples          = 360
		rounds           = 12 // of each: samples/rounds samples per round
	)
	s := startSuite(t, "LEMONADE_API_KEY="+apiKey, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_RATE_LIMIT="+strconv.Itoa(limit)+"/s",
		"ZEST_RATE_LIMIT_KEYS=admin=1000/s")
	get := func(c *http.Client, key string) (int, string, error) {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", s.URL+"/api/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), err
	}
	// Each client its own connections: the noise cannot hold the quiet client's.
	quietClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 30 * time.Second}
	noisyClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}, Timeout: 30 * time.Second}
	sample := func() time.Duration {
		t0 := time.Now()
		code, _, err := get(quietClient, adminKey)
		d := time.Since(t0)
		if err != nil || code != 200 {
			t.Fatalf("the quiet client: %d %v", code, err)
		}
		// A client that polls, well within its own limit: a pace, kept on purpose (the load
		// is the scenario, not a wait for something).
		time.Sleep(2 * time.Millisecond)
		return d
	}
	median := func(lat []time.Duration) time.Duration {
		lat = slices.Clone(lat)
		slices.Sort(lat)
		return lat[len(lat)/2]
	}
	for range 20 { // warm: connections, the inference service's first answers
		get(quietClient, adminKey)
	}

	// The noise: a request every noiseEvery while on is set.
	var on atomic.Bool
	var ok, limited, badRetry, failed atomic.Int64
	var noiseTime time.Duration
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	inFlight := make(chan struct{}, 64) // many at once, bounded: a client, not a fork bomb
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(noiseEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if !on.Load() {
				continue
			}
			select {
			case inFlight <- struct{}{}:
			default:
				continue // 64 in flight already: this tick's request is skipped
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-inFlight }()
				code, retry, err := get(noisyClient, apiKey)
				switch {
				case err != nil:
					if ctx.Err() == nil {
						failed.Add(1)
					}
				case code == 200:
					ok.Add(1)
				case code == 429:
					limited.Add(1)
					if n, err := strconv.Atoi(retry); err != nil || n < 1 {
						badRetry.Add(1)
					}
				default:
					failed.Add(1)
				}
			}()
		}
	}()
	// Rounds without and with the noise, in turn: the machine's own load drifts (CI runs
	// other jobs), and alternating spreads the drift over both figures alike.
	var unloadedLat, loadedLat []time.Duration
	var firstNoise time.Time
	for round := range 2 * rounds {
		noisy := round%2 == 1
		on.Store(noisy)
		began := time.Now()
		if noisy && firstNoise.IsZero() {
			firstNoise = began
		}
		// The noise under way (over its limit), or gone (none of it in flight), before sampling.
		if noisy {
			seen := limited.Load()
			waitfor.True(t, 5*time.Second, "the noise over its limit", func() bool { return limited.Load() > seen })
		} else {
			waitfor.True(t, 5*time.Second, "the noise gone", func() bool { return len(inFlight) == 0 })
		}
		for range samples / rounds {
			if noisy {
				loadedLat = append(loadedLat, sample())
			} else {
				unloadedLat = append(unloadedLat, sample())
			}
		}
		if noisy {
			noiseTime += time.Since(began)
		}
	}
	on.Store(false)
	stop()
	wg.Wait()
	span := time.Since(firstNoise) // the bucket refills between the noisy rounds too
	unloaded, loaded := median(unloadedLat), median(loadedLat)
	noise := noiseTime

	sent := ok.Load() + limited.Load()
	t.Logf("quiet client (admin key) median latency of %d samples each: %v unloaded, %v beside the noise (%+.1f%%)",
		samples, unloaded, loaded, 100*(float64(loaded)/float64(unloaded)-1))
	t.Logf("noisy client (API key, limit %d/s): %d requests in %v (%.0f/s): %d answered, %d refused 429",
		limit, sent, noise.Round(time.Millisecond), float64(sent)/noise.Seconds(), ok.Load(), limited.Load())
	if failed.Load() > 0 || badRetry.Load() > 0 {
		t.Fatalf("the noisy client: %d failures, %d 429s without a Retry-After of whole seconds", failed.Load(), badRetry.Load())
	}
	if float64(sent)/noise.Seconds() < 4*limit {
		t.Fatalf("the noise reached only %.0f requests/s: under 4× the limit it tests nothing", float64(sent)/noise.Seconds())
	}
	// Admitted: the burst (limit) and the rate from the first noisy round to the end, and a
	// little slack.
	if max := int64(limit + limit*span.Seconds() + 5); ok.Load() > max || limited.Load() == 0 {
		t.Fatalf("the noisy client had %d requests answered (at most %d within its limit) and %d refused", ok.Load(), max, limited.Load())
	}
	if loaded > unloaded*120/100 {
		t.Fatalf("the quiet client's median latency went from %v to %v: over 20 %% slower beside the noise", unloaded, loaded)
	}
}

// TestServerRateLimitOnEveryPath: a server's rate_limit (all callers together) holds on each
// path through the real processes: the admin API's tools/call is 429 with Retry-After in the
// admin shape, /mcp/servers/{id} a JSON-RPC error -32029 with data.retry_after_ms, and the
// chat loop gives the model a tool error saying to retry later. A bad value is 400 naming the
// field; the state shows the limit.
func TestServerRateLimitOnEveryPath(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	echo := filepath.Join(peersDir(t), "echo-server.mjs")
	r := admin(t, s, "POST", "/servers", jsonBody(t, map[string]any{"id": "echo", "command": "node", "args": []string{echo}, "rate_limit": "20 per second"}))
	if r.Status != 400 || r.JSON(t)["error"].(map[string]any)["param"] != "rate_limit" || !strings.Contains(errMessage(t, r), `rate_limit "20 per second" is not a rate`) {
		t.Fatalf("a bad rate_limit: %d %s", r.Status, r.Body)
	}
	r = admin(t, s, "POST", "/servers", jsonBody(t, map[string]any{"id": "echo", "command": "node", "args": []string{echo}, "rate_limit": "1/h", "max_concurrency": 4}))
	if st := r.JSON(t)["server"].(map[string]any); r.Status != 200 || st["rate_limit"] != "1/h" || st["max_concurrency"] != 4.0 {
		t.Fatalf("upsert: %d %s", r.Status, r.Body)
	}
	call := jsonBody(t, map[string]any{"name": "echo", "arguments": map[string]string{"text": "hi"}})
	admitted := time.Now()
	if r := admin(t, s, "POST", "/servers/echo/tools/call", call); r.Status != 200 {
		t.Fatalf("the call within the limit: %d %s", r.Status, r.Body)
	}
	r = admin(t, s, "POST", "/servers/echo/tools/call", call)
	// The hour began at the admitted call: Retry-After is what is left of it, in whole seconds
	// (3600 at once; less by the seconds a busy machine took between the two calls).
	retry, _ := strconv.Atoi(r.Header.Get("Retry-After"))
	if least := 3600 - int(time.Since(admitted).Seconds()) - 1; r.Status != 429 || retry < least || retry > 3600 ||
		!strings.Contains(errMessage(t, r), `MCP server "echo" is over its rate_limit of 1 tool calls per hour`) {
		t.Fatalf("admin tools/call over the limit: %d %v %s", r.Status, r.Header, r.Body)
	}

	session, _ := fedInit(t, s, "echo", "2025-11-25")
	r = fedCall(t, s, "echo", session, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":`+call+`}`)
	msgs := sseMessages(t, r)
	e, _ := msgs[len(msgs)-1]["error"].(map[string]any)
	least := float64(3600_000 - time.Since(admitted).Milliseconds() - 1000)
	if data, _ := e["data"].(map[string]any); r.Status != 200 || e["code"] != float64(-32029) || data["retry_after_ms"].(float64) < least {
		t.Fatalf("/mcp/servers/echo tools/call over the limit: %d %s", r.Status, r.Body)
	}

	a, r := chatJSON(t, s, `{"model":"builtin-llm","mcp_server_ids":["echo"],"tool_choice":{"type":"function","function":{"name":"mcp_echo__echo"}},
		"messages":[{"role":"user","content":"{\"text\":\"hi\"}"}]}`)
	if r.Status != 200 || !strings.Contains(a.Choices[0].Message.Content, `The tool was not called: MCP server "echo" is over its rate_limit`) ||
		!strings.Contains(a.Choices[0].Message.Content, "Call it again later") {
		t.Fatalf("chat over the limit: %d %s", r.Status, r.Body)
	}
}
