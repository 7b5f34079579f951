package stdio

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
)

// TestStdinQueueOrderAndWholeness: messages reach the reader whole and in arrival order,
// whether they went at once, waited for room, or were larger than the bound; one whose
// caller gave up is missing entirely.
func TestStdinQueueOrderAndWholeness(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	q := newStdinQueue(w, 1024)
	msg := func(c byte, n int) []byte { return append(bytes.Repeat([]byte{c}, n-1), '\n') }
	a, b, c, d := msg('a', 200<<10), msg('b', 2048), msg('c', 10), msg('d', 10)

	if err := q.write(t.Context(), a); err != nil { // larger than the bound, into an empty queue
		t.Fatal(err)
	}
	errs := make(chan error, 3)
	go func() { errs <- q.write(t.Context(), b) }()
	waitfor.True(t, 10*time.Second, "b waiting for room", func() bool { _, n := q.state(); return n == 1 })
	go func() { errs <- q.write(t.Context(), c) }()
	waitfor.True(t, 10*time.Second, "b and c waiting for room", func() bool { _, n := q.state(); return n == 2 })
	ctx, cancel := context.WithCancel(t.Context())
	go func() { errs <- q.write(ctx, d) }()
	waitfor.True(t, 10*time.Second, "b, c and d waiting for room", func() bool { _, n := q.state(); return n == 3 })
	cancel()
	// d gives up before anything is read: once the reader drains the pipe, d would be
	// admitted as soon as it fits, whether or not its goroutine has seen the cancellation.
	waitfor.True(t, 10*time.Second, "d no longer waiting", func() bool { _, n := q.state(); return n == 2 })
	var cancelled int
	got := make(chan []byte, 1)
	go func() {
		all, _ := io.ReadAll(r)
		got <- all
	}()
	for range 3 {
		if err := <-errs; errors.Is(err, context.Canceled) {
			cancelled++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	waitfor.True(t, 10*time.Second, "the queue written whole", func() bool { n, _ := q.state(); return n == 0 })
	w.Close()
	all := <-got
	want := string(a) + string(b) + string(c)
	if cancelled != 1 || string(all) != want {
		t.Fatalf("%d cancelled; read %d bytes %q…, want %d bytes: a, b, c whole and in order", cancelled, len(all), all[:min(len(all), 20)], len(want))
	}
}

// TestStdinQueueFailsWaitersWhenTheChildIsGone: a write waiting for room fails with the
// reason once stdin is broken, and so does every later one.
func TestStdinQueueFailsWaitersWhenTheChildIsGone(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	q := newStdinQueue(w, 1024)
	if err := q.write(t.Context(), []byte(strings.Repeat("x", 100<<10))); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- q.write(t.Context(), []byte("late\n")) }()
	waitfor.True(t, 10*time.Second, "the write waiting for room", func() bool { _, n := q.state(); return n == 1 })
	gone := errors.New("the child is gone")
	q.close(gone)
	select {
	case err := <-waited:
		if !errors.Is(err, gone) {
			t.Fatalf("waiting write: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiting write outlived the child")
	}
	if err := q.write(t.Context(), []byte("later\n")); !errors.Is(err, gone) {
		t.Fatalf("write after: %v", err)
	}
	if err := q.control([]byte("ctl\n")); !errors.Is(err, gone) {
		t.Fatalf("control after: %v", err)
	}
	if err := q.answer([]byte("answer\n")); !errors.Is(err, gone) {
		t.Fatalf("answer after: %v", err)
	}
}

// TestStdinQueueAnswersPassTheBound: while a request larger than the bound is written to a
// child that reads, an answer to the child still goes (after it, whole) and a cancellation is
// dropped; answers to a child that does not read stop at maxAnswerBytes and go again once it
// reads.
func TestStdinQueueAnswersPassTheBound(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	q := newStdinQueue(w, 1024)
	big := append(bytes.Repeat([]byte{'a'}, 200<<10), '\n') // more than the pipe holds
	if err := q.write(t.Context(), big); err != nil {
		t.Fatal(err)
	}
	if n, _ := q.state(); n <= 1024 {
		t.Fatalf("%d bytes queued, want the large request over the bound", n)
	}
	if err := q.control([]byte("cancel\n")); !errors.Is(err, errStdinFull) {
		t.Fatalf("a cancellation over the bound: %v, want it dropped", err)
	}
	answer := []byte(`{"jsonrpc":"2.0","id":"srv-1","result":{}}` + "\n")
	if err := q.answer(answer); err != nil {
		t.Fatalf("an answer behind a large request: %v", err)
	}

	// A child that reads nothing and asks on: answers stop at maxAnswerBytes.
	small := append(bytes.Repeat([]byte{'p'}, 99), '\n')
	var accepted int
	for q.answer(small) == nil {
		if accepted++; accepted > 2*maxAnswerBytes/len(small) {
			t.Fatal("answers to a child that does not read are not bounded")
		}
	}
	q.mu.Lock()
	pending := q.answerBytes
	q.mu.Unlock()
	if pending > maxAnswerBytes || pending+len(small) <= maxAnswerBytes {
		t.Fatalf("%d answer bytes wait when one more is refused, want up to %d", pending, maxAnswerBytes)
	}

	got := make(chan []byte, 1)
	go func() {
		all, _ := io.ReadAll(r)
		got <- all
	}()
	waitfor.True(t, 10*time.Second, "the queue written whole", func() bool { n, _ := q.state(); return n == 0 })
	q.mu.Lock()
	pending = q.answerBytes
	q.mu.Unlock()
	if pending != 0 {
		t.Fatalf("%d answer bytes counted after all was written", pending)
	}
	if err := q.answer(answer); err != nil { // room again
		t.Fatalf("an answer once the child read: %v", err)
	}
	waitfor.True(t, 10*time.Second, "the queue written whole", func() bool { n, _ := q.state(); return n == 0 })
	w.Close()
	all := <-got
	want := string(big) + string(answer) + strings.Repeat(string(small), accepted) + string(answer)
	if string(all) != want {
		t.Fatalf("read %d bytes, want %d: the large request, the answer, %d small answers, the answer, whole and in order", len(all), len(want), accepted)
	}
}
