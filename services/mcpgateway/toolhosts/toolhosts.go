// Package toolhosts is mcpgateway's view of its tool hosts: the members ZEST_TOOLHOST_ADDR
// names (one host:port, a comma-separated list, or dns:///name:port resolved again every
// ResolveEvery), one gRPC connection to each, each member's health and name, and where a
// stdio server runs.
//
// A member is healthy while its connection is READY and its gRPC health service answers
// SERVING for ToolHostService; its name is what its Describe answered. A connection that
// drops (the tool host died: its socket closed) makes the member unhealthy at once; a tool
// host that stops answering (its machine is gone) is found by the probe every HealthEvery,
// which gives up after max(2×HealthEvery, MinHealthTimeout).
//
// A server runs on the tool host its config pins (ServerConfig.tool_host, a name), else on
// the healthy member that rendezvous (highest random weight) hashing of (server id, member
// name) ranks first: every mcpgateway replica that sees the same healthy members picks the
// same one, and a member that comes or goes moves only the servers it ranks first (about
// 1/N of them). Names, not addresses, are hashed, so a tool host that comes back at another
// address (a restarted pod) gets its servers back.
package toolhosts

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zestmcp/zest/lib/grpcdial"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Defaults of Config.
const (
	// DefaultResolveEvery is how often a dns:/// address is resolved again
	// (ZEST_TOOLHOST_RESOLVE_EVERY).
	DefaultResolveEvery = 5 * time.Second
	// DefaultHealthEvery is how often each member's health is checked
	// (ZEST_TOOLHOST_HEALTH_EVERY).
	DefaultHealthEvery = 500 * time.Millisecond
	// DefaultWait is how long a placement waits for a suitable tool host when none is
	// healthy (ZEST_TOOLHOST_WAIT): long enough for a restarting tool host or mcpgateway's
	// first probe, short enough that a call fails fast when every tool host is gone.
	DefaultWait = 2 * time.Second
	// MinHealthTimeout is the least time a health probe is given (it gets 2×HealthEvery
	// when that is longer).
	MinHealthTimeout = time.Second
)

// Limits of Config, checked by Validate.
const (
	MinResolveEvery = 100 * time.Millisecond
	MinHealthEvery  = 50 * time.Millisecond
	MaxWait         = time.Minute
)

// DNSScheme starts an address resolved with DNS: dns:///name:port.
const DNSScheme = "dns:///"

// ErrNoToolHost means no healthy tool host can run a server (none is healthy, or the one its
// config pins is not).
var ErrNoToolHost = errors.New("no tool host can run the server")

// Config says where the tool hosts are and how they are watched.
type Config struct {
	// Addr is ZEST_TOOLHOST_ADDR: host:port, a comma-separated list, or dns:///name:port.
	Addr string
	// Key is the service key every call carries.
	Key string
	// MaxMessageBytes bounds gRPC messages (grpcdial.Dial).
	MaxMessageBytes int
	// ResolveEvery is how often a dns:/// name is resolved again (DefaultResolveEvery when 0).
	ResolveEvery time.Duration
	// HealthEvery is how often each member is probed (DefaultHealthEvery when 0).
	HealthEvery time.Duration
	// Wait bounds how long Place waits for a suitable tool host (DefaultWait when 0).
	Wait time.Duration
	// LookupHost resolves a dns:/// name to addresses (net.DefaultResolver.LookupHost when nil).
	LookupHost func(ctx context.Context, host string) ([]string, error)
}

func (c *Config) defaults() {
	if c.ResolveEvery <= 0 {
		c.ResolveEvery = DefaultResolveEvery
	}
	if c.HealthEvery <= 0 {
		c.HealthEvery = DefaultHealthEvery
	}
	if c.Wait <= 0 {
		c.Wait = DefaultWait
	}
	if c.LookupHost == nil {
		c.LookupHost = net.DefaultResolver.LookupHost
	}
}

func (c *Config) healthTimeout() time.Duration { return max(2*c.HealthEvery, MinHealthTimeout) }

// Target is what an address names: fixed members, or a DNS name whose addresses are.
type Target struct {
	// Addrs are the members of a fixed list (host:port each).
	Addrs []string
	// DNSHost and DNSPort are the name and port of a dns:/// address.
	DNSHost, DNSPort string
}

// ParseAddr reads ZEST_TOOLHOST_ADDR; flag names the setting in errors.
func ParseAddr(flag, s string) (Target, error) {
	bad := func(why string) error {
		return fmt.Errorf("%s %q: %s; want host:port, a comma-separated list of them, or dns:///name:port (a Kubernetes headless service)", flag, s, why)
	}
	if rest, ok := strings.CutPrefix(s, DNSScheme); ok {
		host, port, err := net.SplitHostPort(rest)
		if err != nil || host == "" || port == "" {
			return Target{}, bad("the dns:/// name needs a port")
		}
		return Target{DNSHost: host, DNSPort: port}, nil
	}
	if strings.Contains(s, "://") {
		return Target{}, bad("the only scheme is dns:///")
	}
	var t Target
	for a := range strings.SplitSeq(s, ",") {
		a = strings.TrimSpace(a)
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return Target{}, bad(fmt.Sprintf("%q is not host:port", a))
		}
		if slices.Contains(t.Addrs, a) {
			return Target{}, bad(fmt.Sprintf("%q is listed twice", a))
		}
		t.Addrs = append(t.Addrs, a)
	}
	return t, nil
}

// Validate checks the configuration; the flag names are mcpgateway's.
func (c Config) Validate() error {
	_, err := ParseAddr("toolhost-addr", c.Addr)
	errs := []error{err}
	if c.ResolveEvery != 0 && c.ResolveEvery < MinResolveEvery {
		errs = append(errs, fmt.Errorf("toolhost-resolve-every (ZEST_TOOLHOST_RESOLVE_EVERY) %v: want at least %v", c.ResolveEvery, MinResolveEvery))
	}
	if c.HealthEvery != 0 && c.HealthEvery < MinHealthEvery {
		errs = append(errs, fmt.Errorf("toolhost-health-every (ZEST_TOOLHOST_HEALTH_EVERY) %v: want at least %v", c.HealthEvery, MinHealthEvery))
	}
	if c.Wait < 0 || c.Wait > MaxWait {
		errs = append(errs, fmt.Errorf("toolhost-wait (ZEST_TOOLHOST_WAIT) %v: want 0 (the default, %v) to %v", c.Wait, DefaultWait, MaxWait))
	}
	return errors.Join(errs...)
}

// Host is one tool host: its name, its address, and a client for it.
type Host struct {
	Name   string
	Addr   string
	Client toolhostv1.ToolHostServiceClient
}

// String names the host for people: "name (addr)".
func (h Host) String() string {
	if h.Name == "" || h.Name == h.Addr {
		return h.Addr
	}
	return fmt.Sprintf("%s (%s)", h.Name, h.Addr)
}

// member is one address of the pool.
type member struct {
	addr   string
	cc     *grpc.ClientConn // nil in a Fixed pool
	client toolhostv1.ToolHostServiceClient
	health healthpb.HealthClient
	stop   context.CancelFunc
	done   chan struct{}

	// Guarded by Pool.mu.
	name    string
	pid     int32
	version string
	healthy bool
	why     string // why it is not healthy
}

func (m *member) host() Host { return Host{Name: m.name, Addr: m.addr, Client: m.client} }

// Pool is the tool hosts of one mcpgateway.
type Pool struct {
	cfg    Config
	target Target
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// gen counts the changes of the healthy members (Generation).
	gen atomic.Uint64

	mu      sync.Mutex
	members map[string]*member // by address
	changed chan struct{}      // closed at the next change of a member's health or name
	closed  bool
	fixed   bool // a Fixed pool: its one member never goes down
}

// New dials the members of cfg.Addr (lazily) and starts watching them; Close stops.
func New(cfg Config, log *slog.Logger) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	if log == nil {
		log = slog.Default()
	}
	t, _ := ParseAddr("toolhost-addr", cfg.Addr)
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{cfg: cfg, target: t, log: log, ctx: ctx, cancel: cancel, members: map[string]*member{}, changed: make(chan struct{})}
	if t.DNSHost != "" {
		p.wg.Add(1)
		go p.resolveLoop()
	} else if err := p.setMembers(t.Addrs); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Fixed is a pool of one tool host that is always healthy, for tests and callers that
// dial their own.
func Fixed(name string, c toolhostv1.ToolHostServiceClient) *Pool {
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{addr: "fixed", client: c, name: name, healthy: true, done: make(chan struct{})}
	close(m.done)
	return &Pool{cfg: Config{Wait: DefaultWait}, log: slog.Default(), ctx: ctx, cancel: cancel,
		members: map[string]*member{m.addr: m}, changed: make(chan struct{}), fixed: true}
}

// Close stops watching and closes every connection.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	ms := p.members
	p.members = map[string]*member{}
	p.mu.Unlock()
	p.cancel()
	var errs []error
	for _, m := range ms {
		errs = append(errs, p.dropMember(m))
	}
	p.wg.Wait()
	return errors.Join(errs...)
}

// setMembers makes addrs the members: new ones are dialed and probed, gone ones closed.
func (p *Pool) setMembers(addrs []string) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	var gone []*member
	for a, m := range p.members {
		if !slices.Contains(addrs, a) {
			gone = append(gone, m)
			delete(p.members, a)
		}
	}
	var added []*member
	var errs []error
	for _, a := range addrs {
		if p.members[a] != nil {
			continue
		}
		cc, err := grpcdial.Dial(a, p.cfg.Key, p.cfg.MaxMessageBytes, grpcdial.LogUnavailable(p.log)...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ctx, stop := context.WithCancel(p.ctx)
		m := &member{addr: a, cc: cc, client: toolhostv1.NewToolHostServiceClient(cc), health: healthpb.NewHealthClient(cc),
			stop: stop, done: make(chan struct{}), why: "not probed yet"}
		p.members[a] = m
		added = append(added, m)
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.probe(ctx, m) }()
	}
	if len(gone)+len(added) > 0 {
		p.broadcastLocked()
	}
	p.mu.Unlock()
	for _, m := range added {
		p.log.Info("tool host added", "addr", m.addr)
	}
	for _, m := range gone {
		p.log.Info("tool host removed: its address is no longer resolved", "addr", m.addr, "name", m.name)
		errs = append(errs, p.dropMember(m))
	}
	return errors.Join(errs...)
}

// dropMember stops probing m and closes its connection (its calls in flight fail).
func (p *Pool) dropMember(m *member) error {
	if m.stop != nil {
		m.stop()
	}
	<-m.done
	if m.cc != nil {
		return m.cc.Close()
	}
	return nil
}

// broadcastLocked wakes everyone waiting on Changed.
func (p *Pool) broadcastLocked() {
	p.gen.Add(1)
	close(p.changed)
	p.changed = make(chan struct{})
}

// Generation is a number that changes whenever Changed fires: a placement checked at one
// generation holds until it changes. It reads no lock.
func (p *Pool) Generation() uint64 { return p.gen.Load() }

// Changed returns a channel closed at the next change of the healthy members (one comes, one
// goes, one's name changes).
func (p *Pool) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// resolveLoop resolves the dns:/// name every ResolveEvery. A failed or empty answer keeps
// the members as they are: a DNS hiccup must not drop healthy tool hosts.
func (p *Pool) resolveLoop() {
	defer p.wg.Done()
	failing := false
	for {
		ctx, cancel := context.WithTimeout(p.ctx, p.cfg.ResolveEvery)
		ips, err := p.cfg.LookupHost(ctx, p.target.DNSHost)
		cancel()
		if p.ctx.Err() != nil {
			return
		}
		if err == nil && len(ips) == 0 {
			err = errors.New("no addresses")
		}
		if err != nil {
			level := slog.LevelWarn
			if failing {
				level = slog.LevelDebug
			}
			failing = true
			p.log.Log(p.ctx, level, "resolving the tool hosts failed; keeping the ones known", "name", p.target.DNSHost, "err", err)
		} else {
			failing = false
			addrs := make([]string, 0, len(ips))
			for _, ip := range ips {
				a := net.JoinHostPort(ip, p.target.DNSPort)
				if !slices.Contains(addrs, a) {
					addrs = append(addrs, a)
				}
			}
			sort.Strings(addrs)
			if err := p.setMembers(addrs); err != nil {
				p.log.Warn("dialing a tool host failed", "err", err)
			}
		}
		t := time.NewTimer(p.cfg.ResolveEvery)
		select {
		case <-p.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// probe checks m's health every HealthEvery, and at once when its connection changes state.
func (p *Pool) probe(ctx context.Context, m *member) {
	defer close(m.done)
	kick := make(chan struct{}, 1)
	followed := make(chan struct{})
	go func() { defer close(followed); p.followState(ctx, m, kick) }()
	defer func() { <-followed }()
	for {
		p.check(ctx, m)
		t := time.NewTimer(p.cfg.HealthEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-kick:
			t.Stop()
		case <-t.C:
		}
	}
}

// followState marks m unhealthy the moment its connection leaves READY (the tool host's
// socket closed: it died or restarts), and asks for a probe at every change.
func (p *Pool) followState(ctx context.Context, m *member, kick chan<- struct{}) {
	st := m.cc.GetState()
	for {
		switch st {
		case connectivity.Ready:
		case connectivity.Idle:
			m.cc.Connect()
			p.setDown(m, "not connected")
		default:
			p.setDown(m, "connection "+strings.ToLower(st.String()))
		}
		select {
		case kick <- struct{}{}:
		default:
		}
		if !m.cc.WaitForStateChange(ctx, st) {
			return
		}
		st = m.cc.GetState()
	}
}

// check probes m once: Describe when its name is not known for the current connection, then
// the health service.
func (p *Pool) check(parent context.Context, m *member) {
	ctx, cancel := context.WithTimeout(parent, p.cfg.healthTimeout())
	defer cancel()
	p.mu.Lock()
	name, pid, version, known := m.name, m.pid, m.version, m.healthy
	p.mu.Unlock()
	if !known {
		d, err := m.client.Describe(ctx, &toolhostv1.DescribeRequest{})
		switch {
		case status.Code(err) == codes.Unimplemented: // a tool host older than Describe
			name, pid, version = m.addr, 0, ""
		case err != nil:
			if parent.Err() == nil {
				p.setDown(m, "describe: "+status.Convert(err).Message())
			}
			return
		default:
			name, pid, version = d.GetName(), d.GetPid(), d.GetVersion()
		}
	}
	r, err := m.health.Check(ctx, &healthpb.HealthCheckRequest{Service: toolhostv1.ToolHostService_ServiceDesc.ServiceName})
	switch {
	case parent.Err() != nil: // the member was dropped or the pool closed
	case err != nil:
		p.setDown(m, "health check: "+status.Convert(err).Message())
	case r.GetStatus() != healthpb.HealthCheckResponse_SERVING:
		p.setDown(m, "health check: "+r.GetStatus().String())
	case m.cc.GetState() != connectivity.Ready:
		p.setDown(m, "connection "+strings.ToLower(m.cc.GetState().String()))
	default:
		p.setUp(m, name, pid, version)
	}
}

func (p *Pool) setDown(m *member, why string) {
	p.mu.Lock()
	was := m.healthy
	m.healthy, m.why = false, why
	if was {
		p.broadcastLocked()
	}
	live := p.members[m.addr] == m
	p.mu.Unlock()
	if was && live && p.ctx.Err() == nil {
		p.log.Warn("tool host down: its stdio servers move to the other tool hosts", "name", m.name, "addr", m.addr, "why", why)
	}
}

func (p *Pool) setUp(m *member, name string, pid int32, version string) {
	p.mu.Lock()
	if p.members[m.addr] != m {
		p.mu.Unlock()
		return
	}
	was, renamed := m.healthy, m.name != name
	m.healthy, m.why, m.name, m.pid, m.version = true, "", name, pid, version
	var twins []string
	for _, o := range p.members {
		if o != m && o.healthy && o.name == name {
			twins = append(twins, o.addr)
		}
	}
	if !was || renamed {
		p.broadcastLocked()
	}
	p.mu.Unlock()
	if !was {
		p.log.Info("tool host up", "name", name, "addr", m.addr, "pid", pid, "version", version)
	}
	if !was && len(twins) > 0 {
		p.log.Error("two tool hosts have the same name: only the one with the lowest address runs servers; give each its own ZEST_TOOLHOST_NAME",
			"name", name, "addr", m.addr, "also_at", strings.Join(twins, ","))
	}
}

// score is the rendezvous weight of (server id, tool host name): FNV-1a over both, then
// murmur3's finalizer, whose avalanche FNV lacks. Every replica must compute the same: do
// not change it without moving every server.
func score(id, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write([]byte(name))
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// Placement is where the server id (pinned to pin, when set) runs now, without waiting.
func (p *Pool) Placement(id, pin string) (Host, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.placeLocked(id, pin)
}

func (p *Pool) placeLocked(id, pin string) (Host, error) {
	var best *member
	var bestScore uint64
	for _, m := range p.members {
		if !m.healthy || (pin != "" && m.name != pin) {
			continue
		}
		s := score(id, m.name)
		// Equal scores only between members of the same name (a misconfiguration): the
		// lowest address wins, the same on every replica.
		if best == nil || s > bestScore || (s == bestScore && m.addr < best.addr) {
			best, bestScore = m, s
		}
	}
	if best != nil {
		return best.host(), nil
	}
	if pin != "" {
		return Host{}, fmt.Errorf("%w: the tool host %q that the server's tool_host pins is not healthy (%s): start it, or change or remove tool_host",
			ErrNoToolHost, pin, p.describeLocked())
	}
	return Host{}, fmt.Errorf("%w: no tool host is healthy (%s): start one, or check ZEST_TOOLHOST_ADDR", ErrNoToolHost, p.describeLocked())
}

// describeLocked lists the members and their health, for errors.
func (p *Pool) describeLocked() string {
	if len(p.members) == 0 {
		if p.target.DNSHost != "" {
			return fmt.Sprintf("%s%s:%s resolves to no address yet", DNSScheme, p.target.DNSHost, p.target.DNSPort)
		}
		return "none is configured"
	}
	addrs := make([]string, 0, len(p.members))
	for a := range p.members {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	parts := make([]string, 0, len(addrs))
	for _, a := range addrs {
		m := p.members[a]
		switch {
		case m.healthy:
			parts = append(parts, m.host().String()+" healthy")
		case m.name != "":
			parts = append(parts, m.host().String()+" down: "+m.why)
		default:
			parts = append(parts, m.addr+" down: "+m.why)
		}
	}
	return strings.Join(parts, "; ")
}

// Place is where the server id (pinned to pin, when set) runs: Placement, waiting up to
// Config.Wait (or until ctx ends) for a suitable tool host when there is none.
func (p *Pool) Place(ctx context.Context, id, pin string) (Host, error) {
	var deadline <-chan time.Time
	for {
		p.mu.Lock()
		h, err := p.placeLocked(id, pin)
		changed := p.changed
		p.mu.Unlock()
		if err == nil {
			return h, nil
		}
		if deadline == nil {
			t := time.NewTimer(p.cfg.Wait)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-changed:
		case <-deadline:
			return Host{}, err
		case <-ctx.Done():
			return Host{}, fmt.Errorf("%w (waiting for one: %w)", err, ctx.Err())
		}
	}
}

// Up reports whether h is still a healthy member under the same name.
func (p *Pool) Up(h Host) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.members[h.Addr]
	return m != nil && m.healthy && m.name == h.Name
}

// Lost reports whether h is no longer a healthy member, waiting up to within for the pool to
// notice: a call that failed because its connection dropped usually fails a moment before the
// pool has seen the connection go. A Fixed pool's host is never lost.
func (p *Pool) Lost(h Host, within time.Duration) bool {
	if p.fixed {
		return false
	}
	t := time.NewTimer(within)
	defer t.Stop()
	for {
		p.mu.Lock()
		m := p.members[h.Addr]
		up := m != nil && m.healthy && m.name == h.Name
		changed := p.changed
		p.mu.Unlock()
		if !up {
			return true
		}
		select {
		case <-changed:
		case <-t.C:
			return false
		}
	}
}

// Elsewhere reports whether server id (pinned to pin) is placed on another tool host than h,
// waiting up to within for the pool to see the change: a tool host that refused a call
// because the server moves off it (another replica saw a tool host come back first) is
// about to be outranked here too, once this pool has probed the newcomer.
func (p *Pool) Elsewhere(id, pin string, h Host, within time.Duration) bool {
	t := time.NewTimer(within)
	defer t.Stop()
	for {
		p.mu.Lock()
		now, err := p.placeLocked(id, pin)
		changed := p.changed
		p.mu.Unlock()
		if err == nil && (now.Addr != h.Addr || now.Name != h.Name) {
			return true
		}
		select {
		case <-changed:
		case <-t.C:
			return false
		}
	}
}

// Lookup returns the healthy tool host named name (the one with the lowest address, should
// two share it).
func (p *Pool) Lookup(name string) (Host, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var best *member
	for _, m := range p.members {
		if m.healthy && m.name == name && (best == nil || m.addr < best.addr) {
			best = m
		}
	}
	if best == nil {
		return Host{}, false
	}
	return best.host(), true
}

// Members returns every member, healthy or not, by address (Name is "" until one answered
// Describe).
func (p *Pool) Members() []Host {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Host, 0, len(p.members))
	for _, m := range p.members {
		out = append(out, m.host())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out
}

// Healthy returns the healthy members, by address.
func (p *Pool) Healthy() []Host {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Host
	for _, m := range p.members {
		if m.healthy {
			out = append(out, m.host())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out
}
