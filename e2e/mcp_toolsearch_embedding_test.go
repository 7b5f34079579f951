package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/zestmcp/zest/lib/waitfor"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/toolsearch"
)

// Tool search's embedding blend (issue 25) through the real suite: the inference node relays
// an embedding model of its model file to scripts/peers/embedder.mjs (the Universal Sentence
// Encoder lite, a real semantic model), and mcpgateway, told its name by
// ZEST_TOOL_SEARCH_EMBEDDING_MODEL, blends it with BM25 in search_tools.

// embedder is scripts/peers/embedder.mjs running on the peers' node.
type embedder struct {
	t     *testing.T
	URL   string // its OpenAI-compatible base, up to and including /v1
	p     *proc
	stdin *os.File // the test's end of its stdin: closing it stops the embedder
}

// startEmbedder starts the embedder and waits for the line that says it listens (its model
// loaded). At cleanup its stdin is closed, and it is killed if it has not exited within 10 s.
func startEmbedder(t *testing.T) *embedder {
	t.Helper()
	peers := peersDir(t)
	node := filepath.Join(peers, "node_modules", ".bin", "node") // the node version the peers pin
	if _, err := os.Stat(node); err != nil {
		t.Fatalf("the peers' node: %v (make peers installs it)", err)
	}
	cmd := exec.Command(node, "embedder.mjs", "--port", "0")
	cmd.Dir = peers
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = r
	e := &embedder{t: t, stdin: w}
	e.p = startProc(t, "embedder", cmd, false)
	r.Close() // the embedder holds its end
	t.Cleanup(func() {
		w.Close()
		if !e.p.exited(10 * time.Second) {
			e.p.stop(syscall.SIGKILL, 5*time.Second)
		}
	})
	waitfor.NoError(t, time.Minute, func() error {
		if line := logLine(e.p.logs.String(), "listening on http://"); line != "" {
			e.URL = strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
			return nil
		}
		if !e.p.running() {
			return waitfor.Stop(fmt.Errorf("the embedder exited before it listened:\n%s", e.p.logs.String()))
		}
		return fmt.Errorf("the embedder is not listening yet:\n%s", e.p.logs.String())
	})
	return e
}

// stop closes the embedder's stdin, which ends it, and waits for it to exit.
func (e *embedder) stop() {
	e.t.Helper()
	e.stdin.Close()
	if !e.p.exited(10 * time.Second) {
		e.t.Fatalf("the embedder did not exit within 10 s of its stdin closing:\n%s", e.p.logs.String())
	}
}

// embeddedTools matches mcpgateway's log line that says a catalog version's tools are
// embedded, and takes how many.
var embeddedTools = regexp.MustCompile(`msg="tool search: the catalog's tools are embedded; searches blend BM25 with the embeddings"[^\n]* tools=(\d+)`)

// TestToolSearchEmbeddingBlend: a request that shares no word with the tool it wants
// ("what is 3 plus 4" for everything's get-sum, "Returns the sum of two numbers") is not
// among BM25's first five over the preset's tools (it finds nothing at all), yet search_tools
// on /mcp/presets/{id} answers get-sum once mcpgateway has embedded the catalog with the
// relayed embedding model. With the embedder stopped, search_tools still answers, by BM25
// alone, with no error.
func TestToolSearchEmbeddingBlend(t *testing.T) {
	const (
		request = "what is 3 plus 4"
		want    = "mcp_everything__get-sum"
		top     = 5
	)
	emb := startEmbedder(t)
	models := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(models, []byte("health_interval: 200ms\nmodels:\n  - id: use-lite\n    type: embedding\n    base_urls: ["+emb.URL+"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey,
		"ZEST_MODELS_FILE="+models, "ZEST_TOOL_SEARCH_EMBEDDING_MODEL=use-lite",
		"ZEST_LOG_LEVEL=info", // the line that says the tools are embedded is at Info
		"E2E_MEMORY_FILE="+filepath.Join(t.TempDir(), "memory.jsonl"))
	memory := filepath.Join(peersDir(t), "node_modules", "@modelcontextprotocol", "server-memory", "dist", "index.js")
	registerServer(t, s, map[string]any{"id": "everything", "command": "node", "args": []string{serverEverything(t)}})
	registerServer(t, s, map[string]any{"id": "memory", "command": "node", "args": []string{memory}, "env": map[string]string{"MEMORY_FILE_PATH": "${E2E_MEMORY_FILE}"}})
	for _, id := range []string{"everything", "memory"} {
		if r := admin(t, s, "POST", "/servers/"+id+"/connect", ""); r.Status != 200 || r.JSON(t)["server"].(map[string]any)["connected"] != true {
			t.Fatalf("connect %s: %d %s", id, r.Status, r.Body)
		}
	}
	if r := admin(t, s, "POST", "/presets", `{"id":"blend","mcp_server_ids":["everything","memory"],"tool_search":true}`); r.Status != 200 {
		t.Fatalf("a preset with tool_search: %d %s", r.Status, r.Body)
	}
	// The inference node routes to the engine once its health check has seen it.
	waitfor.NoError(t, 15*time.Second, func() error {
		r := do(t, "GET", s.URL+"/api/v1/models", "", "Authorization: Bearer "+fedAPIKey)
		for _, m := range asSlice(r.JSON(t)["data"]) {
			if m := m.(map[string]any); m["id"] == "use-lite" && m["loaded"] == true {
				return nil
			}
		}
		return fmt.Errorf("use-lite is not loaded: %d %s", r.Status, r.Body)
	})

	// The catalog as the admin API lists it: BM25 alone over the preset's tools, in process.
	r := admin(t, s, "GET", "/tools", "")
	var listed mcpgatewayv1.ListToolsResponse
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(r.Body, &listed); r.Status != 200 || err != nil {
		t.Fatalf("/tools: %d %v %s", r.Status, err, r.Body)
	}
	docs := toolsearch.Docs(listed.GetTools())
	i := slices.IndexFunc(docs, func(d toolsearch.Doc) bool { return d.Key == want })
	if i < 0 {
		t.Fatalf("%s is not in the catalog: %s", want, r.Body)
	}
	d := docs[i]
	words := toolsearch.Terms(strings.Join([]string{d.Name, d.Server, d.Title, d.Description}, " "))
	for _, p := range d.Params {
		words = append(words, toolsearch.Terms(p.Name+" "+p.Description)...)
	}
	for _, w := range toolsearch.Terms(request) {
		if slices.Contains(words, w) {
			t.Fatalf("%q shares %q with %s (%v): it must share none", request, w, want, words)
		}
	}
	preset := func(d *toolsearch.Doc) bool { return d.Server == "everything" || d.Server == "memory" }
	bm25 := hitKeys(toolsearch.Build(docs).Search(request, toolsearch.Options{Limit: len(docs), Allow: preset}))
	if rank := slices.Index(bm25, want) + 1; rank >= 1 && rank <= top {
		t.Fatalf("BM25 alone ranks %s #%d for %q (%v): the request shows nothing of the blend", want, rank, request, bm25)
	}
	t.Logf("BM25 alone over the %d tools: %s ranks %s (answers %v)", len(docs), want, rankOf(bm25, want), bm25)

	c := modernClient(t, presetURL(s, "blend"), "zest-preset-blend")
	// search is search_tools' answer for query, and how the answer says it was ranked.
	search := func(c *mcpclient.Client, query string, limit int) ([]string, any) {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "search_tools", map[string]any{"query": query, "limit": limit}
		res, err := c.CallTool(t.Context(), req)
		if err != nil || res.IsError || len(res.Content) == 0 {
			t.Fatalf("search_tools %q: %+v %v", query, res, err)
		}
		var ranking any
		if res.Meta != nil {
			ranking = res.Meta.AdditionalFields[toolsearch.MetaRanking]
		}
		return searchNames(t, mcp.GetTextFromContent(res.Content[0])), ranking
	}

	// A search builds the index of the catalog (both servers listed by now, and the built-in
	// tools /mcp serves beside them) and asks for its vectors; the line that says they are
	// made, for that many tools, is the signal.
	builtins, err := modernClient(t, s.URL+"/mcp", "lemonade-mcp").ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	indexed := len(docs) + len(builtins.Tools)
	start := time.Now()
	waitfor.NoError(t, 2*time.Minute, func() error {
		for _, m := range embeddedTools.FindAllStringSubmatch(s.Logs("zest-mcpgateway"), -1) {
			if n, _ := strconv.Atoi(m[1]); n == indexed {
				return nil
			}
		}
		if !emb.p.running() {
			return waitfor.Stop(fmt.Errorf("the embedder exited:\n%s", emb.p.logs.String()))
		}
		search(c, "sum", 1) // asks again, should the catalog have changed since
		return fmt.Errorf("mcpgateway has not embedded the %d tools of the index (%d listed, %d built in); its log:\n%s",
			indexed, len(docs), len(builtins.Tools), s.Logs("zest-mcpgateway"))
	})
	t.Logf("the catalog's tools were embedded %v after the first search", time.Since(start).Round(time.Millisecond))

	blended, ranking := search(c, request, 20)
	if ranking != toolsearch.RankedBlended {
		t.Errorf("search_tools' _meta says it ranked by %v, want %s", ranking, toolsearch.RankedBlended)
	}
	rank := slices.Index(blended, want) + 1
	t.Logf("search_tools %q through /mcp/presets/blend: %s ranks %s (answers %v)", request, want, rankOf(blended, want), blended)
	if rank < 1 || rank > top {
		t.Fatalf("search_tools %q answered %v: want %s among the first %d (BM25 alone: %v)", request, blended, want, top, bm25)
	}

	// The embedder gone, each search's query embedding fails: BM25 alone answers, no error.
	emb.stop()
	if got, ranking := search(c, request, top); slices.Contains(got, want) || ranking != toolsearch.RankedBM25 {
		t.Errorf("search_tools %q without the embedder answered %v, ranked by %v: BM25 alone finds no %s", request, got, ranking, want)
	}
	if got, _ := search(c, "add two numbers", top); !slices.Contains(got, want) {
		t.Errorf("search_tools \"add two numbers\" without the embedder answered %v: want %s (BM25)", got, want)
	}
}

// hitKeys are the keys of hits, in order.
func hitKeys(hits []toolsearch.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Doc.Key
	}
	return out
}

// rankOf says where name is in names ("#3", or "nowhere").
func rankOf(names []string, name string) string {
	if i := slices.Index(names, name); i >= 0 {
		return "#" + strconv.Itoa(i+1)
	}
	return "nowhere"
}
