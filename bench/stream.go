package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// benchStream measures streaming chat through the edge → inference → engine against the
// engine called directly. The engine is a second Zest node (inference + edge) serving
// builtin-llm over OpenAI's HTTP API, so both paths stream from a real HTTP server: first
// paced like a real model (5 ms a token), then as fast as it can.
func benchStream(binDir, _ string, _, _ time.Duration) error {
	words := strings.Repeat("token ", 200)
	fmt.Println("### streaming chat: time to first token and tokens/s, through Zest vs the engine directly")
	fmt.Println()
	fmt.Println("200-token completions, one at a time, 30 requests per row (after 3 warm-up requests).")
	fmt.Println()
	fmt.Println("| engine pace | path | TTFT p50 | TTFT p99 | tokens/s (mean) | ratio | added TTFT p50 |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, pace := range []time.Duration{5 * time.Millisecond, 0} {
		engineURL, stop, err := startEngineNode(binDir, pace)
		if err != nil {
			return err
		}
		models, _ := os.CreateTemp("", "zest-bench-models-*.yaml")
		fmt.Fprintf(models, "health_interval: 1s\nmodels:\n  - id: remote-llm\n    upstream_model: builtin-llm\n    base_urls: [%s/v1]\n    max_concurrency: 64\n", engineURL)
		models.Close()
		s, err := startSuite(binDir, "ZEST_MODELS_FILE="+models.Name())
		if err != nil {
			stop()
			return err
		}
		body := func(model string) string {
			return fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":%q}]}`, model, words)
		}
		direct, err1 := measureStream(engineURL+"/v1/chat/completions", body("builtin-llm"))
		via, err2 := measureStream(s.url+"/api/v1/chat/completions", body("remote-llm"))
		s.stop()
		stop()
		os.Remove(models.Name())
		if err1 != nil || err2 != nil {
			return fmt.Errorf("stream bench: %v %v", err1, err2)
		}
		label := fmt.Sprintf("%v a token", pace)
		if pace == 0 {
			label = "unpaced"
		}
		fmt.Printf("| %s | engine directly | %s | %s | %.0f | 1.00 | – |\n", label, ms(direct.p50), ms(direct.p99), direct.tps)
		fmt.Printf("| %s | edge → inference → engine | %s | %s | %.0f | %.3f | %s |\n", label, ms(via.p50), ms(via.p99), via.tps, via.tps/direct.tps, ms(via.p50-direct.p50))
	}
	fmt.Println()
	return nil
}

type streamResult struct {
	p50, p99 time.Duration
	tps      float64
}

func measureStream(url, body string) (streamResult, error) {
	var ttfts []time.Duration
	var rates []float64
	for i := range 33 {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := httpClient.Do(req)
		if err != nil {
			return streamResult{}, err
		}
		sc := bufio.NewScanner(resp.Body)
		var first, last time.Time
		tokens := 0
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, `"content":"`) {
				if first.IsZero() {
					first = time.Now()
				}
				last = time.Now()
				tokens++
			}
		}
		resp.Body.Close()
		if tokens < 100 {
			return streamResult{}, fmt.Errorf("%s: only %d tokens (status %d)", url, tokens, resp.StatusCode)
		}
		if i < 3 {
			continue
		}
		ttfts = append(ttfts, first.Sub(start))
		rates = append(rates, float64(tokens-1)/last.Sub(first).Seconds())
	}
	sort.Slice(ttfts, func(i, j int) bool { return ttfts[i] < ttfts[j] })
	sum := 0.0
	for _, r := range rates {
		sum += r
	}
	return streamResult{p50: ttfts[len(ttfts)/2], p99: ttfts[len(ttfts)*99/100], tps: sum / float64(len(rates))}, nil
}

// startEngineNode runs zest-inference and zest-gateway as an OpenAI-compatible engine.
func startEngineNode(binDir string, pace time.Duration) (string, func(), error) {
	inf, err := reserve()
	if err != nil {
		return "", nil, err
	}
	edgeSock, err := reserve()
	if err != nil {
		return "", nil, err
	}
	edge := edgeSock.addr
	env := append(os.Environ(), "ZEST_LOG_LEVEL=warn", "LEMONADE_API_KEY=", "ZEST_INFERENCE_ADDR="+inf.addr, "ZEST_EDGE_ADDR="+edge,
		"ZEST_BUILTIN_TOKEN_INTERVAL="+pace.String())
	socks := map[string]socket{"zest-inference": inf, "zest-gateway": edgeSock}
	var procs []*exec.Cmd
	stop := func() {
		for _, p := range procs {
			p.Process.Signal(os.Interrupt)
			p.Wait()
		}
	}
	for _, name := range []string{"zest-inference", "zest-gateway"} {
		cmd := exec.Command(filepath.Join(binDir, name))
		cmd.Env = env
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := startWith(cmd, socks[name]); err != nil {
			stop()
			return "", nil, err
		}
		procs = append(procs, cmd)
	}
	url := "http://" + edge
	for deadline := time.Now().Add(10 * time.Second); ; {
		if resp, err := http.Get(url + "/live"); err == nil {
			resp.Body.Close()
			return url, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("engine node did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
