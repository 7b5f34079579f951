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
