package registry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
)

// checkEtcdTLS tries TLS to every endpoint at once, each with an HTTPS GET of etcd's /health
// (bounded by cfg.DialTimeout), before the etcd client dials. gRPC retries a failed TLS
// handshake as it would a member that is down, so without this a wrong CA or a missing client
// certificate would surface only as a request timeout, 3 s later, saying to check that the
// members are up. A whole request, not a handshake alone, because with TLS 1.3 etcd refuses a
// client certificate only after the handshake, on the first read.
//
// It fails only when no endpoint completes TLS and one failed for a TLS reason: the error
// names that endpoint and the variable to fix. An endpoint that is down (or anything but TLS)
// is left to the client's own errors; one endpoint refusing TLS while another accepts it is
// logged, and the registry opens on the others.
func checkEtcdTLS(ctx context.Context, cfg EtcdConfig) error {
	type result struct {
		ep     string
		tlsErr error // a TLS failure, else nil
		ok     bool  // TLS completed (any HTTP answer)
	}
	results := make([]result, len(cfg.Endpoints))
	var wg sync.WaitGroup
	for i, ep := range cfg.Endpoints {
		wg.Go(func() {
			results[i].ep = ep
			err := probeTLS(ctx, cfg, ep)
			switch {
			case err == nil:
				results[i].ok = true
			case isTLSError(err):
				results[i].tlsErr = err
			}
		})
	}
	wg.Wait()
	var first *result
	for i := range results {
		r := &results[i]
		if r.ok {
			first = nil
			break
		}
		if r.tlsErr != nil && first == nil {
			first = r
		}
	}
	if first != nil {
		return fmt.Errorf("registry on etcd %s: TLS to %s failed: %w (%s)", strings.Join(cfg.Endpoints, ","), first.ep, first.tlsErr, tlsHint(first.tlsErr, cfg.TLS))
	}
	for _, r := range results {
		if r.tlsErr != nil {
			cfg.Logger.Warn("registry on etcd: TLS to one endpoint failed; using the others", "endpoint", r.ep, "err", r.tlsErr, "fix", tlsHint(r.tlsErr, cfg.TLS))
		}
	}
	return nil
}

// probeTLS GETs https://ep/health with cfg's TLS: nil once any HTTP answer came back.
func probeTLS(ctx context.Context, cfg EtcdConfig, ep string) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	tr := &http.Transport{TLSClientConfig: cfg.TLS.Clone(), DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+ep+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// isTLSError reports whether err is TLS's own: a certificate that does not verify, an alert
// from the server (it refused our certificate or its absence), or a server that answered
// plaintext.
func isTLSError(err error) bool {
	var verr *tls.CertificateVerificationError
	var rec tls.RecordHeaderError
	var op *net.OpError
	return errors.As(err, &verr) || errors.As(err, &rec) ||
		errors.As(err, &op) && op.Op == "remote error" ||
		strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}

// tlsHint names the fix of a TLS failure.
func tlsHint(err error, t *tls.Config) string {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var op *net.OpError
	switch {
	case errors.As(err, &unknown):
		return "TLS: etcd's certificate is not signed by a CA in " + EnvEtcdCAFile + " (the system's roots when it is unset): set it to the CA of etcd's certificates"
	case errors.As(err, &host):
		return "TLS: etcd's certificate does not name the host in ZEST_REGISTRY: use a name or address it lists"
	case errors.As(err, &op) && op.Op == "remote error" && len(t.Certificates) == 0:
		return "TLS: etcd requires a client certificate and none is set: set " + EnvEtcdCertFile + " and " + EnvEtcdKeyFile + " to one signed by a CA in etcd's --trusted-ca-file"
	case errors.As(err, &op) && op.Op == "remote error":
		return "TLS: etcd refused the client certificate in " + EnvEtcdCertFile + ": it must be signed by a CA in etcd's --trusted-ca-file, valid now, and allow client auth"
	case strings.Contains(err.Error(), "HTTP response") || errors.As(err, new(tls.RecordHeaderError)):
		return "TLS: the endpoint answers plaintext: use etcd:// or serve TLS on etcd's client URLs"
	default:
		return "TLS failed: check etcds:// and " + EnvEtcdCAFile + ", " + EnvEtcdCertFile + ", " + EnvEtcdKeyFile
	}
}
