package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
)

// twoToolHosts is the layout of the tool host failover test: one inference node, two tool
// hosts (th-a, th-b), one mcpgateway placing stdio servers on them, one edge.
type twoToolHosts struct {
	s     *Suite
	hosts map[string]*service
	addrs map[string]string
}

func startTwoToolHosts(t *testing.T) *twoToolHosts {
	t.Helper()
	base := append(os.Environ(), "ZEST_LOG_LEVEL=warn", "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey,
		"LEMONADE_ALLOWED_ORIGINS=", "ZEST_SERVICE_KEY="+serviceKey, "ZEST_INFERENCE_ADDR="+freeAddr(t))
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	l := &twoToolHosts{hosts: map[string]*service{}, addrs: map[string]string{}}
	runService(t, "zest-inference", base)
	for _, name := range []string{"th-a", "th-b"} {
		l.addrs[name] = freeAddr(t)
		// Metrics on a port of its own choosing, logged at info: a test reads its calls in flight.
		l.hosts[name] = runService(t, "zest-toolhost", with("ZEST_TOOLHOST_ADDR="+l.addrs[name], "ZEST_TOOLHOST_NAME="+name, "ZEST_TOOLHOST_STOP_GRACE=1s",
			"ZEST_TOOLHOST_METRICS_ADDR=127.0.0.1:0", "ZEST_LOG_LEVEL=info"))
	}
	mg, edge := freeAddr(t), freeAddr(t)
	gw := runService(t, "zest-mcpgateway", with("ZEST_MCPGATEWAY_ADDR="+mg, "ZEST_DATA_DIR="+filepath.Join(t.TempDir(), "data"),
		"ZEST_TOOLHOST_ADDR="+l.addrs["th-a"]+","+l.addrs["th-b"], "ZEST_TOOLHOST_HEALTH_EVERY=100ms", "ZEST_LOG_LEVEL=info"))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mcpgateway's log:\n%s", gw.p.logs)
			for n, h := range l.hosts {
				t.Logf("%s's log:\n%s", n, h.p.logs)
			}
		}
	})
	// The edge's health checks one tool host address (it dials one address per service
	// until client-side balancing over lists lands: docs/operator/scale-out.md); the test reads health
	// only before any tool host dies.
	runService(t, "zest-gateway", with("ZEST_MCPGATEWAY_ADDR="+mg, "ZEST_EDGE_ADDR="+edge, "ZEST_TOOLHOST_ADDR="+l.addrs["th-a"]))
	l.s = &Suite{URL: "http://" + edge, t: t, key: fedAPIKey}
	l.s.WaitHealthy()
	// mcpgateway places servers on the tool hosts it has seen healthy: wait until it has seen
	// both (else a server placed on the first would move once the second shows up).
	waitfor.NoError(t, 10*time.Second, func() error {
		for _, name := range []string{"th-a", "th-b"} {
			if !strings.Contains(gw.p.logs.String(), `msg="tool host up" service=zest-mcpgateway name=`+name+" ") {
				return fmt.Errorf("mcpgateway has not seen %s healthy yet", name)
			}
		}
		return nil
	})
	return l
}

// serverState is GET /internal/mcp/servers/{id}'s server.
func serverState(t *testing.T, s *Suite, id string) map[string]any {
	t.Helper()
	r := admin(t, s, "GET", "/servers/"+id, "")
	if r.Status != 200 {
		t.Fatalf("GET server %s: %d %s", id, r.Status, r.Body)
	}
	st, _ := r.JSON(t)["server"].(map[string]any)
	return st
}

// descendants lists the live processes below pid (through /proc's parent links).
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) {
			continue
		}
		var state string
		var ppid int
		fmt.Sscanf(s[i+2:], "%s %d", &state, &ppid)
		if state != "Z" {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c)
		}
		queue = queue[1:]
	}
	return out
}

// postAsync posts body to url with the admin key and hands back the answer (status, body).
func postAsync(url, body string, headers ...string) <-chan Response {
	out := make(chan Response, 1)
	go func() {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for _, h := range headers {
			k, v, _ := strings.Cut(h, ":")
			req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- Response{Status: -1, Body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		out <- Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	}()
	return out
}

// TestToolHostFailover: a stdio server runs on one of two tool hosts (its state says which);
// when that tool host is SIGKILLed, the calls in flight on it fail at once with an error that
// names it (through the admin API and through an MCP client), the next call succeeds on the
// other tool host within 2 s, and nothing the dead tool host ran is left. When it is back, the
// server returns to it.
func TestToolHostFailover(t *testing.T) {
	l := startTwoToolHosts(t)
	s := l.s
	registerServer(t, s, map[string]any{"id": "everything", "command": "node", "args": []string{serverEverything(t)}})
	if r := admin(t, s, "POST", "/servers/everything/connect", ""); r.Status != 200 {
		t.Fatalf("connect: %d %s", r.Status, r.Body)
	}
	st := serverState(t, s, "everything")
	victim, _ := st["placement"].(string)
	if (victim != "th-a" && victim != "th-b") || st["tool_host"] != "" {
		t.Fatalf("placement %q, tool_host %q: want th-a or th-b, unpinned", st["placement"], st["tool_host"])
	}
	other := map[string]string{"th-a": "th-b", "th-b": "th-a"}[victim]
	th := l.hosts[victim].p.cmd.Process.Pid
	below := descendants(th)
	if len(below) < 2 { // the shim and node
		t.Fatalf("the tool host %s (pid %d) runs %v, want the shim and the server", victim, th, below)
	}

	// Calls in flight on the victim: through the admin API, from an MCP client holding the
	// admin key (told the cause), and from one holding an API key (told an incident id: the
	// cause is in mcpgateway's log).
	long := `{"name":"trigger-long-running-operation","arguments":{"duration":20,"steps":4}}`
	viaAdmin := postAsync(s.URL+"/internal/mcp/servers/everything/tools/call", long, adminAuth)
	adminSess, _ := fedInit(t, s, "everything", "2025-11-25", adminAuth)
	viaMCP := postAsync(fedURL(s, "everything"), `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":`+long+`}`,
		append(append([]string{}, mcpHeaders...), "Mcp-Session-Id: "+adminSess, adminAuth)...)
	sess := mustInit(t, s, "everything")
	viaAPI := postAsync(fedURL(s, "everything"), `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":`+long+`}`,
		append(append([]string{}, mcpHeaders...), "Mcp-Session-Id: "+sess, fedAPIAuth)...)
	// All three at the server: the victim's gauge of requests its children have not answered.
	waitfor.NoError(t, 10*time.Second, func() error {
		n, err := gauge(l.hosts[victim].p.logs.String(), "zest_toolhost_calls_in_flight")
		if err == nil && n < 3 {
			err = fmt.Errorf("%v calls in flight on %s", n, victim)
		}
		return err
	})

	killed := time.Now()
	if err := l.hosts[victim].p.signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	gone := fmt.Sprintf("the tool host %s (%s) went away during the call", victim, l.addrs[victim])
	for name, ch := range map[string]<-chan Response{"admin API": viaAdmin, "MCP client (admin key)": viaMCP, "MCP client (API key)": viaAPI} {
		select {
		case r := <-ch:
			if took := time.Since(killed); took > time.Second {
				t.Errorf("the call in flight through the %s failed %v after the kill", name, took)
			}
			want := gone
			if strings.Contains(name, "API key") {
				want = `Internal error: tools/call of MCP server \"everything\" failed (incident `
			}
			if !strings.Contains(string(r.Body), want) {
				t.Errorf("the call in flight through the %s: %d %s, want an error saying %q", name, r.Status, r.Body, want)
			}
			t.Logf("in flight through the %s: %d %.300s", name, r.Status, r.Body)
		case <-time.After(5 * time.Second):
			t.Fatalf("the call in flight through the %s did not end within 5 s of the kill", name)
		}
	}

	// The next call succeeds, on the other tool host.
	var movedAfter time.Duration
	waitfor.NoError(t, 5*time.Second, func() error {
		r := admin(t, s, "POST", "/servers/everything/tools/call", `{"name":"echo","arguments":{"message":"moved"}}`)
		if r.Status != 200 {
			return fmt.Errorf("%d %s", r.Status, r.Body)
		}
		movedAfter = time.Since(killed)
		return nil
	})
	t.Logf("a call succeeded again %v after the kill", movedAfter)
	if movedAfter > 2*time.Second {
		t.Errorf("the first call that succeeded after the kill came %v after it, want under 2 s", movedAfter)
	}
	if st := serverState(t, s, "everything"); st["placement"] != other || st["status"] != "connected" {
		t.Errorf("after the kill: placement %v, status %v; want %s, connected", st["placement"], st["status"], other)
	}
	r := fedCall(t, s, "everything", sess, `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"echo","arguments":{"message":"same session"}}}`, fedAPIAuth)
	if r.Status != 200 || !strings.Contains(string(r.Body), "same session") {
		t.Errorf("the MCP client's session after the move: %d %s", r.Status, r.Body)
	}

	// Nothing the dead tool host ran is left.
	waitfor.NoError(t, 5*time.Second, func() error {
		var left []string
		for _, pid := range below {
			if running(pid) {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				left = append(left, fmt.Sprintf("%d %q", pid, strings.ReplaceAll(string(b), "\x00", " ")))
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("processes of the killed tool host left: %v", left)
		}
		return nil
	})

	// It comes back: the server returns to it (every replica places it there again).
	l.hosts[victim].start()
	waitfor.NoError(t, 10*time.Second, func() error {
		if st := serverState(t, s, "everything"); st["placement"] != victim || st["status"] != "connected" {
			return fmt.Errorf("placement %v, status %v", st["placement"], st["status"])
		}
		return nil
	})
	r = admin(t, s, "POST", "/servers/everything/tools/call", `{"name":"echo","arguments":{"message":"back"}}`)
	if r.Status != 200 {
		t.Fatalf("after %s came back: %d %s", victim, r.Status, r.Body)
	}
	var res struct {
		Result struct {
			Content []struct{ Text string }
		}
	}
	if json.Unmarshal(r.Body, &res) != nil || len(res.Result.Content) == 0 || !strings.Contains(res.Result.Content[0].Text, "back") {
		t.Errorf("echo after the return: %s", r.Body)
	}
}

// TestToolHostPin: a server pinned to a tool host runs there; while that one is down its
// calls fail with an error naming the pin and the fix, and its state still shows the pin.
func TestToolHostPin(t *testing.T) {
	l := startTwoToolHosts(t)
	s := l.s
	for _, pin := range []string{"th-a", "th-b"} {
		id := "on-" + pin
		registerServer(t, s, map[string]any{"id": id, "command": "node", "args": []string{serverEverything(t)}, "tool_host": pin})
		if r := admin(t, s, "POST", "/servers/"+id+"/tools/call", `{"name":"echo","arguments":{"message":"x"}}`); r.Status != 200 {
			t.Fatalf("%s: %d %s", id, r.Status, r.Body)
		}
		if st := serverState(t, s, id); st["placement"] != pin || st["tool_host"] != pin {
			t.Fatalf("%s: placement %v, tool_host %v", id, st["placement"], st["tool_host"])
		}
	}
	if r := admin(t, s, "POST", "/servers", `{"id":"bad","command":"node","tool_host":"no such/host"}`); r.Status != 400 || !strings.Contains(string(r.Body), "tool_host") {
		t.Fatalf("a malformed pin: %d %s", r.Status, r.Body)
	}
	l.hosts["th-b"].stop(syscall.SIGKILL)
	// Once mcpgateway has seen th-b go (a call sent in the instant before may have reached it,
	// and fails as in flight there).
	waitfor.NoError(t, 2*time.Second, func() error {
		if st := serverState(t, s, "on-th-b"); st["status"] == "connected" {
			return fmt.Errorf("on-th-b still connected")
		}
		return nil
	})
	r := admin(t, s, "POST", "/servers/on-th-b/tools/call", `{"name":"echo","arguments":{"message":"x"}}`)
	if r.Status == 200 || !strings.Contains(string(r.Body), `the tool host \"th-b\" that the server's tool_host pins is not healthy`) {
		t.Fatalf("a call while the pinned tool host is down: %d %s", r.Status, r.Body)
	}
	if st := serverState(t, s, "on-th-b"); st["placement"] != "th-b" {
		t.Fatalf("placement while th-b is down: %v", st["placement"])
	}
	if r := admin(t, s, "POST", "/servers/on-th-a/tools/call", `{"name":"echo","arguments":{"message":"x"}}`); r.Status != 200 {
		t.Fatalf("the server pinned to th-a: %d %s", r.Status, r.Body)
	}
}
