package clientmetadata

import (
	"encoding/json"
	"net/http/httptest"
	"slices"
	"testing"
)

func TestURL(t *testing.T) {
	for _, c := range []struct {
		public, want string
		ok           bool
	}{
		{"https://zest.example", "https://zest.example" + Path, true},
		{"https://zest.example/", "https://zest.example" + Path, true},
		{"http://127.0.0.1:13305", "http://127.0.0.1:13305" + Path, true},
		{"http://[::1]:13305", "http://[::1]:13305" + Path, true},
		{"http://localhost:13305", "http://localhost:13305" + Path, true},
		{"http://zest.example", "http://zest.example" + Path, false}, // an authorization server takes https only
		{"", "", false},
		{"zest.example", "", false},
		{"ftp://zest.example", "", false},
	} {
		got, ok := URL(c.public)
		if got != c.want || ok != c.ok {
			t.Errorf("URL(%q) = %q, %v; want %q, %v", c.public, got, ok, c.want, c.ok)
		}
	}
}

// TestHandler: the document names its own URL as client_id, the edge's callback as its one
// redirect URI, and a public client by authorization code with refresh.
func TestHandler(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler("https://zest.example/").ServeHTTP(rec, httptest.NewRequest("GET", Path, nil))
	var d Document
	if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil || rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s: %v", rec.Code, rec.Body, err)
	}
	want := Document{ClientID: "https://zest.example" + Path, ClientName: ClientName, ClientURI: "https://zest.example/",
		RedirectURIs: []string{"https://zest.example" + CallbackPath}, GrantTypes: []string{"authorization_code", "refresh_token"},
		ResponseTypes: []string{"code"}, TokenEndpointAuthMethod: "none"}
	if d.ClientID != want.ClientID || d.ClientName != want.ClientName || d.ClientURI != want.ClientURI || !slices.Equal(d.RedirectURIs, want.RedirectURIs) ||
		!slices.Equal(d.GrantTypes, want.GrantTypes) || !slices.Equal(d.ResponseTypes, want.ResponseTypes) || d.TokenEndpointAuthMethod != "none" {
		t.Fatalf("document = %+v\nwant %+v", d, want)
	}
}
