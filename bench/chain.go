package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// suite is the four Zest binaries on free loopback ports.
type suite struct {
	url            string
	mcpgatewayAddr string
	procs          []*exec.Cmd
	pids           map[string]int
	profiles       map[string]string // process name → pprof address, with ZEST_BENCH_PROFILE
}

// freePort returns a loopback address for a diagnostic server the bench does not start itself
// (the profiler): the port is free when looked up, which is enough for an opt-in diagnosis.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// socket is a listening socket the bench opens and hands to the service that listens on its
// address (socket activation, see lib/listen), so no port is closed and looked up again.
type socket struct {
	addr string
	f    *os.File
}

func reserve() (socket, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return socket{}, err
	}
	defer l.Close()
	f, err := l.(*net.TCPListener).File()
	return socket{addr: l.Addr().String(), f: f}, err
}

// startWith starts cmd with sock as its listening socket; the service owns it afterwards.
func startWith(cmd *exec.Cmd, sock socket) error {
	cmd.ExtraFiles = []*os.File{sock.f}
	cmd.Env = append(cmd.Env[:len(cmd.Env):len(cmd.Env)], "LISTEN_FDS=1")
	err := cmd.Start()
	sock.f.Close()
	return err
}

func startSuite(binDir string, extraEnv ...string) (*suite, error) {
	dataDir, err := os.MkdirTemp("", "zest-bench-data")
	if err != nil {
		return nil, err
	}
	addrs := map[string]string{}
	socks := map[string]socket{}
	for _, k := range []string{"ZEST_EDGE_ADDR", "ZEST_INFERENCE_ADDR", "ZEST_MCPGATEWAY_ADDR", "ZEST_TOOLHOST_ADDR"} {
		if socks[k], err = reserve(); err != nil {
			return nil, err
		}
		addrs[k] = socks[k].addr
	}
	listens := map[string]string{"zest-inference": "ZEST_INFERENCE_ADDR", "zest-toolhost": "ZEST_TOOLHOST_ADDR",
		"zest-mcpgateway": "ZEST_MCPGATEWAY_ADDR", "zest-gateway": "ZEST_EDGE_ADDR"}
	env := append(os.Environ(), "ZEST_DATA_DIR="+dataDir, "ZEST_LOG_LEVEL=warn", "LEMONADE_API_KEY=", "ZEST_SERVICE_KEY="+serviceKey)
	for k, v := range addrs {
		env = append(env, k+"="+v)
	}
	env = append(env, extraEnv...)
	s := &suite{url: "http://" + addrs["ZEST_EDGE_ADDR"], mcpgatewayAddr: addrs["ZEST_MCPGATEWAY_ADDR"], pids: map[string]int{}, profiles: map[string]string{}}
	for _, name := range []string{"zest-inference", "zest-toolhost", "zest-mcpgateway", "zest-gateway"} {
		cmd := exec.Command(filepath.Join(binDir, name))
		cmd.Env = env
		if os.Getenv("ZEST_BENCH_PROFILE") != "" {
			addr, err := freePort()
			if err != nil {
				return nil, err
			}
			s.profiles[name] = addr
			cmd.Env = append(env[:len(env):len(env)], "ZEST_PPROF_ADDR="+addr)
		}
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the bench
		if err := startWith(cmd, socks[listens[name]]); err != nil {
			s.stop()
			return nil, err
		}
		s.procs = append(s.procs, cmd)
		s.pids[name] = cmd.Process.Pid
	}
	apiKey := "" // the health check needs the API key when the suite has one
	for _, kv := range extraEnv {
		if v, ok := strings.CutPrefix(kv, "LEMONADE_API_KEY="); ok {
			apiKey = v
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		req, _ := http.NewRequest("GET", s.url+"/api/v1/health", nil)
		if apiKey != "" {
			req.Header.Set("Authorization", "Bearer "+apiKey)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("suite not healthy: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *suite) stop() { stopProcs(s.procs) }

// stopProcs interrupts every process, then waits for each, killing one that has not exited
// 15 s later.
func stopProcs(procs []*exec.Cmd) {
	for _, p := range procs {
		p.Process.Signal(os.Interrupt)
	}
	for _, p := range procs {
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			p.Process.Kill()
			<-done
		}
	}
}

// httpClient keeps enough idle connections for concurrency 64.
var httpClient = &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}, Timeout: 60 * time.Second}

func post(url, auth, body string) ([]byte, error) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return b, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return b, nil
}

// benchChain measures an external tool called through the whole chain: HTTP edge →
// mcpgateway → tool host → child.
func benchChain(binDir, peers string, warm, dur time.Duration) error {
	const key = "bench-admin-key"
	s, err := startSuite(binDir, append([]string{"LEMONADE_ADMIN_API_KEY=" + key}, strings.Fields(os.Getenv("ZEST_BENCH_ENV"))...)...)
	if err != nil {
		return err
	}
	defer s.stop()
	entry, _ := filepath.Abs(filepath.Join(peers, "@modelcontextprotocol", "server-everything", "dist", "index.js"))
	cfg := fmt.Sprintf(`{"id":"everything","command":"node","args":[%q]}`, entry)
	if _, err := post(s.url+"/internal/mcp/servers", key, cfg); err != nil {
		return fmt.Errorf("upsert: %w", err)
	}
	if _, err := post(s.url+"/internal/mcp/servers/everything/connect", key, ""); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	lc, err := newLoadClient(s.url+"/internal/mcp/servers/everything/tools/call",
		http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + key}},
		`{"name":"echo","arguments":{"message":"bench"}}`)
	if err != nil {
		return err
	}
	defer lc.close()
	call := func() error {
		code, b, err := lc.do()
		if err != nil {
			return err
		}
		if code != 200 || !bytes.Contains(b, []byte(`"text":"Echo: bench"`)) {
			return statusError(code, b)
		}
		return nil
	}
	fmt.Println("### chain: `echo` on server-everything through HTTP edge → mcpgateway → toolhost → child")
	fmt.Println()
	fmt.Println("`POST /internal/mcp/servers/everything/tools/call` with keep-alive connections.")
	fmt.Println()
	fmt.Println("| concurrency | calls/s | p50 | p99 | errors | RSS edge / mcpgateway / toolhost |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, conc := range []int{1, 8, 64} {
		obs := &cpuObserver{roots: s.pids, profiles: s.profiles, label: fmt.Sprintf("chain-c%d", conc), window: dur}
		r := runObserved(conc, warm, dur, call, obs)
		obs.report(conc, r.calls)
		e, _ := rssKB(s.pids["zest-gateway"])
		m, _ := rssKB(s.pids["zest-mcpgateway"])
		t, _ := rssKB(s.pids["zest-toolhost"])
		fmt.Printf("| %d | %.0f | %s | %s | %d | %d / %d / %d MB |\n", conc, r.rate(), ms(r.p50), ms(r.p99), r.errors, e/1024, m/1024, t/1024)
	}
	fmt.Println()
	return nil
}

// startProfiles starts a CPU profile of this process and asks every service's profiler for one;
// the returned func stops them and waits until all are written. A service profiles for window
// (whole seconds, at least one), which should end with the caller's measured window.
func startProfiles(dir, label string, addrs map[string]string, window time.Duration) func() {
	seconds := max(1, int((window+time.Second-1)/time.Second))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "profiles: %v\n", err)
	}
	f, err := os.Create(filepath.Join(dir, label+"-bench.prof"))
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "profile bench: %v\n", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for name, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The server profiles until its seconds pass or the request is cancelled; cancelling
			// loses the profile, so ask for a window that ends with ours and wait for it.
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/debug/pprof/profile?seconds="+strconv.Itoa(seconds), nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				fmt.Fprintf(os.Stderr, "profile %s: %v\n", name, err)
				return
			}
			defer resp.Body.Close()
			out, err := os.Create(filepath.Join(dir, label+"-"+name+".prof"))
			if err != nil {
				fmt.Fprintf(os.Stderr, "profile %s: %v\n", name, err)
				return
			}
			defer out.Close()
			if _, err := io.Copy(out, resp.Body); err != nil {
				fmt.Fprintf(os.Stderr, "profile %s: %v\n", name, err)
			}
		}()
	}
	return func() {
		if f != nil {
			pprof.StopCPUProfile()
			f.Close()
		}
		wg.Wait()
		cancel()
	}
}
