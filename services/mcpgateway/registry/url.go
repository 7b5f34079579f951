package registry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Environment variables of a registry on etcd: TLS and auth never come from the URL.
const (
	EnvEtcdCAFile   = "ZEST_ETCD_CA_FILE"
	EnvEtcdCertFile = "ZEST_ETCD_CERT_FILE"
	EnvEtcdKeyFile  = "ZEST_ETCD_KEY_FILE"
	EnvEtcdUsername = "ZEST_ETCD_USERNAME"
	EnvEtcdPassword = "ZEST_ETCD_PASSWORD"
)

// DefaultEtcdPrefix is where the registry's keys live in etcd unless the URL has a path.
const DefaultEtcdPrefix = "/zest/"

// Limits of a registry URL.
const (
	// MaxEtcdEndpoints: an etcd cluster has 3, 5 or 7 members; 16 leaves room for a client
	// that lists learners or a cluster being moved, and refuses a pasted list gone wrong.
	MaxEtcdEndpoints = 16
	// MaxEtcdPrefix is the longest key prefix, in bytes.
	MaxEtcdPrefix = 256
	// maxURL bounds the whole URL before it is parsed.
	maxURL = 4096
)

// urlForms names the accepted values, for errors.
const urlForms = `"" (bbolt at <data-dir>/registry.db), etcd://host:port[,host:port…][/prefix] or etcds://… (TLS)`

// EtcdURL is a parsed ZEST_REGISTRY value that names etcd.
type EtcdURL struct {
	// TLS: etcds:// (the endpoints are dialled over TLS).
	TLS bool
	// Endpoints are host:port, in the URL's order.
	Endpoints []string
	// Prefix starts and ends with "/".
	Prefix string
}

// String formats u as a URL that ParseURL reads back to u.
func (u EtcdURL) String() string {
	scheme := "etcd"
	if u.TLS {
		scheme = "etcds"
	}
	return scheme + "://" + strings.Join(u.Endpoints, ",") + u.Prefix
}

// ParseURL reads a ZEST_REGISTRY value: nil for "" (bbolt), else where etcd is. It checks the
// form only; OpenURL reads the environment and dials.
func ParseURL(raw string) (*EtcdURL, error) {
	if raw == "" {
		return nil, nil
	}
	if len(raw) > maxURL {
		return nil, fmt.Errorf("registry URL is %d bytes, longer than %d: want %s", len(raw), maxURL, urlForms)
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	u := &EtcdURL{}
	switch strings.ToLower(scheme) {
	case "etcd":
	case "etcds":
		u.TLS = true
	default:
		ok = false
	}
	if !ok {
		return nil, fmt.Errorf("registry URL %q: want %s", raw, urlForms)
	}
	if strings.ContainsAny(rest, "?#") {
		return nil, fmt.Errorf("registry URL %q: a query or fragment is not understood: want %s", raw, urlForms)
	}
	hosts, path, _ := strings.Cut(rest, "/")
	if strings.Contains(hosts, "@") {
		return nil, fmt.Errorf("registry URL: a user or password in the URL is refused (it would show in process listings and logs): set %s and %s instead", EnvEtcdUsername, EnvEtcdPassword)
	}
	if hosts == "" {
		return nil, fmt.Errorf("registry URL %q names no etcd endpoint: want %s", raw, urlForms)
	}
	seen := map[string]bool{}
	for ep := range strings.SplitSeq(hosts, ",") {
		if err := checkEndpoint(ep); err != nil {
			return nil, fmt.Errorf("registry URL %q: %w", raw, err)
		}
		if seen[ep] {
			return nil, fmt.Errorf("registry URL %q lists the endpoint %s twice", raw, ep)
		}
		seen[ep] = true
		u.Endpoints = append(u.Endpoints, ep)
	}
	if len(u.Endpoints) > MaxEtcdEndpoints {
		return nil, fmt.Errorf("registry URL lists %d etcd endpoints, more than %d", len(u.Endpoints), MaxEtcdEndpoints)
	}
	prefix, err := parsePrefix(path)
	if err != nil {
		return nil, fmt.Errorf("registry URL %q: %w", raw, err)
	}
	u.Prefix = prefix
	return u, nil
}

// checkEndpoint accepts host:port with a DNS name or an IP address ([v6]:port) and a port
// from 1 to 65535.
func checkEndpoint(ep string) error {
	host, port, err := net.SplitHostPort(ep)
	if err != nil || host == "" {
		return fmt.Errorf("etcd endpoint %q: want host:port (etcd's client port is usually 2379)", ep)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port != strconv.Itoa(n) {
		return fmt.Errorf("etcd endpoint %q: port %q: want a number from 1 to 65535", ep, port)
	}
	if strings.HasPrefix(ep, "[") { // an IPv6 literal, and only that, is bracketed
		if ip := net.ParseIP(host); ip == nil || ip.To4() != nil {
			return fmt.Errorf("etcd endpoint %q: %q in brackets is not an IPv6 address", ep, host)
		}
		return nil
	}
	if len(host) > 253 {
		return fmt.Errorf("etcd endpoint %q: host name longer than 253 bytes", ep)
	}
	for _, r := range host {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return fmt.Errorf("etcd endpoint %q: host %q: want a DNS name or an IP address (IPv6 in brackets)", ep, host)
		}
	}
	return nil
}

// parsePrefix reads the URL's path (after its first "/"): "" is DefaultEtcdPrefix, else
// segments of [A-Za-z0-9._-] joined by "/" (no empty, "." or ".." segment), given back
// between slashes.
func parsePrefix(path string) (string, error) {
	path = strings.TrimSuffix(path, "/")
	if path == "" {
		return DefaultEtcdPrefix, nil
	}
	for seg := range strings.SplitSeq(path, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("key prefix /%s/: empty, . and .. segments are refused", path)
		}
		for _, r := range seg {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
				return "", fmt.Errorf("key prefix /%s/: %q: want letters, digits, '.', '-', '_' and '/' only", path, r)
			}
		}
	}
	prefix := "/" + path + "/"
	if len(prefix) > MaxEtcdPrefix {
		return "", fmt.Errorf("key prefix is %d bytes, longer than %d", len(prefix), MaxEtcdPrefix)
	}
	return prefix, nil
}

// CheckURL validates a ZEST_REGISTRY value and, for etcd, the TLS and auth variables that go
// with it (reading the certificate files), without dialling: mcpgateway calls it when it
// validates its configuration.
func CheckURL(raw string, getenv func(string) string) error {
	u, err := ParseURL(raw)
	if err != nil || u == nil {
		return err
	}
	_, err = etcdConfigFromEnv(u, getenv)
	return err
}

// OpenURL opens the registry a ZEST_REGISTRY value names: "" is bbolt at
// <dataDir>/registry.db, an etcd URL a registry on etcd with TLS and auth from getenv
// (os.Getenv when nil).
func OpenURL(ctx context.Context, raw, dataDir string, getenv func(string) string) (Registry, error) {
	u, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	if u == nil {
		return Open(filepath.Join(dataDir, "registry.db"))
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg, err := etcdConfigFromEnv(u, getenv)
	if err != nil {
		return nil, err
	}
	return OpenEtcd(ctx, cfg)
}

// etcdConfigFromEnv completes u with TLS (etcds only) and auth from the environment.
func etcdConfigFromEnv(u *EtcdURL, getenv func(string) string) (EtcdConfig, error) {
	cfg := EtcdConfig{Endpoints: u.Endpoints, Prefix: u.Prefix}
	ca, cert, key := getenv(EnvEtcdCAFile), getenv(EnvEtcdCertFile), getenv(EnvEtcdKeyFile)
	var errs []error
	if !u.TLS && (ca != "" || cert != "" || key != "") {
		errs = append(errs, fmt.Errorf("%s, %s or %s is set but the registry URL is etcd:// (plaintext): use etcds:// for TLS, or unset them", EnvEtcdCAFile, EnvEtcdCertFile, EnvEtcdKeyFile))
	}
	if u.TLS {
		t, err := etcdTLS(ca, cert, key)
		if err != nil {
			errs = append(errs, err)
		}
		cfg.TLS = t
	}
	cfg.Username, cfg.Password = getenv(EnvEtcdUsername), getenv(EnvEtcdPassword)
	if (cfg.Username == "") != (cfg.Password == "") {
		errs = append(errs, fmt.Errorf("set both %s and %s, or neither", EnvEtcdUsername, EnvEtcdPassword))
	}
	if cfg.Password != "" && !u.TLS {
		// etcd's own rule too: a password over plaintext could be read off the wire.
		errs = append(errs, fmt.Errorf("%s is set with a plaintext etcd:// URL: use etcds:// so the password is not sent in clear", EnvEtcdPassword))
	}
	return cfg, errors.Join(errs...)
}

// etcdTLS builds the client's TLS config: the CA file's roots (else the system's) and, when
// both are set, a client certificate.
func etcdTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvEtcdCAFile, err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s %s: no PEM certificate in it", EnvEtcdCAFile, caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("set both %s and %s (a client certificate and its key), or neither", EnvEtcdCertFile, EnvEtcdKeyFile)
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%s / %s: %w", EnvEtcdCertFile, EnvEtcdKeyFile, err)
		}
		t.Certificates = []tls.Certificate{pair}
	}
	return t, nil
}
