package edge

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDocsRoutes: GET {prefix}docs lists the bundled pages with urls under the prefix asked,
// each url serves the page's Markdown, and an unknown page is a 404 naming the index.
func TestDocsRoutes(t *testing.T) {
	mux := http.NewServeMux()
	for _, p := range Prefixes {
		mux.HandleFunc(p+"docs", docsIndex)
		mux.HandleFunc(p+"docs/{page...}", docsPage)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	get := func(path string) (int, string, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	for _, prefix := range Prefixes {
		code, _, body := get(prefix + "docs")
		var index struct {
			Format string `json:"format"`
			Docs   []struct {
				ID, Title, URL string
				Bytes          int
			} `json:"docs"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &index) != nil || index.Format != "text/markdown" || len(index.Docs) == 0 {
			t.Fatalf("%sdocs: %d %s", prefix, code, body)
		}
		for _, d := range index.Docs {
			if d.URL != prefix+"docs/"+d.ID {
				t.Errorf("url %q, want it under %s", d.URL, prefix)
			}
			code, ct, md := get(d.URL)
			if code != 200 || !strings.HasPrefix(ct, "text/markdown") || len(md) != d.Bytes || !strings.HasPrefix(md, "# ") {
				t.Errorf("%s: %d %s, %d bytes of %d", d.URL, code, ct, len(md), d.Bytes)
			}
		}
	}
	if code, _, body := get("/api/v1/docs/user/nope"); code != 404 || !strings.Contains(body, "GET /api/v1/docs lists them") {
		t.Errorf("unknown page: %d %s", code, body)
	}
}
