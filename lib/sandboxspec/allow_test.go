package sandboxspec

import (
	"strings"
	"testing"
)

func TestParseAllowAndMatches(t *testing.T) {
	for _, c := range []struct {
		pattern string
		yes, no []string // host:port
	}{
		{"api.example.com", []string{"api.example.com:443", "api.example.com:80"}, []string{"api.example.com:8443", "x.api.example.com:443", "example.com:443"}},
		{"API.Example.com.", []string{"api.example.com:443"}, nil},
		{"*.example.com", []string{"a.example.com:443", "a.b.example.com:80"}, []string{"example.com:443", "aexample.com:443", "a.example.com:22"}},
		{"*.example.com:8443", []string{"a.example.com:8443"}, []string{"a.example.com:443"}},
		{"203.0.113.7:8080", []string{"203.0.113.7:8080"}, []string{"203.0.113.7:443", "203.0.113.8:8080"}},
		{"127.0.0.1:9000", []string{"127.0.0.1:9000"}, []string{"localhost:9000"}},
		{"[2001:db8::1]:443", []string{"[2001:db8::1]:443"}, []string{"[2001:db8::2]:443"}},
		{"2001:db8::1", []string{"[2001:db8::1]:80"}, []string{"[2001:db8::1]:22"}},
	} {
		a, err := ParseAllow(c.pattern)
		if err != nil {
			t.Fatalf("ParseAllow(%q): %v", c.pattern, err)
		}
		for _, list := range []struct {
			hosts []string
			want  bool
		}{{c.yes, true}, {c.no, false}} {
			for _, hp := range list.hosts {
				i := strings.LastIndex(hp, ":")
				host, port := strings.Trim(hp[:i], "[]"), 0
				for _, d := range hp[i+1:] {
					port = port*10 + int(d-'0')
				}
				if got := a.Matches(host, port); got != list.want {
					t.Errorf("%q.Matches(%s) = %v, want %v", c.pattern, hp, got, list.want)
				}
			}
		}
	}
	for pattern, want := range map[string]string{
		"":                   "must be a host name",
		"https://a.example":  "not a URL",
		"a.example.com/path": "not a URL",
		"*.com":              "too wide",
		"a.*.example.com":    `has '*'`,
		"a.example.com:x":    `port "x"`,
		"a.example.com:0":    `port "0"`,
		"a.example.com:080":  `port "080"`,
		"a..example.com":     "empty or over-long",
		"1.2.3":              "malformed IP address",
		"fe80::1%eth0":       "zone",
		"a:b:c":              "malformed",
	} {
		if _, err := ParseAllow(pattern); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseAllow(%q) = %v, want an error containing %q", pattern, err, want)
		}
	}
}

// FuzzParseAllow: whatever ParseAllow accepts writes back as a pattern that parses the same,
// and matches itself on its port (or 443 when it has none).
func FuzzParseAllow(f *testing.F) {
	for _, s := range []string{"api.example.com", "*.example.com:8443", "203.0.113.7", "[2001:db8::1]:443", "2001:db8::1", "a:b", "*.", "1.2.3", "x.y:65536"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAllow(s)
		if err != nil {
			return
		}
		b, err := ParseAllow(a.String())
		if err != nil || b != a {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, a, a.String(), b, err)
		}
		port := a.Port
		if port == 0 {
			port = 443
		}
		host := a.Host
		if a.Wildcard {
			host = "x." + host
		}
		if !a.Matches(host, port) {
			t.Fatalf("%q does not match %s:%d", s, host, port)
		}
	})
}
