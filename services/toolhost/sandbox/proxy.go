package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"

	"github.com/zestmcp/zest/lib/sandboxspec"
)

// ProxyPort is where the forwarder listens inside the sandbox's own network namespace
// (127.0.0.1 there is the sandbox's loopback, not the tool host's): HTTP_PROXY points to it,
// and Landlock allows a TCP connect to this port alone.
const ProxyPort = 3128

// Limits of a server's filtering proxy.
const (
	DefaultProxyTunnels = 64              // concurrent CONNECT tunnels and HTTP requests
	DefaultProxyConns   = 128             // connections accepted at once; more wait unaccepted
	DefaultProxyIdle    = 5 * time.Minute // a tunnel or request with no byte either way is closed
	proxyDialTimeout    = 10 * time.Second
)

// ProxyOptions configure StartProxy.
type ProxyOptions struct {
	AllowHosts []string // sandbox.allow_hosts (checked by Check)
	// UID and GID own the socket when set (> 0): the sandbox user connects to it.
	UID, GID int
	Tunnels  int           // DefaultProxyTunnels when 0
	Conns    int           // DefaultProxyConns when 0
	Idle     time.Duration // DefaultProxyIdle when 0
	Logger   *slog.Logger
	// Resolve looks up a host name (net.DefaultResolver when nil; tests stub it).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// OwnAddrs lists the addresses of the tool host's machine, every interface's (OwnAddrs, the
	// default, when nil; tests stub it): a name that leads to one is refused, public or not.
	OwnAddrs func() ([]netip.Addr, error)
}

// OwnAddrs are the addresses of this machine's interfaces, read again at each call (an
// interface may come up or change its address while the proxy runs).
func OwnAddrs() ([]netip.Addr, error) {
	prefixes, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(prefixes))
	for _, a := range prefixes {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out, nil
}

// Proxy is one sandboxed server's filtering HTTP proxy, in the tool host, on a unix socket in
// a directory of its own that the sandbox binds read-only. It admits CONNECT (TLS) and plain
// absolute-URI HTTP requests to the hosts allow_hosts names, resolves names itself and
// refuses names that lead to loopback, private or link-local addresses, or to one of the tool
// host's own addresses.
type Proxy struct {
	Dir, Socket string
	allow       []sandboxspec.Allow
	opts        ProxyOptions
	log         *slog.Logger
	srv         *http.Server
	slots       chan struct{}
	transport   *http.Transport
	ctx         context.Context
	cancel      context.CancelFunc
	once        sync.Once
}

// StartProxy starts a proxy for one sandboxed server; Close stops it and removes its directory.
func StartProxy(o ProxyOptions) (*Proxy, error) {
	allow, err := sandboxspec.ParseAllowList(o.AllowHosts)
	if err != nil {
		return nil, err
	}
	if o.Tunnels <= 0 {
		o.Tunnels = DefaultProxyTunnels
	}
	if o.Conns <= 0 {
		o.Conns = DefaultProxyConns
	}
	if o.Idle <= 0 {
		o.Idle = DefaultProxyIdle
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.OwnAddrs == nil {
		o.OwnAddrs = OwnAddrs
	}
	if o.Resolve == nil {
		o.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	dir, err := os.MkdirTemp("", "zest-proxy-")
	if err != nil {
		return nil, err
	}
	// 0711: the sandbox user (bwrap binds it, the forwarder connects) may pass through but
	// not list or change it; the socket is its own.
	if err := os.Chmod(dir, 0o711); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	sock := filepath.Join(dir, "proxy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if o.UID > 0 {
		err = os.Chown(sock, o.UID, o.GID)
	}
	if err == nil {
		err = os.Chmod(sock, 0o600)
	}
	if err != nil {
		ln.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	p := &Proxy{Dir: dir, Socket: sock, allow: allow, opts: o, log: o.Logger, slots: make(chan struct{}, o.Tunnels)}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.transport = &http.Transport{
		Proxy: nil, // never the tool host's own proxy variables
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			addrs, _ := ctx.Value(addrsKey{}).([]netip.AddrPort)
			return dialAny(ctx, addrs)
		},
		DisableKeepAlives:     true, // each request is checked and dialled on its own
		ResponseHeaderTimeout: o.Idle,
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: o.Idle, ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug)}
	// Bounded accepts: the server's idle keep-alive connections must not use up the tool
	// host's descriptors (a connection that sends nothing is closed by ReadHeaderTimeout).
	go p.srv.Serve(netutil.LimitListener(ln, o.Conns)) //nolint:errcheck // ends with Close
	return p, nil
}

// Close stops the proxy, its tunnels and requests, and removes its directory.
func (p *Proxy) Close() error {
	p.once.Do(func() {
		p.cancel()
		_ = p.srv.Close()
		p.transport.CloseIdleConnections()
		_ = os.RemoveAll(p.Dir)
	})
	return nil
}

type addrsKey struct{}

func dialAny(ctx context.Context, addrs []netip.AddrPort) (net.Conn, error) {
	if len(addrs) == 0 {
		return nil, errors.New("no address to dial")
	}
	d := net.Dialer{Timeout: proxyDialTimeout}
	var last error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp", a.String())
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

// refusal is a destination the proxy will not reach: the status and the text for the server.
type refusal struct {
	status int
	text   string
}

// check decides host:port (defPort when the port is missing) and returns the addresses to dial.
func (p *Proxy) check(ctx context.Context, hostport string, defPort int) ([]netip.AddrPort, *refusal) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		host, ps = strings.Trim(hostport, "[]"), strconv.Itoa(defPort)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return nil, &refusal{http.StatusBadRequest, fmt.Sprintf("zest sandbox proxy: bad destination %q: want host:port", hostport)}
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	literal, isIP := netip.ParseAddr(host)
	if isIP == nil {
		literal = literal.Unmap()
		host = literal.String()
	}
	allowed := false
	for _, a := range p.allow {
		if a.Matches(host, port) {
			allowed = true
			break
		}
	}
	if !allowed {
		return nil, &refusal{http.StatusForbidden, fmt.Sprintf(
			"zest sandbox proxy: %s is not in this server's sandbox.allow_hosts: add %q there (in the server's config) to let the server reach it",
			net.JoinHostPort(host, strconv.Itoa(port)), net.JoinHostPort(host, strconv.Itoa(port)))}
	}
	if isIP == nil { // the operator wrote this address: reach it even when it is private
		return []netip.AddrPort{netip.AddrPortFrom(literal, uint16(port))}, nil
	}
	rctx, cancel := context.WithTimeout(ctx, proxyDialTimeout)
	defer cancel()
	ips, err := p.opts.Resolve(rctx, host)
	if err != nil {
		return nil, &refusal{http.StatusBadGateway, fmt.Sprintf("zest sandbox proxy: cannot resolve %s: %v", host, err)}
	}
	// The machine's own addresses: a service listening on all interfaces is reached through a
	// public one as well as through loopback.
	own, err := p.opts.OwnAddrs()
	if err != nil {
		return nil, &refusal{http.StatusBadGateway, fmt.Sprintf("zest sandbox proxy: cannot list this machine's addresses to check %s against them: %v", host, err)}
	}
	var out []netip.AddrPort
	var private, self []string
	for _, ip := range ips {
		ip = ip.Unmap()
		switch {
		case !publicAddr(ip):
			private = append(private, ip.String())
		case slices.Contains(own, ip):
			self = append(self, ip.String())
		default:
			out = append(out, netip.AddrPortFrom(ip, uint16(port)))
		}
	}
	if len(out) == 0 {
		var why []string
		if len(private) > 0 {
			why = append(why, strings.Join(private, ", ")+", a loopback, private or link-local address")
		}
		if len(self) > 0 {
			why = append(why, strings.Join(self, ", ")+", an address of the tool host's own machine")
		}
		return nil, &refusal{http.StatusForbidden, fmt.Sprintf(
			"zest sandbox proxy: %s resolves to %s, which a name in sandbox.allow_hosts may not lead to: if the server must reach it, write the IP address itself in sandbox.allow_hosts",
			host, strings.Join(why, "; "))}
	}
	return out, nil
}

func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, f *refusal) {
	if f.status == http.StatusBadGateway { // an allowed destination that failed: not a refusal
		p.log.Info("sandbox proxy could not reach a destination", "method", r.Method, "host", r.Host, "why", f.text)
	} else {
		p.log.Warn("sandbox proxy refused a destination", "method", r.Method, "host", r.Host, "status", f.status, "why", f.text)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(f.status)
	io.WriteString(w, f.text+"\n") //nolint:errcheck // a client that went away cannot be told
}

// take bounds concurrent tunnels and requests.
func (p *Proxy) take(w http.ResponseWriter, r *http.Request) bool {
	select {
	case p.slots <- struct{}{}:
		return true
	default:
		p.refuse(w, r, &refusal{http.StatusServiceUnavailable, fmt.Sprintf("zest sandbox proxy: %d connections are open, the limit per sandboxed server: close some and retry", cap(p.slots))})
		return false
	}
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	if r.URL.Scheme != "http" || r.URL.Host == "" {
		p.refuse(w, r, &refusal{http.StatusBadRequest, "zest sandbox proxy: this is a proxy: send CONNECT host:port (for https) or an absolute http:// URL"})
		return
	}
	if !p.take(w, r) {
		return
	}
	defer func() { <-p.slots }()
	addrs, f := p.check(r.Context(), r.URL.Host, 80)
	if f != nil {
		p.refuse(w, r, f)
		return
	}
	ctx, cancel := context.WithCancel(context.WithValue(r.Context(), addrsKey{}, addrs))
	defer cancel()
	stop := context.AfterFunc(p.ctx, cancel)
	defer stop()
	out := r.Clone(ctx)
	out.RequestURI = ""
	for _, h := range []string{"Proxy-Connection", "Proxy-Authorization", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"} {
		out.Header.Del(h)
	}
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		p.refuse(w, r, &refusal{http.StatusBadGateway, fmt.Sprintf("zest sandbox proxy: %s: %v", r.URL.Host, err)})
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		if k == "Connection" || k == "Keep-Alive" {
			continue
		}
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		_ = rc.SetWriteDeadline(time.Now().Add(p.opts.Idle))
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	if !p.take(w, r) {
		return
	}
	defer func() { <-p.slots }()
	addrs, f := p.check(r.Context(), r.Host, 443)
	if f != nil {
		p.refuse(w, r, f)
		return
	}
	up, err := dialAny(r.Context(), addrs)
	if err != nil {
		p.refuse(w, r, &refusal{http.StatusBadGateway, fmt.Sprintf("zest sandbox proxy: %s: %v", r.Host, err)})
		return
	}
	defer up.Close()
	down, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer down.Close()
	_ = down.SetDeadline(time.Time{})
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	stop := context.AfterFunc(p.ctx, func() { down.Close(); up.Close() })
	defer stop()
	a := idleConn{down, p.opts.Idle}
	pre, _ := rw.Reader.Peek(rw.Reader.Buffered()) // what the client sent after CONNECT already
	pipe(a, io.MultiReader(bytes.NewReader(pre), a), idleConn{up, p.opts.Idle})
}

// pipe copies both ways until either side ends (or idles past its deadline).
func pipe(a net.Conn, aIn io.Reader, b net.Conn) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b, aIn); closeWrite(b); done <- struct{}{} }()
	go func() { _, _ = io.Copy(a, b); closeWrite(a); done <- struct{}{} }()
	<-done
	// One side ended: give the other a moment to drain, then end both.
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	a.Close()
	b.Close()
}

func closeWrite(c net.Conn) {
	if ic, ok := c.(idleConn); ok {
		c = ic.Conn
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// idleConn closes a connection on which nothing moved for d (each read and write renews it).
type idleConn struct {
	net.Conn
	d time.Duration
}

func (c idleConn) Read(b []byte) (int, error) {
	_ = c.Conn.SetDeadline(time.Now().Add(c.d))
	return c.Conn.Read(b)
}

func (c idleConn) Write(b []byte) (int, error) {
	_ = c.Conn.SetDeadline(time.Now().Add(c.d))
	return c.Conn.Write(b)
}

// publicAddr says whether a name's resolved address may be reached: not loopback, link-local
// (the cloud metadata address 169.254.169.254), private, shared (100.64/10), unspecified or
// multicast. Only an IP literal the operator wrote reaches those.
func publicAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid(), ip.IsLoopback(), ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(), ip.IsPrivate(),
		ip.IsUnspecified(), ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return false
	}
	for _, p := range []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("100.64.0.0/10"),
		netip.MustParsePrefix("192.0.0.0/24"), netip.MustParsePrefix("198.18.0.0/15"),
		netip.MustParsePrefix("240.0.0.0/4"),
	} {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}
