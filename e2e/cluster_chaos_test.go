package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/etcdtest"
	"github.com/zestmcp/zest/lib/waitfor"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// The chaos test runs the topology of a deployment past one machine on loopback — a 3-member
// etcd, 2 edges, 2 mcpgateways on it, 2 tool hosts, 2 inference nodes — under a steady load of
// tool calls (admin, federated with and without a session, chat) and registry writes, and
// SIGKILLs one process of each kind in turn, then one etcd member. It checks that no
// acknowledged write is lost, no session is lost, a call fails only when it was in flight on
// the process that died, no child is orphaned, and every replica ends with the same catalog.
// `make chaos` runs it CHAOS_RUNS times in a row (the closing figures of issue 16).

// topology is the running processes of the chaos test.
type topology struct {
	t         *testing.T
	etcd      *etcdtest.Cluster
	inference []*service
	toolhosts []*service
	gateways  []*service
	edges     []*service
	urls      []string // the edges
	mgAddrs   []string // the mcpgateways' gRPC addresses
	thNames   []string
	marker    string // an argument only this test's stdio children carry (found in /proc)
	peers     string
}

func startTopology(t *testing.T) *topology {
	t.Helper()
	top := &topology{t: t, etcd: etcdtest.Start(t, 3), peers: peersDir(t)}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	top.marker = "--zest-chaos-" + hex.EncodeToString(b)
	var inf, th, mg, edge []string
	for range 2 {
		inf, th, mg, edge = append(inf, freeAddr(t)), append(th, freeAddr(t)), append(mg, freeAddr(t)), append(edge, freeAddr(t))
	}
	top.mgAddrs = mg
	base := append(os.Environ(), "ZEST_LOG_LEVEL=warn", "LEMONADE_API_KEY=", "LEMONADE_ADMIN_API_KEY="+adminKey,
		"LEMONADE_ALLOWED_ORIGINS=", "ZEST_SERVICE_KEY="+serviceKey, "ZEST_SESSION_KEY="+replicaSessionKey,
		"ZEST_REGISTRY=etcd://"+strings.Join(top.etcd.Endpoints(), ","),
		"ZEST_INFERENCE_ADDR="+strings.Join(inf, ","), "ZEST_TOOLHOST_ADDR="+strings.Join(th, ","),
		"ZEST_MCPGATEWAY_ADDR="+strings.Join(mg, ","))
	with := func(extra ...string) []string { return append(slices.Clone(base), extra...) }
	for i := range 2 {
		top.inference = append(top.inference, runService(t, "zest-inference", with("ZEST_INFERENCE_ADDR="+inf[i])))
		name := "th-" + string(rune('a'+i))
		top.thNames = append(top.thNames, name)
		top.toolhosts = append(top.toolhosts, runService(t, "zest-toolhost", with("ZEST_TOOLHOST_ADDR="+th[i], "ZEST_TOOLHOST_NAME="+name)))
	}
	for i := range 2 {
		// Tool hosts checked every 100 ms; info logs tell when a tool host is seen up.
		top.gateways = append(top.gateways, runService(t, "zest-mcpgateway", with("ZEST_MCPGATEWAY_ADDR="+mg[i],
			"ZEST_DATA_DIR="+filepath.Join(t.TempDir(), "data"), "ZEST_TOOLHOST_HEALTH_EVERY=100ms", "ZEST_LOG_LEVEL=info")))
		top.edges = append(top.edges, runService(t, "zest-gateway", with("ZEST_EDGE_ADDR="+edge[i])))
		top.urls = append(top.urls, "http://"+edge[i])
	}
	for _, u := range top.urls {
		waitfor.NoError(t, 30*time.Second, func() error {
			_, err := getOK(u + "/api/v1/health")
			return err
		})
	}
	// Every mcpgateway has seen both tool hosts: a server placed now stays where it is.
	for i, g := range top.gateways {
		waitfor.NoError(t, 10*time.Second, func() error {
			for _, name := range top.thNames {
				if !strings.Contains(g.p.logs.String(), "name="+name) {
					return fmt.Errorf("mcpgateway %d has not seen tool host %s", i, name)
				}
			}
			return nil
		})
	}
	return top
}

// call is one request of the load and how it ended.
type call struct {
	op, text   string
	start, end time.Time
	err        error
}

// requestID is the X-Request-Id header of the call whose text is text.
func requestID(text string) string { return "X-Request-Id: chaos-" + text }

// load drives the steady traffic and records every call.
type load struct {
	top    *topology
	client *http.Client
	mu     sync.Mutex
	calls  []call
	acked  []string // presets whose creation was acknowledged (200)
	sess   map[string]string
}

// post sends body to path on the first edge that takes the connection, starting at edge
// first: a connection refused (nothing sent) goes to the other edge, as a load balancer in
// front of the edges does. Any other failure is the call's.
func (l *load) post(first int, path, body string, headers ...string) (int, http.Header, []byte, error) {
	var last error
	for k := range len(l.top.urls) {
		u := l.top.urls[(first+k)%len(l.top.urls)]
		req, _ := http.NewRequest("POST", u+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for _, h := range headers {
			name, val, _ := strings.Cut(h, ": ")
			req.Header.Set(name, val)
		}
		resp, err := l.client.Do(req)
		if err != nil {
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" {
				last = err
				continue
			}
			return 0, nil, nil, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header, b, err
	}
	return 0, nil, nil, last
}

// chaosOps are the kinds of call of the load.
var chaosOps = []string{"admin", "federated", "session", "chat", "write"}

// chaosCalls is how many calls of each kind must succeed before the first kill, and after each
// restart before the next; chaosDowntime is how long a killed process stays down.
const (
	chaosCalls    = 10
	chaosDowntime = 3 * time.Second
)

// succeeded says which kinds of call have not succeeded n times among those begun after since.
func (l *load) succeeded(since time.Time, n int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	ok := map[string]int{}
	for _, c := range l.calls {
		if c.err == nil && c.start.After(since) {
			ok[c.op]++
		}
	}
	var short []string
	for _, op := range chaosOps {
		if ok[op] < n {
			short = append(short, fmt.Sprintf("%s %d", op, ok[op]))
		}
	}
	if len(short) > 0 {
		return fmt.Errorf("calls succeeded since %s, fewer than %d: %s", since.Format("15:04:05.000"), n, strings.Join(short, ", "))
	}
	return nil
}

func (l *load) record(op, text string, start time.Time, err error) {
	l.mu.Lock()
	l.calls = append(l.calls, call{op: op, text: text, start: start, end: time.Now(), err: err})
	l.mu.Unlock()
}

// expect checks an answer: status 200 and want in the body.
func expectAnswer(code int, body []byte, err error, want string) error {
	switch {
	case err != nil:
		return err
	case code != 200:
		return fmt.Errorf("status %d: %.300s", code, body)
	case !bytes.Contains(body, []byte(want)):
		return fmt.Errorf("answer without %q: %.300s", want, body)
	}
	return nil
}

// The operations of the load; each names its edge (i alternates) and a unique text, which
// is also its request id (requestID): the services' logs name a call by it.
func (l *load) adminCall(i int, text string) error {
	code, _, b, err := l.post(i, "/internal/mcp/servers/echo/tools/call", `{"name":"echo","arguments":{"text":"`+text+`"}}`, adminAuth, requestID(text))
	return expectAnswer(code, b, err, text)
}

func (l *load) federated(i int, text string) error {
	params, _ := json.Marshal(map[string]any{"name": "echo", "arguments": map[string]any{"text": text},
		"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "chaos", "version": "1"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{}}})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + string(params) + `}`
	code, _, b, err := l.post(i, "/mcp/servers/echo", body, "Accept: application/json, text/event-stream",
		"MCP-Protocol-Version: 2026-07-28", "Mcp-Method: tools/call", "Mcp-Name: echo", requestID(text))
	if err == nil && bytes.Contains(b, []byte(`"error"`)) {
		return fmt.Errorf("JSON-RPC error: %.300s", b)
	}
	return expectAnswer(code, b, err, text)
}

func (l *load) inSession(i int, text string) error {
	l.mu.Lock()
	session := l.sess["echo"]
	l.mu.Unlock()
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + text + `"}}}`
	code, _, b, err := l.post(i, "/mcp/servers/echo", body, "Accept: application/json, text/event-stream", "Mcp-Session-Id: "+session, requestID(text))
	if err == nil && bytes.Contains(b, []byte(`"error"`)) {
		return fmt.Errorf("JSON-RPC error: %.300s", b)
	}
	return expectAnswer(code, b, err, text)
}

func (l *load) chat(i int, text string) error {
	body := `{"model":"builtin-llm","mcp_server_ids":["echo"],"tool_choice":{"type":"function","function":{"name":"mcp_echo__echo"}},` +
		`"messages":[{"role":"user","content":"{\"text\":\"` + text + `\"}"}]}`
	code, _, b, err := l.post(i, "/api/v1/chat/completions", body, requestID(text))
	return expectAnswer(code, b, err, "The tool returned: "+text)
}

// write creates one preset: an acknowledged write must be there at the end.
func (l *load) write(i int, text string) error {
	id := "w-" + text
	code, _, b, err := l.post(i, "/internal/mcp/presets", `{"id":"`+id+`","mcp_server_ids":["echo"]}`, adminAuth, requestID(text))
	if err := expectAnswer(code, b, err, id); err != nil {
		return err
	}
	l.mu.Lock()
	l.acked = append(l.acked, id)
	l.mu.Unlock()
	return nil
}

// run runs op in a loop until ctx is done.
func (l *load) run(ctx context.Context, wg *sync.WaitGroup, name string, op func(i int, text string) error) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ctx.Err() == nil; n++ {
			start := time.Now()
			text := name + "-" + strconv.Itoa(n)
			err := op(n%2, text)
			if ctx.Err() != nil && err != nil {
				return // the test stopped the load; this call does not count
			}
			l.record(name, text, start, err)
		}
	}()
}

// openSession opens a session-era session of /mcp/servers/echo.
func (l *load) openSession(t *testing.T) {
	t.Helper()
	code, h, b, err := l.post(0, "/mcp/servers/echo", fmt.Sprintf(initBody, "2025-11-25"), "Accept: application/json, text/event-stream")
	if err != nil || code != 200 || h.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %d %v %s", code, err, b)
	}
	session := h.Get("Mcp-Session-Id")
	if code, _, b, err := l.post(0, "/mcp/servers/echo", `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		"Accept: application/json, text/event-stream", "Mcp-Session-Id: "+session); err != nil || code != 202 {
		t.Fatalf("initialized: %d %v %s", code, err, b)
	}
	l.sess = map[string]string{"echo": session}
}

// kill is one SIGKILL of the test: what, its address (empty for an etcd member), when the
// signal went, when the process was reaped (a call that began before then may have reached
// it), and when it was started again.
type kill struct {
	what, addr          string
	at, dead, restarted time.Time
}

// deathNoticed bounds how long after a replica was reaped a caller may still send it a call.
// Its kernel closes its connections at once, but the caller's gRPC reader sees the close only
// when it next runs: tens of milliseconds on this loaded machine, during which a call sent on
// that connection fails (lib/grpcdial.LogUnavailable logs it with the replica's address). A
// call sent to it later than this would mean callers do not notice closed connections.
const deathNoticed = time.Second

// TestChaos: see the top of this file.
func TestChaos(t *testing.T) {
	top := startTopology(t)
	cfg := map[string]any{"id": "echo", "command": "node", "args": []string{filepath.Join(top.peers, "echo-server.mjs"), top.marker}}
	l := &load{top: top, client: &http.Client{Timeout: 30 * time.Second}}
	if code, _, b, err := l.post(0, "/internal/mcp/servers", jsonBody(t, cfg), adminAuth); err != nil || code != 200 {
		t.Fatalf("register: %d %v %s", code, err, b)
	}
	if code, _, b, err := l.post(0, "/internal/mcp/servers/echo/connect", "", adminAuth); err != nil || code != 200 {
		t.Fatalf("connect: %d %v %s", code, err, b)
	}
	// Registered through edge 0: callable through edge 1 (the other mcpgateway) at once.
	for i := range 2 {
		waitfor.NoError(t, 5*time.Second, func() error { return l.adminCall(i, "warm") })
	}
	l.openSession(t)

	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	l.run(ctx, &wg, "admin", l.adminCall)
	l.run(ctx, &wg, "federated", l.federated)
	l.run(ctx, &wg, "session", l.inSession)
	l.run(ctx, &wg, "chat", l.chat)
	l.run(ctx, &wg, "write", l.write)

	var kills []kill
	// underLoad waits until every kind of call has succeeded chaosCalls times among those
	// begun after since: the load is under way (at the start), and back with a killed
	// process restarted.
	underLoad := func(since time.Time) {
		t.Helper()
		waitfor.NoError(t, 30*time.Second, func() error { return l.succeeded(since, chaosCalls) })
	}
	// down keeps a killed process down for chaosDowntime: a sleep kept on purpose, for the
	// downtime is the scenario (the survivors carry the load, the clients' backoff grows).
	down := func() { time.Sleep(chaosDowntime) }
	underLoad(time.Time{})
	restart := func(what string, s *service) {
		k := kill{what: what, addr: envOf(s.env, listenVars[s.name]), at: time.Now()}
		s.p.signal(syscall.SIGKILL)
		<-s.p.done
		k.dead = time.Now()
		down()
		s.start()
		k.restarted = time.Now()
		kills = append(kills, k)
		// Whole again before the next kill: the process serves, and the load with it. A
		// restart that exits, or does not serve in time, says why with its log (a stress run
		// once waited 30 s on "connection refused" with nothing else to read).
		waitfor.NoError(t, 30*time.Second, func() error {
			if !s.p.running() {
				return waitfor.Stop(fmt.Errorf("%s exited after its restart:\n%s", what, s.p.logs.String()))
			}
			if err := s.serving(); err != nil {
				return fmt.Errorf("%s, restarted, does not serve: %w\nits log so far:\n%s", what, err, s.p.logs.String())
			}
			return nil
		})
		underLoad(k.restarted)
	}
	restart("edge 0", top.edges[0])
	restart("mcpgateway 1", top.gateways[1])
	host := top.placement(t, "echo")
	restart("tool host "+top.thNames[host]+" (echo's)", top.toolhosts[host])
	top.checkOrphans(t)
	restart("inference 0", top.inference[0])
	// The etcd member that leads: the worst one to lose (an election before the next write).
	leader := top.etcd.Leader()
	if leader < 0 {
		t.Fatal("no etcd member leads")
	}
	k := kill{what: fmt.Sprintf("etcd member %d (the leader)", leader), at: time.Now()}
	top.etcd.Kill(leader)
	k.dead = time.Now()
	down()
	top.etcd.Restart(leader)
	k.restarted = time.Now()
	kills = append(kills, k)
	underLoad(k.restarted)
	stop()
	wg.Wait()

	l.report(t, kills)
	top.checkRegistry(t, l.acked)
	// The session opened before the first kill still works through both edges.
	for i := range 2 {
		if err := l.inSession(i, "after"); err != nil {
			t.Errorf("the session opened at the start, through edge %d after the chaos: %v", i, err)
		}
	}
	top.checkCatalogs(t)
	top.checkOrphans(t)
	// Stopped, the tool hosts leave no child behind.
	for _, s := range top.toolhosts {
		s.stop(syscall.SIGTERM)
	}
	waitfor.NoError(t, 10*time.Second, func() error {
		if left := markedProcs(top.marker); len(left) > 0 {
			return fmt.Errorf("processes %v outlived their tool hosts", left)
		}
		return nil
	})
}

// report logs the figures and fails for a call that failed without being in flight when a
// process was killed (begun before the process was reaped, ended after the signal) or sent to
// it before its caller saw it die (sentToDead).
func (l *load) report(t *testing.T, kills []kill) {
	t.Helper()
	var logs []string
	for _, s := range append(slices.Clone(l.top.edges), l.top.gateways...) {
		logs = append(logs, s.p.logs.String())
	}
	byOp := map[string][2]int{}
	failedAt, lateAt := make([]int, len(kills)), make([]int, len(kills))
	var stray []call
	for _, c := range l.calls {
		n := byOp[c.op]
		n[0]++
		if c.err != nil {
			n[1]++
			inFlight := false
			for i, k := range kills {
				during := !c.start.After(k.dead) && !c.end.Before(k.at)
				if during || sentToDead(c, k, logs) {
					inFlight = true
					failedAt[i]++
					if !during {
						lateAt[i]++
					}
				}
			}
			if !inFlight {
				stray = append(stray, c)
			}
		}
		byOp[c.op] = n
	}
	ops := make([]string, 0, len(byOp))
	for op := range byOp {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		t.Logf("chaos: %-9s %5d calls, %d failed", op, byOp[op][0], byOp[op][1])
	}
	for i, k := range kills {
		// Recovery: from the kill to the first call of each op that began after it and succeeded.
		var worst time.Duration
		for _, op := range ops {
			first := time.Duration(-1)
			for _, c := range l.calls {
				if c.op == op && c.err == nil && c.start.After(k.at) {
					first = c.end.Sub(k.at)
					break
				}
			}
			worst = max(worst, first)
		}
		t.Logf("chaos: killed %s at %s: %d calls in flight failed (%d sent after it was reaped, before its caller saw it); every kind of call succeeded again %v after the kill, restarted %v after it",
			k.what, k.at.Format("15:04:05.000"), failedAt[i], lateAt[i], worst.Round(time.Millisecond), k.restarted.Sub(k.at).Round(time.Millisecond))
	}
	for _, c := range stray {
		// The cause of an incident is in the log of the mcpgateway that answered.
		if _, rest, ok := strings.Cut(c.err.Error(), "incident "); ok && len(rest) >= 16 {
			for i, g := range l.top.gateways {
				for _, line := range strings.Split(g.p.logs.String(), "\n") {
					if strings.Contains(line, rest[:16]) {
						t.Logf("mcpgateway %d: %s", i, line)
					}
				}
			}
		}
		t.Errorf("chaos: %s call %s–%s failed, in flight on no killed process nor sent to one: %v", c.op, c.start.Format("15:04:05.000"), c.end.Format("15:04:05.000"), c.err)
	}
}

// sentToDead reports whether c was sent to k's process after it was reaped, before its caller
// saw its connection close (within deathNoticed): the caller's log (an edge's or an
// mcpgateway's) names the call's request id and k's address on one line.
func sentToDead(c call, k kill, logs []string) bool {
	if k.addr == "" || c.start.Before(k.at) || c.start.After(k.dead.Add(deathNoticed)) {
		return false
	}
	id, replica := "request_id=chaos-"+c.text+" ", "replica="+k.addr+" "
	for _, log := range logs {
		for _, line := range strings.Split(log, "\n") {
			if line += " "; strings.Contains(line, id) && strings.Contains(line, replica) {
				return true
			}
		}
	}
	return false
}

// placement is the index of the tool host server id runs on, as the registry's state says.
func (top *topology) placement(t *testing.T, id string) int {
	t.Helper()
	adm := mcpgatewayv1.NewAdminServiceClient(dialService(t, top.mgAddrs[0], adminKey))
	st, err := adm.GetServer(t.Context(), &mcpgatewayv1.GetServerRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(top.thNames, st.GetServer().GetPlacement())
	if i < 0 {
		t.Fatalf("%s runs on %q, not one of %v", id, st.GetServer().GetPlacement(), top.thNames)
	}
	return i
}

// checkRegistry: every acknowledged preset is in the registry, seen by every mcpgateway.
func (top *topology) checkRegistry(t *testing.T, acked []string) {
	t.Helper()
	for i, addr := range top.mgAddrs {
		adm := mcpgatewayv1.NewAdminServiceClient(dialService(t, addr, adminKey))
		ps, err := adm.ListPresets(t.Context(), &mcpgatewayv1.ListPresetsRequest{})
		if err != nil {
			t.Fatalf("mcpgateway %d: %v", i, err)
		}
		have := map[string]bool{}
		for _, p := range ps.GetPresets() {
			have[p.GetId()] = true
		}
		for _, id := range acked {
			if !have[id] {
				t.Errorf("mcpgateway %d: preset %s was acknowledged and is not in the registry", i, id)
			}
		}
	}
	t.Logf("chaos: %d acknowledged registry writes, every one on both mcpgateways", len(acked))
}

// checkCatalogs: both mcpgateways list the same servers (placement included) and tools.
func (top *topology) checkCatalogs(t *testing.T) {
	t.Helper()
	var seen []string
	for i, addr := range top.mgAddrs {
		adm := mcpgatewayv1.NewAdminServiceClient(dialService(t, addr, adminKey))
		var out string
		waitfor.NoError(t, 5*time.Second, func() error {
			srv, err := adm.ListServers(t.Context(), &mcpgatewayv1.ListServersRequest{})
			if err != nil {
				return err
			}
			tools, err := adm.ListTools(t.Context(), &mcpgatewayv1.ListToolsRequest{})
			if err != nil {
				return err
			}
			var b strings.Builder
			for _, s := range srv.GetServers() {
				fmt.Fprintf(&b, "%s %s %s %v;", s.GetConfig().GetId(), s.GetStatus(), s.GetPlacement(), s.GetConnected())
			}
			for _, tl := range tools.GetTools() {
				j, _ := protojson.Marshal(tl)
				b.Write(j)
			}
			out = b.String()
			if !strings.Contains(out, "mcp_echo__echo") {
				return fmt.Errorf("mcpgateway %d lists no echo tool: %.300s", i, out)
			}
			return nil
		})
		seen = append(seen, out)
	}
	if seen[0] != seen[1] {
		t.Errorf("the mcpgateways disagree:\n%s\n%s", seen[0], seen[1])
	}
}

// checkOrphans: every process carrying the test's marker (a stdio child) descends from a
// running tool host; none is left once the tool hosts stopped.
func (top *topology) checkOrphans(t *testing.T) {
	t.Helper()
	live := map[int]bool{}
	for _, s := range top.toolhosts {
		if s.p.running() {
			live[s.p.cmd.Process.Pid] = true
		}
	}
	waitfor.NoError(t, 10*time.Second, func() error {
		for _, pid := range markedProcs(top.marker) {
			if !descendsFrom(pid, live) {
				return fmt.Errorf("process %d (%s) runs outside every live tool host", pid, cmdline(pid))
			}
		}
		return nil
	})
}

// markedProcs lists the processes whose command line holds marker.
func markedProcs(marker string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if strings.Contains(cmdline(pid), marker) {
			out = append(out, pid)
		}
	}
	return out
}

func cmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.ReplaceAll(string(b), "\x00", " ")
}

// descendsFrom reports whether pid has one of roots among its ancestors.
func descendsFrom(pid int, roots map[int]bool) bool {
	for i := 0; i < 64 && pid > 1; i++ {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true // gone meanwhile
		}
		s := string(b)
		rest := s[strings.LastIndexByte(s, ')')+2:] // state ppid …
		f := strings.Fields(rest)
		if len(f) < 2 {
			return false
		}
		pid, _ = strconv.Atoi(f[1])
		if roots[pid] {
			return true
		}
	}
	return false
}
