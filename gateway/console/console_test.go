package console

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestServe: / is index.html and /ui/ the other files, each with the CSP, nosniff and an
// ETag that a revalidation answers with 304; unknown files are 404; writes are 405.
func TestServe(t *testing.T) {
	h := New()
	w := get(t, h, "GET", "/", nil)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `<script type="module" src="/ui/app.js">`) || w.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /: %d %s %q", w.Code, w.Header(), w.Body.String())
	}
	if w.Header().Get("Content-Security-Policy") != CSP || w.Header().Get("X-Content-Type-Options") != "nosniff" || w.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("headers: %v", w.Header())
	}
	for _, p := range []string{"/ui/app.js", "/ui/app.css", "/ui/views/servers.js"} {
		w := get(t, h, "GET", p, nil)
		if w.Code != 200 || w.Body.Len() == 0 {
			t.Fatalf("GET %s: %d", p, w.Code)
		}
		etag := w.Header().Get("ETag")
		if again := get(t, h, "GET", p, map[string]string{"If-None-Match": etag}); again.Code != 304 || again.Body.Len() != 0 {
			t.Fatalf("revalidating %s: %d", p, again.Code)
		}
	}
	if ct := get(t, h, "GET", "/ui/app.js", nil).Header().Get("Content-Type"); !strings.Contains(ct, "javascript") {
		t.Fatalf("app.js type %q", ct)
	}
	for _, p := range []string{"/ui/nope.js", "/ui/", "/ui/index.html", "/ui/../console.go"} {
		if w := get(t, h, "GET", p, nil); w.Code != 404 {
			t.Fatalf("GET %s: %d", p, w.Code)
		}
	}
	if w := get(t, h, "POST", "/", nil); w.Code != 405 || w.Header().Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST /: %d", w.Code)
	}
	if w := get(t, h, "HEAD", "/ui/app.css", nil); w.Code != 200 || w.Body.Len() != 0 {
		t.Fatalf("HEAD: %d %d", w.Code, w.Body.Len())
	}
}

// TestNoInline: the CSP forbids inline script, inline style and event-handler attributes;
// no file may need them.
func TestNoInline(t *testing.T) {
	h := New()
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|<style|\sstyle="|\son[a-z]+="|javascript:|innerHTML\s*=|insertAdjacentHTML|document\.write`)
	for p, a := range h.assets {
		if m := inline.Find(a.body); m != nil {
			t.Errorf("%s: %q is blocked by the CSP (or writes HTML from data)", p, m)
		}
	}
	if len(h.assets) < 8 {
		t.Fatalf("%d files embedded", len(h.assets))
	}
}
