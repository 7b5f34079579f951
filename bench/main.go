// Command bench is Zest's load generator (`make bench`). Each scenario runs real processes
// on loopback and prints a markdown table. Scenarios:
//
//	chain:    the same `echo` through the whole chain: HTTP edge → mcpgateway → tool host →
//	          child, at concurrency 1, 8 and 64.
//	stream:   streaming chat through edge → inference → an OpenAI-compatible engine against the
//	          engine directly: time to first token, tokens/s, ratio.
//	mcp:      /mcp tools/list and tools/call lemonade_list_models at concurrency 1, 8 and 64,
//	          via the edge and straight to mcpgateway; RSS of 10,000 idle sessions.
//	toolhost: `echo` on @modelcontextprotocol/server-everything through the zest-toolhost gRPC
//	          API at concurrency 1, 8 and 64, beside the same calls sent straight to a child
//	          over stdio by a minimal client, with the ratio and the tool host's RSS.
//	federation: MCP clients (one session per connection) calling server-everything's `echo`
//	          over Streamable HTTP at concurrency 1, 8 and 64 through Zest's
//	          /mcp/servers/everything, supergateway, mcp-proxy and a one-process mcp-go proxy,
//	          beside the direct stdio client; RSS of 1,000 federated sessions on Zest.
//	scale:    admin and federated tool calls through 1 of each service (bbolt, then etcd) and
//	          2 of each (etcd, 3 members) on the same cores.
//	audit:    admin tool calls with the audit trail off, on and on with details, on bbolt and
//	          on etcd ×3: what the trail costs a call, and whether its queue kept up.
//	catalog:  `GET /internal/mcp/tools` and AdminService.ListTools with 10, 30 and 100
//	          connected stdio servers of 13 tools each (the bench binary as a light fixture
//	          server): latency, bytes, RSS.
//	toolsearch: issue 25's tool search over 500 real tools' definitions (testdata/tool-catalog.json,
//	          harvested from npm MCP servers): index build time, recall@1/@5 on
//	          testdata/tool-queries.json, search p50/p99 at C=64, and the tokens of tools/list
//	          with and without search. In process: no binaries.
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == catalogFixtureRole {
		if err := serveCatalogFixture(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: catalog fixture:", err)
			os.Exit(1)
		}
		return
	}
	if os.Getenv("ZEST_BENCH_ROLE") == mcpgoProxyRole {
		if err := serveMCPGoProxy(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: mcp-go proxy:", err)
			os.Exit(1)
		}
		return
	}
	// The services' metrics servers have fixed default ports (127.0.0.1:13319–13322): off in
	// the suites the benchmarks start, unless the environment asks for them.
	for _, v := range []string{"ZEST_EDGE_METRICS_ADDR", "ZEST_INFERENCE_METRICS_ADDR", "ZEST_MCPGATEWAY_METRICS_ADDR", "ZEST_TOOLHOST_METRICS_ADDR"} {
		if _, set := os.LookupEnv(v); !set {
			os.Setenv(v, "off")
		}
	}
	// The fixture servers (this binary, built by go run in a private temporary directory) are
	// for root alone: a tool host running as root keeps servers root here rather than running
	// them as nobody (ZEST_TOOLHOST_SERVER_UID), unless the environment says otherwise.
	if _, set := os.LookupEnv("ZEST_TOOLHOST_SERVER_UID"); !set {
		os.Setenv("ZEST_TOOLHOST_SERVER_UID", "0")
	}
	binDir := flag.String("bin", "bin", "directory with the built Zest binaries")
	peers := flag.String("peers", "scripts/peers/node_modules", "installed npm peers")
	dur := flag.Duration("duration", 3*time.Second, "measuring time per point")
	warm := flag.Duration("warmup", 500*time.Millisecond, "warm-up time per point")
	flag.String("only", "", "run one scenario: toolhost, chain, mcp, stream, federation, catalog, scale, audit, limits or toolsearch")
	flag.Parse()
	only := flag.Lookup("only").Value.String()
	for _, sc := range []struct {
		name string
		run  func(string, string, time.Duration, time.Duration) error
	}{{"toolhost", benchToolhost}, {"chain", benchChain}, {"mcp", benchMCP}, {"stream", benchStream}, {"federation", benchFederation}, {"catalog", benchCatalog}, {"scale", benchScale}, {"audit", benchAudit}, {"limits", benchLimits}, {"toolsearch", benchToolsearch}} {
		if only != "" && only != sc.name {
			continue
		}
		if err := sc.run(*binDir, *peers, *warm, *dur); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", sc.name+":", err)
			os.Exit(1)
		}
	}
}

// result is one measured point.
type result struct {
	calls    int
	errors   int
	elapsed  time.Duration
	p50, p99 time.Duration
}

func (r result) rate() float64 { return float64(r.calls) / r.elapsed.Seconds() }

// run calls f from conc goroutines for warm+dur and measures the calls that start after warm.
func run(conc int, warm, dur time.Duration, f func() error) result {
	return runObserved(conc, warm, dur, f, nil)
}

// observer is told when the measured window opens and closes, so that CPU time and profiles
// cover exactly the calls counted.
type observer interface {
	begin()
	end()
}

func runObserved(conc int, warm, dur time.Duration, f func() error, obs observer) result {
	fs := make([]func() error, conc)
	for i := range fs {
		fs[i] = f
	}
	return runEach(warm, dur, fs, obs)
}

// runEach is runObserved with one func per goroutine (a client with its own session).
func runEach(warm, dur time.Duration, fs []func() error, obs observer) result {
	conc := len(fs)
	type sample struct {
		lat []time.Duration
		err int
	}
	out := make(chan sample, conc)
	start := time.Now()
	measureFrom := start.Add(warm)
	end := measureFrom.Add(dur)
	for _, f := range fs {
		go func() {
			var s sample
			for {
				t0 := time.Now()
				if !t0.Before(end) {
					break
				}
				err := f()
				if t0.Before(measureFrom) {
					continue
				}
				if err != nil {
					s.err++
					continue
				}
				s.lat = append(s.lat, time.Since(t0))
			}
			out <- s
		}()
	}
	if obs != nil {
		time.Sleep(time.Until(measureFrom))
		obs.begin()
		time.Sleep(time.Until(end))
		obs.end()
	}
	var all []time.Duration
	errs := 0
	for range conc {
		s := <-out
		all = append(all, s.lat...)
		errs += s.err
	}
	elapsed := time.Since(measureFrom)
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	r := result{calls: len(all), errors: errs, elapsed: elapsed}
	if len(all) > 0 {
		r.p50 = all[len(all)*50/100]
		r.p99 = all[min(len(all)*99/100, len(all)-1)]
	}
	return r
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }
