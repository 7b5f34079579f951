// Package workpool runs short functions on reused goroutines. A fresh goroutine starts with a
// small stack and grows it, copying, on every call that needs more: on a multiplexed stream
// that serves a call per message this is a tenth of the CPU of a small call (measured in the
// tool host and mcpgateway). A pool keeps goroutines whose stacks have already grown; when all
// of them are busy a call gets a goroutine of its own, so the pool never queues or blocks.
package workpool

// Pool is a set of idle goroutines waiting for work.
type Pool struct {
	work chan func()
}

// New starts n goroutines that live as long as the process.
func New(n int) *Pool {
	p := &Pool{work: make(chan func())}
	for range n {
		go func() {
			for f := range p.work {
				f()
			}
		}()
	}
	return p
}

// Go runs f on an idle goroutine of the pool, or on a new one when none is idle.
func (p *Pool) Go(f func()) {
	select {
	case p.work <- f:
	default:
		go f()
	}
}
