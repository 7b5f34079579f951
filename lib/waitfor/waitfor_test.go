package waitfor

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// fakeTB records a failure instead of ending the test.
type fakeTB struct{ failed string }

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

// TestTrueReturnsSoonAfterTheCondition: a condition that comes to hold after 300 ms is seen
// within MaxInterval of it, and the time it took is returned.
func TestTrueReturnsSoonAfterTheCondition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ready atomic.Bool
		time.AfterFunc(300*time.Millisecond, func() { ready.Store(true) })
		took := True(t, time.Second, "ready", ready.Load)
		if took < 300*time.Millisecond || took > 300*time.Millisecond+MaxInterval {
			t.Fatalf("took %v; want 300 ms to 300 ms + %v", took, MaxInterval)
		}
	})
}

// TestTheLimitIsOnTheCondition: a condition that holds exactly when the limit passes is
// still checked then (the last sleep ends at the limit, not after it), and one that never
// holds fails with what was awaited.
func TestTheLimitIsOnTheCondition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ready atomic.Bool
		time.AfterFunc(time.Second, func() { ready.Store(true) })
		var f fakeTB
		True(&f, time.Second, "ready at the limit", ready.Load)
		if f.failed != "" {
			t.Fatalf("a condition that held at the limit failed: %s", f.failed)
		}
		took := True(&f, 200*time.Millisecond, "never", func() bool { return false })
		if f.failed != "never: not within 200ms" {
			t.Fatalf("failure %q", f.failed)
		}
		if took < 200*time.Millisecond || took > 200*time.Millisecond+FirstInterval {
			t.Fatalf("gave up after %v; want just past 200ms", took)
		}
	})
}

// TestNoErrorSaysTheLastError: the failure carries the condition's last error, and the
// polling slows down to MaxInterval (a second's wait is about a hundred checks, not a
// thousand).
func TestNoErrorSaysTheLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		var f fakeTB
		NoError(&f, time.Second, func() error {
			calls++
			return fmt.Errorf("attempt %d", calls)
		})
		if !strings.HasPrefix(f.failed, "not within 1s: attempt ") || !strings.HasSuffix(f.failed, fmt.Sprint(calls)) {
			t.Fatalf("failure %q after %d calls", f.failed, calls)
		}
		if calls < 95 || calls > 110 {
			t.Fatalf("%d checks in a second; want about %d", calls, int(time.Second/MaxInterval))
		}
	})
}

// TestPollWrapsTheError: Poll's error wraps the condition's, for errors.Is.
func TestPollWrapsTheError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errNope := errors.New("nope")
		if _, err := Poll(50*time.Millisecond, func() error { return errNope }); !errors.Is(err, errNope) {
			t.Fatalf("Poll: %v", err)
		}
		if took, err := Poll(time.Second, func() error { return nil }); err != nil || took != 0 {
			t.Fatalf("a condition that holds at once: %v %v", took, err)
		}
	})
}

// TestStopEndsTheWait: a condition that can no longer hold ends the wait at once, with its
// error (unwrapped: it is the reason, not a timeout).
func TestStopEndsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errGone := errors.New("the process exited")
		calls := 0
		took, err := Poll(time.Minute, func() error {
			if calls++; calls == 3 {
				return Stop(errGone)
			}
			return errors.New("not yet")
		})
		if err != errGone || calls != 3 || took > 10*time.Millisecond { //nolint:errorlint // the reason itself, unwrapped, is what Poll returns
			t.Fatalf("Poll: %v after %d calls and %v", err, calls, took)
		}
	})
}

// TestWrappedStopEndsTheWait: a Stop that the condition wraps with its context still ends the
// wait at once.
func TestWrappedStopEndsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errGone := errors.New("the process exited")
		calls := 0
		took, err := Poll(time.Minute, func() error {
			calls++
			return fmt.Errorf("probe: %w", Stop(errGone))
		})
		if err != errGone || calls != 1 || took > 10*time.Millisecond { //nolint:errorlint // the reason itself, unwrapped, is what Poll returns
			t.Fatalf("Poll: %v after %d calls and %v", err, calls, took)
		}
	})
}
