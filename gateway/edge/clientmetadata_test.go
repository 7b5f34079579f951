package edge

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/zestmcp/zest/lib/clientmetadata"
)

// TestClientMetadataDocument: with ZEST_PUBLIC_URL the edge serves Zest's client ID metadata
// document without a key (an authorization server fetches it); a wrong method is an admin
// route's (the key first); without ZEST_PUBLIC_URL there is no document to serve.
func TestClientMetadataDocument(t *testing.T) {
	te := startEdge(t, func(c *Config) { c.OAuth.PublicURL = "https://zest.example" })
	resp, err := http.Get(te.url + clientmetadata.Path)
	if err != nil {
		t.Fatal(err)
	}
	var doc clientmetadata.Document
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || doc.ClientID != "https://zest.example"+clientmetadata.Path || doc.RedirectURIs[0] != "https://zest.example"+clientmetadata.CallbackPath {
		t.Fatalf("GET: %d %+v %v", resp.StatusCode, doc, err)
	}
	resp, err = http.Post(te.url+clientmetadata.Path, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST without a key: %d", resp.StatusCode)
	}

	bare := startEdge(t, nil)
	resp, err = http.Get(bare.url + clientmetadata.Path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == 200 {
		t.Fatal("a document served without ZEST_PUBLIC_URL")
	}
}
