package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// loadClient sends one prepared HTTP/1.1 request again and again over keep-alive connections
// it owns, the way wrk or h2load do, and reads every answer whole (status, headers, a body
// framed by Content-Length or chunked encoding) with a small parser of its own. It exists
// because net/http's Client costs ~80 µs of CPU per request on this machine (three goroutines
// hand each request over) and http.ReadResponse ~10 µs more than this parser; the load
// generator shares the two cores with the services it measures, so its own cost lowers every
// figure. The callers check every answer's status and body.
type loadClient struct {
	addr  string
	req   []byte
	conns chan *loadConn
}

type loadConn struct {
	c net.Conn
	r *bufio.Reader
}

// newLoadClient prepares a POST of body to rawURL with the given headers.
func newLoadClient(rawURL string, header http.Header, body string) (*loadClient, error) {
	return newLoadClientMethod("POST", rawURL, header, body)
}

// newLoadClientMethod prepares a request of method with body to rawURL with the given headers.
func newLoadClientMethod(method, rawURL string, header http.Header, body string) (*loadClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", method, u.RequestURI(), u.Host, len(body))
	_ = header.Write(&b) // into a bytes.Buffer, which cannot fail
	b.WriteString("\r\n")
	b.WriteString(body)
	return &loadClient{addr: u.Host, req: b.Bytes(), conns: make(chan *loadConn, 1024)}, nil
}

// do sends the request and returns the status and the whole body.
func (lc *loadClient) do() (int, []byte, error) {
	var c *loadConn
	select {
	case c = <-lc.conns:
	default:
		nc, err := net.DialTimeout("tcp", lc.addr, 5*time.Second)
		if err != nil {
			return 0, nil, err
		}
		c = &loadConn{c: nc, r: bufio.NewReaderSize(nc, 16<<10)}
	}
	_ = c.c.SetDeadline(time.Now().Add(60 * time.Second)) // a conn that refuses it fails the Write below
	if _, err := c.c.Write(lc.req); err != nil {
		c.c.Close()
		return 0, nil, err
	}
	// A fresh body each time: the connection goes back to the pool before the caller looks
	// at the body, and another goroutine may take it at once.
	code, body, keep, err := readResponse(c.r, nil)
	if err != nil || !keep {
		c.c.Close() // the next call dials a new one
		return code, body, err
	}
	select {
	case lc.conns <- c:
	default:
		c.c.Close()
	}
	return code, body, nil
}

// readResponse reads one HTTP/1.1 response: the status line, the headers, and a body framed
// by Content-Length or chunked encoding, which it appends to buf. keep is false when the server
// closes the connection. Anything else an HTTP/1.1 server may send (1xx, bodies delimited by
// the connection's end) is an error: the bench's servers send neither.
func readResponse(r *bufio.Reader, buf []byte) (code int, body []byte, keep bool, err error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return 0, nil, false, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, nil, false, fmt.Errorf("bad status line %q", line)
	}
	if code, err = strconv.Atoi(string(line[9:12])); err != nil || code < 200 {
		return 0, nil, false, fmt.Errorf("bad status line %q", line)
	}
	length, chunked, keep := -1, false, true
	for {
		h, err := r.ReadSlice('\n')
		if err != nil {
			return code, nil, false, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return code, nil, false, fmt.Errorf("bad header %q", h)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return code, nil, false, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			keep = !bytes.EqualFold(value, []byte("close"))
		}
	}
	switch {
	case chunked:
		for {
			sz, err := r.ReadSlice('\n')
			if err != nil {
				return code, nil, false, err
			}
			sz, _, _ = bytes.Cut(bytes.TrimRight(sz, "\r\n"), []byte(";"))
			n, err := strconv.ParseInt(string(sz), 16, 64)
			if err != nil || n < 0 {
				return code, nil, false, fmt.Errorf("bad chunk size %q", sz)
			}
			if n == 0 {
				for { // trailers, up to the empty line
					t, err := r.ReadSlice('\n')
					if err != nil {
						return code, nil, false, err
					}
					if len(bytes.TrimRight(t, "\r\n")) == 0 {
						return code, buf, keep, nil
					}
				}
			}
			start := len(buf)
			buf = append(buf, make([]byte, n)...)
			if _, err := io.ReadFull(r, buf[start:]); err != nil {
				return code, nil, false, err
			}
			if _, err := r.Discard(2); err != nil { // the chunk's CRLF
				return code, nil, false, err
			}
		}
	case length >= 0:
		buf = append(buf[:0], make([]byte, length)...)
		if _, err := io.ReadFull(r, buf); err != nil {
			return code, nil, false, err
		}
		return code, buf, keep, nil
	default:
		return code, nil, false, errors.New("a response with neither Content-Length nor chunked encoding")
	}
}

// close closes the idle connections.
func (lc *loadClient) close() {
	for {
		select {
		case c := <-lc.conns:
			c.c.Close()
		default:
			return
		}
	}
}

// statusError describes an unexpected answer.
func statusError(code int, body []byte) error {
	return fmt.Errorf("status %s: %s", strconv.Itoa(code), body)
}
