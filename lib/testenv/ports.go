package testenv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// ListenFixed listens on a loopback TCP port outside the kernel's ephemeral port range, for a
// test that stops a server and starts it again on the same address. A port the kernel chose
// (127.0.0.1:0) lies inside that range: while its server is down, any other process's
// listen on port 0 or outgoing connection may be given it, and the restarted server then
// fails to bind. The kernel never gives a port outside the range to anyone who did not ask
// for it by number. Where the range cannot be read (not Linux), it is taken to be IANA's,
// 49152–65535.
func ListenFixed() (net.Listener, error) {
	lo, hi := ephemeralRange()
	var spans [][2]int // ports to pick from: below the range (but above 10000), and above it
	if lo > minFixedPort {
		spans = append(spans, [2]int{minFixedPort, lo - 1})
	}
	if hi < 65535 {
		spans = append(spans, [2]int{hi + 1, 65535})
	}
	total := 0
	for _, s := range spans {
		total += s[1] - s[0] + 1
	}
	if total == 0 {
		return nil, fmt.Errorf("the ephemeral port range %d–%d leaves no port above %d", lo, hi, minFixedPort)
	}
	var last error
	for range fixedPortTries {
		n := rand.IntN(total)
		port := 0
		for _, s := range spans {
			if size := s[1] - s[0] + 1; n < size {
				port = s[0] + n
				break
			} else {
				n -= size
			}
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			return l, nil
		}
		last = err
	}
	return nil, fmt.Errorf("no free loopback port outside the ephemeral range %d–%d in %d tries: %w", lo, hi, fixedPortTries, last)
}

const (
	// minFixedPort keeps ListenFixed above the ports of services a developer runs by hand.
	minFixedPort = 10000
	// fixedPortTries bounds ListenFixed's attempts: each picks a port at random, so a few
	// ports in use cost a try each.
	fixedPortTries = 100
)

// ephemeralRangeFile is where Linux keeps the range of ports it gives to port-0 binds and
// outgoing connections.
const ephemeralRangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// ephemeralRange is the kernel's ephemeral port range.
func ephemeralRange() (lo, hi int) {
	b, err := os.ReadFile(ephemeralRangeFile)
	if err == nil {
		if lo, hi, err = parseRange(string(b)); err == nil {
			return lo, hi
		}
	}
	return 49152, 65535
}

// parseRange reads ip_local_port_range's "low<tab>high".
func parseRange(s string) (lo, hi int, err error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, 0, errors.New("want two numbers")
	}
	if lo, err = strconv.Atoi(f[0]); err != nil {
		return 0, 0, err
	}
	if hi, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, err
	}
	if lo < 1 || hi > 65535 || lo > hi {
		return 0, 0, fmt.Errorf("%d–%d is not a port range", lo, hi)
	}
	return lo, hi, nil
}
