// Package waitfor is how a test waits for what it does not control the timing of (a process
// it started, a socket, a goroutine of the code under test): it polls a condition until it
// holds, and fails when it still does not after a limit. The limit is a deadline on the
// condition, not on the sleep: the condition is always checked once more when the limit has
// passed, so a test delayed by a busy machine fails only when the condition is really false.
//
// A test whose code runs in goroutines it can bubble (no real process or socket) uses
// testing/synctest instead: synctest.Wait returns when everything else is blocked, with no
// polling at all.
package waitfor

import (
	"errors"
	"fmt"
	"time"
)

// The polling interval starts at FirstInterval and doubles up to MaxInterval: a condition that
// holds at once costs a millisecond, and one that takes seconds is checked a hundred times a
// second at most. A duration returned is late by MaxInterval at most.
const (
	FirstInterval = time.Millisecond
	MaxInterval   = 10 * time.Millisecond
)

// TB is what the helpers use of a test (testing.TB has it).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Poll calls f until it returns nil or limit has passed since the call, and returns how long
// it took, or f's last error once limit has passed. An error made by Stop ends the wait at
// once: the condition can no longer hold.
func Poll(limit time.Duration, f func() error) (time.Duration, error) {
	began := time.Now()
	interval := FirstInterval
	for {
		err := f()
		took := time.Since(began)
		if err == nil {
			return took, nil
		}
		if s := (stopped{}); errors.As(err, &s) {
			return took, s.err
		}
		if took > limit {
			return took, fmt.Errorf("not within %v: %w", limit, err)
		}
		time.Sleep(min(interval, limit-took+FirstInterval))
		interval = min(2*interval, MaxInterval)
	}
}

// NoError waits until f returns nil, and returns how long it took; it fails the test with
// f's last error when that has not happened within limit.
func NoError(t TB, limit time.Duration, f func() error) time.Duration {
	t.Helper()
	took, err := Poll(limit, f)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return took
}

// True waits until cond holds, and returns how long it took; it fails the test, naming what
// it waited for, when cond has not held within limit.
func True(t TB, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	took, err := Poll(limit, func() error {
		if cond() {
			return nil
		}
		return errFalse
	})
	if err != nil {
		t.Fatalf("%s: not within %v", what, limit)
	}
	return took
}

// Stop wraps err to end a Poll (or NoError) at once with err: what the condition waits for
// can no longer happen (the process that was to answer has exited).
func Stop(err error) error { return stopped{err} }

type stopped struct{ err error }

func (s stopped) Error() string { return s.err.Error() }

// errFalse is True's condition not holding yet.
var errFalse = fmt.Errorf("condition false")
