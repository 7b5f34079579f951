package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tiktoken-go/tokenizer"

	"google.golang.org/protobuf/proto"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/catalog"
	"github.com/zestmcp/zest/services/mcpgateway/toolsearch"
	"github.com/zestmcp/zest/services/mcpgateway/toolsearch/searcheval"
)

// The tool-search benchmark's inputs (issue 25): real tools' definitions and the query set.
var (
	toolCatalogPath = filepath.Join("testdata", "tool-catalog.json")
	toolQueriesPath = filepath.Join("testdata", "tool-queries.json")
)

const (
	searchConcurrency = 64 // the C=64
	searchAnswerSize  = 5  // the tools a typical search_tools answer lists
	buildRounds       = 20 // builds timed, the median reported
	// tokenEncoding is the tokenizer the token counts use: OpenAI's o200k_base (GPT-4o, o1,
	// o3, gpt-4.1), from github.com/tiktoken-go/tokenizer, a pure-Go port whose vocabulary is
	// compiled into the module: no download at run time.
	tokenEncoding = tokenizer.O200kBase
)

// harvested is the harvested catalog as mcpgateway's catalog reads its servers: each server
// registered and connected, listing the tools it listed when harvested.
type harvested struct {
	cfgs  []*mcpgatewayv1.ServerConfig
	tools map[string][]json.RawMessage
}

func newHarvested(cat *searcheval.Catalog) (*harvested, error) {
	h := &harvested{tools: map[string][]json.RawMessage{}}
	for _, t := range cat.Tools {
		raw, err := json.Marshal(listEntries([]searcheval.Tool{t})[0])
		if err != nil {
			return nil, err
		}
		if _, ok := h.tools[t.Server]; !ok {
			h.cfgs = append(h.cfgs, &mcpgatewayv1.ServerConfig{Id: t.Server, Name: t.Server, Enabled: proto.Bool(true)})
		}
		h.tools[t.Server] = append(h.tools[t.Server], raw)
	}
	slices.SortFunc(h.cfgs, func(a, b *mcpgatewayv1.ServerConfig) int { return strings.Compare(a.GetId(), b.GetId()) })
	return h, nil
}

func (h *harvested) ListServers(context.Context) ([]*mcpgatewayv1.ServerConfig, error) {
	return h.cfgs, nil
}

func (h *harvested) Listed(id string) ([]json.RawMessage, uint64, bool) {
	t, ok := h.tools[id]
	return t, 1, ok
}

func benchToolsearch(binDir, peers string, warm, dur time.Duration) error {
	cat, err := searcheval.LoadCatalog(toolCatalogPath)
	if err != nil {
		return err
	}
	qs, err := searcheval.LoadQueries(toolQueriesPath, cat)
	if err != nil {
		return err
	}
	docs := searcheval.Docs(cat)
	servers := map[string]bool{}
	fixtures := 0
	for _, t := range cat.Tools {
		servers[t.Server] = true
		if t.Fixture {
			fixtures++
		}
	}

	// Build: the median of buildRounds builds of the whole catalog.
	var ix *toolsearch.Index
	builds := make([]time.Duration, buildRounds)
	for i := range builds {
		runtime.GC()
		t0 := time.Now()
		ix = toolsearch.Build(docs)
		builds[i] = time.Since(t0)
	}
	slices.Sort(builds)

	ev := searcheval.Evaluate(ix, qs)

	// Search latency: what search_tools runs in mcpgateway (toolsearch.Shared: the index of
	// the catalog's snapshot, narrowed to the preset's providers, here every server), the
	// query set round-robin from searchConcurrency goroutines.
	src, err := newHarvested(cat)
	if err != nil {
		return err
	}
	shared := toolsearch.NewShared(catalog.New(src, src, nil), nil)
	providers := make([]string, 0, len(src.cfgs))
	for _, c := range src.cfgs {
		providers = append(providers, c.GetId())
	}
	ctx := context.Background()
	search := func(q searcheval.Query) (toolsearch.Answer, error) {
		return shared.Search(ctx, toolsearch.SearchArgs{Query: q.Query, Server: q.Server, Limit: searchAnswerSize}, providers, nil)
	}
	var next atomic.Uint64
	r := runYielding(searchConcurrency, warm, dur, func() error {
		q := qs[next.Add(1)%uint64(len(qs))]
		found, err := search(q)
		if err == nil && len(found.Tools) == 0 {
			err = fmt.Errorf("no hit for %q", q.Query)
		}
		return err
	})
	if n := shared.Builds(); n != 1 {
		return fmt.Errorf("the shared index was built %d times over one catalog version", n)
	}

	// Tokens: the catalog's tools/list, the two meta-tools' tools/list, and the mean answer of
	// a search (each query's first searchAnswerSize tools, as search_tools would list them).
	enc, err := tokenizer.Get(tokenEncoding)
	if err != nil {
		return err
	}
	count := func(v any) (int, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return 0, err
		}
		return enc.Count(string(b))
	}
	full, err := count(map[string]any{"tools": listEntries(cat.Tools)})
	if err != nil {
		return err
	}
	meta, err := count(map[string]any{"tools": toolsearch.MetaTools})
	if err != nil {
		return err
	}
	answers := 0
	for _, q := range qs {
		found, err := search(q)
		if err != nil {
			return err
		}
		n, err := count(toolsearch.Result(found))
		if err != nil {
			return err
		}
		answers += n
	}
	answer := answers / len(qs)

	fmt.Printf("\n## Tool search (BM25, toolsearch.Build): %d tools of %d servers (%d fixture copies), %d queries\n\n",
		len(cat.Tools), len(servers), fixtures, len(qs))
	fmt.Println("| queries | n | recall@1 | recall@5 |")
	fmt.Println("|---|---|---|---|")
	for _, p := range []struct {
		name string
		r    searcheval.Recall
	}{{"all", ev.All}, {"tuning two thirds", ev.Tuning}, {"held-out third", ev.HeldOut}} {
		fmt.Printf("| %s | %d | %.3f | %.3f |\n", p.name, p.r.Queries, p.r.R1(), p.r.R5())
	}
	fmt.Printf("\n| index build (median of %d) | search_tools' search (toolsearch.Shared, %d providers) C=%d p50 | p99 | searches/s | errors |\n", buildRounds, len(providers), searchConcurrency)
	fmt.Println("|---|---|---|---|---|")
	fmt.Printf("| %s | %s | %s | %.0f | %d |\n", ms(builds[len(builds)/2]), ms(r.p50), ms(r.p99), r.rate(), r.errors)
	fmt.Printf("\nTokens (%s, github.com/tiktoken-go/tokenizer) of what a client reads:\n\n", tokenEncoding)
	fmt.Println("| tools/list of every tool | tools/list in search mode (2 meta-tools) | one search_tools result (5 tools, mean) | search mode, list + one answer | ratio |")
	fmt.Println("|---|---|---|---|---|")
	fmt.Printf("| %d | %d | %d | %d | %.1f× fewer |\n", full, meta, answer, meta+answer, float64(full)/float64(meta+answer))
	if len(ev.Misses) > 0 {
		fmt.Printf("\nQueries whose tools were not among the first %d:\n\n", searchAnswerSize)
		for _, m := range ev.Misses {
			fmt.Printf("- %q (want %v) got %v\n", m.Query.Query, m.Query.Expect, m.Got)
		}
	}
	return benchToolsearchBlend(binDir, peers, cat, qs, ev, warm, dur)
}

// listEntries is tools as tools/list lists them.
func listEntries(tools []searcheval.Tool) []map[string]any {
	out := make([]map[string]any, 0, len(tools))
	for _, t := range tools {
		e := map[string]any{"name": t.Name, "inputSchema": t.InputSchema}
		if t.Title != "" {
			e["title"] = t.Title
		}
		if t.Description != "" {
			e["description"] = t.Description
		}
		if len(t.Annotations) > 0 {
			e["annotations"] = t.Annotations
		}
		out = append(out, e)
	}
	return out
}

// runYielding is run for a call that never blocks: each goroutine yields between its calls,
// as a search served to a client waits for the client's next request. Without it 64
// goroutines on two cores run until preempted (10 ms each), and a call's time would be its
// wait for 31 others' time slices, not the search.
func runYielding(conc int, warm, dur time.Duration, f func() error) result {
	type sample struct {
		lat []time.Duration
		err int
	}
	out := make(chan sample, conc)
	start := time.Now()
	measureFrom := start.Add(warm)
	end := measureFrom.Add(dur)
	for range conc {
		go func() {
			var s sample
			for {
				t0 := time.Now()
				if !t0.Before(end) {
					break
				}
				err := f()
				d := time.Since(t0)
				runtime.Gosched()
				if t0.Before(measureFrom) {
					continue
				}
				if err != nil {
					s.err++
					continue
				}
				s.lat = append(s.lat, d)
			}
			out <- s
		}()
	}
	var all []time.Duration
	errs := 0
	for range conc {
		s := <-out
		all = append(all, s.lat...)
		errs += s.err
	}
	elapsed := time.Since(measureFrom)
	slices.Sort(all)
	r := result{calls: len(all), errors: errs, elapsed: elapsed}
	if len(all) > 0 {
		r.p50 = all[len(all)*50/100]
		r.p99 = all[min(len(all)*99/100, len(all)-1)]
	}
	return r
}
