package grpcdial

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/resolver"
)

// TargetForms says what a dial target may be, in every error about one.
const TargetForms = "want host:port, a comma-separated list of host:port (replicas), or dns:///name:port (every address the name resolves to, e.g. a Kubernetes headless service)"

// DNSRefresh is how often a dns:/// target is resolved again while nothing fails, so that a
// replica added behind the name is found. It is also gRPC's least interval between two
// resolutions of one name (a connection that fails asks for one at once, at most that often).
const DNSRefresh = 30 * time.Second

// listScheme is the scheme of the resolver that gives a comma-separated list's addresses; it
// is only ever built through the ClientConn's own resolvers, never registered globally.
const listScheme = "zest-list"

// Target is a parsed dial target.
type Target struct {
	// Addrs are the addresses of a single or list target, in their order; nil for DNS.
	Addrs []string
	// DNS is the dns:/// target as given ("dns:///name:port" or "dns://server/name:port").
	DNS string
}

// ParseTarget reads a dial target: one host:port, a comma-separated list of host:port (spaces
// around the commas are ignored, an address may not be listed twice), or dns:///name:port
// (dns://dns-server:53/name:port asks that DNS server). The error says what was wrong and
// what is wanted; ValidateTarget adds the flag's name.
func ParseTarget(target string) (Target, error) {
	if rest, ok := strings.CutPrefix(target, "dns://"); ok {
		_, hostport, found := strings.Cut(rest, "/")
		if !found {
			return Target{}, fmt.Errorf("%q has no /name:port after dns:// (three slashes when no DNS server is named: dns:///name:port)", target)
		}
		host, port, err := net.SplitHostPort(hostport)
		if err != nil || host == "" || port == "" {
			return Target{}, fmt.Errorf("%q: the name needs a port: dns:///name:port", target)
		}
		return Target{DNS: target}, nil
	}
	if i := strings.Index(target, "://"); i >= 0 {
		return Target{}, fmt.Errorf("%q: scheme %q is not supported", target, target[:i])
	}
	var t Target
	seen := map[string]bool{}
	for i, a := range strings.Split(target, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			return Target{}, fmt.Errorf("%q: address %d is empty", target, i+1)
		}
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return Target{}, fmt.Errorf("%q: address %q is not host:port", target, a)
		}
		if seen[a] {
			return Target{}, fmt.Errorf("%q: address %q is listed twice", target, a)
		}
		seen[a] = true
		t.Addrs = append(t.Addrs, a)
	}
	return t, nil
}

// ValidateTarget checks the dial target of flag (its name, e.g. "inference-addr"): the error
// names the flag, what was wrong and the accepted forms. Services call it from Validate.
func ValidateTarget(flag, target string) error {
	if _, err := ParseTarget(target); err != nil {
		return fmt.Errorf("%s %v: %s", flag, err, TargetForms)
	}
	return nil
}

// grpcTarget is what grpc.NewClient dials for t, with the resolver that reads it.
func (t Target) grpcTarget() (string, resolver.Builder) {
	switch {
	case t.DNS != "":
		return t.DNS, refreshedDNS{}
	case len(t.Addrs) == 1:
		// One address, dialled as before: no resolution, the address as the authority.
		return "passthrough:///" + t.Addrs[0], nil
	}
	return listScheme + ":///" + strings.Join(t.Addrs, ","), listBuilder{}
}

// listBuilder resolves "zest-list:///a:1,b:2" to one endpoint per address, once: a list never
// changes. A replica that dies stays in the list; its connection is retried with backoff and
// the balancer skips it until it answers SERVING again.
type listBuilder struct{}

func (listBuilder) Scheme() string { return listScheme }

func (listBuilder) Build(target resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	var eps []resolver.Endpoint
	for _, a := range strings.Split(target.Endpoint(), ",") {
		eps = append(eps, resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}})
	}
	if err := cc.UpdateState(resolver.State{Endpoints: eps}); err != nil {
		return nil, err
	}
	return nopResolver{}, nil
}

type nopResolver struct{}

func (nopResolver) ResolveNow(resolver.ResolveNowOptions) {}
func (nopResolver) Close()                                {}

// refreshedDNS is gRPC's own DNS resolver, asked to resolve again every DNSRefresh: on its
// own it resolves again only when a connection fails, so replicas added behind a name would
// never be used while the others stay up.
type refreshedDNS struct{}

func (refreshedDNS) Scheme() string { return "dns" }

func (refreshedDNS) Build(target resolver.Target, cc resolver.ClientConn, opts resolver.BuildOptions) (resolver.Resolver, error) {
	b := resolver.Get("dns")
	if b == nil {
		return nil, fmt.Errorf("gRPC's dns resolver is not registered")
	}
	r, err := b.Build(target, cc, opts)
	if err != nil {
		return nil, err
	}
	p := &refreshing{Resolver: r, stop: make(chan struct{})}
	go p.run(DNSRefresh)
	return p, nil
}

type refreshing struct {
	resolver.Resolver
	stop chan struct{}
	once sync.Once
}

func (p *refreshing) run(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.ResolveNow(resolver.ResolveNowOptions{})
		}
	}
}

func (p *refreshing) Close() {
	p.once.Do(func() { close(p.stop) })
	p.Resolver.Close()
}
