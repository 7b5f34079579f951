package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/zestmcp/zest/lib/etcdtest"
)

// The scale scenario: the same calls through a topology of 1 of each service (bbolt, then
// etcd) and of 2 of each (on etcd), on this machine's cores. On 2 cores a second replica
// cannot add throughput (every process competes for the same cores); the figures show what
// the hops and the registry cost, and docs/operator/scale-out.md models bigger machines from them.

// benchTB is the etcdtest.TB of a program: a failure ends the bench.
type benchTB struct {
	cleanups []func()
	dirs     []string
	failed   bool
}

func (b *benchTB) Helper()           {}
func (b *benchTB) Fatal(args ...any) { b.failed = true; panic(fmt.Sprint(args...)) }
func (b *benchTB) Fatalf(format string, args ...any) {
	b.failed = true
	panic(fmt.Sprintf(format, args...))
}
func (b *benchTB) Skipf(format string, args ...any) { b.Fatalf(format, args...) }
func (b *benchTB) Logf(format string, args ...any)  { fmt.Fprintf(os.Stderr, format+"\n", args...) }
func (b *benchTB) Cleanup(f func())                 { b.cleanups = append(b.cleanups, f) }
func (b *benchTB) Failed() bool                     { return b.failed }
func (b *benchTB) TempDir() string {
	d, err := os.MkdirTemp("", "zest-bench-etcd")
	if err != nil {
		b.Fatal(err)
	}
	b.dirs = append(b.dirs, d)
	return d
}

// close runs the cleanups, last first, and removes the directories.
func (b *benchTB) close() {
	for i := len(b.cleanups) - 1; i >= 0; i-- {
		b.cleanups[i]()
	}
	for _, d := range b.dirs {
		os.RemoveAll(d)
	}
}

// topology is n of each service on loopback, over bbolt (n == 1, etcd == false) or etcd.
type topology struct {
	edges []string
	pids  map[string]int
	procs []*exec.Cmd
	tb    *benchTB
}

func startTopology(binDir string, n int, etcd bool, key string) (top *topology, err error) {
	top = &topology{pids: map[string]int{}, tb: &benchTB{}}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
		if err != nil {
			top.stop()
		}
	}()
	env := append(os.Environ(), "ZEST_LOG_LEVEL=warn", "LEMONADE_API_KEY=", "LEMONADE_ADMIN_API_KEY="+key,
		"ZEST_SERVICE_KEY="+serviceKey, "ZEST_SESSION_KEY=qrvKk0m7sHq1kVQ1n3m8p0Wb7cJ2xN4yT6uE9aZ5dLw")
	if etcd {
		c := etcdtest.Start(top.tb, 3)
		env = append(env, "ZEST_REGISTRY=etcd://"+strings.Join(c.Endpoints(), ",")+"/bench")
		for i := range 3 {
			top.pids[fmt.Sprintf("etcd-%d", i)] = c.PID(i)
		}
	}
	socks := map[string][]socket{}
	addrs := map[string][]string{}
	for _, v := range []string{"ZEST_EDGE_ADDR", "ZEST_INFERENCE_ADDR", "ZEST_MCPGATEWAY_ADDR", "ZEST_TOOLHOST_ADDR"} {
		for range n {
			s, err := reserve()
			if err != nil {
				return top, err
			}
			socks[v] = append(socks[v], s)
			addrs[v] = append(addrs[v], s.addr)
		}
		env = append(env, v+"="+strings.Join(addrs[v], ","))
	}
	start := func(name, listen string, i int, extra ...string) error {
		cmd := exec.Command(filepath.Join(binDir, name))
		cmd.Env = append(append(env[:len(env):len(env)], listen+"="+addrs[listen][i]), extra...)
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := startWith(cmd, socks[listen][i]); err != nil {
			return err
		}
		top.procs = append(top.procs, cmd)
		top.pids[fmt.Sprintf("%s-%d", name, i)] = cmd.Process.Pid
		return nil
	}
	for i := range n {
		dataDir := top.tb.TempDir()
		for _, s := range []struct {
			name, listen string
			extra        []string
		}{{"zest-inference", "ZEST_INFERENCE_ADDR", nil},
			{"zest-toolhost", "ZEST_TOOLHOST_ADDR", []string{fmt.Sprintf("ZEST_TOOLHOST_NAME=th-%d", i)}},
			{"zest-mcpgateway", "ZEST_MCPGATEWAY_ADDR", []string{"ZEST_DATA_DIR=" + dataDir}},
			{"zest-gateway", "ZEST_EDGE_ADDR", nil}} {
			if err := start(s.name, s.listen, i, s.extra...); err != nil {
				return top, err
			}
		}
		top.edges = append(top.edges, "http://"+addrs["ZEST_EDGE_ADDR"][i])
	}
	for _, u := range top.edges {
		if err := waitHealthy(u); err != nil {
			return top, err
		}
	}
	return top, nil
}

func waitHealthy(url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/api/v1/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
			err = fmt.Errorf("health %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (top *topology) stop() {
	stopProcs(top.procs)
	top.tb.close()
}

// benchScale measures admin tool calls and session-era federated tool calls through 1 and 2
// of each service.
func benchScale(binDir, peers string, warm, dur time.Duration) error {
	const key = "bench-admin-key"
	entry, _ := filepath.Abs(filepath.Join(peers, "@modelcontextprotocol", "server-everything", "dist", "index.js"))
	fmt.Println("### scale: 1 and 2 of each service on the same cores")
	fmt.Println()
	fmt.Println("`echo` on server-everything: `POST /internal/mcp/servers/everything/tools/call` (admin) and")
	fmt.Println("`tools/call` in a 2025-11-25 session of `/mcp/servers/everything` (federated; each request")
	fmt.Println("checks that its session was not ended: a registry read). The load spreads over the edges.")
	fmt.Println()
	fmt.Println("| topology | path | concurrency | calls/s | p50 | p99 | errors |")
	fmt.Println("|---|---|---|---|---|---|---|")
	var cpu []string
	for _, c := range []struct {
		label string
		n     int
		etcd  bool
	}{{"1 of each, bbolt", 1, false}, {"1 of each, etcd ×3", 1, true}, {"2 of each, etcd ×3", 2, true}} {
		top, err := startTopology(binDir, c.n, c.etcd, key)
		if err != nil {
			return fmt.Errorf("%s: %w", c.label, err)
		}
		if err := scaleRows(top, c.label, entry, key, warm, dur, &cpu); err != nil {
			top.stop()
			return fmt.Errorf("%s: %w", c.label, err)
		}
		top.stop()
	}
	fmt.Println()
	fmt.Println("CPU per call (µs, from /proc over the measured window; a process's children are its shims and servers):")
	fmt.Println()
	fmt.Println("| topology, path | concurrency | all | per process |")
	fmt.Println("|---|---|---|---|")
	for _, row := range cpu {
		fmt.Print(row)
	}
	fmt.Println()
	return nil
}

func scaleRows(top *topology, label, entry, key string, warm, dur time.Duration, cpu *[]string) error {
	cfg := fmt.Sprintf(`{"id":"everything","command":"node","args":[%q]}`, entry)
	if _, err := post(top.edges[0]+"/internal/mcp/servers", key, cfg); err != nil {
		return fmt.Errorf("upsert: %w", err)
	}
	for _, u := range top.edges {
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := post(u+"/internal/mcp/servers/everything/connect", key, "")
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("connect via %s: %w", u, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	auth := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + key}}
	for _, conc := range []int{8, 64} {
		// Admin: one load client per edge, goroutine i on edge i mod n.
		var clients []*loadClient
		for _, u := range top.edges {
			lc, err := newLoadClient(u+"/internal/mcp/servers/everything/tools/call", auth, `{"name":"echo","arguments":{"message":"bench"}}`)
			if err != nil {
				return err
			}
			clients = append(clients, lc)
		}
		fs := make([]func() error, conc)
		for i := range fs {
			lc := clients[i%len(clients)]
			fs[i] = func() error {
				code, b, err := lc.do()
				if err != nil {
					return err
				}
				if code != 200 || !bytes.Contains(b, []byte(`"text":"Echo: bench"`)) {
					return statusError(code, b)
				}
				return nil
			}
		}
		obs := &cpuObserver{roots: top.pids}
		r := runEach(warm, dur, fs, obs)
		*cpu = append(*cpu, obs.row(label+", admin", conc, r.calls))
		for _, lc := range clients {
			lc.close()
		}
		fmt.Printf("| %s | admin | %d | %.0f | %s | %s | %d |\n", label, conc, r.rate(), ms(r.p50), ms(r.p99), r.errors)

		// Federated: one session per goroutine, opened through its edge.
		fs = make([]func() error, conc)
		var closers []func()
		for i := range fs {
			url := top.edges[i%len(top.edges)] + "/mcp/servers/everything"
			s, err := openSession(url, http.Header{"Authorization": {"Bearer " + key}})
			if err != nil {
				return err
			}
			h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
				"Authorization": {"Bearer " + key}, "Mcp-Session-Id": {s.session}, "Mcp-Protocol-Version": {s.version}}
			lc, err := newLoadClient(url, h, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"bench"}}}`)
			if err != nil {
				return err
			}
			closers = append(closers, lc.close)
			fs[i] = func() error {
				code, b, err := lc.do()
				if err != nil {
					return err
				}
				if code != 200 || !bytes.Contains(b, []byte(`Echo: bench`)) {
					return statusError(code, b)
				}
				return nil
			}
		}
		obs = &cpuObserver{roots: top.pids}
		r = runEach(warm, dur, fs, obs)
		*cpu = append(*cpu, obs.row(label+", federated", conc, r.calls))
		for _, c := range closers {
			c()
		}
		fmt.Printf("| %s | federated | %d | %.0f | %s | %s | %d |\n", label, conc, r.rate(), ms(r.p50), ms(r.p99), r.errors)
	}
	return nil
}
