// Package sse bounds what a reader of a peer's server-sent event stream (text/event-stream)
// holds: a line, and an event (its lines up to the blank line that ends it; comments, lines
// that start with ':', count as lines only). A reader that gathers a line, or an event's data,
// before it looks at it — bufio's ReadString, mcp-go's SSE readers — holds all of it: a peer
// that sends an endless line would take the process's memory. Through Limit it gets
// ErrTooLong instead, once the bound is passed.
//
// Limit wraps a body; Transport wraps every event-stream body an http.Client receives, for
// readers inside a library (mcp-go's Streamable HTTP client transport).
package sse

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// ErrTooLong means a peer's event stream had a line or an event longer than the reader's
// bound: the stream is given up.
var ErrTooLong = errors.New("an event-stream line or event is longer than the reader's limit")

// ContentType is the media type of an event stream.
const ContentType = "text/event-stream"

// Limit returns r as a reader that fails with an error wrapping ErrTooLong (and naming max)
// once a line, or an event, of r passes max bytes (line endings aside). The bytes before the
// one that passed it are returned first.
func Limit(r io.Reader, max int) io.Reader {
	return &limited{r: r, max: max, lineStart: true}
}

type limited struct {
	r       io.Reader
	max     int
	err     error  // sticky: the stream is given up
	tooLong func() // called once, when the bound is passed (nil: not)

	lineStart bool // the next byte starts a line
	comment   bool // the current line is a comment
	line      int  // bytes of the current line
	event     int  // bytes of the current event's finished lines (comments aside)
}

func (l *limited) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	for i, b := range p[:n] {
		switch b {
		case '\n':
			switch {
			case l.line == 0: // a blank line ends the event
				l.event = 0
			case !l.comment:
				l.event += l.line
			}
			l.line, l.lineStart, l.comment = 0, true, false
			continue
		case '\r': // of a CRLF; a lone CR is no line end to the readers this bounds
			continue
		}
		if l.lineStart {
			l.lineStart, l.comment = false, b == ':'
		}
		l.line++
		if l.line > l.max || (!l.comment && l.event+l.line > l.max) {
			l.err = fmt.Errorf("%w (%d bytes)", ErrTooLong, l.max)
			if l.tooLong != nil {
				l.tooLong()
			}
			return i, l.err
		}
	}
	return n, err
}

// Transport returns base (http.DefaultTransport when nil) with the body of every response of
// type text/event-stream bounded by Limit(max). A library that reads the body may not say why
// it stopped: tooLong, when not nil, is called with the request whose answer passed the bound.
func Transport(base http.RoundTripper, max int, tooLong func(*http.Request)) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return transport{base: base, max: max, tooLong: tooLong}
}

type transport struct {
	base    http.RoundTripper
	max     int
	tooLong func(*http.Request)
}

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == ContentType {
		l := &limited{r: resp.Body, max: t.max, lineStart: true}
		if t.tooLong != nil {
			l.tooLong = func() { t.tooLong(req) }
		}
		resp.Body = body{Reader: l, Closer: resp.Body}
	}
	return resp, nil
}

// body is a bounded response body that closes the original.
type body struct {
	io.Reader
	io.Closer
}
