package stdio

import "sync"

// tail keeps the last n bytes written to it in a ring: a write copies its own bytes once (at
// most n of them) whatever the size of the tail, and only String puts them in order.
type tail struct {
	mu   sync.Mutex
	buf  []byte // allocated at the first write, len n
	n    int
	next int  // where the next byte goes
	full bool // buf has wrapped: the oldest byte is at next
}

func newTail(n int) *tail { return &tail{n: max(n, 0)} }

func (t *tail) Write(p []byte) {
	if t.n == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.buf == nil {
		t.buf = make([]byte, t.n)
	}
	if len(p) >= t.n { // only the last n bytes of p stay
		copy(t.buf, p[len(p)-t.n:])
		t.next, t.full = 0, true
		return
	}
	k := copy(t.buf[t.next:], p)
	if k < len(p) { // wrap around
		copy(t.buf, p[k:])
		t.full = true
	}
	t.next += len(p)
	if t.next >= t.n {
		t.next -= t.n
		t.full = true
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.full {
		return string(t.buf[:t.next])
	}
	out := make([]byte, 0, t.n)
	out = append(out, t.buf[t.next:]...)
	return string(append(out, t.buf[:t.next]...))
}
