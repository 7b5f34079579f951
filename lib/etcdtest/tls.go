package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// certLifetime: a test's certificates are valid from an hour ago (a clock a little behind is
// no failure) to a day ahead, far past any test.
const certLifetime = 24 * time.Hour

// Certs are the PEM files of a test CA, a server certificate it signed for 127.0.0.1 and a
// client certificate it signed, keys ECDSA P-256, every file mode 0600.
type Certs struct {
	CAFile                        string
	ServerCertFile, ServerKeyFile string
	ClientCertFile, ClientKeyFile string
	ca                            *x509.CertPool
	client                        tls.Certificate
}

// NewCerts generates a CA, a server and a client certificate into a directory of
// t.TempDir(). Each call makes a new CA: the CA of one call does not verify another's
// certificates (a test of a wrong CA uses two).
func NewCerts(t TB) *Certs {
	t.Helper()
	c, err := newCerts(t.TempDir())
	if err != nil {
		t.Fatalf("etcdtest: test certificates: %v", err)
	}
	return c
}

func newCerts(dir string) (*Certs, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcdtest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certLifetime),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	c := &Certs{
		CAFile:         filepath.Join(dir, "ca.pem"),
		ServerCertFile: filepath.Join(dir, "server.pem"), ServerKeyFile: filepath.Join(dir, "server-key.pem"),
		ClientCertFile: filepath.Join(dir, "client.pem"), ClientKeyFile: filepath.Join(dir, "client-key.pem"),
		ca: x509.NewCertPool(),
	}
	c.ca.AddCert(caCert)
	if err := writePEM(c.CAFile, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	leaf := func(serial int64, name string, usage []x509.ExtKeyUsage, certFile, keyFile string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certLifetime),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage,
		}
		if name == "127.0.0.1" {
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(keyFile, "EC PRIVATE KEY", kder)
	}
	// The server's certificate is a client's too: etcd's JSON gateway (/v3/…, which Leader
	// uses) dials the member's own gRPC port with it, and --client-cert-auth checks it.
	if err := leaf(2, "127.0.0.1", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, c.ServerCertFile, c.ServerKeyFile); err != nil {
		return nil, err
	}
	// etcd's user when auth is on and no password is given is the client certificate's CN.
	if err := leaf(3, "etcdtest-client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, c.ClientCertFile, c.ClientKeyFile); err != nil {
		return nil, err
	}
	if c.client, err = tls.LoadX509KeyPair(c.ClientCertFile, c.ClientKeyFile); err != nil {
		return nil, err
	}
	return c, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// ClientTLS returns a TLS config that trusts the CA and presents the client certificate.
func (c *Certs) ClientTLS() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: c.ca, Certificates: []tls.Certificate{c.client}}
}

// serverArgs make a member serve https on its client URL with the server certificate and
// refuse a client without a certificate the CA signed. Peers stay plaintext: what is tested
// is the client's side.
func (c *Certs) serverArgs() []string {
	return []string{
		"--cert-file", c.ServerCertFile, "--key-file", c.ServerKeyFile,
		"--client-cert-auth", "--trusted-ca-file", c.CAFile,
	}
}

// StartTLS is Start with client TLS: every member serves https on its client URL with
// certs' server certificate and requires a client certificate signed by certs' CA
// (--client-cert-auth). Its health checks present certs' client certificate.
func StartTLS(t TB, n int, certs *Certs) *Cluster {
	t.Helper()
	if certs == nil {
		t.Fatal("etcdtest.StartTLS: no certificates (etcdtest.NewCerts makes them)")
	}
	return start(t, n, certs)
}

// httpClient returns a client for the members' URLs: with the CA and client certificate
// after StartTLS.
func (c *Cluster) httpClient(timeout time.Duration) *http.Client {
	if c.certs == nil {
		return &http.Client{Timeout: timeout}
	}
	// No keep-alive: a client made for one wait leaves no idle connection behind.
	return &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: c.certs.ClientTLS(), DisableKeepAlives: true}}
}

// ClientTLS returns the TLS config that reaches the cluster (nil when it is plaintext).
func (c *Cluster) ClientTLS() *tls.Config {
	if c.certs == nil {
		return nil
	}
	return c.certs.ClientTLS()
}
