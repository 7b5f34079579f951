package toolsearch

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"github.com/zestmcp/zest/services/mcpgateway/activity"
)

// Embedder turns texts into vectors, one each in order: the inference node's embedding model
// that the operator names (ZEST_TOOL_SEARCH_EMBEDDING_MODEL).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// The embedding blend's bounds.
const (
	// EmbedBatch is how many tools' texts one Embed call of the background work carries.
	EmbedBatch = 64
	// EmbedBatchTimeout bounds one such call: a CPU engine takes seconds for a batch.
	EmbedBatchTimeout = time.Minute
	// QueryEmbedTimeout bounds the embedding of a search's query; past it the search ranks by
	// BM25 alone rather than keep a model waiting.
	QueryEmbedTimeout = 2 * time.Second
	// EmbedRetryAfter is how long a catalog version whose embedding failed waits before a
	// search tries it again (searches rank by BM25 alone meanwhile).
	EmbedRetryAfter = 30 * time.Second
	// QueryQueue is how many searches' queries may wait for their embedding at once; a search
	// past it ranks by BM25 alone rather than queue without bound.
	QueryQueue = 1024
)

// SharedOption configures NewShared.
type SharedOption func(*Shared)

// WithEmbedder blends the embeddings of e into every search (Options.Vector): each catalog
// version's tools are embedded once, in the background, reusing the vectors of tools whose
// text did not change; until a version's vectors are made, and whenever the query's embedding
// fails, a search ranks by BM25 alone. Close stops the background work.
func WithEmbedder(e Embedder, log *slog.Logger) SharedOption {
	return func(s *Shared) {
		s.emb = e
		if log != nil {
			s.log = log
		}
	}
}

// embedding is the background work's state.
type embedding struct {
	kick     chan struct{}      // a version may want vectors (size 1)
	stop     context.CancelFunc // ends the work (Close)
	done     chan struct{}      // closed when the work has ended
	cache    map[string][]float32
	failed   *Index // the index whose embedding failed last, and when
	failedAt time.Time
	// queries are the searches' queries waiting for their embedding; one goroutine embeds
	// all that wait in one call (at most EmbedBatch), so concurrent searches share a call.
	queries chan *queryWait
}

// queryWait is one search's query, waiting for its vector.
type queryWait struct {
	ctx  context.Context // the search's: a query whose search gave up is not embedded
	text string
	vec  []float32 // set before done is closed; nil when the embedding failed
	done chan struct{}
}

// startEmbedding starts the background work (NewShared, with an embedder).
func (s *Shared) startEmbedding() {
	ctx, stop := context.WithCancel(context.Background())
	s.bg = &embedding{kick: make(chan struct{}, 1), stop: stop, done: make(chan struct{}), cache: map[string][]float32{},
		queries: make(chan *queryWait, QueryQueue)}
	queriesDone := make(chan struct{})
	go func() {
		defer close(queriesDone)
		s.embedQueries(ctx)
	}()
	go func() {
		defer close(s.bg.done)
		defer func() { <-queriesDone }()
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.bg.kick:
			}
			if v := s.cur.Load(); v != nil && v.ix.Dimensions() == 0 {
				s.embedIndex(ctx, v.ix)
			}
		}
	}()
}

// wantVectors asks the background work to embed the current version when it has no vectors.
func (s *Shared) wantVectors() {
	if s.bg == nil {
		return
	}
	select {
	case s.bg.kick <- struct{}{}:
	default:
	}
}

// embedIndex embeds ix's tools (those whose text has no vector yet) and gives ix its vectors.
// Only the background goroutine runs it.
func (s *Shared) embedIndex(ctx context.Context, ix *Index) {
	bg := s.bg
	if bg.failed == ix && time.Since(bg.failedAt) < EmbedRetryAfter {
		return
	}
	docs := ix.Docs()
	texts := make([]string, len(docs))
	var missing []string
	seen := map[string]bool{}
	for i := range docs {
		texts[i] = EmbedText(&docs[i])
		if _, ok := bg.cache[texts[i]]; !ok && !seen[texts[i]] {
			seen[texts[i]] = true
			missing = append(missing, texts[i])
		}
	}
	start := time.Now()
	for len(missing) > 0 {
		batch := missing[:min(EmbedBatch, len(missing))]
		bctx, cancel := context.WithTimeout(ctx, EmbedBatchTimeout)
		vs, err := s.emb.Embed(bctx, batch)
		cancel()
		if err == nil && len(vs) != len(batch) {
			err = fmt.Errorf("%d vectors for %d texts", len(vs), len(batch))
		}
		if err != nil {
			if ctx.Err() == nil {
				embeddingsMetric.WithLabelValues("error").Inc()
				bg.failed, bg.failedAt = ix, time.Now()
				s.log.Warn("tool search: embedding the catalog's tools failed; searches rank by BM25 alone until it succeeds",
					"tools", len(docs), "retry_after", EmbedRetryAfter, "err", err)
			}
			return
		}
		for i, t := range batch {
			bg.cache[t] = vs[i]
		}
		missing = missing[len(batch):]
	}
	vectors := make([][]float32, len(docs))
	kept := make(map[string][]float32, len(docs))
	for i, t := range texts {
		vectors[i] = bg.cache[t]
		kept[t] = bg.cache[t]
	}
	bg.cache = kept // the tools of the current version: a removed tool's vector goes
	if !ix.SetVectors(vectors) {
		embeddingsMetric.WithLabelValues("error").Inc()
		bg.failed, bg.failedAt = ix, time.Now()
		s.log.Warn("tool search: the embedding model answered vectors of different lengths; searches rank by BM25 alone")
		return
	}
	s.embedded.Add(1)
	embeddingsMetric.WithLabelValues("ok").Inc()
	s.log.Info("tool search: the catalog's tools are embedded; searches blend BM25 with the embeddings", "tools", len(docs),
		"dimensions", ix.Dimensions(), "took", time.Since(start).Round(time.Millisecond))
}

// queryVector is the embedding of query for a search of ix, or nil: when ix has no vectors
// yet (the background work is asked for them), the model fails or takes too long, or too
// many searches wait (QueryQueue).
func (s *Shared) queryVector(ctx context.Context, ix *Index, query string) []float32 {
	if s.emb == nil {
		return nil
	}
	if ix.Dimensions() == 0 {
		s.wantVectors()
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, QueryEmbedTimeout)
	defer cancel()
	w := &queryWait{ctx: ctx, text: activity.Cut(query, MaxEmbedTextBytes), done: make(chan struct{})}
	select {
	case s.bg.queries <- w:
	default:
		s.log.Debug("tool search: too many queries wait for their embedding; this search ranks by BM25 alone", "waiting", QueryQueue)
		return nil
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		s.log.Debug("tool search: the query's embedding took too long; this search ranks by BM25 alone", "timeout", QueryEmbedTimeout)
		return nil
	}
	if len(w.vec) != ix.Dimensions() {
		return nil
	}
	return w.vec
}

// embedQueries embeds the searches' queries until ctx ends: each call carries every query
// that waits (at most EmbedBatch), so while one call runs the queries of other searches
// gather for the next, and a model that embeds one request at a time serves many searches
// per request. A lone search's query is embedded at once, as before.
func (s *Shared) embedQueries(ctx context.Context) {
	for {
		var batch []*queryWait
		select {
		case <-ctx.Done():
			for { // the searches that wait rank by BM25 alone now, not at their timeout
				select {
				case w := <-s.bg.queries:
					close(w.done)
				default:
					return
				}
			}
		case w := <-s.bg.queries:
			batch = append(batch, w)
		}
	gather:
		for len(batch) < EmbedBatch {
			select {
			case w := <-s.bg.queries:
				batch = append(batch, w)
			default:
				break gather
			}
		}
		s.embedBatch(ctx, batch)
	}
}

// embedBatch embeds the queries of batch whose searches still wait, in one call bounded by
// QueryEmbedTimeout, and closes every wait's done.
func (s *Shared) embedBatch(ctx context.Context, batch []*queryWait) {
	defer func() {
		for _, w := range batch {
			close(w.done)
		}
	}()
	var live []*queryWait
	for _, w := range batch {
		if w.ctx.Err() == nil {
			live = append(live, w)
		}
	}
	if len(live) == 0 {
		return
	}
	texts := make([]string, len(live))
	for i, w := range live {
		texts[i] = w.text
	}
	ctx, cancel := context.WithTimeout(ctx, QueryEmbedTimeout)
	defer cancel()
	vs, err := s.emb.Embed(ctx, texts)
	if err == nil && len(vs) != len(texts) {
		err = fmt.Errorf("%d vectors for %d queries", len(vs), len(texts))
	}
	if err != nil {
		s.log.Debug("tool search: the queries' embedding failed; their searches rank by BM25 alone", "queries", len(texts), "err", err)
		return
	}
	for i, w := range live {
		w.vec = vs[i]
	}
	queryBatchMetric.Observe(float64(len(texts)))
}

// Embedded is how many catalog versions' tools were embedded (tests and metrics).
func (s *Shared) Embedded() int64 { return s.embedded.Load() }

// Close ends the background embedding, if any, and waits for it.
func (s *Shared) Close() {
	if s.bg == nil {
		return
	}
	s.bg.stop()
	<-s.bg.done
}

// InferenceEmbedder is the inference node's embedding model named model, as an Embedder.
func InferenceEmbedder(text inferencev1.TextServiceClient, model string) Embedder {
	return inferenceEmbedder{text, model}
}

type inferenceEmbedder struct {
	text  inferencev1.TextServiceClient
	model string
}

func (e inferenceEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	resp, err := e.text.Embeddings(ctx, &inferencev1.EmbeddingsRequest{Model: e.model, Input: texts})
	if err != nil {
		return nil, fmt.Errorf("embedding model %s: %w", e.model, err)
	}
	out := make([][]float32, len(resp.GetData()))
	for i, d := range resp.GetData() {
		out[i] = d.GetVector()
	}
	return out, nil
}

// embeddingModelID is what a model id may be: the inference node's model file's pattern
// (services/inference/modelfile), repeated here because services share code only through
// lib/ (deploy's TestServicesMeetInProto).
var embeddingModelID = regexp.MustCompile(`^[A-Za-z0-9_.:/-]{1,128}$`)

// builtinEmbed is the inference node's built-in embedding model (builtin.Embed).
const builtinEmbed = "builtin-embed"

// CheckEmbeddingModel says what is wrong with model as tool search's embedding model ("":
// none, BM25 alone). builtin-embed is refused: it hashes words, knows no meaning, and blending
// it lowered recall@5 on the tool-search benchmark (TestBuiltinEmbedDoesNotHelp).
func CheckEmbeddingModel(model string) error {
	switch {
	case model == "":
		return nil
	case model == builtinEmbed:
		return fmt.Errorf("%s: the built-in embedder hashes words and knows no meaning; blended, it lowered tool search's recall. Name a semantic embedding model of an engine in the model file, or none", model)
	case !embeddingModelID.MatchString(model):
		return fmt.Errorf("%q: want a model id ([A-Za-z0-9_.:/-]{1,128}) of an embedding model in the inference node's model file", model)
	}
	return nil
}
