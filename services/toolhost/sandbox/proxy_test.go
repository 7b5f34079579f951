package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
)

// connectVia opens a CONNECT tunnel through the proxy's socket and returns the response.
func connectVia(t *testing.T, p *Proxy, target string) (net.Conn, *http.Response, string) {
	t.Helper()
	c, err := net.Dial("unix", p.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	body := ""
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
	}
	return c, resp, body
}

func TestProxyRefusesNamesThatLeadToPrivateAddresses(t *testing.T) {
	resolved := map[string][]netip.Addr{
		"metadata.example.com": {netip.MustParseAddr("169.254.169.254")},
		"intranet.example.com": {netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("fd00::1")},
		"mapped.example.com":   {netip.MustParseAddr("::ffff:127.0.0.1")},
	}
	p, err := StartProxy(ProxyOptions{
		AllowHosts: []string{"*.example.com"},
		Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
			return resolved[host], nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for host, want := range map[string]string{
		"metadata.example.com:443": "resolves to 169.254.169.254, a loopback, private or link-local address",
		"intranet.example.com:443": "resolves to 10.1.2.3, fd00::1",
		"mapped.example.com:80":    "resolves to 127.0.0.1",
		"example.com:443":          `example.com:443 is not in this server's sandbox.allow_hosts: add "example.com:443" there`,
		"a.example.com:22":         "a.example.com:22 is not in this server's sandbox.allow_hosts",
		"169.254.169.254:80":       "169.254.169.254:80 is not in this server's sandbox.allow_hosts",
	} {
		_, resp, body := connectVia(t, p, host)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, want) {
			t.Errorf("CONNECT %s: %d %q, want 403 containing %q", host, resp.StatusCode, body, want)
		}
	}
	for ip, public := range map[string]bool{"8.8.8.8": true, "2606:4700::1": true, "127.0.0.1": false, "10.0.0.1": false,
		"172.16.0.1": false, "192.168.1.1": false, "169.254.169.254": false, "100.64.0.1": false, "0.0.0.0": false,
		"::1": false, "fe80::1": false, "fc00::1": false, "::": false, "224.0.0.1": false, "::ffff:10.0.0.1": false} {
		if got := publicAddr(netip.MustParseAddr(ip)); got != public {
			t.Errorf("publicAddr(%s) = %v, want %v", ip, got, public)
		}
	}
}

func TestProxyBoundsTunnelsAndIdleTime(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // an echo server
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	target := ln.Addr().String()
	p, err := StartProxy(ProxyOptions{AllowHosts: []string{target}, Tunnels: 1, Idle: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	first, resp, _ := connectVia(t, p, target)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("first CONNECT: %d", resp.StatusCode)
	}
	fmt.Fprint(first, "ping")
	b := make([]byte, 4)
	if _, err := io.ReadFull(first, b); err != nil || string(b) != "ping" {
		t.Fatalf("echo through the tunnel: %q %v", b, err)
	}
	if _, resp, body := connectVia(t, p, target); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "1 connections are open") {
		t.Fatalf("second CONNECT while the first is open: %d %q, want 503", resp.StatusCode, body)
	}
	// Idle past 300 ms: the proxy closes the tunnel and frees its slot.
	start := time.Now()
	if _, err := first.Read(b); err == nil {
		t.Fatal("an idle tunnel stayed open")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("an idle tunnel closed after %v", d)
	}
	waitfor.NoError(t, 3*time.Second, func() error {
		if _, resp, _ := connectVia(t, p, target); resp.StatusCode != http.StatusOK {
			return fmt.Errorf("the slot was not freed after the idle close: %d", resp.StatusCode)
		}
		return nil
	})
	p.Close()
	if _, err := net.Dial("unix", p.Socket); err == nil {
		t.Fatal("the proxy still listens after Close")
	}
}

func TestProxyBoundsConnections(t *testing.T) {
	p, err := StartProxy(ProxyOptions{AllowHosts: []string{"api.example.com"}, Conns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var held []net.Conn
	for range 2 { // two connections that send nothing yet
		c, err := net.Dial("unix", p.Socket)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	third, err := net.Dial("unix", p.Socket) // queued in the backlog, not accepted
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	fmt.Fprint(third, "CONNECT other.example.com:443 HTTP/1.1\r\nHost: other.example.com:443\r\n\r\n")
	_ = third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := third.Read(make([]byte, 1)); err == nil {
		t.Fatal("a third connection was served while two were open (Conns 2)")
	}
	held[0].Close() // a slot frees: the third is accepted and answered
	_ = third.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(third), nil)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the third connection after a slot freed: %v %v, want 403", resp, err)
	}
}

// TestProxyRefusesNamesThatLeadToTheHostItself: a name that resolves to one of the tool host's
// own addresses — any interface's, a public one included, where a service listening on all
// interfaces answers — is refused like a private address; the operator may still write that IP.
func TestProxyRefusesNamesThatLeadToTheHostItself(t *testing.T) {
	self := netip.MustParseAddr("198.51.100.7") // public, and this machine's (stubbed)
	p, err := StartProxy(ProxyOptions{
		AllowHosts: []string{"*.example.com", "198.51.100.7:8080"},
		Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
			return map[string][]netip.Addr{
				"self.example.com":   {self},
				"mapped.example.com": {netip.MustParseAddr("::ffff:198.51.100.7")},
				"both.example.com":   {self, netip.MustParseAddr("10.0.0.1")},
				"mixed.example.com":  {self, netip.MustParseAddr("203.0.113.5")},
			}[host], nil
		},
		OwnAddrs: func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("127.0.0.1"), self}, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for host, want := range map[string]string{
		"self.example.com:443":   "self.example.com resolves to 198.51.100.7, an address of the tool host's own machine, which a name in sandbox.allow_hosts may not lead to: if the server must reach it, write the IP address itself",
		"mapped.example.com:443": "resolves to 198.51.100.7, an address of the tool host's own machine",
		"both.example.com:443":   "resolves to 10.0.0.1, a loopback, private or link-local address; 198.51.100.7, an address of the tool host's own machine",
	} {
		if _, resp, body := connectVia(t, p, host); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, want) {
			t.Errorf("CONNECT %s: %d %q, want 403 containing %q", host, resp.StatusCode, body, want)
		}
	}
	// Only the other addresses of a name are dialled; the IP the operator wrote is reached.
	if addrs, f := p.check(t.Context(), "mixed.example.com:443", 443); f != nil || len(addrs) != 1 || addrs[0].String() != "203.0.113.5:443" {
		t.Errorf("mixed.example.com: %v %v, want 203.0.113.5:443 alone", addrs, f)
	}
	if addrs, f := p.check(t.Context(), "198.51.100.7:8080", 80); f != nil || len(addrs) != 1 || addrs[0].String() != "198.51.100.7:8080" {
		t.Errorf("the IP written in allow_hosts: %v %v, want it admitted", addrs, f)
	}

	own, err := OwnAddrs() // the real list: this machine's loopback at least
	if err != nil || !slices.Contains(own, netip.MustParseAddr("127.0.0.1")) {
		t.Errorf("OwnAddrs() = %v, %v: want 127.0.0.1 among them", own, err)
	}
}
