package sse

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// endless is a peer that never ends its line.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// TestEndlessLineIsAnError: a reader that gathers a whole line (bufio's ReadString, as mcp-go's
// SSE readers do) gets ErrTooLong after at most the bound, not the peer's endless line.
func TestEndlessLineIsAnError(t *testing.T) {
	const max = 1 << 20
	line, err := bufio.NewReader(Limit(io.MultiReader(strings.NewReader("data: "), endless{}), max)).ReadString('\n')
	if !errors.Is(err, ErrTooLong) || len(line) > max {
		t.Fatalf("read %d bytes, %v; want at most %d and ErrTooLong", len(line), err, max)
	}
	if !strings.Contains(err.Error(), "1048576 bytes") {
		t.Errorf("the error does not name the bound: %v", err)
	}
}

// TestBounds: lines and events up to the bound pass unchanged (CRLF, comments and blank lines
// included); one byte more is refused, whether in one line or across an event's lines; comments
// between events, however many, are no event.
func TestBounds(t *testing.T) {
	const max = 16
	for _, c := range []struct {
		name, stream string
		ok           bool
	}{
		{"a line at the bound", "data: 0123456789\n\n", true},
		{"a line past it", "data: 0123456789A\n\n", false},
		{"CRLF does not count", "data: 0123456789\r\n\r\n", true},
		{"an event at the bound", "data: 01\ndata: 34\n\ndata: 01\ndata: 34\n\n", true},
		{"an event past it", "data: 012\ndata: 345\n\n", false},
		{"keep-alive comments", strings.Repeat(": keep-alive\n", 100) + "data: x\n\n", true},
		{"a comment line past the bound", ": " + strings.Repeat("c", max) + "\n", false},
		{"the last line without an end", "data: 0123456789", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := io.ReadAll(Limit(strings.NewReader(c.stream), max))
			if c.ok && (err != nil || string(got) != c.stream) {
				t.Fatalf("read %q, %v; want the stream unchanged", got, err)
			}
			if !c.ok && (!errors.Is(err, ErrTooLong) || !strings.HasPrefix(c.stream, string(got))) {
				t.Fatalf("read %q, %v; want a prefix and ErrTooLong", got, err)
			}
		})
	}
}

// TestTransportBoundsEventStreamsOnly: through Transport, an event stream's long line is
// refused (and its request handed to the callback) and a JSON body of the same length is not.
func TestTransportBoundsEventStreamsOnly(t *testing.T) {
	long := strings.Repeat("x", 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", r.URL.Query().Get("type"))
		io.WriteString(w, "data: "+long+"\n\n")
	}))
	t.Cleanup(srv.Close)
	var told []string
	client := &http.Client{Transport: Transport(nil, 32, func(r *http.Request) { told = append(told, r.URL.Query().Get("type")) })}
	for typ, want := range map[string]error{"text/event-stream; charset=utf-8": ErrTooLong, "application/json": nil} {
		resp, err := client.Get(srv.URL + "?type=" + url.QueryEscape(typ))
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", typ, err, want)
		}
	}
	if len(told) != 1 || !strings.HasPrefix(told[0], "text/event-stream") {
		t.Errorf("told of %q, want the event stream's request once", told)
	}
}
