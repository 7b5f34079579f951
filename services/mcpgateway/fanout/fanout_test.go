package fanout

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPublishReachesFollowersAndDropsBeyondTheBuffer(t *testing.T) {
	h := NewHub()
	a, b := NewListener(), NewListener()
	h.Follow(a, []string{"x", "y"})
	h.Follow(b, []string{"y"})
	if d := h.Publish("x", []byte("1")); d != 0 || len(a.ch) != 1 || len(b.ch) != 0 {
		t.Fatalf("x: dropped %d, a %d, b %d", d, len(a.ch), len(b.ch))
	}
	h.Follow(a, []string{"z"}) // a leaves x and y
	if h.Publish("y", []byte("2")); len(a.ch) != 1 || len(b.ch) != 1 {
		t.Fatalf("y after a left: a %d, b %d", len(a.ch), len(b.ch))
	}
	for range Buffer - 1 {
		h.Publish("y", []byte("fill"))
	}
	if d := h.Publish("y", []byte("over")); d != 1 || len(b.ch) != Buffer {
		t.Fatalf("beyond the buffer: dropped %d, queued %d", d, len(b.ch))
	}
	h.Follow(b, nil)
	if d := h.Publish("y", []byte("none")); d != 0 || len(h.subs) != 1 {
		t.Fatalf("after b left: dropped %d, %d servers followed", d, len(h.subs))
	}
}

func TestServeSendsWhatPassesAndEndsWhenCheckSays(t *testing.T) {
	h := NewHub()
	l := NewListener()
	h.Follow(l, []string{"x"})
	h.Publish("x", []byte("skip"))
	h.Publish("x", []byte("keep"))
	sent := make(chan string, 4)
	stop := make(chan struct{})
	errSend := errors.New("gone")
	err := l.Serve(t.Context(), Stream{
		Send: func(m []byte) error {
			sent <- string(m)
			if string(m) == "last" {
				return errSend
			}
			return nil
		},
		Every: time.Millisecond,
		Check: func() (bool, error) {
			select {
			case <-stop:
				return false, nil
			default:
			}
			if len(sent) == 1 && len(l.ch) == 0 {
				h.Publish("x", []byte("last"))
			}
			return true, nil
		},
		Pass: func(m []byte) bool { return string(m) != "skip" },
	})
	if !errors.Is(err, errSend) || <-sent != "keep" || <-sent != "last" {
		t.Fatalf("Serve: %v", err)
	}
	close(stop)
	if err := l.Serve(t.Context(), Stream{Every: time.Millisecond, Check: func() (bool, error) {
		select {
		case <-stop:
			return false, nil
		default:
			return true, nil
		}
	}}); err != nil {
		t.Fatalf("a stream Check ends: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.Serve(ctx, Stream{Every: time.Hour, Check: func() (bool, error) { return true, nil }}); err != nil {
		t.Fatalf("a stream whose client left: %v", err)
	}
	if err := l.Serve(t.Context(), Stream{Expires: time.Now(), Every: time.Hour, Check: func() (bool, error) { return true, nil }}); err != nil {
		t.Fatalf("an expired session's stream: %v", err)
	}
}

// A Bell runs the Check of the streams that listen to it at once, not at their next Every;
// a stopped listener is not woken.
func TestBellWakes(t *testing.T) {
	var b Bell
	b.Ring() // nobody listens: nothing happens
	wake, stop := b.Listen()
	checked := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		n := 0
		done <- NewListener().Serve(t.Context(), Stream{Every: time.Hour, Wake: wake, Check: func() (bool, error) {
			n++
			checked <- struct{}{}
			return n < 2, nil
		}})
	}()
	for range 2 {
		b.Ring()
		select {
		case <-checked:
		case <-time.After(5 * time.Second):
			t.Fatal("a ring did not run Check")
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	stop()
	b.Ring()
	if len(wake) != 0 {
		t.Fatal("a stopped listener was woken")
	}
}
