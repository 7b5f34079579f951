package toolhosts

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
	"github.com/zestmcp/zest/services/mcpgateway/toolhosts/toolhoststest"
)

func TestMain(m *testing.M) { toolhoststest.Main(m) }

func TestParseAddr(t *testing.T) {
	cases := []struct {
		in   string
		want Target
		err  string
	}{
		{in: "127.0.0.1:13312", want: Target{Addrs: []string{"127.0.0.1:13312"}}},
		{in: "a:1, b:2,c:3", want: Target{Addrs: []string{"a:1", "b:2", "c:3"}}},
		{in: "dns:///toolhost.zest.svc.cluster.local:13312", want: Target{DNSHost: "toolhost.zest.svc.cluster.local", DNSPort: "13312"}},
		{in: "", err: `"" is not host:port`},
		{in: "a:1,", err: `"" is not host:port`},
		{in: "a", err: `"a" is not host:port`},
		{in: "a:1,a:1", err: `"a:1" is listed twice`},
		{in: "dns:///toolhost", err: "the dns:/// name needs a port"},
		{in: "dns://8.8.8.8/toolhost:1", err: "the only scheme is dns:///"},
		{in: "http://a:1", err: "the only scheme is dns:///"},
	}
	for _, tc := range cases {
		got, err := ParseAddr("toolhost-addr", tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "toolhost-addr") || !strings.Contains(err.Error(), "dns:///name:port") {
				t.Errorf("%q: err = %v, want one naming the setting and %q", tc.in, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case fmt.Sprint(got) != fmt.Sprint(tc.want):
			t.Errorf("%q = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Addr: "a:1"}, ""},
		{Config{Addr: "a:1", ResolveEvery: time.Millisecond}, "toolhost-resolve-every (ZEST_TOOLHOST_RESOLVE_EVERY) 1ms: want at least 100ms"},
		{Config{Addr: "a:1", HealthEvery: time.Millisecond}, "toolhost-health-every (ZEST_TOOLHOST_HEALTH_EVERY) 1ms: want at least 50ms"},
		{Config{Addr: "a:1", Wait: 2 * time.Minute}, "toolhost-wait (ZEST_TOOLHOST_WAIT) 2m0s: want 0 (the default, 2s) to 1m0s"},
	} {
		err := tc.c.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: err = %v, want %q", tc.c, err, tc.want)
		}
	}
}

// static is a pool of healthy members named names, without connections: placement alone.
func static(names ...string) *Pool {
	p := Fixed("", nil)
	p.members = map[string]*member{}
	for i, n := range names {
		a := fmt.Sprintf("10.0.0.%d:1", i+1)
		p.members[a] = &member{addr: a, name: n, healthy: true}
	}
	return p
}

func placements(t *testing.T, p *Pool, ids []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, id := range ids {
		h, err := p.Placement(id, "")
		if err != nil {
			t.Fatal(err)
		}
		out[id] = h.Name
	}
	return out
}

// TestRendezvousStability: servers spread evenly; a member that goes moves only its own
// servers (spread over the rest), one that comes takes about 1/N from every other, and the
// placement does not depend on the members' addresses or order.
func TestRendezvousStability(t *testing.T) {
	const n = 3000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("server-%d", i)
	}
	p := static("th-a", "th-b", "th-c", "th-d")
	before := placements(t, p, ids)
	counts := map[string]int{}
	for _, h := range before {
		counts[h]++
	}
	for name, c := range counts {
		if c < n/4*8/10 || c > n/4*12/10 {
			t.Errorf("%s runs %d of %d servers, want about %d: %v", name, c, n, n/4, counts)
		}
	}

	// th-c goes: only its servers move, to every other member.
	p.members["10.0.0.3:1"].healthy = false
	after := placements(t, p, ids)
	moved, to := 0, map[string]int{}
	for _, id := range ids {
		if before[id] != after[id] {
			moved++
			to[after[id]]++
			if before[id] != "th-c" {
				t.Fatalf("%s moved from %s, which stayed, to %s", id, before[id], after[id])
			}
		}
	}
	if moved != counts["th-c"] || len(to) != 3 {
		t.Fatalf("moved %d (th-c ran %d), to %v", moved, counts["th-c"], to)
	}
	t.Logf("th-c went: %d of %d servers moved (%.1f%%), to %v", moved, n, 100*float64(moved)/n, to)

	// th-c comes back: exactly its servers return.
	p.members["10.0.0.3:1"].healthy = true
	if back := placements(t, p, ids); fmt.Sprint(back) != fmt.Sprint(before) {
		t.Fatal("the placement differs after th-c came back")
	}

	// A fifth member takes about 1/5, only from the others, onto itself.
	p.members["10.0.0.9:1"] = &member{addr: "10.0.0.9:1", name: "th-e", healthy: true}
	grown := placements(t, p, ids)
	moved = 0
	for _, id := range ids {
		if before[id] != grown[id] {
			moved++
			if grown[id] != "th-e" {
				t.Fatalf("%s moved to %s, not to the new member", id, grown[id])
			}
		}
	}
	if moved < n/5*8/10 || moved > n/5*12/10 {
		t.Fatalf("a fifth member took %d of %d servers, want about %d", moved, n, n/5)
	}

	// Other addresses, same names: the same placement (names are hashed, not addresses).
	q := static("th-d", "th-c", "th-b", "th-a")
	if again := placements(t, q, ids); fmt.Sprint(again) != fmt.Sprint(before) {
		t.Fatal("the placement depends on the members' addresses or order")
	}
}

func TestPinning(t *testing.T) {
	p := static("th-a", "th-b")
	for range 20 {
		h, err := p.Placement(fmt.Sprint(time.Now().UnixNano()), "th-b")
		if err != nil || h.Name != "th-b" {
			t.Fatalf("pinned to th-b: %v %v", h, err)
		}
	}
	p.members["10.0.0.2:1"].healthy, p.members["10.0.0.2:1"].why = false, "connection transient_failure"
	_, err := p.Placement("files", "th-b")
	if !errors.Is(err, ErrNoToolHost) || !strings.Contains(err.Error(), `the tool host "th-b" that the server's tool_host pins is not healthy`) ||
		!strings.Contains(err.Error(), "th-b (10.0.0.2:1) down: connection transient_failure") || !strings.Contains(err.Error(), "start it, or change or remove tool_host") {
		t.Fatalf("pinned to a host that is down: %v", err)
	}
	if _, err := p.Placement("files", "th-z"); err == nil || !strings.Contains(err.Error(), `"th-z"`) {
		t.Fatalf("pinned to an unknown host: %v", err)
	}
	// Unpinned servers still run, on th-a.
	if h, err := p.Placement("files", ""); err != nil || h.Name != "th-a" {
		t.Fatalf("unpinned: %v %v", h, err)
	}
	p.members["10.0.0.1:1"].healthy = false
	if _, err := p.Placement("files", ""); !errors.Is(err, ErrNoToolHost) || !strings.Contains(err.Error(), "no tool host is healthy") {
		t.Fatalf("none healthy: %v", err)
	}
}

func healthyNames(p *Pool) string {
	var names []string
	for _, h := range p.Healthy() {
		names = append(names, h.Name)
	}
	return strings.Join(names, ",")
}

func newPool(t *testing.T, c Config) *Pool {
	t.Helper()
	c.Key = toolhoststest.Key
	if c.HealthEvery == 0 {
		c.HealthEvery = 100 * time.Millisecond
	}
	p, err := New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestMembersComeAndGo: real tool hosts, named by Describe; one killed (its connections drop)
// is unhealthy at once, one stopped gracefully within a probe, and one started again is back.
func TestMembersComeAndGo(t *testing.T) {
	a, b, c := toolhoststest.Start(t, "th-a"), toolhoststest.Start(t, "th-b"), toolhoststest.Start(t, "th-c")
	p := newPool(t, Config{Addr: a.Addr() + "," + b.Addr() + "," + c.Addr()})
	waitfor.NoError(t, 5*time.Second, func() error {
		if len(p.Healthy()) != 3 {
			return fmt.Errorf("healthy: %q", healthyNames(p))
		}
		return nil
	})
	onB := ""
	for i := 0; onB == ""; i++ {
		if h, _ := p.Placement(fmt.Sprint("s", i), ""); h.Name == "th-b" {
			onB = fmt.Sprint("s", i)
		}
	}

	changed := p.Changed()
	killed := time.Now()
	b.Kill()
	<-changed
	noticed := time.Since(killed)
	if h, err := p.Placement(onB, ""); err != nil || h.Name == "th-b" {
		t.Fatalf("after th-b was killed, %s is placed on %v (%v)", onB, h, err)
	}
	if p.Up(Host{Name: "th-b", Addr: b.Addr()}) {
		t.Fatal("th-b is up after it was killed")
	}
	t.Logf("a killed tool host was noticed after %v", noticed)
	if noticed > 500*time.Millisecond {
		t.Fatalf("a killed tool host was noticed after %v, want at once", noticed)
	}

	stopped := time.Now()
	c.Stop()
	waitfor.NoError(t, 2*time.Second, func() error {
		if got := healthyNames(p); got != "th-a" {
			return fmt.Errorf("healthy after stopping th-c: %q", got)
		}
		return nil
	})
	t.Logf("a stopped tool host was noticed after %v", time.Since(stopped))

	b.Restart()
	d := waitfor.NoError(t, 3*time.Second, func() error {
		if h, err := p.Placement(onB, ""); err != nil || h.Name != "th-b" {
			return fmt.Errorf("%s on %v (%v)", onB, h, err)
		}
		return nil
	})
	t.Logf("a restarted tool host was back after %v", d)
	if h, ok := p.Lookup("th-b"); !ok || h.Addr != b.Addr() {
		t.Fatalf("lookup th-b: %v %v", h, ok)
	}
}

// TestPlaceWaits: with no healthy tool host, Place waits up to Wait for one and then fails
// naming the members; a tool host that comes up meanwhile is used.
func TestPlaceWaits(t *testing.T) {
	a := toolhoststest.Start(t, "th-a")
	addr := a.Addr()
	a.Stop()
	p := newPool(t, Config{Addr: addr, Wait: 300 * time.Millisecond})
	began := time.Now()
	_, err := p.Place(t.Context(), "x", "")
	if waited := time.Since(began); !errors.Is(err, ErrNoToolHost) || waited < 300*time.Millisecond || waited > 2*time.Second ||
		!strings.Contains(err.Error(), addr+" down: ") {
		t.Fatalf("after %v: %v", waited, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.Place(ctx, "x", ""); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrNoToolHost) {
		t.Fatalf("a caller's deadline: %v", err)
	}

	q := newPool(t, Config{Addr: addr, Wait: 5 * time.Second})
	time.AfterFunc(200*time.Millisecond, a.Restart) // it comes back while Place waits
	if h, err := q.Place(t.Context(), "x", ""); err != nil || h.Name != "th-a" {
		t.Fatalf("a tool host that came up while waiting: %v %v", h, err)
	}
}

// TestDNS: a dns:/// address is resolved every ResolveEvery; each address is a member; a
// failed or empty answer keeps the members; a gone address is dropped.
func TestDNS(t *testing.T) {
	a := toolhoststest.Start(t, "th-a")
	_, port, _ := net.SplitHostPort(a.Addr())
	var mu sync.Mutex
	answer, fail := []string{"127.0.0.1"}, error(nil)
	asked := 0 // lookups so far
	set := func(ips []string, err error) {
		mu.Lock()
		answer, fail = ips, err
		mu.Unlock()
	}
	// resolvedAgain waits until the pool has asked twice since: it has acted on the answer of
	// the first (it resolves one lookup after another).
	resolvedAgain := func() {
		t.Helper()
		mu.Lock()
		since := asked
		mu.Unlock()
		waitfor.True(t, 3*time.Second, "two more lookups", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return asked >= since+2
		})
	}
	p := newPool(t, Config{Addr: "dns:///toolhost.test:" + port, ResolveEvery: 100 * time.Millisecond,
		LookupHost: func(_ context.Context, host string) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			asked++
			if host != "toolhost.test" {
				return nil, fmt.Errorf("asked for %q", host)
			}
			return answer, fail
		}})
	members := func(want string) func() error {
		return func() error {
			var got []string
			for _, h := range p.Members() {
				got = append(got, h.Addr)
			}
			if strings.Join(got, ",") != want {
				return fmt.Errorf("members %v, want %s", got, want)
			}
			return nil
		}
	}
	waitfor.NoError(t, 3*time.Second, members("127.0.0.1:"+port))
	if h, err := p.Place(t.Context(), "x", ""); err != nil || h.Name != "th-a" {
		t.Fatalf("placed on %v: %v", h, err)
	}
	// A second address (nothing listens there: a member that is down).
	set([]string{"127.0.0.1", "127.0.0.2"}, nil)
	waitfor.NoError(t, 3*time.Second, members("127.0.0.1:"+port+",127.0.0.2:"+port))
	set(nil, errors.New("SERVFAIL"))
	resolvedAgain()
	if err := members("127.0.0.1:" + port + ",127.0.0.2:" + port)(); err != nil {
		t.Fatalf("after a failed lookup: %v", err)
	}
	set([]string{}, nil)
	resolvedAgain()
	if err := members("127.0.0.1:" + port + ",127.0.0.2:" + port)(); err != nil {
		t.Fatalf("after an empty answer: %v", err)
	}
	set([]string{"127.0.0.2"}, nil)
	waitfor.NoError(t, 3*time.Second, members("127.0.0.2:"+port))
	if _, err := p.Placement("x", ""); !errors.Is(err, ErrNoToolHost) {
		t.Fatalf("th-a's address is gone, yet: %v", err)
	}
}

// TestDNSLocalhost resolves a real name: dns:///localhost reaches the tool host on 127.0.0.1.
func TestDNSLocalhost(t *testing.T) {
	a := toolhoststest.Start(t, "th-a")
	_, port, _ := net.SplitHostPort(a.Addr())
	p := newPool(t, Config{Addr: "dns:///localhost:" + port})
	waitfor.NoError(t, 5*time.Second, func() error {
		if h, ok := p.Lookup("th-a"); !ok || h.Addr != "127.0.0.1:"+port {
			return fmt.Errorf("th-a not found among %v", p.Members())
		}
		return nil
	})
}

// TestSameNameTwice: two tool hosts of one name (a misconfiguration) hold one place: the lowest
// address runs the servers, the same on every replica.
func TestSameNameTwice(t *testing.T) {
	a, b := toolhoststest.Start(t, "twin"), toolhoststest.Start(t, "twin")
	p := newPool(t, Config{Addr: a.Addr() + "," + b.Addr()})
	waitfor.NoError(t, 5*time.Second, func() error {
		if n := len(p.Healthy()); n != 2 {
			return fmt.Errorf("%d healthy", n)
		}
		return nil
	})
	low := min(a.Addr(), b.Addr())
	for i := range 50 {
		if h, _ := p.Placement(fmt.Sprint(i), ""); h.Addr != low {
			t.Fatalf("placed on %s, want the lowest address %s", h.Addr, low)
		}
	}
}
