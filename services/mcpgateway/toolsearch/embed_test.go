package toolsearch_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zestmcp/zest/lib/metrics"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/catalog"
	"github.com/zestmcp/zest/services/mcpgateway/toolsearch"
	"google.golang.org/protobuf/proto"
)

// conceptEmbedder stands in for an embedding model in the tests of the blend's wiring (the
// recall a real model gives is measured by recall_test.go and bench): a text's vector has a
// 1 for each concept one of whose phrases it holds, so texts that share no word can be near.
type conceptEmbedder struct {
	mu      sync.Mutex
	docs    int // tools' texts embedded
	queries int
	calls   int
	fail    func(texts []string) error
	// hold, when set, keeps the embedding of tools' texts waiting until it is closed: a
	// search that runs meanwhile is surely ranked by BM25 alone.
	hold chan struct{}
	// holdQueries, when set, keeps the embedding of searches' queries waiting until it is
	// closed; queryCalls are the sizes of the calls that embedded queries.
	holdQueries chan struct{}
	queryCalls  []int
}

// isQuery tells searches' queries from tools' texts: EmbedText joins a tool's parts with ". ".
func isQuery(texts []string) bool {
	return !slices.ContainsFunc(texts, func(t string) bool { return strings.Contains(t, ". ") })
}

var concepts = [][]string{
	{"elevation", "sea level", "how high"},
	{"file", "notes.txt"},
	{"issue", "bug report"},
	{"pull request", "propose my branch"},
}

func (e *conceptEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	if e.hold != nil && !isQuery(texts) {
		<-e.hold
	}
	if e.holdQueries != nil && isQuery(texts) {
		<-e.holdQueries
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls++
	if e.fail != nil {
		if err := e.fail(texts); err != nil {
			return nil, err
		}
	}
	if isQuery(texts) {
		e.queries += len(texts)
		e.queryCalls = append(e.queryCalls, len(texts))
	} else {
		e.docs += len(texts)
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, len(concepts)+1)
		v[len(concepts)] = 0.1
		for c, phrases := range concepts {
			for _, p := range phrases {
				if strings.Contains(strings.ToLower(t), p) {
					v[c] = 1
				}
			}
		}
		out[i] = v
	}
	return out, nil
}

func (e *conceptEmbedder) counts() (docs, queries, calls int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.docs, e.queries, e.calls
}

func (e *conceptEmbedder) failWith(f func(texts []string) error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fail = f
}

// withMaps adds a server whose one tool shares no word with seaLevel.
func withMaps(src *source) *source {
	src.cfgs = append(src.cfgs, &mcpgatewayv1.ServerConfig{Id: "maps", Name: "maps", Enabled: proto.Bool(true)})
	src.tools["maps"] = raws(`{"name":"maps_elevation","description":"Get the elevation data for locations on the earth.","inputSchema":{"type":"object","properties":{"locations":{"type":"array"}}}}`)
	return src
}

var allServers = []string{"fs", "gh", "maps"}

const seaLevel = "how high above sea level is Denver"

// counter is the value of the registered counter name with the label value (any label), 0
// when it has no such series.
func counter(t *testing.T, name, value string) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if value == "" || (len(m.GetLabel()) > 0 && m.GetLabel()[0].GetValue() == value) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// ranking is how search_tools' MCP result for query says its tools were ranked (its _meta).
func ranking(t *testing.T, s *toolsearch.Shared, query string) string {
	t.Helper()
	answer, err := s.Search(t.Context(), toolsearch.SearchArgs{Query: query, Limit: 1}, allServers, nil)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Meta map[string]string `json:"_meta"`
	}
	if err := json.Unmarshal(toolsearch.Result(answer), &res); err != nil {
		t.Fatal(err)
	}
	return res.Meta[toolsearch.MetaRanking]
}

func first(t *testing.T, s *toolsearch.Shared, query string) string {
	t.Helper()
	found, err := s.Search(t.Context(), toolsearch.SearchArgs{Query: query, Limit: 1}, allServers, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(found.Tools) == 0 {
		return ""
	}
	return found.Tools[0].Name
}

// TestSharedEmbeddingBlend: with an embedder, the catalog's tools are embedded once per
// version in the background (each text once: a list_changed embeds only the new tool), a
// search before that ranks by BM25 alone, and one after finds a tool that shares no word
// with the query.
func TestSharedEmbeddingBlend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := withMaps(newSource())
		emb := &conceptEmbedder{hold: make(chan struct{})}
		s := toolsearch.NewShared(catalog.New(src, src, nil), nil, toolsearch.WithEmbedder(emb, nil))
		defer s.Close()
		elevation := catalog.ChatName("maps", "maps_elevation")
		if got := first(t, s, seaLevel); got == elevation {
			t.Fatalf("BM25 alone found %s, which shares no word with %q: the test shows nothing", got, seaLevel)
		}
		if r := ranking(t, s, seaLevel); r != toolsearch.RankedBM25 {
			t.Fatalf("before the catalog is embedded, the answer says it was ranked %q", r)
		}
		close(emb.hold)
		synctest.Wait() // the background embedding is done
		if n := s.Embedded(); n != 1 {
			t.Fatalf("%d versions embedded, want 1", n)
		}
		if docs, _, _ := emb.counts(); docs != 3 {
			t.Fatalf("%d tool texts embedded, want the 3 listed (a denied tool is not)", docs)
		}
		if got := first(t, s, seaLevel); got != elevation {
			t.Fatalf("blended: first %q, want %s", got, elevation)
		}
		if r := ranking(t, s, seaLevel); r != toolsearch.RankedBlended {
			t.Fatalf("blended, the answer says it was ranked %q", r)
		}
		if got := first(t, s, "read a file"); got != catalog.ChatName("fs", "read_file") {
			t.Fatalf("blended, a query BM25 answers: first %q", got)
		}
		blended, bm25 := counter(t, "zest_tool_search_searches_total", "blended"), counter(t, "zest_tool_search_searches_total", "bm25")
		for range 100 {
			first(t, s, seaLevel)
		}
		if b, a := counter(t, "zest_tool_search_searches_total", "blended")-blended, counter(t, "zest_tool_search_searches_total", "bm25")-bm25; b != 100 || a != 0 {
			t.Fatalf("zest_tool_search_searches_total rose by %v blended and %v bm25, want 100 and 0", b, a)
		}
		if docs, queries, _ := emb.counts(); docs != 3 || queries != 103 {
			t.Fatalf("after 103 blended searches: %d tool texts and %d queries embedded, want 3 and 103", docs, queries)
		}
		src.listChanged("gh", `{"name":"create_issue","description":"Create a new issue in a GitHub repository.","inputSchema":{"type":"object","properties":{"title":{"type":"string"}}}}`,
			`{"name":"create_pull_request","description":"Create a new pull request."}`)
		first(t, s, "propose my branch for merging")
		synctest.Wait()
		if n := s.Embedded(); n != 2 {
			t.Fatalf("after a list_changed, %d versions embedded, want 2", n)
		}
		if docs, _, _ := emb.counts(); docs != 4 {
			t.Fatalf("after a list_changed adding one tool, %d tool texts embedded in all, want 4", docs)
		}
		if got := first(t, s, "propose my branch"); got != catalog.ChatName("gh", "create_pull_request") {
			t.Fatalf("the new tool, blended: first %q", got)
		}
	})
}

// TestSharedEmbeddingFails: when the model fails, searches rank by BM25 alone and answer; a
// failed catalog embedding is tried again only after EmbedRetryAfter, however many searches
// come meanwhile; a query whose embedding fails is answered by BM25.
func TestSharedEmbeddingFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := withMaps(newSource())
		down := errors.New("engine down")
		emb := &conceptEmbedder{fail: func([]string) error { return down }}
		s := toolsearch.NewShared(catalog.New(src, src, nil), nil, toolsearch.WithEmbedder(emb, nil))
		defer s.Close()
		for range 50 {
			if got := first(t, s, "read a file"); got != catalog.ChatName("fs", "read_file") {
				t.Fatalf("BM25 alone while the model is down: first %q", got)
			}
			synctest.Wait()
		}
		if n := counter(t, "zest_tool_search_catalog_embeddings_total", "error"); n < 1 {
			t.Fatalf("zest_tool_search_catalog_embeddings_total{result=error} = %v after a failure", n)
		}
		if _, _, calls := emb.counts(); calls != 1 || s.Embedded() != 0 {
			t.Fatalf("50 searches while the model is down: %d embedding calls, %d versions embedded; want 1 and 0", calls, s.Embedded())
		}
		emb.failWith(func(texts []string) error {
			if slices.Contains(texts, seaLevel) {
				return down // the query's embedding only
			}
			return nil
		})
		first(t, s, "read a file")
		synctest.Wait()
		if s.Embedded() != 0 {
			t.Fatal("tried again before EmbedRetryAfter")
		}
		time.Sleep(toolsearch.EmbedRetryAfter)
		first(t, s, "read a file")
		synctest.Wait()
		if s.Embedded() != 1 {
			t.Fatalf("%d versions embedded after EmbedRetryAfter, want 1", s.Embedded())
		}
		if got := first(t, s, seaLevel); got == catalog.ChatName("maps", "maps_elevation") {
			t.Fatalf("the query's embedding failed, yet the blend answered %s", got)
		}
		if got := first(t, s, "read a file"); got != catalog.ChatName("fs", "read_file") {
			t.Fatalf("blended: first %q", got)
		}
	})
}

// TestConcurrentQueriesShareACall: the queries of searches that run at once are embedded in
// one call while another call runs, so a model that embeds one request at a time serves
// them all with two requests; each search still gets its own query's vector.
func TestConcurrentQueriesShareACall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := withMaps(newSource())
		emb := &conceptEmbedder{}
		s := toolsearch.NewShared(catalog.New(src, src, nil), nil, toolsearch.WithEmbedder(emb, nil))
		defer s.Close()
		first(t, s, "read a file") // builds the index and starts its embedding
		synctest.Wait()
		if s.Embedded() != 1 {
			t.Fatal("the catalog was not embedded")
		}
		emb.mu.Lock()
		emb.holdQueries, emb.queryCalls = make(chan struct{}), nil
		emb.mu.Unlock()
		const searches = 20
		got := make([]string, searches+1)
		var wg sync.WaitGroup
		search := func(i int, query string) {
			wg.Go(func() { got[i] = first(t, s, query) })
		}
		search(0, seaLevel)
		synctest.Wait() // its query's call is running (held)
		for i := 1; i <= searches; i++ {
			query := seaLevel
			if i%2 == 0 {
				query = "read a file"
			}
			search(i, query)
		}
		synctest.Wait() // every other search waits for its query's vector
		close(emb.holdQueries)
		wg.Wait()
		elevation, readFile := catalog.ChatName("maps", "maps_elevation"), catalog.ChatName("fs", "read_file")
		for i, g := range got {
			want := elevation
			if i > 0 && i%2 == 0 {
				want = readFile
			}
			if g != want {
				t.Errorf("search %d: first %q, want %s (blended with its own query's vector)", i, g, want)
			}
		}
		emb.mu.Lock()
		defer emb.mu.Unlock()
		if !slices.Equal(emb.queryCalls, []int{1, searches}) {
			t.Fatalf("queries embedded in calls of %v, want [1 %d]: the searches that waited share one call", emb.queryCalls, searches)
		}
	})
}

// TestQueryQueueIsBounded: past QueryQueue waiting queries, a search ranks by BM25 alone at
// once instead of queueing; once the model answers, searches blend again.
func TestQueryQueueIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := withMaps(newSource())
		emb := &conceptEmbedder{}
		s := toolsearch.NewShared(catalog.New(src, src, nil), nil, toolsearch.WithEmbedder(emb, nil))
		defer s.Close()
		first(t, s, "read a file")
		synctest.Wait()
		emb.mu.Lock()
		emb.holdQueries = make(chan struct{})
		emb.mu.Unlock()
		var wg sync.WaitGroup
		// One query is taken into the held call; then QueryQueue more fill the queue.
		wg.Go(func() { first(t, s, "read a file") })
		synctest.Wait()
		for range toolsearch.QueryQueue {
			wg.Go(func() { first(t, s, "read a file") })
		}
		synctest.Wait()
		bm25 := counter(t, "zest_tool_search_searches_total", "bm25")
		start := time.Now()
		if got := first(t, s, seaLevel); got == catalog.ChatName("maps", "maps_elevation") {
			t.Fatalf("with the queue full, the search was blended (%s)", got)
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("with the queue full, the search waited %v (the bubble's clock), want an answer at once", waited)
		}
		if n := counter(t, "zest_tool_search_searches_total", "bm25") - bm25; n != 1 {
			t.Fatalf("zest_tool_search_searches_total{ranking=bm25} rose by %v, want 1", n)
		}
		close(emb.holdQueries)
		wg.Wait()
		if got := first(t, s, seaLevel); got != catalog.ChatName("maps", "maps_elevation") {
			t.Fatalf("after the queue drained: first %q, want the blend's answer", got)
		}
	})
}
