package streamable

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/zestmcp/zest/lib/httpexchange"
	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"
)

// errAnswered is what a call of an endpoint's stream gets once the exchange it belongs to
// returned: the HTTP response is no longer the endpoint's to write (a late progress
// notification of a call that ended is dropped so).
var errAnswered = errors.New("the request was answered: nothing more can be written to it")

// postAnswer is the ExchangeStream of one POST: the endpoint's calls are written through to the
// HTTP response, a lone answer as JSON with its status, messages before it as an SSE stream
// (each flushed as it comes). The calls may come from the endpoint's goroutines (a relay of
// progress): they are serialized here.
type postAnswer struct {
	w    http.ResponseWriter
	ctx  context.Context
	body []byte // the request's, for the error that ends a broken stream (brokenAnswer)

	mu     sync.Mutex
	sse    bool // the SSE stream was started
	wrote  bool // the response's status was written
	final  bool // the answer was written
	closed bool // the exchange returned
}

var _ mcphttp.ExchangeStream = (*postAnswer)(nil)

// Context is the request's.
func (a *postAnswer) Context() context.Context { return a.ctx }

// Session sets the Mcp-Session-Id header of the response to initialize.
func (a *postAnswer) Session(id, _ string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.usable(); err != nil {
		return err
	}
	a.w.Header().Set(mcphttp.HeaderSession, id)
	return nil
}

// Message writes one message before the answer: it starts the SSE stream.
func (a *postAnswer) Message(msg []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.usable(); err != nil {
		return err
	}
	return a.event(msg)
}

// Final writes the answer: as the JSON body with status when nothing preceded it, else as
// the stream's last event (the stream's status was sent: 200).
func (a *postAnswer) Final(msg []byte, status int) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.usable(); err != nil {
		return err
	}
	a.final = true
	if a.sse {
		return a.event(msg)
	}
	a.w.Header().Set("Content-Type", "application/json")
	a.w.WriteHeader(status)
	a.wrote = true
	_, err := a.w.Write(msg)
	return err
}

// usable is nil while the endpoint may write: before its answer, while its exchange runs
// and its client is there.
func (a *postAnswer) usable() error {
	switch {
	case a.closed || a.final:
		return errAnswered
	case a.ctx.Err() != nil:
		return statusOf(a.ctx.Err())
	}
	return nil
}

// event writes msg as an SSE event, starting the stream first.
func (a *postAnswer) event(msg []byte) error {
	if !a.sse {
		// Were this replica to die now that the answer streams, the edge ends it with
		// this request's error (brokenAnswer).
		if b := brokenAnswer(a.body, msgDied); b != nil {
			httpexchange.IfBroken(a.w, b)
		}
		sseHeaders(a.w)
		a.w.WriteHeader(http.StatusOK)
		a.sse, a.wrote = true, true
	}
	if _, err := io.WriteString(a.w, "event: message\ndata: "+string(msg)+"\n\n"); err != nil {
		return err
	}
	flush(a.w)
	return nil
}

// close ends the endpoint's writing (its exchange returned) and says whether the answer was
// written and whether anything was.
func (a *postAnswer) close() (final, wrote bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	return a.final, a.wrote
}

// listenStream is the ListenStream of one GET: once the endpoint opens it, an SSE stream of
// its messages, with a comment line every interval it is idle (a goroutine writes those
// until the stream closes).
type listenStream struct {
	w     http.ResponseWriter
	ctx   context.Context
	fail  context.CancelFunc // ends the endpoint's Listen when a write fails
	every time.Duration

	mu     sync.Mutex
	open   bool
	closed bool
	idle   chan struct{} // closed when the keep-alive goroutine returned
	stop   chan struct{}
}

var _ mcphttp.ListenStream = (*listenStream)(nil)

// Context is the request's, cancelled when a write fails.
func (s *listenStream) Context() context.Context { return s.ctx }

// Open answers 200 and starts the stream.
func (s *listenStream) Open() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errAnswered
	}
	if s.open {
		return nil
	}
	sseHeaders(s.w)
	s.w.WriteHeader(http.StatusOK)
	s.open = true
	if err := s.write(": stream open\n\n"); err != nil {
		return err
	}
	s.stop, s.idle = make(chan struct{}), make(chan struct{})
	go s.keepAlive()
	return nil
}

// Message writes one message. No "id:" line: an id would invite the client to resume from
// it, which is not supported.
func (s *listenStream) Message(msg []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || !s.open {
		return errAnswered
	}
	return s.write("event: message\ndata: " + string(msg) + "\n\n")
}

// keepAlive writes a comment line every interval until the stream closes.
func (s *listenStream) keepAlive() {
	defer close(s.idle)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.mu.Lock()
			err := s.write(": keepalive\n\n")
			s.mu.Unlock()
			if err != nil {
				return
			}
		case <-s.stop:
			return
		}
	}
}

// write writes and flushes p (s.mu held); a failed write ends the stream.
func (s *listenStream) write(p string) error {
	if s.closed {
		return errAnswered
	}
	if _, err := io.WriteString(s.w, p); err != nil {
		s.fail()
		return err
	}
	flush(s.w)
	return nil
}

// close ends the stream (the endpoint's Listen returned) and says whether it was open.
func (s *listenStream) close() bool {
	s.mu.Lock()
	s.closed = true
	open, stop, idle := s.open, s.stop, s.idle
	s.mu.Unlock()
	if stop != nil {
		close(stop)
		<-idle
	}
	return open
}

func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
