// Package listen opens a service's listening socket: a socket its parent handed over, when
// there is one (socket activation as systemd does it: LISTEN_FDS=1, the socket as file
// descriptor 3, LISTEN_PID absent or this process), else a new one on the configured
// address. A supervisor that holds the socket keeps the port for the service across
// restarts, and no other process can take it in between.
package listen

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/zestmcp/zest/lib/envflag"
)

// Environment variables of socket activation.
const (
	EnvFDs = "LISTEN_FDS"
	EnvPID = "LISTEN_PID"
)

// firstFD is the first handed-over descriptor (after stdin, stdout, stderr).
const firstFD = 3

// TCP returns the handed-over socket, or listens on addr. A handed-over socket must listen on
// addr when addr names a port (the address others dial is the configured one). The
// activation variables are removed from the environment, so that no child inherits them.
func TCP(addr string) (net.Listener, error) {
	n, pid := os.Getenv(EnvFDs), os.Getenv(EnvPID)
	os.Unsetenv(EnvFDs)
	os.Unsetenv(EnvPID)
	if n == "" || (pid != "" && pid != strconv.Itoa(os.Getpid())) {
		return net.Listen("tcp", addr)
	}
	if n != "1" {
		return nil, fmt.Errorf("%s=%s: a Zest service takes exactly one socket", EnvFDs, n)
	}
	f := os.NewFile(firstFD, "listen-fd")
	defer f.Close() // FileListener holds its own copy
	lis, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("the socket handed over in %s is not a listening socket: %w", EnvFDs, err)
	}
	if _, port, _ := net.SplitHostPort(addr); port != "" && port != "0" && !sameAddr(lis.Addr().String(), addr) {
		lis.Close()
		return nil, fmt.Errorf("the socket handed over in %s listens on %s, not on the configured %s", EnvFDs, lis.Addr(), addr)
	}
	return lis, nil
}

func sameAddr(got, want string) bool {
	gh, gp, err1 := net.SplitHostPort(got)
	wh, wp, err2 := net.SplitHostPort(want)
	if err1 != nil || err2 != nil || gp != wp {
		return false
	}
	if wh == "" || wh == gh {
		return true
	}
	if ips, err := net.LookupIP(wh); err == nil {
		for _, ip := range ips {
			if ip.Equal(net.ParseIP(gh)) {
				return true
			}
		}
	}
	return false
}

// IsLoopbackHost reports whether host (no port) names this machine's loopback: localhost, a
// name under .localhost, or a loopback IP (127.0.0.0/8, ::1).
func IsLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsLoopbackAddr reports whether a listen address (host:port) binds loopback only. An empty
// host (":6060") or an unspecified IP (0.0.0.0, ::) binds every interface, and any other name
// or address may be reached from elsewhere.
func IsLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && IsLoopbackHost(host)
}

// ValidateUnauthenticated checks the address setting (flag) of a server that asks no key (a
// profiler, metrics): host:port, on loopback unless the operator set publicFlag. why says what
// anyone who reaches it could read. The error names both settings and the fix.
func ValidateUnauthenticated(flag, addr, publicFlag string, public bool, why string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%s (%s) %q: want host:port", flag, envflag.EnvName(flag), addr)
	}
	if !public && !IsLoopbackAddr(addr) {
		return fmt.Errorf("%s (%s) %q is not a loopback address and %s: bind it to 127.0.0.1 (or [::1]), or set %s=true to serve it there anyway",
			flag, envflag.EnvName(flag), addr, why, envflag.EnvName(publicFlag))
	}
	return nil
}
