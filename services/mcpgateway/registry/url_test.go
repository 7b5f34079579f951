package registry

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseURL(t *testing.T) {
	many := make([]string, MaxEtcdEndpoints+1)
	for i := range many {
		many[i] = "h" + string(rune('a'+i)) + ":2379"
	}
	for _, tc := range []struct {
		in      string
		want    *EtcdURL
		wantErr string // a part of the error
	}{
		{in: "", want: nil},
		{in: "etcd://127.0.0.1:2379", want: &EtcdURL{Endpoints: []string{"127.0.0.1:2379"}, Prefix: "/zest/"}},
		{in: "etcd://a:2379,b:2379,c:2379/", want: &EtcdURL{Endpoints: []string{"a:2379", "b:2379", "c:2379"}, Prefix: "/zest/"}},
		{in: "etcds://etcd-0.etcd.svc:2379/prod/zest", want: &EtcdURL{TLS: true, Endpoints: []string{"etcd-0.etcd.svc:2379"}, Prefix: "/prod/zest/"}},
		{in: "ETCD://[::1]:2379/x_y.z-1/", want: &EtcdURL{Endpoints: []string{"[::1]:2379"}, Prefix: "/x_y.z-1/"}},
		{in: "etcd://" + strings.Join(many[:MaxEtcdEndpoints], ","), want: &EtcdURL{Endpoints: many[:MaxEtcdEndpoints], Prefix: "/zest/"}},

		{in: "/var/lib/zest/registry.db", wantErr: "etcd://host:port"},
		{in: "http://127.0.0.1:2379", wantErr: "etcds://"},
		{in: "bolt://x", wantErr: `"" (bbolt`},
		{in: "etcd://user:secret@h:2379", wantErr: "ZEST_ETCD_USERNAME and ZEST_ETCD_PASSWORD"},
		{in: "etcd://user@h:2379", wantErr: "ZEST_ETCD_USERNAME"},
		{in: "etcd://", wantErr: "no etcd endpoint"},
		{in: "etcd:///zest", wantErr: "no etcd endpoint"},
		{in: "etcd://h", wantErr: "want host:port"},
		{in: "etcd://h:", wantErr: "port"},
		{in: "etcd://:2379", wantErr: "want host:port"},
		{in: "etcd://h:0", wantErr: "port"},
		{in: "etcd://h:65536", wantErr: "port"},
		{in: "etcd://h:02379", wantErr: "port"},
		{in: "etcd://h:2379,", wantErr: "want host:port"},
		{in: "etcd://h:2379,h:2379", wantErr: "twice"},
		{in: "etcd://[1.2.3.4]:2379", wantErr: "IPv6"},
		{in: "etcd://h%20x:2379", wantErr: "DNS name"},
		{in: "etcd://h:2379?x=1", wantErr: "query"},
		{in: "etcd://h:2379#f", wantErr: "query or fragment"},
		{in: "etcd://h:2379//x", wantErr: "empty"},
		{in: "etcd://h:2379/a/../b", wantErr: ".."},
		{in: "etcd://h:2379/a b", wantErr: "letters"},
		{in: "etcd://h:2379/" + strings.Repeat("p", MaxEtcdPrefix), wantErr: "longer than"},
		{in: "etcd://" + strings.Join(many, ","), wantErr: "more than 16"},
		{in: "etcd://h:2379/" + strings.Repeat("a/", maxURL), wantErr: "longer than 4096"},
	} {
		got, err := ParseURL(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseURL(%.60q) = %v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// FuzzParseURL: ParseURL never panics, and what it accepts is well formed and reads back the
// same from its String.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"", "etcd://127.0.0.1:2379", "etcds://a:1,b:2/p/q/", "etcd://[::1]:2379/x", "etcd://u:p@h:1", "etcd://h:1?x", "etcd://h:1//", "etcd://h:99999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := ParseURL(raw)
		if err != nil || u == nil {
			if err == nil && raw != "" {
				t.Fatalf("%q: neither a URL nor an error", raw)
			}
			return
		}
		if len(u.Endpoints) == 0 || len(u.Endpoints) > MaxEtcdEndpoints {
			t.Fatalf("%q: %d endpoints", raw, len(u.Endpoints))
		}
		for _, ep := range u.Endpoints {
			if err := checkEndpoint(ep); err != nil {
				t.Fatalf("%q: accepted endpoint %q: %v", raw, ep, err)
			}
		}
		if !strings.HasPrefix(u.Prefix, "/") || !strings.HasSuffix(u.Prefix, "/") || len(u.Prefix) > MaxEtcdPrefix || strings.Contains(u.Prefix, "//") {
			t.Fatalf("%q: prefix %q", raw, u.Prefix)
		}
		again, err := ParseURL(u.String())
		if err != nil || !reflect.DeepEqual(again, u) {
			t.Fatalf("%q → %q → %+v, %v; want %+v", raw, u.String(), again, err, u)
		}
	})
}

func TestCheckURLEnvironment(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := writeTestCert(t, dir)
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url     string
		env     map[string]string
		wantErr string
	}{
		{url: "", env: map[string]string{EnvEtcdCAFile: "/nonexistent"}}, // bbolt ignores them
		{url: "etcd://h:2379"},
		{url: "etcds://h:2379"}, // the system's roots
		{url: "etcds://h:2379", env: map[string]string{EnvEtcdCAFile: ca, EnvEtcdCertFile: cert, EnvEtcdKeyFile: key, EnvEtcdUsername: "zest", EnvEtcdPassword: "pw"}},
		{url: "etcd://h:2379", env: map[string]string{EnvEtcdCAFile: ca}, wantErr: "use etcds://"},
		{url: "etcd://h:2379", env: map[string]string{EnvEtcdUsername: "zest", EnvEtcdPassword: "pw"}, wantErr: "not sent in clear"},
		{url: "etcds://h:2379", env: map[string]string{EnvEtcdUsername: "zest"}, wantErr: "set both ZEST_ETCD_USERNAME and ZEST_ETCD_PASSWORD"},
		{url: "etcds://h:2379", env: map[string]string{EnvEtcdCertFile: cert}, wantErr: "set both ZEST_ETCD_CERT_FILE and ZEST_ETCD_KEY_FILE"},
		{url: "etcds://h:2379", env: map[string]string{EnvEtcdCAFile: "/nonexistent/ca.pem"}, wantErr: "ZEST_ETCD_CA_FILE"},
		{url: "etcds://h:2379", env: map[string]string{EnvEtcdCAFile: garbage}, wantErr: "no PEM certificate"},
		{url: "etcds://h:2379", env: map[string]string{EnvEtcdCertFile: garbage, EnvEtcdKeyFile: key}, wantErr: "ZEST_ETCD_CERT_FILE / ZEST_ETCD_KEY_FILE"},
		{url: "etcd://h", wantErr: "host:port"},
	} {
		err := CheckURL(tc.url, func(k string) string { return tc.env[k] })
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("CheckURL(%q, %v) = %v; want %q", tc.url, tc.env, err, tc.wantErr)
		}
	}
}

// TestOpenURLEmptyIsBolt: no URL is the bbolt file in the data dir.
func TestOpenURLEmptyIsBolt(t *testing.T) {
	dir := t.TempDir()
	r, err := OpenURL(t.Context(), "", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, ok := r.(*Bolt); !ok {
		t.Fatalf("%T, want *Bolt", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "registry.db")); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenURL(t.Context(), "zk://h:1", dir, nil); err == nil {
		t.Fatal("an unknown scheme was accepted")
	}
}

// writeTestCert writes a self-signed CA certificate that is also the client's, and its key.
func writeTestCert(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "zest-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, cert, key
}
