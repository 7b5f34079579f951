// Package searcheval measures toolsearch's ranking on a catalog of real tool definitions and
// a set of natural-language queries (issue 25's benchmark): bench/testdata/tool-catalog.json,
// harvested from real npm MCP servers by scripts/peers/harvest-tools.mjs, and
// bench/testdata/tool-queries.json. The benchmark (`make bench`, -only toolsearch) and
// toolsearch's acceptance test read them through this package, so both measure the same thing.
package searcheval

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"

	"github.com/zestmcp/zest/services/mcpgateway/toolsearch"
)

// Tool is one tool of the catalog, as its server's tools/list gave it.
type Tool struct {
	Server      string          `json:"server"`
	Source      string          `json:"source"` // the npm package@version that served it
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
	// Fixture marks a copy made to reach the catalog's size, not a real server's tool.
	Fixture bool `json:"fixture,omitempty"`
}

// Key is how a query names the tool: server/tool.
func (t Tool) Key() string { return t.Server + "/" + t.Name }

// Catalog is the harvested file.
type Catalog struct {
	Harvested string `json:"harvested"` // what made it, for the reader
	Tools     []Tool `json:"tools"`
}

// Query is one natural-language request and the tools that answer it: any one of Expect
// among the first k hits counts as found at k (they are alternatives that serve it equally).
type Query struct {
	Query  string   `json:"query"`
	Expect []string `json:"expect"`           // server/tool
	Server string   `json:"server,omitempty"` // the search's server filter, when set
	// Vector is the query's embedding when the evaluation blends one in (Embed), else nil.
	Vector []float32 `json:"-"`
}

// HeldOut reports whether the i-th query (from 0) is in the held-out third: every third
// one, fixed before any tuning, never looked at while the ranking was tuned.
func HeldOut(i int) bool { return i%3 == 2 }

// LoadCatalog reads a catalog file and checks it: every tool named, no key twice.
func LoadCatalog(path string) (*Catalog, error) {
	var c Catalog
	if err := readJSON(path, &c); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i, t := range c.Tools {
		if t.Server == "" || t.Name == "" {
			return nil, fmt.Errorf("%s: tools[%d] has no server or name", path, i)
		}
		if seen[t.Key()] {
			return nil, fmt.Errorf("%s: tools[%d]: %s appears twice", path, i, t.Key())
		}
		seen[t.Key()] = true
	}
	return &c, nil
}

// LoadQueries reads a query file and checks every expected tool against the catalog.
func LoadQueries(path string, c *Catalog) ([]Query, error) {
	var qs []Query
	if err := readJSON(path, &qs); err != nil {
		return nil, err
	}
	known := map[string]bool{}
	servers := map[string]bool{}
	for _, t := range c.Tools {
		known[t.Key()] = true
		servers[t.Server] = true
	}
	for i, q := range qs {
		if q.Query == "" || len(q.Expect) == 0 {
			return nil, fmt.Errorf("%s: [%d] needs a query and at least one expected tool", path, i)
		}
		for _, e := range q.Expect {
			if !known[e] {
				return nil, fmt.Errorf("%s: [%d] %q expects %s, which the catalog does not have", path, i, q.Query, e)
			}
		}
		if q.Server != "" && !servers[q.Server] {
			return nil, fmt.Errorf("%s: [%d] filters on server %q, which the catalog does not have", path, i, q.Server)
		}
	}
	return qs, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Docs turns the catalog into the index's documents, keyed server/tool: the arguments are
// the input schema's top-level properties, in name order.
func Docs(c *Catalog) []toolsearch.Doc {
	docs := make([]toolsearch.Doc, 0, len(c.Tools))
	for _, t := range c.Tools {
		docs = append(docs, toolsearch.Doc{
			Key: t.Key(), Server: t.Server, Name: t.Name, Title: t.Title,
			Description: t.Description, Params: params(t.InputSchema),
		})
	}
	return docs
}

func params(schema json.RawMessage) []toolsearch.Param {
	var s struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]toolsearch.Param, 0, len(names))
	for _, n := range names {
		out = append(out, toolsearch.Param{Name: n, Description: s.Properties[n].Description})
	}
	return out
}

// Options is the search a query makes: its server filter, and at most limit hits.
func (q Query) Options(limit int) toolsearch.Options {
	o := toolsearch.Options{Limit: limit, Vector: q.Vector}
	if q.Server != "" {
		server := q.Server
		o.Allow = func(d *toolsearch.Doc) bool { return d.Server == server }
	}
	return o
}

// Recall is how many queries found an expected tool first, and among the first five.
type Recall struct {
	Queries, At1, At5 int
}

// R1 is the fraction of queries whose tool came first.
func (r Recall) R1() float64 { return frac(r.At1, r.Queries) }

// R5 is the fraction of queries whose tool was among the first five.
func (r Recall) R5() float64 { return frac(r.At5, r.Queries) }

func frac(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

// Miss is a query whose expected tools were not among the first five.
type Miss struct {
	Query Query
	Got   []string
}

// Result is recall over all queries, the tuning two thirds and the held-out third.
type Result struct {
	All, Tuning, HeldOut Recall
	Misses               []Miss
}

// Embed gives ix its documents' embeddings and each query its own, by embed (a model's
// Embed: texts in, one vector each out), in batches of at most batch texts.
func Embed(ix *toolsearch.Index, qs []Query, embed func([]string) ([][]float32, error), batch int) error {
	docs := ix.Docs()
	texts := make([]string, 0, len(docs)+len(qs))
	for i := range docs {
		texts = append(texts, toolsearch.EmbedText(&docs[i]))
	}
	for _, q := range qs {
		texts = append(texts, q.Query)
	}
	vs := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += batch {
		part, err := embed(texts[start:min(start+batch, len(texts))])
		if err != nil {
			return err
		}
		vs = append(vs, part...)
	}
	if len(vs) != len(texts) || !ix.SetVectors(vs[:len(docs)]) {
		return fmt.Errorf("%d vectors for %d texts, or of different lengths", len(vs), len(texts))
	}
	for i := range qs {
		qs[i].Vector = vs[len(docs)+i]
	}
	return nil
}

// Evaluate runs every query against ix.
func Evaluate(ix *toolsearch.Index, qs []Query) Result {
	var r Result
	for i, q := range qs {
		hits := ix.Search(q.Query, q.Options(5))
		got := make([]string, len(hits))
		for j, h := range hits {
			got[j] = h.Doc.Key
		}
		rank := -1
		for j, k := range got {
			if slices.Contains(q.Expect, k) {
				rank = j
				break
			}
		}
		part := &r.Tuning
		if HeldOut(i) {
			part = &r.HeldOut
		}
		for _, p := range []*Recall{&r.All, part} {
			p.Queries++
			if rank == 0 {
				p.At1++
			}
			if rank >= 0 {
				p.At5++
			}
		}
		if rank < 0 {
			r.Misses = append(r.Misses, Miss{q, got})
		}
	}
	return r
}
