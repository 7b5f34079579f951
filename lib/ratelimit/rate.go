// Package ratelimit holds Zest's rate and concurrency limits: the syntax of a rate ("20/s",
// "600/m", "20/s:40"), and Keyed, token buckets (golang.org/x/time/rate) and in-flight
// counts per key in bounded memory. The edge keys them by caller (API key, admin key, or the
// address of an anonymous caller); mcpgateway by server.
package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// Bounds of a rate's count and burst: a larger figure is no limit at all, and a typo
// ("20000000/s") should not pass for one.
const (
	MaxCount = 1_000_000
	MaxBurst = 1_000_000
)

// Rate is a parsed rate: Count events per Per, with bursts of up to Burst at once. The zero
// Rate is no limit.
type Rate struct {
	Count int
	Per   time.Duration
	Burst int
}

// ErrSyntax wraps every error of Parse.
var ErrSyntax = errors.New("invalid rate")

var units = map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}

// Syntax says how a rate is written, for error messages.
const Syntax = `N/s, N/m or N/h with an optional burst ":B" (e.g. "20/s", "600/m", "20/s:40")`

// Parse reads "N/s", "N/m" or "N/h", optionally followed by ":B", the burst (the most events
// let through at once after a quiet spell). Without a burst it is N: a full period's worth.
// N and B are whole numbers from 1 to a million; the unit is one letter, in lower case.
func Parse(s string) (Rate, error) {
	bad := func(why string) (Rate, error) {
		return Rate{}, fmt.Errorf("%w %q: %s; write %s", ErrSyntax, truncate(s, 40), why, Syntax)
	}
	count, rest, ok := strings.Cut(s, "/")
	if !ok {
		return bad(`no "/" between the count and the unit`)
	}
	unit, burst, hasBurst := strings.Cut(rest, ":")
	per, ok := units[unit]
	if !ok {
		return bad(fmt.Sprintf("unit %q is not s, m or h", truncate(unit, 10)))
	}
	n, err := whole(count, MaxCount)
	if err != nil {
		return bad("the count " + err.Error())
	}
	r := Rate{Count: n, Per: per, Burst: n}
	if hasBurst {
		if r.Burst, err = whole(burst, MaxBurst); err != nil {
			return bad("the burst " + err.Error())
		}
	}
	return r, nil
}

// whole reads a decimal whole number from 1 to max: digits only (no sign, no spaces).
func whole(s string, max int) (int, error) {
	if s == "" || len(s) > 7 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a whole number from 1 to %d", truncate(s, 12), max)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, fmt.Errorf("%q is not a whole number from 1 to %d", truncate(s, 12), max)
	}
	return n, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// IsZero reports whether r is no limit.
func (r Rate) IsZero() bool { return r.Count == 0 }

// String writes r as Parse reads it, the burst only when it is not the default: Parse(r.String())
// is r.
func (r Rate) String() string {
	if r.IsZero() {
		return ""
	}
	u := "s"
	switch r.Per {
	case time.Minute:
		u = "m"
	case time.Hour:
		u = "h"
	}
	s := strconv.Itoa(r.Count) + "/" + u
	if r.Burst != r.Count {
		s += ":" + strconv.Itoa(r.Burst)
	}
	return s
}

// Limit is r as x/time/rate's events per second (rate.Inf for the zero Rate).
func (r Rate) Limit() rate.Limit {
	if r.IsZero() {
		return rate.Inf
	}
	return rate.Limit(float64(r.Count) / r.Per.Seconds())
}

// Fill is how long r takes to fill an empty bucket (0 for the zero Rate).
func (r Rate) Fill() time.Duration {
	if r.IsZero() {
		return 0
	}
	return time.Duration(float64(r.Burst) / float64(r.Limit()) * float64(time.Second))
}

// Words says r in words for a message: "20 calls per second (bursts of 40)".
func (r Rate) Words(what string) string {
	unit := map[time.Duration]string{time.Second: "second", time.Minute: "minute", time.Hour: "hour"}[r.Per]
	s := fmt.Sprintf("%d %s per %s", r.Count, what, unit)
	if r.Burst != r.Count {
		s += fmt.Sprintf(" (bursts of %d)", r.Burst)
	}
	return s
}

// RetryAfterSeconds is d as the value of a Retry-After header: whole seconds, rounded up, at
// least 1 (a client told 0 would come straight back).
func RetryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
