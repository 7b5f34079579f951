// Package park runs a call apart from its caller, for an MCP client that cannot hold a stream
// open while it answers a server's request (MCP 2026-07-28: the answer comes in a new request).
// The call's items — progress, a request for the client, its last item — queue up while nobody
// reads them. A caller reads them in order (Serve) until the call asks the client something:
// the caller's wait ends there and the call waits, parked, for a retry that resumes it
// (Resume) with the answers. A park that passes cancels the call, and so does a caller that
// leaves with nothing asked, as for any call whose caller left.
//
// The tool host parks the calls of stdio servers (services/toolhost/host), mcpgateway those
// of session-era HTTP servers (services/mcpgateway/upstream): one implementation, the items
// each one's own.
package park

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// Kind is what an item of a call is to its caller.
type Kind int

const (
	// Progress is handed to the caller and the call goes on.
	Progress Kind = iota
	// Request asks the client something: the call is parked before the item is handed to the
	// caller (the retry that answers it may come at once), and the caller's wait ends.
	Request
	// Last is the call's final item (its answer): handed to the caller, then the call is over.
	Last
)

var (
	// ErrUnknown means no call of that id is parked here (it ended, its park passed, or another
	// process parked it).
	ErrUnknown = errors.New("no parked call of that id")
	// ErrResumed means the call is being served to another caller already.
	ErrResumed = errors.New("the call is being resumed already")
)

// Calls are the calls run apart from their callers in one process, by id. kind classifies
// their items.
type Calls[T any] struct {
	kind func(T) Kind
	mu   sync.Mutex
	m    map[string]*Call[T]
}

// New returns an empty table whose items kind classifies.
func New[T any](kind func(T) Kind) *Calls[T] {
	return &Calls[T]{kind: kind, m: map[string]*Call[T]{}}
}

// Call is one call run apart from its caller: what it produced and nobody has read yet.
type Call[T any] struct {
	id     string
	park   time.Duration
	cancel context.CancelFunc
	wake   chan struct{}

	mu       sync.Mutex
	queue    []T
	done     bool  // nothing more comes: the last item is queued, or the call failed
	failure  error // the call ended with this error instead of a last item
	attached bool  // a caller serves the call
	timer    *time.Timer
}

// ID names the call for Resume: 32 random hex digits, never reused.
func (c *Call[T]) ID() string { return c.id }

// Push queues an item the call produced (a Progress or Request item); it never blocks.
func (c *Call[T]) Push(item T) {
	c.mu.Lock()
	c.queue = append(c.queue, item)
	c.mu.Unlock()
	c.signal()
}

func (c *Call[T]) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// finish ends the call: with last queued as its final item, or with err and nothing more.
func (c *Call[T]) finish(last T, err error) {
	c.mu.Lock()
	c.done, c.failure = true, err
	if err == nil {
		c.queue = append(c.queue, last)
	}
	c.mu.Unlock()
	c.signal()
}

// next takes the first queued item (ok false: none).
func (c *Call[T]) next() (item T, ok, done bool, failure error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		return item, false, c.done, c.failure
	}
	item = c.queue[0]
	var zero T
	c.queue[0] = zero
	c.queue = c.queue[1:]
	return item, true, false, nil
}

// Start runs run apart from ctx's cancellation (its values are kept) and returns the call,
// attached to its caller: serve it with Serve. run's context is cancelled when the call is
// (its caller left with nothing asked, or its park passed); it pushes the call's items and
// returns its last item, or an error. park is how long the call may wait for Resume after it
// asked the client something (0: it is cancelled as its caller leaves).
func (cs *Calls[T]) Start(ctx context.Context, park time.Duration, run func(ctx context.Context, c *Call[T]) (T, error)) *Call[T] {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &Call[T]{id: hex.EncodeToString(b), park: park, cancel: cancel, wake: make(chan struct{}, 1), attached: true}
	cs.mu.Lock()
	cs.m[c.id] = c
	cs.mu.Unlock()
	go func() {
		defer cancel()
		last, err := run(cctx, c)
		c.finish(last, err)
	}()
	return c
}

// Len counts the calls run apart from their callers (served or parked).
func (cs *Calls[T]) Len() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return len(cs.m)
}

func (cs *Calls[T]) remove(c *Call[T]) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.m[c.id] == c {
		delete(cs.m, c.id)
	}
}

// Resume attaches the parked call id to a new caller, which delivers the client's answers
// and serves the rest of it (Serve). ErrUnknown: no such call is parked here; ErrResumed:
// another caller serves it.
func (cs *Calls[T]) Resume(id string) (*Call[T], error) {
	cs.mu.Lock()
	c := cs.m[id]
	cs.mu.Unlock()
	if c == nil {
		return nil, ErrUnknown
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.attached {
		return nil, ErrResumed
	}
	c.attached = true
	if c.timer != nil {
		c.timer.Stop()
	}
	return c, nil
}

// Serve hands the call's items to send in order, until a Request (the call is parked first,
// and send's error is returned), its Last item (the call is forgotten, and send's error is
// returned), or its failure (returned). When ctx ends first, or send fails on a Progress
// item, the call is cancelled and that error returned.
func (cs *Calls[T]) Serve(ctx context.Context, c *Call[T], send func(T) error) error {
	for {
		item, ok, done, failure := c.next()
		if !ok {
			if done {
				cs.remove(c)
				return failure
			}
			select {
			case <-c.wake:
			case <-ctx.Done():
				cs.leave(c, false)
				return ctx.Err()
			}
			continue
		}
		switch cs.kind(item) {
		case Request:
			cs.leave(c, true)
			return send(item)
		case Last:
			cs.remove(c)
			return send(item)
		}
		if err := send(item); err != nil {
			cs.leave(c, false)
			return err
		}
	}
}

// Park detaches the call from its caller, which could not deliver what it resumed the call
// with: the call waits for another Resume for its park time.
func (cs *Calls[T]) Park(c *Call[T]) { cs.leave(c, true) }

// leave detaches the call from its caller: parked for its park time when it asked the client
// something, after which it is cancelled; cancelled at once when its caller went away with
// nothing asked.
func (cs *Calls[T]) leave(c *Call[T], asked bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attached = false
	if !asked || c.park <= 0 {
		c.cancel()
		cs.remove(c)
		return
	}
	c.timer = time.AfterFunc(c.park, func() {
		c.mu.Lock()
		attached := c.attached
		c.mu.Unlock()
		if !attached {
			c.cancel()
			cs.remove(c)
		}
	})
}
