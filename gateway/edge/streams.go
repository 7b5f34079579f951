package edge

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/zestmcp/zest/lib/envflag"
	"github.com/zestmcp/zest/lib/ratelimit"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// Streams and sockets a caller holds open (docs/operator/security.md, "Limits"): each holds one of the
// edge's descriptors for as long as its client keeps it — hours — so each is bounded per
// session, per caller (a key, or the address of a caller without one) and in all, and the
// bound in all leaves DescriptorReserve descriptors to everything else: the admin routes,
// /live, ordinary requests. Past a bound the answer is 429 with Retry-After in the route's
// shape. The streams are the responses mcpgateway asks the edge to admit as held open
// (admitter); the WebSockets of lemond_ws.go have bounds of their own, counted in the same
// table.

// Defaults and bounds of the stream settings.
const (
	// DefaultStreamsPerSession lets a client open its session's GET stream again while the
	// edge has not yet seen the old one close.
	DefaultStreamsPerSession = 2
	// DefaultStreamsPerKey is far above one person's clients (each holds one stream per
	// session) and well below the descriptors of a machine.
	DefaultStreamsPerKey = 256
	// DefaultMaxStreams bounds the streams in all unless ZEST_MAX_STREAMS says otherwise, and
	// never more than the open-file limit allows (streamsInAll).
	DefaultMaxStreams = 4096
	// DescriptorReserve is the descriptors kept from the streams and sockets, for the admin
	// routes, /live, ordinary requests, and the edge's own connections and files.
	DescriptorReserve = 256
	// MinStreams is the fewest streams in all the edge starts with: an open-file limit that
	// leaves fewer after the reserve is a configuration to fix, not to run with.
	MinStreams = 16
	// MaxStreamsSetting bounds each stream setting.
	MaxStreamsSetting = 1_000_000
)

// streamsInAll is the bound in all on streams: ZEST_MAX_STREAMS, or by default
// DefaultMaxStreams, never more than the open-file limit (nofile, 0: unknown) leaves after
// DescriptorReserve and the WebSocket slots. An explicit setting the limit cannot hold is an
// error naming both.
func streamsInAll(setting, nofile int) (int, error) {
	if setting < 0 || setting > MaxStreamsSetting {
		return 0, fmt.Errorf("max-streams (ZEST_MAX_STREAMS) %d: want 0 (the default, %d or what the open-file limit allows) to %d", setting, DefaultMaxStreams, MaxStreamsSetting)
	}
	n := setting
	if n == 0 {
		n = DefaultMaxStreams
	}
	if nofile <= 0 {
		return n, nil
	}
	room := nofile - DescriptorReserve - wsMaxConns - wsMaxPending
	switch {
	case room < MinStreams:
		return 0, fmt.Errorf("the open-file limit of %d descriptors leaves %d for streams after %d kept for the other routes and %d for the log and span sockets; the edge needs at least %d: raise it (ulimit -n, LimitNOFILE=)",
			nofile, max(room, 0), DescriptorReserve, wsMaxConns+wsMaxPending, MinStreams)
	case setting > room:
		return 0, fmt.Errorf("max-streams (ZEST_MAX_STREAMS) %d: the open-file limit of %d descriptors leaves room for %d streams after %d kept for the other routes and %d for the log and span sockets; lower it, or raise the limit (ulimit -n, LimitNOFILE=)",
			setting, nofile, room, DescriptorReserve, wsMaxConns+wsMaxPending)
	}
	return min(n, room), nil
}

// checkStreamSettings checks ZEST_STREAMS_PER_SESSION and ZEST_STREAMS_PER_KEY.
func checkStreamSettings(c *Config) error {
	for _, s := range []struct {
		flag string
		v    int
	}{{"streams-per-session", c.StreamsPerSession}, {"streams-per-key", c.StreamsPerKey}} {
		if s.v < 1 || s.v > MaxStreamsSetting {
			return fmt.Errorf("%s (%s) %d: want 1 to %d", s.flag, envflag.EnvName(s.flag), s.v, MaxStreamsSetting)
		}
	}
	return nil
}

// holds counts what callers hold open, per scope, in bounded memory (ratelimit.Keyed: an
// entry with nothing held is evicted).
type holds struct{ table *ratelimit.Keyed }

// bound is one bound a hold must fit: at most n held in scope (n ≤ 0: none), and the message
// of a refusal.
type bound struct {
	scope string
	n     int
	msg   string
}

// take holds one in every scope of bounds, or none: the first bound that is full is returned.
func (h *holds) take(bounds ...bound) (release func(), full *bound) {
	var taken []ratelimit.Decision
	release = func() {
		for i := range taken {
			taken[i].Release()
		}
	}
	for i := range bounds {
		if bounds[i].n <= 0 {
			continue
		}
		d := h.table.Admit(bounds[i].scope, ratelimit.Limits{Concurrency: bounds[i].n})
		if !d.OK {
			release()
			return nil, &bounds[i]
		}
		taken = append(taken, d)
	}
	return release, nil
}

// streams bounds the MCP streams.
type streams struct {
	holds
	perSession, perKey, inAll int
	caller                    func(*http.Request) (key, role, label string)
}

// hold admits one stream of r, in group (one session's streams, bounded apart; "": none):
// false means a 429 in /mcp's shape was written, with Retry-After (a stream does not say when
// it ends: ratelimit.ConcurrencyRetry).
func (s *streams) hold(w http.ResponseWriter, r *http.Request, group string) (func(), bool) {
	key, _, label := s.caller(r)
	bounds := []bound{
		{"streams", s.inAll, fmt.Sprintf("the edge holds %d streams open, its limit (ZEST_MAX_STREAMS, and the open-file limit less %d descriptors kept for the other routes)", s.inAll, DescriptorReserve)},
		{"streams of " + key, s.perKey, fmt.Sprintf("%s holds %d streams open, its limit (ZEST_STREAMS_PER_KEY)", label, s.perKey)},
	}
	if group != "" {
		bounds = append(bounds, bound{"streams of session " + group, s.perSession, fmt.Sprintf("this session holds %d GET streams open, its limit (ZEST_STREAMS_PER_SESSION)", s.perSession)})
	}
	release, full := s.take(bounds...)
	if full != nil {
		secs := ratelimit.RetryAfterSeconds(ratelimit.ConcurrencyRetry)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		mcpLimited(w, "Too many streams: "+full.msg+"; close one, or retry after "+strconv.Itoa(secs)+" s", ratelimit.ConcurrencyRetry.Milliseconds())
		return nil, false
	}
	return release, true
}

// admitter answers mcpgateway's admissions (exchange.Proxy.Admit) with the edge's budgets:
// a request that weighs n takes n−1 more from its caller's rate; a response held open takes a
// stream (in all, per caller, per group) and gives back its place among the calls in flight.
type admitter struct {
	limits  *keyLimits
	streams *streams
	write   limitedWriter
}

func (a admitter) admit(w http.ResponseWriter, r *http.Request, ad *mcpgatewayv1.Admit) (func(), bool) {
	if n := int(ad.GetWeight()); n > 1 && !a.limits.off() && !a.limits.batch(a.write)(w, r, n) {
		return nil, false
	}
	if !ad.GetHeldOpen() {
		return func() {}, true
	}
	release, ok := a.streams.hold(w, r, ad.GetHoldGroup())
	if !ok {
		return nil, false
	}
	leaveInFlight(r)
	return release, true
}
