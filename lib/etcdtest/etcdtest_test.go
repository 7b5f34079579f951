package etcdtest

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
)

// TestThreeMembersSurviveKillAndRestart: a cluster of three answers, keeps a quorum with one
// member killed, and takes the member back on its data and ports.
func TestThreeMembersSurviveKillAndRestart(t *testing.T) {
	c := Start(t, 3)
	if n := len(c.Endpoints()); n != 3 {
		t.Fatalf("%d endpoints", n)
	}
	client := &http.Client{Timeout: time.Second}
	c.Kill(1)
	if err := health(client, c.ClientURL(1)); err == nil {
		t.Fatal("a killed member still answers")
	}
	for _, i := range []int{0, 2} {
		// A leader may be elected again meanwhile.
		waitfor.NoError(t, 3*time.Second, func() error { return health(client, c.ClientURL(i)) })
	}
	start := time.Now()
	c.Restart(1)
	t.Logf("member 1 rejoined in %v", time.Since(start))
	if err := health(client, c.ClientURL(1)); err != nil {
		t.Fatal(err)
	}
	c.Stop()
	for i := range 3 {
		if err := health(client, c.ClientURL(i)); err == nil {
			t.Fatalf("member %d answers after Stop", i)
		}
	}
}

// TestLeader: one member of three says it leads; killed, another one leads.
func TestLeader(t *testing.T) {
	c := Start(t, 3)
	first := c.Leader()
	if first < 0 {
		t.Fatal("no member leads")
	}
	c.Kill(first)
	waitfor.True(t, 10*time.Second, fmt.Sprintf("a new leader after member %d was killed", first), func() bool {
		l := c.Leader()
		return l >= 0 && l != first
	})
}

// TestStartTLS: a member started with client TLS answers https with its certificate for
// 127.0.0.1 to a client that presents the CA's client certificate, and refuses one without
// a certificate, one that does not trust its CA, and plaintext.
func TestStartTLS(t *testing.T) {
	certs := NewCerts(t)
	for _, f := range []string{certs.CAFile, certs.ServerCertFile, certs.ServerKeyFile, certs.ClientCertFile, certs.ClientKeyFile} {
		st, err := os.Stat(f)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, %v; want mode 0600", f, st, err)
		}
	}
	c := StartTLS(t, 1, certs)
	url := c.ClientURL(0)
	if !strings.HasPrefix(url, "https://127.0.0.1:") {
		t.Fatalf("client URL %s", url)
	}
	withCert := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: c.ClientTLS()}}
	if err := health(withCert, url); err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	noCert := certs.ClientTLS()
	noCert.Certificates = nil
	other := NewCerts(t).ClientTLS()
	for name, client := range map[string]*http.Client{
		"no client certificate": {Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: noCert}},
		"another CA":            {Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: other}},
	} {
		if err := health(client, url); err == nil {
			t.Errorf("%s: /health answered", name)
		}
	}
	if err := health(&http.Client{Timeout: time.Second}, "http"+strings.TrimPrefix(url, "https")); err == nil {
		t.Error("plaintext /health answered")
	}
	if c.Leader() != 0 {
		t.Errorf("Leader() = %d over TLS; want 0", c.Leader())
	}
}
