// Package httpguard holds the edge's HTTP checks: Host (DNS-rebinding protection on a
// loopback listener), Origin and CORS, the API and admin keys, and body limits. Each writes
// Lemonade's JSON error shape {"error":"…"}. (A 401's WWW-Authenticate: Bearer is added by
// the edge's root handler, for every 401 whoever wrote it.)
package httpguard

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/listen"
	"github.com/zestmcp/zest/lib/oauthrs"
	"golang.org/x/net/http/httpguts"
)

// WriteJSON writes v as a JSON answer with status: the one encoder of every answer the
// edge writes itself, in each route family's shape.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError writes {"error": msg} with status.
func WriteError(w http.ResponseWriter, status int, msg string) {
	WriteJSON(w, status, map[string]string{"error": msg})
}

// GetOnly serves GET and HEAD (which net/http answers without the body) with h, and answers
// other methods 405 {"error":"…"}.
func GetOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			WriteError(w, http.StatusMethodNotAllowed, "Method Not Allowed. Use GET for this endpoint")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Guard applies the checks in front of a handler.
type Guard struct {
	Keys           keyauth.Keys
	AllowedOrigins []string
	// LoopbackOnly refuses Host headers that do not name loopback (set when the listener is loopback).
	LoopbackOnly bool
	// Failures, when set, slows failed authentications per address (failures.go).
	Failures *Failures
	// OAuth, when set, verifies the access tokens the MCP endpoints take beside the keys
	// (oauth.go).
	OAuth *oauthrs.Verifier
}

// Host refuses a foreign Host header on a loopback listener (421 Misdirected Request).
func (g Guard) Host(next http.Handler) http.Handler {
	if !g.LoopbackOnly {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if !listen.IsLoopbackHost(host) {
			WriteError(w, http.StatusMisdirectedRequest, "Host not allowed: this server listens on loopback only")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// originAllowed applies docs/dev/contracts.md's Origin rule.
func (g Guard) originAllowed(origin string) bool {
	if origin == "" {
		return true
	}
	if slices.Contains(g.AllowedOrigins, origin) {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return u.Scheme != "" // tauri://, app:// and the like
	}
	return listen.IsLoopbackHost(u.Hostname())
}

// A preflight from an allowed origin may send any request header: the origin is the trust
// CORS decides on, and a list of names would have to follow every protocol behind the edge
// (MCP's 2026-07-28 era adds a header per method parameter, a family no list can
// hold). So the preflight's Access-Control-Request-Headers are granted as asked, when they are
// header names; defaultAllowHeaders answers a preflight that asks for none.
// A response to an allowed origin exposes every header it carries (exposing), for the same
// reason: a browser client told 429 reads Retry-After, a session-era MCP client its session
// id, and the edge names no protocol's headers.
const (
	defaultAllowHeaders = "Authorization, Content-Type, Accept"
	allowMethods        = "GET, POST, PATCH, DELETE, OPTIONS"
	// maxRequestHeaders bounds the Access-Control-Request-Headers a preflight may echo.
	maxRequestHeaders = 4096
)

// allowHeaders is the Access-Control-Allow-Headers answer to a preflight that asked for
// requested: the names it asked for, or defaultAllowHeaders when it asked for none, or for
// something that is not a list of header names (which the browser then refuses).
func allowHeaders(requested string) string {
	if requested == "" || len(requested) > maxRequestHeaders {
		return defaultAllowHeaders
	}
	for name := range strings.SplitSeq(requested, ",") {
		if !httpguts.ValidHeaderFieldName(strings.TrimSpace(name)) {
			return defaultAllowHeaders
		}
	}
	return requested
}

// CORS refuses disallowed origins with 403, echoes allowed ones, and answers preflights. The
// response to an allowed origin exposes its own headers to the page's script (exposing).
func (g Guard) CORS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if !g.originAllowed(origin) {
			WriteError(w, http.StatusForbidden, "Origin not allowed")
			return
		}
		if origin != "" {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions {
			h := w.Header()
			h.Set("Access-Control-Allow-Methods", allowMethods)
			h.Set("Access-Control-Allow-Headers", allowHeaders(r.Header.Get("Access-Control-Request-Headers")))
			h.Add("Vary", "Access-Control-Request-Headers")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if origin != "" {
			w = &exposing{ResponseWriter: w}
		}
		next.ServeHTTP(w, r)
	})
}

// APIKey requires the API key (or the admin key) when LEMONADE_API_KEY is set.
func (g Guard) APIKey(next http.Handler) http.Handler {
	return g.APIKeyAs(WriteError)(next)
}

// APIKeyAs is APIKey refusing in the shape write gives (OpenAI's on the OpenAI routes).
func (g Guard) APIKeyAs(write ErrorWriter) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := g.Verify(r, keyauth.BearerToken(r.Header.Get("Authorization")), g.Keys.CheckAPI); err != nil {
				RefuseAs(w, err, write)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// AdminNotConfigured fails closed: with no admin or API key, every request is refused with
// 403, OPTIONS included. Put it before CORS so that preflights are refused too.
func (g Guard) AdminNotConfigured(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.Keys.AdminKey() == "" {
			WriteError(w, http.StatusForbidden, keyauth.ErrAdminNotConfigured.Error())
			return
		}
		next.ServeHTTP(w, r)
	})
}

// AdminKey requires the admin key (falling back to the API key).
func (g Guard) AdminKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := g.Verify(r, keyauth.BearerToken(r.Header.Get("Authorization")), g.Keys.CheckAdmin); err != nil {
			Refuse(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// AdminIfConfigured requires the admin key (the API key when only that one is set) once a key
// is configured, and lets every caller in while none is — as lemond guards /internal/* — for
// the edge's own settings, which Lemonade's GUI reads and writes on a machine without keys.
func (g Guard) AdminIfConfigured(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.Keys.AdminKey() != "" {
			if err := g.Verify(r, keyauth.BearerToken(r.Header.Get("Authorization")), g.Keys.CheckAdmin); err != nil {
				Refuse(w, err)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// LimitBody caps request bodies at n bytes: a declared length over it is answered 413 by
// writeError, the route family's error writer (WriteError when nil); reading past it fails
// with *http.MaxBytesError.
func LimitBody(n int64, writeError func(w http.ResponseWriter, status int, msg string), next http.Handler) http.Handler {
	if writeError == nil {
		writeError = WriteError
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > n {
			writeError(w, http.StatusRequestEntityTooLarge, TooLargeMessage(n))
			return
		}
		r.Body = http.MaxBytesReader(innermost(w), r.Body, n)
		next.ServeHTTP(w, r)
	})
}

// innermost returns the writer net/http made, under any wrappers that have Unwrap (as
// http.ResponseController finds it): http.MaxBytesReader tells that one, past the limit, to
// close the connection after the answer, and cannot see through a wrapper.
func innermost(w http.ResponseWriter) http.ResponseWriter {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}

// TooLargeMessage says what the body limit is.
func TooLargeMessage(n int64) string { return "Request body too large: the limit is " + humanBytes(n) }

func humanBytes(n int64) string {
	switch {
	case n%(1<<20) == 0:
		return itoa(n>>20) + " MiB"
	case n%(1<<10) == 0:
		return itoa(n>>10) + " KiB"
	}
	return itoa(n) + " bytes"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// maxPresize caps the buffer ReadBody sizes from Content-Length before any byte arrived.
const maxPresize = 64 << 20

// ReadBody reads a request body whole. The buffer is sized from Content-Length (which
// LimitBody has checked) so that a large body lands in one allocation instead of being copied
// at every doubling; reading past the limit fails with *http.MaxBytesError.
func ReadBody(r *http.Request) ([]byte, error) { return ReadSized(r.Body, r.ContentLength) }

// ReadSized reads rd to its end. With a size hint (bytes expected; ≤ 0: unknown) it reads
// into one buffer of that size. Without one it reads into pieces of up to 1 MiB and joins
// them once at the end, so that a body the limit cuts off (a chunked upload past it) has cost
// what was read, not the 2–3× of a doubling buffer.
func ReadSized(rd io.Reader, hint int64) ([]byte, error) {
	if hint > 0 {
		var buf bytes.Buffer
		buf.Grow(int(min(hint, maxPresize)) + bytes.MinRead) // ReadFrom wants MinRead free at the end
		_, err := buf.ReadFrom(rd)
		return buf.Bytes(), err
	}
	var (
		pieces [][]byte
		total  int
		size   = 4 << 10
	)
	for {
		p := make([]byte, 0, size)
		for len(p) < cap(p) {
			n, err := rd.Read(p[len(p):cap(p)])
			p = p[:len(p)+n]
			if err != nil {
				total += len(p)
				pieces = append(pieces, p)
				if !errors.Is(err, io.EOF) {
					return nil, err
				}
				if len(pieces) == 1 {
					return pieces[0], nil
				}
				out := make([]byte, 0, total)
				for _, q := range pieces {
					out = append(out, q...)
				}
				return out, nil
			}
		}
		total += len(p)
		pieces = append(pieces, p)
		size = min(size*2, 1<<20)
	}
}

// exposing sets Access-Control-Expose-Headers, when the response's head goes, to the names of
// the headers it carries, but CORS's own (a browser shows a script the CORS-safelisted ones
// anyway).
type exposing struct {
	http.ResponseWriter
	done bool
}

func (e *exposing) expose() {
	if e.done {
		return
	}
	e.done = true
	h := e.ResponseWriter.Header()
	var names []string
	for name := range h {
		if !strings.HasPrefix(name, "Access-Control-") && name != "Vary" && name != "Set-Cookie" {
			names = append(names, name)
		}
	}
	if len(names) > 0 {
		slices.Sort(names)
		h.Set("Access-Control-Expose-Headers", strings.Join(names, ", "))
	}
}

func (e *exposing) WriteHeader(code int) {
	e.expose()
	e.ResponseWriter.WriteHeader(code)
}

func (e *exposing) Write(p []byte) (int, error) {
	e.expose()
	return e.ResponseWriter.Write(p)
}

// Flush passes on (an SSE response flushes each event).
func (e *exposing) Flush() {
	e.expose()
	if f, ok := e.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController and the WebSocket upgrade reach the connection.
func (e *exposing) Unwrap() http.ResponseWriter { return e.ResponseWriter }
