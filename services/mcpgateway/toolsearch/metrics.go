package toolsearch

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/zestmcp/zest/lib/metrics"
)

// Tool search's metrics: whether searches are blended (an embedding model named, the
// catalog embedded, the query's embedding made) or ranked by BM25 alone, and the work done
// per catalog version. Labels are fixed words, never a query or a tool.
var (
	searchesMetric = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Name: "tool_search_searches_total",
		Help: "search_tools searches, by ranking: bm25 (alone) or blended (with the embedding model)."}, []string{"ranking"})
	buildsMetric = prometheus.NewCounter(prometheus.CounterOpts{Namespace: metrics.Namespace, Name: "tool_search_index_builds_total",
		Help: "Tool search indexes built: one per catalog version a search asked for."})
	embeddingsMetric = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Name: "tool_search_catalog_embeddings_total",
		Help: "Catalog versions whose tools were embedded for the blend, by result: ok or error."}, []string{"result"})
	queryBatchMetric = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metrics.Namespace, Name: "tool_search_query_batch_size",
		Help:    "Queries embedded per call to the embedding model: concurrent searches share a call.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64}})
)

func init() {
	metrics.Registry.MustRegister(searchesMetric, buildsMetric, embeddingsMetric, queryBatchMetric)
	for _, r := range []string{"bm25", "blended"} {
		searchesMetric.WithLabelValues(r)
	}
	for _, r := range []string{"ok", "error"} {
		embeddingsMetric.WithLabelValues(r)
	}
}
