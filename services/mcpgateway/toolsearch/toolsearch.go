// Package toolsearch ranks a catalog's tools for a natural-language query: BM25 over each
// tool's name, title, description and its arguments' names and descriptions (issue 25's tool
// search). An Index is built once from a catalog snapshot's tools and then only read, by any
// number of searches at once; a new catalog version builds a new one (Shared keeps the
// current one for the whole process). MetaTools are search_tools and call_tool, which a
// preset with tool_search serves in place of its tools.
//
// Fields weigh differently (a BM25F-like sum): a word of the tool's name counts most, then its
// title, its arguments' names, its description, and its arguments' descriptions. Words are
// lower-cased, split at punctuation, snake_case, kebab-case and camelCase, stripped of common
// English endings (a light stemmer: "files" and "file", "listing" and "list" meet), and a
// short list of stop words is dropped.
package toolsearch

import (
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/activity"
)

// Doc is one tool as the index sees it.
type Doc struct {
	Key         string // what a search answers it by (the tool's chat_name)
	Server      string // the server's id, for the server filter
	Name        string
	Title       string
	Description string
	Params      []Param // the input schema's properties
	// Entry is the catalog entry the document was made of (Docs), nil when it was not.
	Entry *mcpgatewayv1.ToolEntry
}

// Param is one argument of a tool.
type Param struct {
	Name, Description string
}

// The fields' weights, and BM25's parameters.
const (
	weightName      = 3.0
	weightServer    = 1.5
	weightTitle     = 2.0
	weightParamName = 1.0
	weightLead      = 1.0 // the description's first sentence
	weightDesc      = 0.5
	weightParamDesc = 0.5
	weightSynonym   = 0.5 // a query word's synonym, against the word itself
	// weightEmbedding is the embedding's share of a blended score: the query's cosine with
	// the tool's vector, beside BM25's score divided by the best one of the search (so both
	// run 0 to 1). 0.5 was best on the tuning two thirds of the query set among 0.3, 0.5 and
	// 0.7 (docs/decisions.md).
	weightEmbedding = 0.5
	k1              = 1.2
	b               = 0.75
	// MaxQueryBytes bounds the query a search reads; longer ones are cut.
	MaxQueryBytes = 1024
)

// posting is one document's weighted count of a term.
type posting struct {
	doc int
	tf  float64
}

// Index is the search index of one catalog version.
type Index struct {
	docs     []Doc
	postings map[string][]posting // by term, in document order
	docLen   []float64            // weighted words per document
	avgLen   float64
	// vectors are the documents' embeddings (unit length, in document order), once an
	// embedding model made them (Shared, in the background); nil until then.
	vectors atomic.Pointer[[][]float32]
}

// Build indexes docs. The index keeps docs (not copies): they must not change afterwards.
func Build(docs []Doc) *Index {
	ix := &Index{docs: docs, postings: map[string][]posting{}, docLen: make([]float64, len(docs))}
	total := 0.0
	for i, d := range docs {
		tf := map[string]float64{}
		add := func(text string, w float64) {
			for _, t := range Terms(text) {
				tf[t] += w
				ix.docLen[i] += w
			}
		}
		add(d.Name, weightName)
		add(d.Server, weightServer)
		add(d.Title, weightTitle)
		lead, rest := leadSentence(d.Description)
		add(lead, weightLead)
		add(rest, weightDesc)
		for _, p := range d.Params {
			add(p.Name, weightParamName)
			add(p.Description, weightParamDesc)
		}
		for t, n := range tf {
			ix.postings[t] = append(ix.postings[t], posting{i, n})
		}
		total += ix.docLen[i]
	}
	if len(docs) > 0 {
		ix.avgLen = total / float64(len(docs))
	}
	return ix
}

// Len is the number of tools indexed.
func (ix *Index) Len() int { return len(ix.docs) }

// Docs are the documents indexed, in order; they must not be changed.
func (ix *Index) Docs() []Doc { return ix.docs }

// SetVectors gives the index its documents' embeddings, one per document in order (Docs),
// each of the same length: from then on a search with a query vector blends them in. It
// reports false, and changes nothing, when they do not fit.
func (ix *Index) SetVectors(vs [][]float32) bool {
	if len(vs) != len(ix.docs) {
		return false
	}
	unit := make([][]float32, len(vs))
	for i, v := range vs {
		if len(v) == 0 || len(v) != len(vs[0]) {
			return false
		}
		unit[i] = normalized(v)
	}
	ix.vectors.Store(&unit)
	return true
}

// Dimensions is the length of the documents' embeddings, 0 while the index has none.
func (ix *Index) Dimensions() int {
	if vs := ix.vectors.Load(); vs != nil && len(*vs) > 0 {
		return len((*vs)[0])
	}
	return 0
}

// MaxEmbedTextBytes bounds what an embedding model reads of a tool or a query: a description
// with no full stop would otherwise be one long "first sentence", past what small models
// take (often 512 tokens), and one such tool would fail its whole batch.
const MaxEmbedTextBytes = 1024

// EmbedText is what an embedding model reads of a tool: its name in words, its title and the
// first sentence of its description, the sentence that says what the tool does (the usage
// notes after it dilute a sentence embedding); at most MaxEmbedTextBytes.
func EmbedText(d *Doc) string {
	return activity.Cut(embedText(d), MaxEmbedTextBytes)
}

func embedText(d *Doc) string {
	parts := []string{strings.ToLower(strings.Join(words(d.Name), " "))}
	if d.Title != "" {
		parts = append(parts, d.Title)
	}
	if lead, _ := leadSentence(d.Description); lead != "" {
		parts = append(parts, lead)
	}
	return strings.Join(parts, ". ")
}

// normalized is v scaled to unit length (v itself when it is all zeros).
func normalized(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return slices.Clone(v)
	}
	n = math.Sqrt(n)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / n)
	}
	return out
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// Hit is one tool found, with its score (higher is better).
type Hit struct {
	Doc   *Doc
	Score float64
}

// Options narrow a search.
type Options struct {
	// Limit is the most hits returned (at least 1).
	Limit int
	// Allow, when set, keeps only the documents it accepts (a preset's servers, a server
	// filter, what the caller may see).
	Allow func(*Doc) bool
	// Vector is the query's embedding, by the model that made the index's vectors. When both
	// are there (and of one length) every document the search allows is ranked by the blend
	// of BM25 and the embeddings' cosine, so a tool that shares no word with the query can
	// still be found; else by BM25 alone.
	Vector []float32
}

// Search returns the documents that share a term with query, best first (ties by Key), at
// most opts.Limit of them.
func (ix *Index) Search(query string, opts Options) []Hit {
	if len(query) > MaxQueryBytes {
		query = query[:MaxQueryBytes]
	}
	limit := max(opts.Limit, 1)
	scores := make([]float64, len(ix.docs)) // a slice, not a map: a search touches many of 500 tools
	var touched []int
	n := float64(len(ix.docs))
	for _, qt := range queryTerms(query) {
		t, w := qt.term, qt.w
		ps := ix.postings[t]
		if len(ps) == 0 {
			continue
		}
		idf := math.Log(1 + (n-float64(len(ps))+0.5)/(float64(len(ps))+0.5))
		for _, p := range ps {
			norm := p.tf + k1*(1-b+b*ix.docLen[p.doc]/ix.avgLen)
			if scores[p.doc] == 0 {
				touched = append(touched, p.doc)
			}
			scores[p.doc] += w * idf * p.tf * (k1 + 1) / norm
		}
	}
	if vs := ix.vectors.Load(); vs != nil && len(opts.Vector) > 0 && len(opts.Vector) == ix.Dimensions() {
		return ix.blend(scores, *vs, opts, limit)
	}
	hits := make([]Hit, 0, len(touched))
	for _, i := range touched {
		s := scores[i]
		d := &ix.docs[i]
		if opts.Allow != nil && !opts.Allow(d) {
			continue
		}
		hits = append(hits, Hit{d, s})
	}
	return best(hits, limit)
}

// blend ranks every document opts allows by weightEmbedding × the cosine of its vector with
// the query's, plus the rest × its BM25 score over the best BM25 score among them.
func (ix *Index) blend(scores []float64, vectors [][]float32, opts Options, limit int) []Hit {
	q := normalized(opts.Vector)
	allowed := make([]int, 0, len(ix.docs))
	top := 0.0
	for i := range ix.docs {
		if opts.Allow != nil && !opts.Allow(&ix.docs[i]) {
			continue
		}
		allowed = append(allowed, i)
		top = max(top, scores[i])
	}
	hits := make([]Hit, 0, len(allowed))
	for _, i := range allowed {
		s := weightEmbedding * dot(q, vectors[i])
		if top > 0 {
			s += (1 - weightEmbedding) * scores[i] / top
		}
		hits = append(hits, Hit{&ix.docs[i], s})
	}
	return best(hits, limit)
}

// best sorts hits best first (ties by Key) and keeps the first limit.
func best(hits []Hit, limit int) []Hit {
	slices.SortFunc(hits, func(a, b Hit) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Doc.Key, b.Doc.Key)
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits
}

// leadSentence splits a description after its first sentence: the sentence that says what
// the tool does, before usage notes, warnings and examples.
func leadSentence(desc string) (lead, rest string) {
	for i := 0; i+1 < len(desc); i++ {
		if (desc[i] == '.' || desc[i] == '\n') && (desc[i+1] == ' ' || desc[i+1] == '\n') {
			return desc[:i+1], desc[i+1:]
		}
	}
	return desc, ""
}

// weighted is a query term and its weight.
type weighted struct {
	term string
	w    float64
}

// queryTerms is the query's terms, each once and weighing 1, then their synonyms not in the
// query, each weighing weightSynonym: in a fixed order, so that a score's sum is the same in
// every search.
func queryTerms(query string) []weighted {
	var out []weighted
	seen := map[string]bool{}
	terms := Terms(query)
	for _, t := range terms {
		if !seen[t] {
			seen[t] = true
			out = append(out, weighted{t, 1})
		}
	}
	for _, t := range terms {
		for _, s := range synonyms[t] {
			if !seen[s] {
				seen[s] = true
				out = append(out, weighted{s, weightSynonym})
			}
		}
	}
	return out
}

// synonymGroups are words a person asking for a tool and the tool's author often use for the
// same thing: common verbs of software, and common names of the things tools act on. They are
// general vocabulary, kept small, and never written for one query or one tool; a query's word
// also searches its group's other words at weightSynonym.
var synonymGroups = [][]string{
	{"create", "make", "new", "add"},
	{"delete", "remove", "drop", "erase", "forget"},
	{"list", "show", "display", "enumerate"},
	{"get", "fetch", "retrieve", "read", "view"},
	{"search", "find", "lookup", "query", "locate"},
	{"update", "change", "modify", "edit", "set"},
	{"write", "save", "store", "put", "upsert", "insert"},
	{"run", "execute", "launch", "start", "trigger"},
	{"stop", "kill", "terminate", "end", "halt"},
	{"move", "rename"},
	{"copy", "clone", "duplicate", "fork"},
	{"folder", "directory", "dir"},
	{"picture", "photo", "image", "screenshot"},
	{"program", "process", "app"},
	{"bug", "issue", "ticket", "problem"},
	{"web", "internet", "online"},
	{"webpage", "page", "website", "site", "url", "article"},
	{"field", "property", "attribute", "column", "schema", "mapping"},
	{"comment", "note", "reply"},
	{"message", "post", "chat"},
	{"people", "user", "member", "person"},
	{"repo", "repository", "project"},
	{"remember", "memory", "knowledge"},
	{"size", "space", "bytes"},
	{"history", "log", "logs"},
	{"type", "fill", "enter", "input"},
	{"draw", "plot", "chart", "graph", "visualize", "visualise", "diagram"},
	{"mongo", "mongodb"},
	{"kubernetes", "k8s", "kubectl", "cluster"},
	{"postgres", "postgresql"},
	{"error", "exception", "crash", "failure"},
	{"download", "scrape", "extract"},
	{"order", "sort", "rank", "rerank"},
}

// synonyms maps a term to the other terms of its groups (as Terms makes them).
var synonyms = func() map[string][]string {
	m := map[string][]string{}
	for _, g := range synonymGroups {
		var terms []string
		for _, w := range g {
			terms = append(terms, Terms(w)...)
		}
		for _, t := range terms {
			for _, u := range terms {
				if u != t && !slices.Contains(m[t], u) {
					m[t] = append(m[t], u)
				}
			}
		}
	}
	return m
}()

// stopWords are dropped from documents and queries alike: they say nothing of a tool.
var stopWords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "by": true,
	"can": true, "do": true, "for": true, "from": true, "i": true, "if": true, "in": true, "into": true,
	"is": true, "it": true, "its": true, "me": true, "my": true, "of": true, "on": true, "or": true,
	"please": true, "so": true, "that": true, "the": true, "their": true, "them": true, "then": true,
	"there": true, "this": true, "to": true, "tool": true, "use": true, "using": true, "want": true,
	"was": true, "we": true, "what": true, "when": true, "which": true, "will": true, "with": true,
	"you": true, "your": true, "mcp": true,
	// question and filler words of a request in plain words
	"how": true, "who": true, "where": true, "why": true, "whose": true, "some": true, "any": true,
	"each": true, "every": true, "our": true, "us": true, "have": true, "has": true, "had": true,
	"does": true, "did": true, "just": true, "about": true, "these": true, "those": true,
	"am": true, "been": true, "were": true, "would": true, "could": true, "should": true,
	"let": true, "like": true, "yet": true, "very": true, "much": true, "also": true,
	"anywhere": true, "somewhere": true, "something": true, "someone": true, "else": true,
}

// Terms splits text into the index's terms: words lower-cased, split at anything not a
// letter or digit and at camelCase humps, stemmed, stop words dropped.
func Terms(text string) []string {
	var out []string
	add := func(w string) {
		w = stem(strings.ToLower(w))
		if w != "" && !stopWords[w] {
			out = append(out, w)
		}
	}
	for _, run := range strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		parts := words(run)
		for _, w := range parts {
			add(w)
		}
		if len(parts) > 1 { // JavaScript, GitHub, MongoDB: their parts, and the word a person types
			add(run)
		}
	}
	return out
}

// words splits text at non-alphanumerics and at a lower-to-upper change (readFile → read,
// File; HTTPServer → HTTP, Server).
func words(text string) []string {
	var out []string
	start := -1
	var prev rune
	for i, r := range text {
		alnum := unicode.IsLetter(r) || unicode.IsDigit(r)
		switch {
		case !alnum:
			if start >= 0 {
				out = append(out, text[start:i])
				start = -1
			}
		case start < 0:
			start = i
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			out = append(out, text[start:i])
			start = i
		case unicode.IsLower(r) && unicode.IsUpper(prev) && i-start > utf8.RuneLen(prev):
			// "HTTPServer": the S begins a word; the run before it is one.
			j := i - utf8.RuneLen(prev)
			out = append(out, text[start:j])
			start = j
		}
		prev = r
	}
	if start >= 0 {
		out = append(out, text[start:])
	}
	return out
}

// stem strips the common English endings of w (lower case), keeping at least three letters:
// a light stemmer, enough for "files"/"file", "listing"/"list", "created"/"create",
// "queries"/"query". Only ASCII words are stemmed: the endings are English ones.
func stem(w string) string {
	if len(w) <= 3 || !isASCII(w) {
		return w
	}
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "ing") && len(w) > 5:
		w = w[:len(w)-3]
	case strings.HasSuffix(w, "ed") && len(w) > 4:
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "es") && len(w) > 4 && strings.ContainsAny(w[len(w)-3:len(w)-2], "sxzh"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us"):
		w = w[:len(w)-1]
	}
	return trimE(w)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// trimE drops a final e, and one of a doubled final consonant, so that "create", "created"
// and "creating" meet at "creat", and "running" at "run".
func trimE(w string) string {
	if len(w) > 3 && w[len(w)-1] == 'e' {
		return w[:len(w)-1]
	}
	if n := len(w); n > 3 && w[n-1] == w[n-2] && !strings.ContainsRune("aeiousl", rune(w[n-1])) {
		return w[:n-1]
	}
	return w
}
