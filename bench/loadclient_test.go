package main

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The load client reads what net/http's server writes: bodies framed by Content-Length and
// by chunked encoding, several on one connection, and a connection the server closes.
func TestLoadClientReadsServerResponses(t *testing.T) {
	big := strings.Repeat("0123456789", 2000) // past net/http's buffer: sent chunked
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/small":
			w.WriteHeader(201)
			w.Write([]byte(`{"ok":true}`))
		case "/chunked":
			w.Write([]byte(big[:10]))
			w.(http.Flusher).Flush()
			w.Write([]byte(big[10:]))
		case "/close":
			w.Header().Set("Connection", "close")
			w.Write([]byte("bye"))
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		path, body string
		code       int
	}{{"/small", `{"ok":true}`, 201}, {"/chunked", big, 200}, {"/close", "bye", 200}} {
		lc, err := newLoadClient(srv.URL+tc.path, http.Header{"Content-Type": {"application/json"}}, `{}`)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 { // the same connection again, or a new one after a close
			code, body, err := lc.do()
			if err != nil || code != tc.code || string(body) != tc.body {
				t.Fatalf("%s #%d: %d %q %v", tc.path, i, code, body[:min(len(body), 40)], err)
			}
		}
		lc.close()
	}
}

func TestReadResponseRefusesWhatItCannotFrame(t *testing.T) {
	for name, raw := range map[string]string{
		"not HTTP/1.1":      "HTTP/1.0 200 OK\r\n\r\n",
		"no framing":        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nbody",
		"bad length":        "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
		"short body":        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
		"bad chunk size":    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"informational 100": "HTTP/1.1 100 Continue\r\n\r\n",
	} {
		if _, _, _, err := readResponse(bufio.NewReader(strings.NewReader(raw)), nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	code, body, keep, err := readResponse(bufio.NewReader(strings.NewReader(
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n")), nil)
	if err != nil || code != 200 || string(body) != "abcde" || keep {
		t.Fatalf("chunked with an extension and a trailer: %d %q keep=%v %v", code, body, keep, err)
	}
}
