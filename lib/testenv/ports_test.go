package testenv

import (
	"net"
	"testing"
)

// TestListenFixedIsOutsideTheEphemeralRange: the ports ListenFixed gives are none the kernel
// gives to a port-0 listen, and each is listening.
func TestListenFixedIsOutsideTheEphemeralRange(t *testing.T) {
	lo, hi := ephemeralRange()
	for range 50 {
		l, err := ListenFixed()
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if port >= lo && port <= hi {
			t.Errorf("port %d is inside the ephemeral range %d–%d", port, lo, hi)
		}
		if port < minFixedPort {
			t.Errorf("port %d is below %d", port, minFixedPort)
		}
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Errorf("dial %s: %v", l.Addr(), err)
		} else {
			c.Close()
		}
		l.Close()
	}
}

func TestParseRange(t *testing.T) {
	for _, c := range []struct {
		in     string
		lo, hi int
		ok     bool
	}{
		{"32768\t60999\n", 32768, 60999, true},
		{"1024 65535", 1024, 65535, true},
		{"60999 32768", 0, 0, false},
		{"32768", 0, 0, false},
		{"a b", 0, 0, false},
		{"0 70000", 0, 0, false},
	} {
		lo, hi, err := parseRange(c.in)
		if (err == nil) != c.ok || lo != c.lo || hi != c.hi {
			t.Errorf("parseRange(%q) = %d, %d, %v", c.in, lo, hi, err)
		}
	}
}

func FuzzParseRange(f *testing.F) {
	f.Add("32768\t60999\n")
	f.Add("1 65535")
	f.Fuzz(func(t *testing.T, s string) {
		lo, hi, err := parseRange(s)
		if err == nil && (lo < 1 || hi > 65535 || lo > hi) {
			t.Fatalf("parseRange(%q) = %d, %d: not a port range", s, lo, hi)
		}
	})
}
