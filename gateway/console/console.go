// Package console serves Zest's web console: static files embedded in the binary (no Node at
// run time, works offline), on the edge's own origin, so that the console calls the admin
// API, /mcp and the OpenAI routes with no CORS. The files are plain ES modules and CSS, with
// no build step: what is in static/ is what the browser gets.
//
// Every answer carries a strict Content-Security-Policy (no inline script or style, no other
// origin), and the files are revalidated on every load (Cache-Control: no-cache with an ETag
// of their content, so a reload after an upgrade never mixes versions and an unchanged file
// costs a 304).
package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var files embed.FS

// CSP is the console's Content-Security-Policy.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; media-src 'self' data: blob:; " +
	"connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// asset is one embedded file.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

// Handler serves the console: GET / is index.html, GET /ui/<file> the other files. Anything
// else under /ui/ is 404.
type Handler struct{ assets map[string]asset }

// New reads the embedded files once.
func New() *Handler {
	h := &Handler{assets: map[string]asset{}}
	_ = fs.WalkDir(files, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ctype := mime.TypeByExtension(path.Ext(p))
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		h.assets[strings.TrimPrefix(p, "static")] = asset{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if p == "/" {
		p = "/index.html"
	}
	a, ok := h.assets[p]
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	if !ok || p == "/index.html" && r.URL.Path != "/" {
		hd.Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("404 page not found: the console's files are under /ui/\n"))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed: the console is read with GET", http.StatusMethodNotAllowed)
		return
	}
	hd.Set("Cache-Control", "no-cache")
	hd.Set("ETag", a.etag)
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd.Set("Content-Type", a.ctype)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(a.body)
}
