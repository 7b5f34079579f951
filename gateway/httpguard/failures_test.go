package httpguard

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/ratelimit"
)

// TestFailedAuthenticationsAreSlowed: an address that presented its budget of wrong keys
// (here 3 an hour) gets 429 with Retry-After for every key it presents, the right one
// included on a new connection — a throttle that checked first would confirm a right guess at
// full speed — while a connection that proved the API key before goes on with it; a request
// without a key is not counted; another address keeps its own budget.
func TestFailedAuthenticationsAreSlowed(t *testing.T) {
	const api, admin = "api-key-0123", "admin-key-0123"
	g := Guard{Keys: keyauth.Keys{API: api, Admin: admin}, Failures: NewFailures(ratelimit.Rate{Count: 3, Per: time.Hour, Burst: 3}, 0)}
	h := g.APIKey(ok)
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnContext = ConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	get := func(c *http.Client, key string) (int, string, string) {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
	}
	proven := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}     // one connection, kept alive
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}} // a new connection each time
	if code, _, body := get(proven, api); code != http.StatusTeapot {
		t.Fatalf("the good client: %d %s", code, body)
	}
	for i := range 3 {
		if code, _, body := get(fresh, "guess-"+string(rune('a'+i))); code != 401 {
			t.Fatalf("wrong key %d of the budget of 3: %d %s", i+1, code, body)
		}
	}
	code, retry, body := get(fresh, "guess-d")
	if code != 429 || retry != "1200" || !strings.Contains(body, "Too many failed authentications from 127.0.0.1") ||
		!strings.Contains(body, "3 wrong keys per hour (ZEST_AUTH_FAILURE_LIMIT)") {
		t.Fatalf("a 4th wrong key: %d %q %s", code, retry, body)
	}
	if code, _, body := get(fresh, api); code != 429 {
		t.Fatalf("the right key on a new connection from the throttled address: %d %s; want 429, unchecked", code, body)
	}
	for range 5 {
		if code, _, body := get(proven, api); code != http.StatusTeapot {
			t.Fatalf("the connection that proved the API key: %d %s", code, body)
		}
	}
	if code, _, _ := get(proven, admin); code != 429 {
		t.Fatalf("a key the connection never proved: %d; want 429", code)
	}
	if code, _, _ := get(fresh, ""); code != 401 {
		t.Fatalf("no key at all: %d; want 401 (nothing guessed, nothing counted)", code)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.1:4444"
	r.Header.Set("Authorization", "Bearer guess-e")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 401 {
		t.Fatalf("a wrong key from another address: %d; want 401, its own budget", w.Code)
	}
	var th *ThrottledError
	if err := g.Verify(r, "guess-f", g.Keys.CheckAPI); err == nil || errors.As(err, &th) {
		t.Fatalf("Verify of a second wrong key from 192.0.2.1: %v", err)
	}
	if NewFailures(ratelimit.Rate{}, 0) != nil {
		t.Fatal("no rate: a throttle all the same")
	}
}

// BenchmarkAPIKey is the key check of one request with the right key, without and with the
// failure throttle (which also records the key on the connection).
func BenchmarkAPIKey(b *testing.B) {
	keys := keyauth.Keys{API: "api-key-0123", Admin: "admin-key-0123"}
	for _, c := range []struct {
		name string
		g    Guard
	}{
		{"plain", Guard{Keys: keys}},
		{"throttled", Guard{Keys: keys, Failures: NewFailures(ratelimit.Rate{Count: 1, Per: time.Second, Burst: 30}, 0)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := c.g.APIKey(ok)
			r := httptest.NewRequest("GET", "/", nil)
			r = r.WithContext(ConnContext(r.Context(), nil))
			r.Header.Set("Authorization", "Bearer api-key-0123")
			w := httptest.NewRecorder()
			for b.Loop() {
				h.ServeHTTP(w, r)
			}
		})
	}
}
