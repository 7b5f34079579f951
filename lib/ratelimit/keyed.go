package ratelimit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits are the limits of one key: its rate (zero: none) and the most calls in flight at
// once (0: none).
type Limits struct {
	Rate        Rate
	Concurrency int
}

// IsZero reports whether l limits nothing.
func (l Limits) IsZero() bool { return l.Rate.IsZero() && l.Concurrency <= 0 }

// Reasons a call is refused.
const (
	ReasonRate        = "rate"
	ReasonConcurrency = "concurrency"
	// ReasonBurst refuses Take of more tokens than the bucket holds: no wait makes room.
	ReasonBurst = "burst"
)

// Decision is the answer of Keyed.Admit. A call admitted must call Release once it is done;
// a call refused is told how long to wait.
type Decision struct {
	OK bool
	// Reason is ReasonRate or ReasonConcurrency when refused.
	Reason string
	// RetryAfter is when a token is next free (rate), or ConcurrencyRetry (concurrency).
	RetryAfter time.Duration
	// Overflow reports that the key shared the overflow entry (the table was full).
	Overflow bool
	release  func()
}

// Release ends an admitted call (its place in the concurrency count); it is safe to call on a
// refused one, and more than once.
func (d *Decision) Release() {
	if d.release != nil {
		d.release()
		d.release = nil
	}
}

// ConcurrencyRetry is the Retry-After of a call refused for concurrency: a call in flight
// does not say when it ends, and a second is long against most calls and short for a person.
const ConcurrencyRetry = time.Second

// DefaultMaxKeys bounds the entries of a Keyed: past it, idle entries are evicted; when none
// is idle the new keys share one overflow entry (their limits, one budget) rather than grow
// the table.
const DefaultMaxKeys = 10_000

// sweepEvery is how often Admit looks for idle entries at most: at the cap, a sweep per
// call would be a full scan per call.
const sweepEvery = time.Second

// Keyed keeps a token bucket and an in-flight count per key, in bounded memory: an entry that
// is idle — nothing in flight, bucket full again — holds no state a new entry would not, so
// it is evicted (a periodic sweep, and at the cap); when the table is full of busy entries,
// new keys share one overflow entry. The zero Keyed is not usable: call NewKeyed.
type Keyed struct {
	mu        sync.Mutex
	m         map[string]*entry
	max       int
	overflow  *entry
	lastSweep time.Time
	now       func() time.Time
}

type entry struct {
	lim      *rate.Limiter // nil: no rate limit
	limits   Limits
	inflight int
}

// NewKeyed returns a Keyed of at most maxKeys entries (DefaultMaxKeys when ≤ 0).
func NewKeyed(maxKeys int) *Keyed {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	return &Keyed{m: map[string]*entry{}, max: maxKeys, now: time.Now}
}

// Len is the number of entries (the overflow entry not counted).
func (k *Keyed) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}

// Admit decides whether one call of key may start under limits l (a key's limits may change
// from call to call: its entry follows them). With l zero it admits at once and keeps no
// entry.
func (k *Keyed) Admit(key string, l Limits) Decision {
	if l.IsZero() {
		return Decision{OK: true}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	e, overflow := k.entry(key, l, now)
	e.set(l)
	if l.Concurrency > 0 && e.inflight >= l.Concurrency {
		return Decision{Reason: ReasonConcurrency, RetryAfter: ConcurrencyRetry, Overflow: overflow}
	}
	if e.lim != nil && !e.lim.AllowN(now, 1) {
		// The wait for the one token missing: (1 − tokens) / rate.
		wait := time.Duration((1 - e.lim.TokensAt(now)) / float64(e.lim.Limit()) * float64(time.Second))
		return Decision{Reason: ReasonRate, RetryAfter: max(wait, time.Millisecond), Overflow: overflow}
	}
	e.inflight++
	return Decision{OK: true, Overflow: overflow, release: func() {
		k.mu.Lock()
		e.inflight--
		k.mu.Unlock()
	}}
}

// Take takes n more tokens from key's bucket under limits l, for work that Admit let in as one
// call and that turned out to be n calls more (the other messages of a JSON-RPC batch): it
// adds nothing in flight. Refused for ReasonRate with the wait for the n tokens, or for
// ReasonBurst when n is more than the burst (the bucket never holds n). With no rate, or
// n ≤ 0, it takes nothing.
func (k *Keyed) Take(key string, l Limits, n int) Decision {
	if l.Rate.IsZero() || n <= 0 {
		return Decision{OK: true}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	e, overflow := k.entry(key, l, now)
	e.set(l)
	if n > l.Rate.Burst {
		return Decision{Reason: ReasonBurst, RetryAfter: max(l.Rate.Fill(), time.Millisecond), Overflow: overflow}
	}
	if !e.lim.AllowN(now, n) {
		wait := time.Duration((float64(n) - e.lim.TokensAt(now)) / float64(e.lim.Limit()) * float64(time.Second))
		return Decision{Reason: ReasonRate, RetryAfter: max(wait, time.Millisecond), Overflow: overflow}
	}
	return Decision{OK: true, Overflow: overflow}
}

// Wait is how long key waits for one token of its bucket under limits l, without taking it
// (0: one is there, or l has no rate). A key without an entry makes none: it waits only when
// the table is full (it would share the overflow entry) and that entry waits.
func (k *Keyed) Wait(key string, l Limits) time.Duration {
	if l.Rate.IsZero() {
		return 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.m[key]
	if !ok {
		if len(k.m) < k.max || k.overflow == nil {
			return 0
		}
		e = k.overflow
	}
	if e.lim == nil || e.limits.Rate != l.Rate {
		return 0 // a bucket of other limits: Admit starts a full one
	}
	now := k.now()
	if tokens := e.lim.TokensAt(now); tokens < 1 {
		return max(time.Duration((1-tokens)/float64(e.lim.Limit())*float64(time.Second)), time.Millisecond)
	}
	return 0
}

// entry returns key's entry, making one (after a sweep at the cap) or handing out the
// overflow entry when the table is full of busy ones. Called with mu held.
func (k *Keyed) entry(key string, l Limits, now time.Time) (*entry, bool) {
	if e, ok := k.m[key]; ok {
		return e, false
	}
	if now.Sub(k.lastSweep) >= time.Minute || (len(k.m) >= k.max && now.Sub(k.lastSweep) >= sweepEvery) {
		k.sweep(now)
	}
	if len(k.m) >= k.max {
		if k.overflow == nil {
			k.overflow = &entry{}
		}
		return k.overflow, true
	}
	e := &entry{}
	k.m[key] = e
	return e, false
}

// sweep drops the idle entries. Called with mu held.
func (k *Keyed) sweep(now time.Time) {
	k.lastSweep = now
	for key, e := range k.m {
		if e.idle(now) {
			delete(k.m, key)
		}
	}
}

// idle reports whether e holds nothing a new entry would not: no call in flight, its bucket
// full.
func (e *entry) idle(now time.Time) bool {
	return e.inflight == 0 && (e.lim == nil || e.lim.TokensAt(now) >= float64(e.lim.Burst()))
}

// set makes e follow limits l: a new bucket, full, for a new rate (an operator who raises a
// limit means it to apply at once, not after the old rate refilled the bucket), none when the
// rate went away.
func (e *entry) set(l Limits) {
	switch {
	case l.Rate.IsZero():
		e.lim = nil
	case e.lim == nil || e.limits.Rate != l.Rate:
		e.lim = rate.NewLimiter(l.Rate.Limit(), l.Rate.Burst)
	}
	e.limits = l
}
