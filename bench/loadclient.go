package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// loadClient sends one prepared HTTP/1.1 request again and again over keep-alive connections
// it owns, the way wrk or h2load do, and parses every answer with net/http's own reader
// (status, headers, Content-Length or chunked body). It exists because net/http's Client
// costs ~80 µs of CPU per request on this machine (three goroutines hand each request over);
// the load generator shares the two cores with the services it measures, so its own cost
// lowers every figure. The answers are still checked in full by the caller.
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
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", u.RequestURI(), u.Host, len(body))
	header.Write(&b)
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
	c.c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := c.c.Write(lc.req); err != nil {
		c.c.Close()
		return 0, nil, err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		c.c.Close()
		return 0, nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.Close {
		c.c.Close() // the next call dials a new one
		return resp.StatusCode, body, err
	}
	select {
	case lc.conns <- c:
	default:
		c.c.Close()
	}
	return resp.StatusCode, body, nil
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
