package ratelimit

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a Keyed's time, moved by the test.
type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }
func fakeKeyed(max int) (*Keyed, *clock) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	k := NewKeyed(max)
	k.now = c.now
	return k, c
}

func TestAdmitRate(t *testing.T) {
	k, c := fakeKeyed(0)
	l := Limits{Rate: Rate{Count: 2, Per: time.Second, Burst: 2}}
	for i := range 2 {
		d := k.Admit("a", l)
		if !d.OK {
			t.Fatalf("call %d within the burst refused: %+v", i, d)
		}
		d.Release()
	}
	d := k.Admit("a", l)
	if d.OK || d.Reason != ReasonRate || d.RetryAfter != 500*time.Millisecond {
		t.Fatalf("third call at once: %+v; want refused for rate, retry after 500ms (one token at 2/s)", d)
	}
	if other := k.Admit("b", l); !other.OK {
		t.Fatal("another key shares the first one's bucket")
	}
	c.add(500 * time.Millisecond)
	if d := k.Admit("a", l); !d.OK {
		t.Fatalf("after the retry delay: %+v", d)
	}
}

func TestAdmitConcurrency(t *testing.T) {
	k, _ := fakeKeyed(0)
	l := Limits{Concurrency: 2}
	a, b := k.Admit("a", l), k.Admit("a", l)
	if !a.OK || !b.OK {
		t.Fatal("two calls under a limit of 2 refused")
	}
	d := k.Admit("a", l)
	if d.OK || d.Reason != ReasonConcurrency || d.RetryAfter != ConcurrencyRetry {
		t.Fatalf("third call in flight: %+v", d)
	}
	a.Release()
	a.Release() // twice: counted once
	if d := k.Admit("a", l); !d.OK {
		t.Fatalf("after a release: %+v", d)
	}
	if d := k.Admit("a", l); d.OK {
		t.Fatal("a double Release freed two places")
	}
}

// A call refused for concurrency takes no token: the rate counts the calls that ran.
func TestConcurrencyRefusalTakesNoToken(t *testing.T) {
	k, _ := fakeKeyed(0)
	l := Limits{Rate: Rate{Count: 2, Per: time.Hour, Burst: 2}, Concurrency: 1}
	first := k.Admit("a", l)
	for range 5 {
		if d := k.Admit("a", l); d.Reason != ReasonConcurrency {
			t.Fatalf("%+v", d)
		}
	}
	first.Release()
	if d := k.Admit("a", l); !d.OK {
		t.Fatalf("the second token was taken by refused calls: %+v", d)
	}
}

func TestZeroLimitsKeepNoEntry(t *testing.T) {
	k, _ := fakeKeyed(0)
	for i := range 100 {
		if d := k.Admit(fmt.Sprint(i), Limits{}); !d.OK {
			t.Fatal("refused without limits")
		}
	}
	if k.Len() != 0 {
		t.Fatalf("%d entries for unlimited keys", k.Len())
	}
}

// The table never holds more than its cap: idle entries (bucket full, nothing in flight) are
// evicted, and while every entry is busy new keys share the overflow entry.
func TestEvictionBound(t *testing.T) {
	k, c := fakeKeyed(100)
	l := Limits{Rate: Rate{Count: 1, Per: time.Second, Burst: 1}}
	for i := range 1000 {
		d := k.Admit(fmt.Sprint("busy", i), l) // each key's one token spent: not idle for a second
		d.Release()
		if k.Len() > 100 {
			t.Fatalf("%d entries, over the cap of 100", k.Len())
		}
	}
	// Keys 100..999 shared the overflow entry: one budget between them.
	if d := k.Admit("late", l); d.OK || !d.Overflow {
		t.Fatalf("a new key at the cap: %+v; want the overflow entry, already spent", d)
	}
	// The first 100 keep their own (spent) buckets: their state was not lost.
	if d := k.Admit("busy0", l); d.OK || d.Overflow {
		t.Fatalf("busy0: %+v", d)
	}
	c.add(1100 * time.Millisecond) // every bucket full again: all idle
	if d := k.Admit("fresh", l); !d.OK || d.Overflow {
		t.Fatalf("after the buckets refilled: %+v; want an entry of its own", d)
	}
	if k.Len() != 1 {
		t.Fatalf("%d entries after the sweep; want only the fresh one", k.Len())
	}
}

// An entry with a call in flight is never evicted (its count would be lost).
func TestInFlightNotEvicted(t *testing.T) {
	k, c := fakeKeyed(1)
	l := Limits{Concurrency: 1}
	held := k.Admit("a", l)
	c.add(time.Hour)
	if d := k.Admit("b", l); !d.OK || !d.Overflow {
		t.Fatalf("b: %+v; want the overflow entry while a is in flight", d)
	}
	if d := k.Admit("a", l); d.OK {
		t.Fatal("a's call in flight was forgotten")
	}
	held.Release()
	c.add(2 * time.Second)
	if d := k.Admit("c", l); !d.OK || d.Overflow {
		t.Fatalf("c after a finished: %+v", d)
	}
}

// A key's entry follows a change of its limits (a server's config edited) at once: a new
// rate starts with a full bucket.
func TestLimitsChange(t *testing.T) {
	k, _ := fakeKeyed(0)
	slow := Limits{Rate: Rate{Count: 1, Per: time.Hour, Burst: 1}}
	k.Admit("s", slow)
	if d := k.Admit("s", slow); d.OK {
		t.Fatal("1/h let two through")
	}
	if d := k.Admit("s", Limits{Concurrency: 5}); !d.OK {
		t.Fatal("the rate limit removed still applies")
	}
	fast := Limits{Rate: Rate{Count: 1000, Per: time.Second, Burst: 1000}}
	for range 1000 {
		if d := k.Admit("s", fast); !d.OK {
			t.Fatalf("a raised rate still waits %v", d.RetryAfter)
		}
	}
}

// BenchmarkAdmit is the cost of one admitted call of a known key (the edge pays it per
// request): one lock, one token, one release.
func BenchmarkAdmit(b *testing.B) {
	k := NewKeyed(0)
	l := Limits{Rate: Rate{Count: MaxCount, Per: time.Second, Burst: MaxBurst}, Concurrency: 1 << 20}
	for b.Loop() {
		d := k.Admit("api", l)
		d.Release()
	}
}

// BenchmarkAdmitParallel: many callers of their own at once (the lock is the table's).
func BenchmarkAdmitParallel(b *testing.B) {
	k := NewKeyed(0)
	l := Limits{Rate: Rate{Count: MaxCount, Per: time.Second, Burst: MaxBurst}, Concurrency: 1 << 20}
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprint("caller", n.Add(1))
		for pb.Next() {
			d := k.Admit(key, l)
			d.Release()
		}
	})
}

// TestTake: the rest of a batch takes its tokens from the same bucket, adds nothing in flight,
// and is refused for rate (with the wait for all its tokens) or, more than the burst, for
// burst.
func TestTake(t *testing.T) {
	k, c := fakeKeyed(0)
	l := Limits{Rate: Rate{Count: 10, Per: time.Second, Burst: 10}, Concurrency: 1}
	first := k.Admit("a", l)
	if d := k.Take("a", l, 6); !d.OK {
		t.Fatalf("6 more of 9 left: %+v", d)
	}
	d := k.Take("a", l, 5)
	if d.OK || d.Reason != ReasonRate || d.RetryAfter != 200*time.Millisecond {
		t.Fatalf("5 more of 3 left: %+v; want refused for rate, retry after 200ms (2 tokens at 10/s)", d)
	}
	if d := k.Take("a", l, 11); d.OK || d.Reason != ReasonBurst || d.RetryAfter != time.Second {
		t.Fatalf("11 of a burst of 10: %+v; want ReasonBurst, retry after 1s (a full bucket)", d)
	}
	if d := k.Admit("a", l); d.OK || d.Reason != ReasonConcurrency {
		t.Fatalf("Take added or released a call in flight: %+v", d)
	}
	first.Release()
	c.add(200 * time.Millisecond)
	if d := k.Take("a", l, 5); !d.OK {
		t.Fatalf("after the wait: %+v", d)
	}
	if d := k.Take("b", Limits{Concurrency: 1}, 1000); !d.OK {
		t.Fatal("no rate: Take refused")
	}
}

// TestWait: Wait tells when a token is next free without taking one and without making an
// entry for a key it does not know.
func TestWait(t *testing.T) {
	k, c := fakeKeyed(2)
	l := Limits{Rate: Rate{Count: 2, Per: time.Second, Burst: 2}}
	if w := k.Wait("a", l); w != 0 || k.Len() != 0 {
		t.Fatalf("an unknown key: wait %v, %d entries", w, k.Len())
	}
	k.Admit("a", l)
	if w := k.Wait("a", l); w != 0 {
		t.Fatalf("one token left: wait %v", w)
	}
	k.Admit("a", l)
	for range 3 { // waiting takes nothing
		if w := k.Wait("a", l); w != 500*time.Millisecond {
			t.Fatalf("an empty bucket at 2/s: wait %v, want 500ms", w)
		}
	}
	c.add(500 * time.Millisecond)
	if w := k.Wait("a", l); w != 0 {
		t.Fatalf("after 500ms: wait %v", w)
	}
	// A full table: an unknown key waits as the overflow entry does.
	k.Admit("b", l)
	k.Admit("b", l)
	k.Admit("c", l)
	k.Admit("c", l)
	if w := k.Wait("d", l); w == 0 {
		t.Fatal("an unknown key beside a full table of busy keys and a spent overflow entry does not wait")
	}
	if w := k.Wait("a", Limits{}); w != 0 {
		t.Fatalf("no rate: wait %v", w)
	}
}
