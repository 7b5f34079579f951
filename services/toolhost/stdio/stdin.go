package stdio

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
)

// stdinQueue writes the messages of any number of concurrent writers to a child's stdin,
// each one whole and in the order they were queued, with a bound on the bytes waiting for the
// child to read them.
//
// Writes are combined without a goroutine handoff: a writer appends its message to buf and,
// unless a write is in progress, becomes the writer and writes everything queued (including
// what others append meanwhile) with non-blocking writes. When the pipe is full (the child is
// not reading), the rest is left to a goroutine that waits for the child, and the caller goes
// on. A message that does not fit under the bound waits for room in line (first come, first
// queued) with its caller's context; one whose caller gives up is dropped whole, before any of
// its bytes was written, and the others keep their places. A message larger than the bound
// goes alone, once the queue is empty.
//
// The tool host's own messages go ahead of the waiting calls without waiting. Answers to the
// child's requests are not held to the bound (a child that reads gets them even behind a
// large request; each follows a line the child sent), only to maxAnswerBytes of their own,
// which a child that floods requests without reading its stdin reaches. Cancellations are
// dropped when the queue is full.
type stdinQueue struct {
	f   *os.File
	rc  syscall.RawConn
	max int
	nb  nonblockingWrite // used by the one writer at a time

	mu      sync.Mutex
	buf     []byte // queued, not yet handed to a write
	spare   []byte
	queued  int    // bytes queued or being written: the bound applies to this
	in, out int64  // bytes queued and written since the start: positions in the stream
	answers []span // answers to the child not yet written whole, in order
	// answerBytes counts their bytes not yet written; maxAnswerBytes applies to this.
	answerBytes int
	writing     bool // a writer (a caller, or the flusher goroutine) is writing
	broken      error
	waiters     []*stdinWaiter // messages that did not fit yet, in arrival order
}

// stdinWaiter is a message waiting for room.
type stdinWaiter struct {
	msg    []byte
	done   chan struct{} // closed once msg is queued, or can never be (err)
	queued bool
	err    error
}

// span is where a message lies in the stream written to stdin.
type span struct{ start, end int64 }

// errStdinFull is returned for a message of the tool host's own dropped for want of room.
var errStdinFull = errors.New("stdin queue is full")

// maxAnswerBytes bounds the answers to the child waiting to be written, beyond the bound on
// requests: thousands of answers, more than a child that reads its stdin leaves waiting.
const maxAnswerBytes = 1 << 20

// spareMax bounds the buffer kept for reuse, so that one large message does not pin its
// memory for the life of the child.
const spareMax = 1 << 20

func newStdinQueue(f *os.File, max int) *stdinQueue {
	q := &stdinQueue{f: f, max: max}
	q.rc, _ = f.SyscallConn() // nil for a file that has none: every write then blocks
	q.nb.fn = q.nb.write
	return q
}

// write queues msg whole, waiting with ctx for room when the queue is full, and starts
// writing unless a writer is at work. The error is ctx's (msg was not queued) or the reason
// stdin is broken.
func (q *stdinQueue) write(ctx context.Context, msg []byte) error {
	q.mu.Lock()
	if q.broken != nil {
		err := q.broken
		q.mu.Unlock()
		return err
	}
	if len(q.waiters) == 0 && q.fits(len(msg)) {
		q.enqueue(msg)
		q.flush()
		q.mu.Unlock()
		return nil
	}
	w := &stdinWaiter{msg: msg, done: make(chan struct{})}
	q.waiters = append(q.waiters, w)
	queued := q.queued
	q.mu.Unlock()
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.queued || w.err != nil { // decided meanwhile: queued whole, or stdin broke
		return w.err
	}
	for i, o := range q.waiters {
		if o == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			break
		}
	}
	q.admit() // the next in line may fit now
	return fmt.Errorf("the MCP server does not read its stdin: %d bytes wait for it (limit %d, toolhost-max-stdin-queue-bytes); this request was not sent: %w",
		queued, q.max, ctx.Err())
}

// control queues a message of the tool host's own that may be lost (a cancellation) ahead of
// the waiting calls, without waiting: it is dropped when the queue is full or stdin is broken.
func (q *stdinQueue) control(msg []byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.broken != nil {
		return q.broken
	}
	if !q.fits(len(msg)) {
		return errStdinFull
	}
	q.enqueue(msg)
	q.flush()
	return nil
}

// answer queues an answer to a request of the child ahead of the waiting calls, without
// waiting and past the bound on requests: the child waits for it, and reads its stdin unless
// stuck. It is dropped only when stdin is broken, or when maxAnswerBytes of answers already
// wait (the child does not read).
func (q *stdinQueue) answer(msg []byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.broken != nil {
		return q.broken
	}
	if q.answerBytes > 0 && q.answerBytes+len(msg) > maxAnswerBytes {
		return errStdinFull
	}
	q.answers = append(q.answers, span{q.in, q.in + int64(len(msg))})
	q.answerBytes += len(msg)
	q.enqueue(msg)
	q.flush()
	return nil
}

// fits says whether n more bytes may be queued: always into an empty queue.
func (q *stdinQueue) fits(n int) bool { return q.queued == 0 || q.queued+n <= q.max }

func (q *stdinQueue) enqueue(msg []byte) {
	q.buf = append(q.buf, msg...)
	q.queued += len(msg)
	q.in += int64(len(msg))
}

// wrote accounts for n bytes written to the child. Called with mu held.
func (q *stdinQueue) wrote(n int) {
	q.queued -= n
	q.out += int64(n)
	for len(q.answers) > 0 && q.answers[0].start < q.out {
		a := &q.answers[0]
		done := min(a.end, q.out) - a.start
		q.answerBytes -= int(done)
		a.start += done
		if a.start < a.end {
			break
		}
		q.answers = q.answers[1:]
	}
}

// admit queues the waiting messages that fit now, in order. Called with mu held.
func (q *stdinQueue) admit() {
	n := 0
	for _, w := range q.waiters {
		if !q.fits(len(w.msg)) {
			break
		}
		q.enqueue(w.msg)
		w.queued = true
		close(w.done)
		n++
	}
	if n == 0 {
		return
	}
	q.waiters = append(q.waiters[:0], q.waiters[n:]...)
	if !q.writing { // nobody would write them otherwise
		q.writing = true
		go q.flushBlocking()
	}
}

// flush writes the queue without blocking, unless a writer is at work already; what the pipe
// does not take is left to flushBlocking. Called with mu held; returns with it held.
func (q *stdinQueue) flush() {
	if q.writing {
		return
	}
	q.writing = true
	for len(q.buf) > 0 {
		buf := q.take()
		q.mu.Unlock()
		n, err := q.writeNow(buf)
		q.mu.Lock()
		if q.broken != nil { // the child went meanwhile
			return
		}
		q.wrote(n)
		if err != nil {
			q.fail(err)
			return
		}
		if n < len(buf) { // the pipe is full: the child is not reading right now
			rest := buf[:copy(buf, buf[n:])]
			newer := q.buf
			q.buf = append(rest, newer...)
			q.keep(newer)
			q.admit()
			go q.flushBlocking()
			return
		}
		q.keep(buf)
		q.admit()
	}
	q.writing = false
}

// flushBlocking writes the queue, waiting for the child to read, until the queue is empty or
// stdin breaks. It runs while q.writing is set on its behalf.
func (q *stdinQueue) flushBlocking() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.buf) > 0 {
		buf := q.take()
		for off := 0; off < len(buf); {
			end := min(len(buf), off+64<<10) // free room as the child reads, not only at the end
			q.mu.Unlock()
			n, err := q.f.Write(buf[off:end])
			q.mu.Lock()
			if q.broken != nil {
				return
			}
			q.wrote(n)
			off += n
			if err != nil {
				q.fail(err)
				return
			}
			q.admit()
		}
		q.keep(buf)
	}
	q.writing = false
}

// take hands the queued bytes to the writer. Called with mu held.
func (q *stdinQueue) take() []byte {
	buf := q.buf
	q.buf, q.spare = q.spare[:0], nil
	return buf
}

// keep keeps buf for reuse unless it is large. Called with mu held.
func (q *stdinQueue) keep(buf []byte) {
	if cap(buf) <= spareMax {
		q.spare = buf[:0]
	}
}

// writeNow writes what the pipe takes without waiting for the child.
func (q *stdinQueue) writeNow(b []byte) (int, error) {
	if q.rc == nil {
		return q.f.Write(b)
	}
	q.nb.b, q.nb.n, q.nb.err = b, 0, nil
	err := q.rc.Write(q.nb.fn)
	n, werr := q.nb.n, q.nb.err
	q.nb.b = nil
	if werr == nil {
		werr = err
	}
	return n, werr
}

// nonblockingWrite is the callback of RawConn.Write that writes b until the pipe is full,
// kept with the queue so that a write allocates nothing.
type nonblockingWrite struct {
	b   []byte
	n   int
	err error
	fn  func(fd uintptr) bool
}

func (w *nonblockingWrite) write(fd uintptr) bool {
	for w.n < len(w.b) {
		m, e := syscall.Write(int(fd), w.b[w.n:])
		if m > 0 {
			w.n += m
		}
		switch {
		case e == syscall.EINTR:
		case e == syscall.EAGAIN: // full: flushBlocking waits for the child
			return true
		case e != nil:
			w.err = e
			return true
		case m <= 0:
			return true
		}
	}
	return true
}

// fail breaks the queue: what is queued is dropped and every write, waiting or to come,
// fails with err. Called with mu held.
func (q *stdinQueue) fail(err error) {
	if q.broken == nil {
		q.broken = err
	}
	q.buf, q.spare, q.queued, q.writing = nil, nil, 0, false
	q.answers, q.answerBytes = nil, 0
	for _, w := range q.waiters {
		w.err = q.broken
		close(w.done)
	}
	q.waiters = nil
}

// close breaks the queue with err (the child is gone).
func (q *stdinQueue) close(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.fail(err)
}

// state reports the queued bytes and the number of waiting messages (for tests).
func (q *stdinQueue) state() (queued, waiting int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queued, len(q.waiters)
}
