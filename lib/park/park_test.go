package park

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// item is a test call's item: its text, and its kind.
type item struct {
	text string
	kind Kind
}

func newCalls() *Calls[item] { return New(func(it item) Kind { return it.kind }) }

// serve collects what Serve hands over.
func serve(ctx context.Context, cs *Calls[item], c *Call[item]) ([]string, error) {
	var got []string
	err := cs.Serve(ctx, c, func(it item) error { got = append(got, it.text); return nil })
	return got, err
}

// TestServedToItsEnd: a call that asks nothing hands its progress and its last item to its
// caller in order and is forgotten; one that fails hands its error.
func TestServedToItsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := newCalls()
		c := cs.Start(t.Context(), time.Minute, func(ctx context.Context, c *Call[item]) (item, error) {
			c.Push(item{text: "p1"})
			c.Push(item{text: "p2"})
			return item{text: "answer", kind: Last}, nil
		})
		got, err := serve(t.Context(), cs, c)
		if err != nil || !slices.Equal(got, []string{"p1", "p2", "answer"}) || cs.Len() != 0 {
			t.Fatalf("served %q, %v; %d calls left", got, err, cs.Len())
		}
		boom := errors.New("boom")
		c = cs.Start(t.Context(), time.Minute, func(context.Context, *Call[item]) (item, error) { return item{}, boom })
		if got, err := serve(t.Context(), cs, c); !errors.Is(err, boom) || len(got) != 0 || cs.Len() != 0 {
			t.Fatalf("a failed call: %q, %v; %d calls left", got, err, cs.Len())
		}
	})
}

// TestParkedUntilResumed: a request ends the caller's wait and parks the call; Resume
// attaches it to one new caller at a time, which serves the rest; a call that ended cannot be
// resumed.
func TestParkedUntilResumed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := newCalls()
		answer := make(chan string)
		c := cs.Start(t.Context(), time.Minute, func(ctx context.Context, c *Call[item]) (item, error) {
			c.Push(item{text: "question", kind: Request})
			return item{text: "answer: " + <-answer, kind: Last}, nil
		})
		got, err := serve(t.Context(), cs, c)
		if err != nil || !slices.Equal(got, []string{"question"}) || cs.Len() != 1 {
			t.Fatalf("asked: %q, %v; %d calls", got, err, cs.Len())
		}
		if _, err := cs.Resume("nobody"); !errors.Is(err, ErrUnknown) {
			t.Fatalf("an unknown id: %v", err)
		}
		r, err := cs.Resume(c.ID())
		if err != nil || r != c {
			t.Fatalf("resume: %v", err)
		}
		if _, err := cs.Resume(c.ID()); !errors.Is(err, ErrResumed) {
			t.Fatalf("a second resume: %v", err)
		}
		answer <- "42"
		got, err = serve(t.Context(), cs, r)
		if err != nil || !slices.Equal(got, []string{"answer: 42"}) || cs.Len() != 0 {
			t.Fatalf("resumed: %q, %v; %d calls", got, err, cs.Len())
		}
		if _, err := cs.Resume(c.ID()); !errors.Is(err, ErrUnknown) {
			t.Fatalf("a call that ended: %v", err)
		}
	})
}

// TestParkPasses: a parked call nobody resumes within its park is cancelled and forgotten; a
// resume just before it passes holds it.
func TestParkPasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := newCalls()
		cancelled := make(chan struct{})
		c := cs.Start(t.Context(), time.Minute, func(ctx context.Context, c *Call[item]) (item, error) {
			c.Push(item{text: "question", kind: Request})
			<-ctx.Done()
			close(cancelled)
			return item{}, ctx.Err()
		})
		if _, err := serve(t.Context(), cs, c); err != nil {
			t.Fatal(err)
		}
		<-time.After(time.Minute - time.Second)
		synctest.Wait()
		if cs.Len() != 1 {
			t.Fatal("the call left before its park passed")
		}
		<-time.After(2 * time.Second)
		synctest.Wait()
		select {
		case <-cancelled:
		default:
			t.Fatal("the park passed and the call was not cancelled")
		}
		if _, err := cs.Resume(c.ID()); !errors.Is(err, ErrUnknown) || cs.Len() != 0 {
			t.Fatalf("after its park: %v; %d calls", err, cs.Len())
		}
	})
}

// TestCallerLeaves: a caller that goes away with nothing asked, or that cannot take a
// progress item, cancels the call at once; so does a request of a call with no park time.
func TestCallerLeaves(t *testing.T) {
	for _, tc := range []struct {
		name  string
		park  time.Duration
		items []item
		leave func(cancel context.CancelFunc) func(item) error
	}{
		{"context ends", time.Minute, nil, func(cancel context.CancelFunc) func(item) error { cancel(); return nil }},
		{"send fails", time.Minute, []item{{text: "p"}}, func(context.CancelFunc) func(item) error {
			return func(item) error { return errors.New("gone") }
		}},
		{"no park time", 0, []item{{text: "q", kind: Request}}, func(context.CancelFunc) func(item) error {
			return func(item) error { return nil }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cs := newCalls()
				cancelled := make(chan struct{})
				c := cs.Start(t.Context(), tc.park, func(ctx context.Context, c *Call[item]) (item, error) {
					for _, it := range tc.items {
						c.Push(it)
					}
					<-ctx.Done()
					close(cancelled)
					return item{}, ctx.Err()
				})
				ctx, cancel := context.WithCancel(t.Context())
				send := tc.leave(cancel)
				if send == nil {
					send = func(item) error { return nil }
				}
				_ = cs.Serve(ctx, c, send)
				synctest.Wait()
				select {
				case <-cancelled:
				default:
					t.Fatal("the call goes on without its caller")
				}
				if cs.Len() != 0 {
					t.Fatalf("%d calls left", cs.Len())
				}
				cancel()
			})
		})
	}
}
