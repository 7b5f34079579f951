package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const fedCall = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"bench"}}}`

// fedTarget is one way to reach server-everything's `echo`. open starts n clients, each with
// its own session and connection, and returns one call per client and a func that ends the
// sessions.
type fedTarget struct {
	name  string
	open  func(n int) ([]func() error, func(), error)
	roots map[string]int // processes whose CPU and process tree are measured
	zest  bool           // the target the ratios are taken against
}

// benchFederation measures MCP clients calling `echo` on server-everything over Streamable
// HTTP through Zest's /mcp/servers/everything and through three peers that serve a stdio
// server the same way, beside the direct stdio client, and the memory 1,000 federated
// sessions add to Zest.
func benchFederation(binDir, peers string, warm, dur time.Duration) error {
	peers, err := filepath.Abs(peers)
	if err != nil {
		return err
	}
	entry := filepath.Join(peers, "@modelcontextprotocol", "server-everything", "dist", "index.js")
	for _, p := range []string{entry, filepath.Join(peers, "supergateway"), filepath.Join(peers, "mcp-proxy")} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s is not installed (run make peers): %w", p, err)
		}
	}

	direct, err := startDirect("node", entry)
	if err != nil {
		return err
	}
	defer direct.close()

	const adminKey, apiKey = "bench-admin-key", "bench-api-key"
	s, err := startSuite(binDir, append([]string{"LEMONADE_ADMIN_API_KEY=" + adminKey, "LEMONADE_API_KEY=" + apiKey},
		strings.Fields(os.Getenv("ZEST_BENCH_ENV"))...)...)
	if err != nil {
		return err
	}
	defer s.stop()
	cfg := fmt.Sprintf(`{"id":"everything","command":"node","args":[%q]}`, entry)
	if _, err := post(s.url+"/internal/mcp/servers", adminKey, cfg); err != nil {
		return fmt.Errorf("register everything: %w", err)
	}
	zestURL := s.url + "/mcp/servers/everything"
	zestAuth := http.Header{"Authorization": {"Bearer " + apiKey}}

	sg, err := startNodePeer(peers, filepath.Join(peers, "supergateway", "dist", "index.js"),
		"--stdio", "node "+entry, "--outputTransport", "streamableHttp", "--stateful",
		"--sessionTimeout", "60000", "--logLevel", "none", "--port", "0")
	if err != nil {
		return err
	}
	defer sg.stop()
	mp, err := startNodePeer(peers, filepath.Join(peers, "mcp-proxy", "dist", "bin", "mcp-proxy.mjs"),
		"--host", "127.0.0.1", "--port", "0", "--server", "stream", "--", "node", entry)
	if err != nil {
		return err
	}
	defer mp.stop()
	mg, err := startMCPGoProxy(entry)
	if err != nil {
		return err
	}
	defer mg.stop()

	directPIDs := map[string]int{"node server": direct.cmd.Process.Pid}
	targets := []fedTarget{
		{name: "direct stdio (reference)", roots: directPIDs, open: func(n int) ([]func() error, func(), error) {
			fs := make([]func() error, n)
			for i := range fs {
				fs[i] = direct.echo
			}
			return fs, func() {}, nil
		}},
		{name: "Zest /mcp/servers/everything", roots: s.pids, zest: true, open: httpSessions(zestURL, zestAuth)},
		{name: "supergateway 4.0.0 (stateful)", roots: map[string]int{"supergateway": sg.pid()}, open: httpSessions(sg.url, nil)},
		{name: "mcp-proxy 6.7.19", roots: map[string]int{"mcp-proxy": mp.pid()}, open: httpSessions(mp.url, nil)},
		{name: "mcp-go v1.2.1 one-process proxy", roots: map[string]int{"mcp-go proxy": mg.pid()}, open: httpSessions(mg.url, nil)},
	}

	targets, concs := pickTargets(targets, os.Getenv("ZEST_BENCH_TARGETS")), []int{1, 8, 64}
	if v := os.Getenv("ZEST_BENCH_CONCURRENCY"); v != "" {
		c, err := strconv.Atoi(v)
		if err != nil || c < 1 {
			return fmt.Errorf("ZEST_BENCH_CONCURRENCY=%q: want one concurrency, a positive integer such as 64", v)
		}
		concs = []int{c}
	}

	fmt.Println("### federation: `echo` on server-everything through MCP Streamable HTTP proxies")
	fmt.Println()
	fmt.Println("Each client opens its own session (initialize + notifications/initialized), then sends")
	fmt.Println("tools/call `echo` again and again on its own keep-alive connection with Mcp-Session-Id, and")
	fmt.Println("checks every answer. Processes: the processes of the target's tree and their RSS with the")
	fmt.Println("point's sessions open (supergateway spawns one server-everything per session).")
	fmt.Println()
	fmt.Println("| target | concurrency | calls/s | p50 | p99 | errors | Zest ÷ target (calls/s) | processes, RSS |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	var cpuRows []string
	for _, conc := range concs {
		results := make([]result, len(targets))
		trees := make([]string, len(targets))
		zest := 0
		for i, t := range targets {
			if t.zest {
				zest = i
			}
			fs, closeAll, err := t.open(conc)
			if err != nil {
				return fmt.Errorf("%s: open %d sessions: %w", t.name, conc, err)
			}
			trees[i] = treeSummary(t.roots)
			obs := &cpuObserver{roots: t.roots}
			if t.zest {
				obs.profiles, obs.label, obs.window = s.profiles, fmt.Sprintf("federation-c%d", conc), dur
			}
			results[i] = runEach(warm, dur, fs, obs)
			closeAll()
			cpuRows = append(cpuRows, obs.row(t.name, conc, results[i].calls))
		}
		for i, t := range targets {
			r := results[i]
			ratio := "–"
			if i != zest && r.rate() > 0 {
				ratio = fmt.Sprintf("%.2f", results[zest].rate()/r.rate())
			}
			fmt.Printf("| %s | %d | %.0f | %s | %s | %d | %s | %s |\n", t.name, conc, r.rate(), ms(r.p50), ms(r.p99), r.errors, ratio, trees[i])
		}
	}
	fmt.Println()
	// Always: the CPU a call costs each process is half of what the federation compares.
	fmt.Println("CPU per call over each measured window (clock ticks of 10 ms, so a few µs of noise at")
	fmt.Println("concurrency 1); a process's children are a tool host's shim and server, a proxy's servers.")
	fmt.Println()
	fmt.Println("| target | concurrency | µs CPU per call, all | by process |")
	fmt.Println("|---|---|---|---|")
	fmt.Print(strings.Join(cpuRows, ""))
	fmt.Println()

	if os.Getenv("ZEST_BENCH_TARGETS") != "" {
		return nil // a chosen few targets: the A/B loop of a CPU cut, without the memory point
	}
	// 1,000 federated sessions held open: every service's RSS before and after.
	before := map[string]int{}
	for name, pid := range s.pids {
		before[name], _ = rssKB(pid)
	}
	const n = 1000
	_, closeAll, err := openSessions(zestURL, zestAuth, n, 8)
	if err != nil {
		return fmt.Errorf("1,000 sessions: %w", err)
	}
	time.Sleep(time.Second) // a measurement choice, not synchronization: let the last answers' memory settle
	fmt.Printf("1,000 open sessions on /mcp/servers/everything (initialize + notifications/initialized each): RSS before → after\n\n| service | before | after | added |\n|---|---|---|---|\n")
	total := 0
	for _, name := range []string{"zest-gateway", "zest-mcpgateway", "zest-inference", "zest-toolhost"} {
		after, _ := rssKB(s.pids[name])
		total += after - before[name]
		fmt.Printf("| %s | %.1f MB | %.1f MB | %+.1f MB |\n", name, float64(before[name])/1024, float64(after)/1024, float64(after-before[name])/1024)
	}
	fmt.Printf("| all | | | %+.1f MB (%.1f KB a session) |\n\n", float64(total)/1024, float64(total)/n)
	closeAll()
	return nil
}

// pickTargets keeps the targets whose name contains one of the comma-separated words of only
// (case-insensitive; "zest,mcp-go" keeps Zest and the mcp-go proxy), or all when only is empty.
func pickTargets(all []fedTarget, only string) []fedTarget {
	if only == "" {
		return all
	}
	var out []fedTarget
	for _, t := range all {
		for _, w := range strings.Split(only, ",") {
			if w = strings.TrimSpace(w); w != "" && strings.Contains(strings.ToLower(t.name), strings.ToLower(w)) {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// httpSessions opens n MCP sessions on url, each with its own load client (its own
// connection), and returns a call per session that checks the echo.
func httpSessions(url string, auth http.Header) func(n int) ([]func() error, func(), error) {
	return func(n int) ([]func() error, func(), error) {
		ids, closeAll, err := openSessions(url, auth, n, 8)
		if err != nil {
			return nil, nil, err
		}
		fs := make([]func() error, n)
		var lcs []*loadClient
		for i, id := range ids {
			h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
				"Mcp-Session-Id": {id.session}, "Mcp-Protocol-Version": {id.version}}
			for k, v := range auth {
				h[k] = v
			}
			lc, err := newLoadClient(url, h, fedCall)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			lcs = append(lcs, lc)
			fs[i] = func() error {
				code, b, err := lc.do()
				if err != nil {
					return err
				}
				if code != 200 || !bytes.Contains(b, []byte(`"result"`)) || !bytes.Contains(b, []byte(`Echo: bench`)) {
					return statusError(code, b)
				}
				return nil
			}
		}
		return fs, func() {
			for _, lc := range lcs {
				lc.close()
			}
			closeAll()
		}, nil
	}
}

type mcpSession struct{ session, version string }

var protocolVersionRE = regexp.MustCompile(`"protocolVersion"\s*:\s*"([^"]+)"`)

// openSessions initializes n sessions on url from `workers` goroutines and returns them with
// a func that DELETEs them.
func openSessions(url string, auth http.Header, n, workers int) ([]mcpSession, func(), error) {
	out := make([]mcpSession, n)
	errs := make(chan error, n)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				s, err := openSession(url, auth)
				if err != nil {
					errs <- err
					return
				}
				out[i] = s
			}
		}()
	}
	wg.Wait()
	closeAll := func() {
		var wg sync.WaitGroup
		ch := make(chan mcpSession, len(out))
		for _, s := range out {
			if s.session != "" {
				ch <- s
			}
		}
		close(ch)
		for range min(workers, n) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for s := range ch {
					resp, err := mcpRequest("DELETE", url, auth, s, "")
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body) // drained for the connection's reuse; not measured
						resp.Body.Close()
					}
				}
			}()
		}
		wg.Wait()
	}
	select {
	case err := <-errs:
		closeAll()
		return nil, nil, err
	default:
	}
	return out, closeAll, nil
}

// openSession is what an MCP client does first: initialize, then notifications/initialized.
func openSession(url string, auth http.Header) (mcpSession, error) {
	resp, err := mcpRequest("POST", url, auth, mcpSession{}, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	if err != nil {
		return mcpSession{}, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return mcpSession{}, err
	}
	s := mcpSession{session: resp.Header.Get("Mcp-Session-Id")}
	m := protocolVersionRE.FindSubmatch(b)
	if resp.StatusCode != 200 || s.session == "" || m == nil {
		return mcpSession{}, fmt.Errorf("initialize: %w", statusError(resp.StatusCode, b))
	}
	s.version = string(m[1])
	resp, err = mcpRequest("POST", url, auth, s, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if err != nil {
		return mcpSession{}, err
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return mcpSession{}, fmt.Errorf("notifications/initialized: %w", statusError(resp.StatusCode, b))
	}
	return s, nil
}

func mcpRequest(method, url string, auth http.Header, s mcpSession, body string) (*http.Response, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range auth {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.session != "" {
		req.Header.Set("Mcp-Session-Id", s.session)
		req.Header.Set("Mcp-Protocol-Version", s.version)
	}
	return httpClient.Do(req)
}

// peerProcess is a proxy the bench started in its own process group, listening on a socket
// the bench handed over.
type peerProcess struct {
	cmd *exec.Cmd
	url string
}

func (p *peerProcess) pid() int { return p.cmd.Process.Pid }

// stop ends the process group (the proxy and the servers it spawned) by the proxy's PID.
func (p *peerProcess) stop() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// startNodePeer starts a Node proxy from the peers directory with scripts/peers/loopback.mjs
// preloaded, which makes it listen on the handed-over socket (fd 3) on loopback.
func startNodePeer(peers, script string, args ...string) (*peerProcess, error) {
	sock, err := reserve()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("node", append([]string{"--import", "./loopback.mjs", script}, args...)...)
	cmd.Dir = filepath.Dir(peers) // scripts/peers
	cmd.Env = append(os.Environ(), "ZEST_LISTEN_FD=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := startWith(cmd, sock); err != nil {
		return nil, err
	}
	return &peerProcess{cmd: cmd, url: "http://" + sock.addr + "/mcp"}, nil
}

// startMCPGoProxy runs this binary again as the mcp-go proxy (mcpgoproxy.go).
func startMCPGoProxy(entry string) (*peerProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	sock, err := reserve()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "ZEST_BENCH_ROLE="+mcpgoProxyRole, "ZEST_BENCH_ENTRY="+entry)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := startWith(cmd, sock); err != nil {
		return nil, err
	}
	return &peerProcess{cmd: cmd, url: "http://" + sock.addr + "/mcp"}, nil
}

// procChildren maps every process to its children.
func procChildren() map[int][]int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], pid)
	}
	return children
}

// processTree returns root and then its descendants.
func processTree(children map[int][]int, root int) []int {
	out := []int{root}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// treeSummary counts the processes under roots and sums their RSS.
func treeSummary(roots map[string]int) string {
	children := procChildren()
	procs, kb := 0, 0
	for _, root := range roots {
		for _, pid := range processTree(children, root) {
			if rss, _ := rssKB(pid); rss > 0 {
				procs++
				kb += rss
			}
		}
	}
	return fmt.Sprintf("%d, %d MB", procs, kb/1024)
}
