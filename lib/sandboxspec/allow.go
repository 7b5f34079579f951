package sandboxspec

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// MaxAllowHosts bounds sandbox.allow_hosts.
const MaxAllowHosts = 64

// Allow is one parsed sandbox.allow_hosts entry: an exact host name, a "*.suffix" wildcard
// (subdomains only, not the suffix itself), or an IP literal, with a port or (Port 0) the
// default ports 443 and 80.
type Allow struct {
	Host     string     // lower case, no trailing dot; for a wildcard the suffix without "*."
	Wildcard bool       // "*.example.com"
	IP       netip.Addr // set for an IP literal (then Host is its text)
	Port     int        // 0: 443 and 80
}

// ParseAllow parses one allow_hosts pattern: "example.com", "*.example.com",
// "example.com:8443", "203.0.113.7", "203.0.113.7:8080", "[2001:db8::1]:443" or "2001:db8::1".
// The error says what is wrong and how to write it (the caller adds the field's name).
func ParseAllow(s string) (Allow, error) {
	var a Allow
	if s == "" || len(s) > 300 {
		return a, errors.New("must be a host name of 1 to 300 bytes, e.g. api.example.com or *.example.com:443")
	}
	if strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@ \t\r\n\x00") {
		return a, errors.New("must be a host with an optional port, not a URL: write api.example.com or api.example.com:8443")
	}
	host, port := s, ""
	if ip, err := netip.ParseAddr(s); err == nil { // a bare IPv6 literal has colons of its own
		host = ip.String()
	} else if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	} else if strings.Contains(s, ":") {
		return a, errors.New("has a malformed port: write host:port (an IPv6 address as [2001:db8::1]:443)")
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return a, fmt.Errorf("port %q: want 1 to 65535 (or no port: 443 and 80)", port)
		}
		a.Port = n
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return a, errors.New("an IP address with a zone (%…) cannot be allowed: write the address alone")
		}
		a.IP, a.Host = ip.Unmap(), ip.Unmap().String()
		return a, nil
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		a.Wildcard, host = true, rest
		if !strings.Contains(host, ".") {
			return a, fmt.Errorf("wildcard %q is too wide: name at least two labels after *. (e.g. *.example.com)", s)
		}
	}
	if err := checkHostName(host); err != nil {
		return a, err
	}
	a.Host = host
	return a, nil
}

// checkHostName accepts DNS names of letters, digits, '-' and '_' labels (no '*' inside).
func checkHostName(h string) error {
	if h == "" || len(h) > 253 {
		return errors.New("must be a host name of 1 to 253 bytes, e.g. api.example.com")
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 {
			return fmt.Errorf("host %q has an empty or over-long (63+) label", h)
		}
		for _, c := range l {
			ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
			if !ok {
				return fmt.Errorf("host %q has %q: use letters, digits, '-' and a leading \"*.\" for subdomains only", h, c)
			}
		}
	}
	if _, err := strconv.Atoi(strings.ReplaceAll(h, ".", "")); err == nil {
		return fmt.Errorf("host %q looks like a malformed IP address: write a full IPv4 address such as 203.0.113.7", h)
	}
	return nil
}

// String writes a back as a pattern.
func (a Allow) String() string {
	h := a.Host
	if a.Wildcard {
		h = "*." + h
	}
	if a.Port == 0 {
		return h
	}
	return net.JoinHostPort(h, strconv.Itoa(a.Port))
}

// Matches says whether host (lower case, no trailing dot; an IP literal as netip prints it)
// and port are admitted by a.
func (a Allow) Matches(host string, port int) bool {
	if a.Port == 0 {
		if port != 443 && port != 80 {
			return false
		}
	} else if port != a.Port {
		return false
	}
	if a.IP.IsValid() {
		ip, err := netip.ParseAddr(host)
		return err == nil && ip.Unmap() == a.IP
	}
	if a.Wildcard {
		return strings.HasSuffix(host, "."+a.Host)
	}
	return host == a.Host
}

// ParseAllowList parses every pattern; errors name sandbox.allow_hosts[i].
func ParseAllowList(list []string) ([]Allow, error) {
	var out []Allow
	var errs []error
	if len(list) > MaxAllowHosts {
		errs = append(errs, FieldError(fmt.Sprintf("sandbox.allow_hosts has %d entries: at most %d (use a *.example.com wildcard for many subdomains)", len(list), MaxAllowHosts)))
	}
	for i, s := range list {
		a, err := ParseAllow(s)
		if err != nil {
			errs = append(errs, FieldError(fmt.Sprintf("sandbox.allow_hosts[%d] %q %v", i, s, err)))
			continue
		}
		out = append(out, a)
	}
	return out, errors.Join(errs...)
}
