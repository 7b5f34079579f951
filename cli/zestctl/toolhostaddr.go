package zestctl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
)

// toolhostAddrs reads ZEST_TOOLHOST_ADDR as mcpgateway does: one host:port, a comma-separated
// list, or dns:///name:port (then addrs is empty and dnsName is the name to resolve).
func toolhostAddrs(s string) (addrs []string, dnsName string, err error) {
	const want = "want host:port, a comma-separated list of them, or dns:///name:port"
	if rest, ok := strings.CutPrefix(s, "dns:///"); ok {
		host, port, err := net.SplitHostPort(rest)
		if err != nil || host == "" || port == "" {
			return nil, "", errors.New(want)
		}
		return nil, host, nil
	}
	for a := range strings.SplitSeq(s, ",") {
		a = strings.TrimSpace(a)
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, "", fmt.Errorf("%q is not host:port; %s", a, want)
		}
		addrs = append(addrs, a)
	}
	return addrs, "", nil
}

// resolveToolhosts resolves a dns:///name:port address to every address:port it names now.
func resolveToolhosts(ctx context.Context, s string) ([]string, error) {
	rest := strings.TrimPrefix(s, "dns:///")
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return nil, err
	}
	ips, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", host, err)
	}
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = net.JoinHostPort(ip, port)
	}
	return out, nil
}
