package httpguard

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/keyauth"
)

var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })

func serve(h http.Handler, method, host string, headers map[string]string, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "http://"+host+"/mcp", strings.NewReader(body))
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestOrigin(t *testing.T) {
	g := Guard{AllowedOrigins: []string{"https://app.example.com"}}
	cases := []struct {
		origin string
		allow  bool
	}{
		{"", true},
		{"http://localhost:5173", true},
		{"http://127.0.0.1", true},
		{"http://[::1]:8080", true},
		{"http://gui.localhost", true},
		{"tauri://localhost", true},
		{"https://app.example.com", true},
		{"https://app.example.com.evil.net", false},
		{"https://evil.example", false},
		{"http://localhost.evil.example", false},
		{"null", false},
	}
	for _, c := range cases {
		t.Run(c.origin, func(t *testing.T) {
			withHeaders := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("X-Session", "s")
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTeapot)
			})
			w := serve(g.CORS(withHeaders), "POST", "127.0.0.1", map[string]string{"Origin": c.origin}, "")
			if got := w.Code != http.StatusForbidden; got != c.allow {
				t.Fatalf("origin %q: status %d, want allowed=%v", c.origin, w.Code, c.allow)
			}
			if c.allow && c.origin != "" {
				if w.Header().Get("Access-Control-Allow-Origin") != c.origin || w.Header().Get("Vary") != "Origin" {
					t.Fatalf("CORS headers %v", w.Header())
				}
				if w.Header().Get("Access-Control-Expose-Headers") != "Retry-After, X-Session" {
					t.Fatalf("the response's headers not exposed: %v", w.Header())
				}
			}
			if !c.allow && !strings.Contains(w.Body.String(), "Origin not allowed") {
				t.Fatalf("body %q", w.Body.String())
			}
		})
	}
}

// TestPreflightGrantsTheRequestedHeaders: an allowed origin's preflight is granted the request
// headers it asks for — MCP's 2026-07-28 Mcp-Method, Mcp-Name and Mcp-Param-<name> among them,
// a family no fixed list holds — as long as they are header names and the list is within its
// bound; otherwise the default list answers (and the browser refuses what it lacks).
func TestPreflightGrantsTheRequestedHeaders(t *testing.T) {
	h := Guard{}.CORS(ok)
	asked := "authorization, content-type, mcp-protocol-version, mcp-method, mcp-name, mcp-param-region, last-event-id"
	for _, c := range []struct{ name, requested, want string }{
		{"MCP's headers", asked, asked},
		{"none asked", "", defaultAllowHeaders},
		{"not header names", "authorization, bad header", defaultAllowHeaders},
		{"over the bound", strings.Repeat("x-a,", maxRequestHeaders/4+1) + "x-a", defaultAllowHeaders},
	} {
		t.Run(c.name, func(t *testing.T) {
			hdr := map[string]string{"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"}
			if c.requested != "" {
				hdr["Access-Control-Request-Headers"] = c.requested
			}
			w := serve(h, "OPTIONS", "127.0.0.1", hdr, "")
			if w.Code != http.StatusNoContent || w.Header().Get("Access-Control-Allow-Headers") != c.want ||
				!slices.Contains(w.Header().Values("Vary"), "Access-Control-Request-Headers") {
				t.Fatalf("preflight: %d %v", w.Code, w.Header())
			}
		})
	}
}

func TestPreflightIsExemptFromAPIKey(t *testing.T) {
	g := Guard{Keys: keyauth.Keys{API: "k"}}
	h := g.CORS(g.APIKey(ok))
	w := serve(h, "OPTIONS", "127.0.0.1", map[string]string{"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"}, "")
	if w.Code != http.StatusNoContent || !strings.Contains(w.Header().Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Fatalf("preflight: %d %v", w.Code, w.Header())
	}
	if w := serve(h, "POST", "127.0.0.1", nil, ""); w.Code != http.StatusUnauthorized {
		t.Fatalf("no key: %d", w.Code)
	}
	if w := serve(h, "POST", "127.0.0.1", map[string]string{"Authorization": "Bearer k"}, ""); w.Code != http.StatusTeapot {
		t.Fatalf("key: %d", w.Code)
	}
}

func TestAdminFailsClosedIncludingOptions(t *testing.T) {
	g := Guard{}
	h := g.AdminNotConfigured(g.CORS(g.AdminKey(ok)))
	for _, m := range []string{"OPTIONS", "GET", "POST", "DELETE"} {
		if w := serve(h, m, "127.0.0.1", nil, ""); w.Code != http.StatusForbidden {
			t.Errorf("%s with no keys: %d", m, w.Code)
		}
	}
	g = Guard{Keys: keyauth.Keys{Admin: "a"}}
	h = g.AdminNotConfigured(g.CORS(g.AdminKey(ok)))
	if w := serve(h, "GET", "127.0.0.1", map[string]string{"Authorization": "Bearer b"}, ""); w.Code != http.StatusUnauthorized {
		t.Errorf("wrong key: %d", w.Code)
	}
	if w := serve(h, "GET", "127.0.0.1", map[string]string{"Authorization": "Bearer a"}, ""); w.Code != http.StatusTeapot {
		t.Errorf("right key: %d", w.Code)
	}
}

func TestHostOnLoopbackListener(t *testing.T) {
	h := Guard{LoopbackOnly: true}.Host(ok)
	for host, allowed := range map[string]bool{
		"127.0.0.1:13305": true, "localhost:13305": true, "[::1]:13305": true, "localhost": true,
		"evil.example": false, "evil.example:13305": false, "10.0.0.1:13305": false, "127.0.0.1.nip.io": false,
	} {
		w := serve(h, "GET", host, nil, "")
		if (w.Code == http.StatusTeapot) != allowed {
			t.Errorf("Host %q: %d, want allowed=%v", host, w.Code, allowed)
		}
	}
	if w := serve(Guard{}.Host(ok), "GET", "evil.example", nil, ""); w.Code != http.StatusTeapot {
		t.Errorf("a non-loopback listener must not check Host: %d", w.Code)
	}
}

func TestLimitBody(t *testing.T) {
	read := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 4096)
		n := 0
		for {
			m, err := r.Body.Read(buf)
			n += m
			if err != nil {
				if err.Error() != "EOF" {
					WriteError(w, http.StatusRequestEntityTooLarge, err.Error())
					return
				}
				break
			}
		}
		w.WriteHeader(http.StatusTeapot)
	})
	h := LimitBody(1024, nil, read)
	if w := serve(h, "POST", "127.0.0.1", nil, strings.Repeat("x", 1024)); w.Code != http.StatusTeapot {
		t.Errorf("at the limit: %d", w.Code)
	}
	w := serve(h, "POST", "127.0.0.1", nil, strings.Repeat("x", 1025))
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "1 KiB") {
		t.Errorf("over the limit: %d %s", w.Code, w.Body.String())
	}
}

// wrapped is a middleware's ResponseWriter, as the edge's root handler uses.
type wrapped struct{ http.ResponseWriter }

func (w wrapped) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestLimitBodyClosesTheConnectionBehindWrappers: a body that grows past the limit is
// answered and its connection closed (the rest of the body is not read), also when a
// middleware wrapped the ResponseWriter.
func TestLimitBodyClosesTheConnectionBehindWrappers(t *testing.T) {
	h := LimitBody(1024, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			WriteError(w, http.StatusRequestEntityTooLarge, err.Error())
			return
		}
		w.WriteHeader(http.StatusTeapot)
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(wrapped{w}, r) }))
	defer srv.Close()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL, io.MultiReader(strings.NewReader(strings.Repeat("x", 4096)))) // chunked
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close {
		t.Fatalf("status %d, connection close %v (%v)", resp.StatusCode, resp.Close, resp.Header)
	}
}

// TestReadBodyAllocatesOnce: a body of declared length is read into one buffer of that size
// (no copy at each doubling); past the limit the read fails with *http.MaxBytesError.
func TestReadBodyAllocatesOnce(t *testing.T) {
	body := bytes.Repeat([]byte("z"), 5<<20)
	r := httptest.NewRequest("POST", "/", bytes.NewReader(body))
	b, err := ReadBody(r)
	if err != nil || !bytes.Equal(b, body) || cap(b) < len(body)+bytes.MinRead || cap(b) > len(body)+64<<10 { // sized once, not doubled
		t.Fatalf("%v: %d bytes, cap %d", err, len(b), cap(b))
	}
	w := httptest.NewRecorder()
	r = httptest.NewRequest("POST", "/", bytes.NewReader(body))
	r.ContentLength = -1 // sent chunked: only the reader's limit stops it
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	var tooBig *http.MaxBytesError
	if _, err := ReadBody(r); !errors.As(err, &tooBig) {
		t.Fatalf("over the limit: %v", err)
	}
}

// TestReadSizedWithoutAHint: a body of unknown length is read whole, in pieces joined once;
// cut off by the limit, it has cost about what was read.
func TestReadSizedWithoutAHint(t *testing.T) {
	for _, n := range []int{0, 1, 4 << 10, 4<<10 + 1, 3<<20 + 17} {
		body := bytes.Repeat([]byte("0123456789"), n/10+1)[:n]
		b, err := ReadSized(io.MultiReader(bytes.NewReader(body)), -1)
		if err != nil || !bytes.Equal(b, body) || cap(b) > max(n, 4<<10) {
			t.Fatalf("%d bytes: %v, got %d (cap %d)", n, err, len(b), cap(b))
		}
	}
	// TotalAlloc counts every goroutine of the test binary: the least of three reads is what
	// ReadSized itself allocated (anything else only adds).
	least := uint64(math.MaxUint64)
	for range 3 {
		w := httptest.NewRecorder()
		limited := http.MaxBytesReader(w, io.NopCloser(bytes.NewReader(make([]byte, 8<<20))), 4<<20)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := ReadSized(limited, -1)
		runtime.ReadMemStats(&after)
		var tooBig *http.MaxBytesError
		if !errors.As(err, &tooBig) {
			t.Fatalf("over the limit: %v", err)
		}
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	if least > 5<<20 {
		t.Fatalf("reading 4 MiB before the limit allocated %d bytes", least)
	}
}

// TestGetOnly: GET and HEAD reach the handler; any other method is 405 {"error":"…"} with
// Allow naming both.
func TestGetOnly(t *testing.T) {
	h := GetOnly(ok)
	for _, m := range []string{"GET", "HEAD"} {
		if w := serve(h, m, "127.0.0.1", nil, ""); w.Code != http.StatusTeapot {
			t.Errorf("%s: %d", m, w.Code)
		}
	}
	for _, m := range []string{"POST", "PUT", "DELETE", "OPTIONS"} {
		w := serve(h, m, "127.0.0.1", nil, "")
		var body map[string]string
		if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" ||
			json.Unmarshal(w.Body.Bytes(), &body) != nil || body["error"] != "Method Not Allowed. Use GET for this endpoint" {
			t.Errorf("%s: %d %v %q", m, w.Code, w.Header(), w.Body.String())
		}
	}
}
