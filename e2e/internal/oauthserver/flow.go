package oauthserver

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Approve does the browser's part of an authorization request: it follows authorizeURL's
// redirects (the server signs its user in at once) up to the client's redirect URI on a
// loopback port, and requests that last one too, as a browser would, so that a client
// listening there (mcp-remote) receives the code. It returns the redirect's URL.
func Approve(authorizeURL string) (*url.URL, error) {
	var last *url.URL
	client := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) > 10 {
			return errors.New("more than 10 redirects")
		}
		if req.URL.Path == CallbackPath {
			last = req.URL
		}
		return nil
	}}
	resp, err := client.Get(authorizeURL)
	if err != nil {
		if last != nil { // a callback nobody listens on (the test's own flow)
			return last, nil
		}
		return nil, err
	}
	defer resp.Body.Close()
	if last == nil {
		return nil, fmt.Errorf("authorization ended at %s with %s, not at the client's redirect", resp.Request.URL, resp.Status)
	}
	return last, nil
}

// Token signs the user in for resource with scope as a client would (authorization code with
// PKCE S256, the resource parameter of RFC 8707) and returns the access token.
func (s *Server) Token(t testing.TB, resource, scope string) string {
	t.Helper()
	verifier := rand.Text() + rand.Text()
	sum := sha256.Sum256([]byte(verifier))
	redirect := "http://127.0.0.1:1" + CallbackPath // never listened on: Approve stops there
	q := url.Values{"response_type": {"code"}, "client_id": {ClientID}, "redirect_uri": {redirect}, "scope": {scope},
		"state": {rand.Text()}, "code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
		"resource": {resource}}
	cb, err := Approve(s.Issuer + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	code := cb.Query().Get("code")
	if code == "" {
		t.Fatalf("the authorization answered %s", cb)
	}
	resp, err := http.PostForm(s.Issuer+"/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {ClientID},
		"redirect_uri": {redirect}, "code_verifier": {verifier}, "resource": {resource}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || tok.AccessToken == "" {
		t.Fatalf("token endpoint: %s %v %s: %s", resp.Status, err, tok.Error, tok.Description)
	}
	if !strings.Contains(tok.AccessToken, ".") {
		t.Fatalf("the access token is not a JWT")
	}
	return tok.AccessToken
}
