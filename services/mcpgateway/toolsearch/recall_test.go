package toolsearch_test

import (
	"path/filepath"
	"testing"
	"time"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"github.com/zestmcp/zest/services/inference/builtin"
	"github.com/zestmcp/zest/services/mcpgateway/toolsearch"
	"github.com/zestmcp/zest/services/mcpgateway/toolsearch/searcheval"
)

// The benchmark's catalog and query set (bench/testdata): 500 real tools' definitions and the
// natural-language requests written from their purposes.
var (
	catalogPath = filepath.Join("..", "..", "..", "bench", "testdata", "tool-catalog.json")
	queriesPath = filepath.Join("..", "..", "..", "bench", "testdata", "tool-queries.json")
)

const (
	// minRecallAt5 is the share of the query set whose expected tool BM25 alone must find
	// among the first five. Issue 25's acceptance asks 0.9; this ranking measures 0.856 on the
	// whole set (0.810 on the held-out third, docs/dev/benchmarks.md), and this floor keeps it
	// from slipping while the rest is open (docs/decisions.md).
	minRecallAt5 = 0.84
	catalogSize  = 500 // the preset of 500 tools
	minQueries   = 100
)

// loadBenchmark reads the benchmark's catalog and query set.
func loadBenchmark(tb testing.TB) (*searcheval.Catalog, []searcheval.Query) {
	tb.Helper()
	cat, err := searcheval.LoadCatalog(catalogPath)
	if err != nil {
		tb.Fatal(err)
	}
	qs, err := searcheval.LoadQueries(queriesPath, cat)
	if err != nil {
		tb.Fatal(err)
	}
	return cat, qs
}

func TestRecallOnRealCatalog(t *testing.T) {
	cat, qs := loadBenchmark(t)
	if len(cat.Tools) < catalogSize || len(qs) < minQueries {
		t.Fatalf("%d tools and %d queries, want at least %d and %d", len(cat.Tools), len(qs), catalogSize, minQueries)
	}
	ev := searcheval.Evaluate(toolsearch.Build(searcheval.Docs(cat)), qs)
	t.Logf("recall@1 %.3f recall@5 %.3f (held-out third: @1 %.3f @5 %.3f)", ev.All.R1(), ev.All.R5(), ev.HeldOut.R1(), ev.HeldOut.R5())
	if ev.All.R5() < minRecallAt5 {
		for _, m := range ev.Misses {
			t.Logf("missed %q: want %v, got %v", m.Query.Query, m.Query.Expect, m.Got)
		}
		t.Errorf("recall@5 = %.3f (%d of %d), want at least %.2f", ev.All.R5(), ev.All.At5, ev.All.Queries, minRecallAt5)
	}
}

// BenchmarkSearchRealCatalog is one search's own time on the 578 real tools, the query set in
// turn (bench's toolsearch scenario measures it at C=64).
func BenchmarkSearchRealCatalog(b *testing.B) {
	cat, qs := loadBenchmark(b)
	ix := toolsearch.Build(searcheval.Docs(cat))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		q := qs[i%len(qs)]
		ix.Search(q.Query, q.Options(5))
		i++
	}
}

// TestBuiltinEmbedDoesNotHelp measures the blend with the inference node's built-in embedder
// (hashed words and trigrams, no meaning), as issue 25 asks before blending it: on the tuning
// two thirds it finds fewer tools among the first five than BM25 alone, which is why
// CheckEmbeddingModel refuses it. Should the built-in embedder ever help, this test says to
// lift the refusal.
func TestBuiltinEmbedDoesNotHelp(t *testing.T) {
	cat, qs := loadBenchmark(t)
	ix := toolsearch.Build(searcheval.Docs(cat))
	alone := searcheval.Evaluate(ix, qs)
	engine := builtin.New(time.Now())
	embed := func(texts []string) ([][]float32, error) {
		resp, err := engine.Embeddings(t.Context(), &inferencev1.EmbeddingsRequest{Model: builtin.Embed, Input: texts})
		if err != nil {
			return nil, err
		}
		out := make([][]float32, len(resp.GetData()))
		for i, d := range resp.GetData() {
			out[i] = d.GetVector()
		}
		return out, nil
	}
	if err := searcheval.Embed(ix, qs, embed, toolsearch.EmbedBatch); err != nil {
		t.Fatal(err)
	}
	blended := searcheval.Evaluate(ix, qs)
	t.Logf("recall@5 tuning part: BM25 %.3f, blended with %s %.3f (held-out: %.3f, %.3f)",
		alone.Tuning.R5(), builtin.Embed, blended.Tuning.R5(), alone.HeldOut.R5(), blended.HeldOut.R5())
	if blended.Tuning.At5 > alone.Tuning.At5 {
		t.Errorf("%s blended finds %d of %d tuning queries' tools, BM25 alone %d: it helps now — let CheckEmbeddingModel accept it",
			builtin.Embed, blended.Tuning.At5, blended.Tuning.Queries, alone.Tuning.At5)
	}
	if toolsearch.CheckEmbeddingModel(builtin.Embed) == nil {
		t.Errorf("CheckEmbeddingModel accepts %s, which does not help", builtin.Embed)
	}
}
