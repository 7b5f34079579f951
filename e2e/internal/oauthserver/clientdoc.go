package oauthserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// maxClientDocument bounds a client ID metadata document the server reads.
const maxClientDocument = 64 << 10

// AcceptClientMetadataDocuments makes the server take a client id that is a URL (MCP
// authorization 2025-11-25, the OAuth client ID metadata document): its metadata says
// client_id_metadata_document_supported, and it reads such a client from the document at
// that URL — whose client_id must be the URL itself — as a public client (PKCE) with the
// document's redirect URIs. The tests' documents are served on loopback: http is taken for
// a loopback host, which a real server would refuse.
func (s *Server) AcceptClientMetadataDocuments() { s.metadataDocs.Store(true) }

// ClientDocumentsFetched are the URLs of the client metadata documents the server read, in order.
func (s *Server) ClientDocumentsFetched() []string {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	return slices.Clone(s.store.fetched)
}

// clientMetadataSupported adds client_id_metadata_document_supported to the server's
// metadata (RFC 8414 and OpenID discovery) once AcceptClientMetadataDocuments was called:
// zitadel's provider has the field but never sets it.
func (s *Server) clientMetadataSupported(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.metadataDocs.Load() || !strings.HasPrefix(r.URL.Path, "/.well-known/") {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		var m map[string]any
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &m) != nil || m["issuer"] == nil {
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		m["client_id_metadata_document_supported"] = true
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(m)
	})
}

// clientDocument is the part of a client metadata document the server reads.
type clientDocument struct {
	ClientID                string   `json:"client_id"`
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
}

// clientFromDocument reads the client id's document: the client it describes, or why not.
func (s *store) clientFromDocument(ctx context.Context, id string) (op.Client, error) {
	u, err := url.Parse(id)
	if err != nil || u.Path == "" || u.Path == "/" {
		return nil, fmt.Errorf("client id %q is not a client metadata document's URL", id)
	}
	if ip := net.ParseIP(u.Hostname()); u.Scheme != "https" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("client id %q: a client metadata document must be served by https", id)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client id %q: %w", id, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxClientDocument))
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.fetched = append(s.fetched, id)
	s.mu.Unlock()
	var doc clientDocument
	dec := json.NewDecoder(bytes.NewReader(b))
	if resp.StatusCode != http.StatusOK || dec.Decode(&doc) != nil {
		return nil, fmt.Errorf("client id %q: its document answered %s", id, resp.Status)
	}
	if doc.ClientID != id || len(doc.RedirectURIs) == 0 || doc.TokenEndpointAuthMethod != "none" {
		return nil, fmt.Errorf("client id %q: its document names client_id %q, %d redirect URIs, token_endpoint_auth_method %q: want its own URL, one or more, none",
			id, doc.ClientID, len(doc.RedirectURIs), doc.TokenEndpointAuthMethod)
	}
	return jwtClient{Client: storage.NativeClient(id, doc.RedirectURIs...), scopes: s.scopes}, nil
}
