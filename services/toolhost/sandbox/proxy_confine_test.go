package sandbox_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"github.com/zestmcp/zest/services/toolhost/sandbox"
	"google.golang.org/protobuf/proto"
)

// countingServer is an httptest server on 127.0.0.1 that counts the requests it gets.
func countingServer(t *testing.T, body string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestNetworkProxyAdmitsAllowHostsAlone(t *testing.T) {
	needBwrap(t)
	s := newSup(t, nil)
	allowed, allowedHits := countingServer(t, "hello from the allowed host")
	other, otherHits := countingServer(t, "secret")
	allowedAddr := strings.TrimPrefix(allowed.URL, "http://") // 127.0.0.1:PORT, an IP literal the operator may allow
	port := allowedAddr[strings.LastIndex(allowedAddr, ":")+1:]
	spec := &toolhostv1.ServerSpec{Id: "proxied", Command: hostile, TimeoutMs: 20000, Sandbox: &toolhostv1.Sandbox{
		Enabled: proto.Bool(true), Network: proto.String("proxy"),
		AllowHosts: []string{allowedAddr, "localhost:" + port},
	}}
	st, err := s.EnsureStarted(t.Context(), spec, false)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	active := st.GetSandbox().GetActive()
	if !slices.Contains(active, "network_proxy") || slices.Contains(active, "network_none") {
		t.Fatalf("sandbox.active = %v, want network_proxy and no network_none", active)
	}

	// An allowed host: through the proxy, the fetch succeeds.
	text, isErr, err := callTool(t, s, "proxied", "fetch", map[string]any{"url": allowed.URL + "/x"})
	if err != nil || isErr || text != "200 hello from the allowed host" {
		t.Fatalf("fetch allowed: %q isError=%v err=%v", text, isErr, err)
	}
	if allowedHits.Load() != 1 {
		t.Fatalf("allowed server got %d requests, want 1", allowedHits.Load())
	}

	// HTTPS: a CONNECT tunnel to an allowed TLS server.
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello over TLS") }))
	t.Cleanup(secure.Close)
	secureAddr := strings.TrimPrefix(secure.URL, "https://")
	spec.Sandbox.AllowHosts = append(spec.Sandbox.AllowHosts, secureAddr)
	if _, err := s.EnsureStarted(t.Context(), spec, false); err != nil { // a changed spec restarts it
		t.Fatalf("restart with the TLS host: %v", err)
	}
	text, isErr, err = callTool(t, s, "proxied", "fetch", map[string]any{"url": secure.URL + "/", "insecure": true})
	if err != nil || isErr || text != "200 hello over TLS" {
		t.Fatalf("fetch over TLS: %q isError=%v err=%v", text, isErr, err)
	}

	// A host not listed: 403 from the proxy naming it and the setting; nothing reaches it.
	text, isErr, err = callTool(t, s, "proxied", "fetch", map[string]any{"url": other.URL + "/x"})
	otherAddr := strings.TrimPrefix(other.URL, "http://")
	if err != nil || isErr || !strings.HasPrefix(text, "403 ") || !strings.Contains(text, otherAddr) || !strings.Contains(text, "sandbox.allow_hosts") {
		t.Fatalf("fetch unlisted: %q isError=%v err=%v, want a 403 naming %s and sandbox.allow_hosts", text, isErr, err, otherAddr)
	}

	// A name that resolves to loopback is refused although listed: only IP literals reach it.
	text, isErr, err = callTool(t, s, "proxied", "fetch", map[string]any{"url": "http://localhost:" + port + "/x"})
	if err != nil || isErr || !strings.HasPrefix(text, "403 ") || !strings.Contains(text, "loopback") {
		t.Fatalf("fetch localhost: %q isError=%v err=%v, want a 403 about a loopback address", text, isErr, err)
	}

	// Straight to the allowed server's port, bypassing the proxy: no route (own network
	// namespace) and no Landlock connect right.
	text, isErr, err = callTool(t, s, "proxied", "connect", map[string]any{"addr": allowedAddr})
	if err != nil || !isErr {
		t.Fatalf("raw dial to %s: %q isError=%v err=%v, want a failure", allowedAddr, text, isErr, err)
	}
	t.Logf("raw dial to %s: %s", allowedAddr, text)
	if n := otherHits.Load(); n != 0 {
		t.Fatalf("unlisted server got %d requests, want 0", n)
	}
	if n := allowedHits.Load(); n != 1 {
		t.Fatalf("allowed server got %d requests after the refusals, want 1", n)
	}

	// The forwarder runs inside the sandbox while the server does, and it and the proxy's
	// directory are gone once the server stops.
	fwd := forwarders(t)
	if len(fwd) != 1 {
		t.Fatalf("forwarders of this test's binary: %v, want 1", fwd)
	}
	var sock string
	for _, path := range fwd {
		sock = path
	}
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("proxy socket while the server runs: %v", err)
	}
	if _, err := s.Stop("proxied"); err != nil {
		t.Fatal(err)
	}
	waitfor.NoError(t, 5*time.Second, func() error {
		if fwd := forwarders(t); len(fwd) > 0 {
			return fmt.Errorf("forwarders left after the server stopped: %v", fwd)
		}
		if _, err := os.Stat(filepath.Dir(sock)); !os.IsNotExist(err) {
			return fmt.Errorf("the proxy's directory %s is left after the server stopped", filepath.Dir(sock))
		}
		return nil
	})
}

// forwarders are the running forwarders started from this test's binary: pid → socket.
func forwarders(t *testing.T) map[string]string {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	out := map[string]string{}
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) == 3 && args[0] == exe && args[1] == sandbox.ForwardFlag {
			out[filepath.Base(filepath.Dir(f))] = args[2]
		}
	}
	return out
}
