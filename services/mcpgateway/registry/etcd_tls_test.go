package registry

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/etcdtest"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEtcdTLSAndAuth runs OpenURL against a real etcd that serves TLS and requires client
// certificates, configured only through ZEST_REGISTRY and ZEST_ETCD_*: it writes and reads
// a server; without the client certificate or with another CA it fails naming what to fix.
// Then etcd's auth is enabled: the right password works, a wrong one fails naming
// ZEST_ETCD_USERNAME and ZEST_ETCD_PASSWORD, and no error ever shows a password.
func TestEtcdTLSAndAuth(t *testing.T) {
	t.Parallel()
	certs := etcdtest.NewCerts(t)
	c := etcdtest.StartTLS(t, 1, certs)
	_, port, _ := net.SplitHostPort(c.Endpoints()[0])
	env := map[string]string{EnvEtcdCAFile: certs.CAFile, EnvEtcdCertFile: certs.ClientCertFile, EnvEtcdKeyFile: certs.ClientKeyFile}
	const password, wrong = "pw-7f3c9e1a", "wrong-5b2d8c4e"
	// open runs OpenURL on endpoints (default the cluster's), with env edited by edit.
	open := func(name string, edit map[string]string, endpoints ...string) (Registry, error) {
		t.Helper()
		e := map[string]string{}
		for k, v := range env {
			e[k] = v
		}
		for k, v := range edit {
			e[k] = v
		}
		if len(endpoints) == 0 {
			endpoints = c.Endpoints()
		}
		url := "etcds://" + strings.Join(endpoints, ",") + "/tls"
		start := time.Now()
		r, err := OpenURL(t.Context(), url, "", func(k string) string { return e[k] })
		t.Logf("%s: %v in %v", name, err, time.Since(start))
		if err != nil {
			for _, pw := range []string{password, wrong} {
				if strings.Contains(err.Error(), pw) {
					t.Errorf("%s: the error shows a password: %v", name, err)
				}
			}
		} else {
			t.Cleanup(func() { r.Close() })
		}
		return r, err
	}

	r, err := open("client certificate", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.PutServer(t.Context(), &mcpgatewayv1.ServerConfig{Id: "s", Command: "node"}); err != nil {
		t.Fatal(err)
	}
	if got, err := r.GetServer(t.Context(), "s"); err != nil || got.GetCommand() != "node" {
		t.Fatalf("GetServer over TLS = %v, %v", got, err)
	}

	_, err = open("no client certificate", map[string]string{EnvEtcdCertFile: "", EnvEtcdKeyFile: ""})
	if err == nil || !strings.Contains(err.Error(), EnvEtcdCertFile) {
		t.Errorf("without a client certificate: %v; want an error naming %s", err, EnvEtcdCertFile)
	}
	_, err = open("another CA", map[string]string{EnvEtcdCAFile: etcdtest.NewCerts(t).CAFile})
	if err == nil || !strings.Contains(err.Error(), "TLS") || !strings.Contains(err.Error(), EnvEtcdCAFile) {
		t.Errorf("with another CA: %v; want an error naming TLS and %s", err, EnvEtcdCAFile)
	}
	other := etcdtest.NewCerts(t)
	_, err = open("client certificate of another CA", map[string]string{EnvEtcdCertFile: other.ClientCertFile, EnvEtcdKeyFile: other.ClientKeyFile})
	if err == nil || !strings.Contains(err.Error(), "refused the client certificate in "+EnvEtcdCertFile) {
		t.Errorf("with a client certificate of another CA: %v; want an error naming %s", err, EnvEtcdCertFile)
	}
	r, err = open("one endpoint whose name the certificate lacks", nil, "localhost:"+port, c.Endpoints()[0])
	if err != nil {
		t.Errorf("with one endpoint of two good: %v", err)
	} else if _, err := r.GetServer(t.Context(), "s"); err != nil {
		t.Errorf("GetServer through the good endpoint: %v", err)
	}
	_, err = open("only an endpoint whose name the certificate lacks", nil, "localhost:"+port)
	if err == nil || !strings.Contains(err.Error(), "does not name the host") {
		t.Errorf("with a host name the certificate lacks: %v; want an error saying so", err)
	}
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	_, err = open("plaintext server", nil, strings.TrimPrefix(plain.URL, "http://"))
	if err == nil || !strings.Contains(err.Error(), "use etcd://") {
		t.Errorf("etcds:// to a plaintext server: %v; want an error saying to use etcd://", err)
	}

	// Auth on, as an operator does it: user root with a password and role root, then enable.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"https://" + c.Endpoints()[0]}, TLS: c.ClientTLS(), DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.UserAdd(t.Context(), "root", password); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(t.Context(), "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AuthEnable(t.Context()); err != nil {
		t.Fatal(err)
	}

	r, err = open("password", map[string]string{EnvEtcdUsername: "root", EnvEtcdPassword: password})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.GetServer(t.Context(), "s"); err != nil || got.GetCommand() != "node" {
		t.Fatalf("GetServer with auth = %v, %v", got, err)
	}
	_, err = open("no user", nil)
	if err == nil || !strings.Contains(err.Error(), "permission") || !strings.Contains(err.Error(), EnvEtcdUsername) {
		t.Errorf("with auth on and no user: %v; want a permission error naming %s", err, EnvEtcdUsername)
	}
	_, err = open("wrong password", map[string]string{EnvEtcdUsername: "root", EnvEtcdPassword: wrong})
	if err == nil || !strings.Contains(err.Error(), EnvEtcdUsername) || !strings.Contains(err.Error(), EnvEtcdPassword) {
		t.Errorf("with a wrong password: %v; want an error naming %s and %s", err, EnvEtcdUsername, EnvEtcdPassword)
	}
}
