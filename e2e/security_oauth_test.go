package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/e2e/internal/oauthserver"
	"github.com/zestmcp/zest/lib/waitfor"
)

// startOAuthSuite is a suite whose MCP endpoints take the test authorization server's access
// tokens beside the API key, with the echo server and the preset "signed" (echo).
func startOAuthSuite(t *testing.T) (*Suite, *oauthserver.Server) {
	t.Helper()
	as := oauthserver.Start(t, "mcp", "mcp:admin")
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_OAUTH_ISSUER="+as.Issuer)
	registerServer(t, s, map[string]any{"id": "echo", "command": "node", "args": []string{filepath.Join(peersDir(t), "echo-server.mjs")}})
	putPreset(t, s, "signed", "echo")
	putPreset(t, s, "other", "echo")
	return s, as
}

// initializeWith POSTs an initialize to path with authorization (none when empty) and returns
// the answer's status, WWW-Authenticate and body.
func initializeWith(t *testing.T, s *Suite, path, authorization string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", s.URL+path, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"oauth-e2e","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
}

// TestOAuthProtectedResource: with ZEST_OAUTH_ISSUER set, each MCP endpoint is an OAuth
// protected resource — its 401 points to its RFC 9728 metadata, which names the issuer; a
// token the issuer gave for that endpoint (authorization code + PKCE, resource=the endpoint)
// opens it and no other; an expired token, a forged signature and an unknown key are 401 with
// the challenge; the API key still works; no token reaches a log.
func TestOAuthProtectedResource(t *testing.T) {
	s, as := startOAuthSuite(t)
	challenge := func(endpoint string) string {
		return `Bearer resource_metadata="` + s.URL + `/.well-known/oauth-protected-resource` + endpoint + `", scope="mcp"`
	}

	t.Run("401 points to the metadata", func(t *testing.T) {
		for _, ep := range []string{"/mcp", "/mcp/servers/echo", "/mcp/presets/signed"} {
			code, www, body := initializeWith(t, s, ep, "")
			if code != http.StatusUnauthorized || www != challenge(ep) {
				t.Errorf("%s without a token: %d %q %s", ep, code, www, body)
			}
			resp, err := http.Get(s.URL + "/.well-known/oauth-protected-resource" + ep)
			if err != nil {
				t.Fatal(err)
			}
			var m struct {
				Resource             string   `json:"resource"`
				AuthorizationServers []string `json:"authorization_servers"`
				ScopesSupported      []string `json:"scopes_supported"`
			}
			err = json.NewDecoder(resp.Body).Decode(&m)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || m.Resource != s.URL+ep || len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != as.Issuer {
				t.Errorf("%s metadata: %d %+v %v", ep, resp.StatusCode, m, err)
			}
		}
		// A client that looks for the authorization server at Zest is told which one it is.
		resp, err := http.Post(s.URL+"/register", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 || !strings.Contains(string(b), as.Issuer) {
			t.Errorf("/register: %d %s", resp.StatusCode, b)
		}
	})

	token := as.Token(t, s.URL+"/mcp/presets/signed", "mcp")
	t.Run("a token opens its endpoint", func(t *testing.T) {
		if code, _, body := initializeWith(t, s, "/mcp/presets/signed", "Bearer "+token); code != 200 || !strings.Contains(body, `"result"`) {
			t.Fatalf("initialize with the token: %d %s", code, body)
		}
		if code, _, body := initializeWith(t, s, "/mcp/presets/signed", "Bearer "+fedAPIKey); code != 200 {
			t.Fatalf("initialize with the API key: %d %s", code, body)
		}
	})

	// An administrator's token (ZEST_OAUTH_ADMIN_SCOPE) is the admin key on the MCP endpoints:
	// a server hidden from API users (expose: false) opens to it alone.
	t.Run("the admin scope", func(t *testing.T) {
		registerServer(t, s, map[string]any{"id": "hidden", "command": "node", "args": []string{filepath.Join(peersDir(t), "echo-server.mjs")}, "expose": false})
		user, admin := as.Token(t, s.URL+"/mcp/servers/hidden", "mcp"), as.Token(t, s.URL+"/mcp/servers/hidden", "mcp:admin")
		if code, _, body := initializeWith(t, s, "/mcp/servers/hidden", "Bearer "+user); code != http.StatusNotFound {
			t.Errorf("an API user's token on a hidden server: %d %s", code, body)
		}
		if code, _, body := initializeWith(t, s, "/mcp/servers/hidden", "Bearer "+admin); code != 200 || !strings.Contains(body, `"result"`) {
			t.Errorf("an administrator's token on a hidden server: %d %s", code, body)
		}
	})

	stranger, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	claims := func(aud string, exp time.Time) map[string]any {
		return map[string]any{"iss": as.Issuer, "sub": "id1", "aud": aud, "exp": exp.Unix(), "iat": time.Now().Unix(), "scope": "mcp"}
	}
	in := time.Now().Add(5 * time.Minute)
	// Each refused token is 401 with the endpoint's challenge and error="invalid_token"; one
	// without the scope required is 403 with error="insufficient_scope" (RFC 6750).
	bad := []struct{ name, endpoint, token, says string }{
		{"wrong audience: another preset", "/mcp/presets/other", token, "is not this endpoint's resource"},
		{"wrong audience: /mcp", "/mcp", token, "is not this endpoint's resource"},
		{"wrong audience: a server", "/mcp/servers/echo", token, "is not this endpoint's resource"},
		{"expired", "/mcp/presets/signed", as.Sign(t, claims(s.URL+"/mcp/presets/signed", time.Now().Add(-time.Hour)), nil, ""), "it expired"},
		{"bad signature", "/mcp/presets/signed", as.Sign(t, claims(s.URL+"/mcp/presets/signed", in), stranger, ""), "signature is not the issuer's"},
		{"unknown kid", "/mcp/presets/signed", as.Sign(t, claims(s.URL+"/mcp/presets/signed", in), stranger, "stranger"), `key id \"stranger\"`},
		{"no scope", "/mcp/presets/signed", as.Sign(t, map[string]any{"iss": as.Issuer, "sub": "id1", "aud": s.URL + "/mcp/presets/signed", "exp": in.Unix()}, nil, ""), `lacks the scope \"mcp\"`},
	}
	t.Run("bad tokens", func(t *testing.T) {
		for _, b := range bad {
			code, www, body := initializeWith(t, s, b.endpoint, "Bearer "+b.token)
			want, wantCode := challenge(b.endpoint)+`, error="invalid_token"`, http.StatusUnauthorized
			if b.name == "no scope" {
				want, wantCode = challenge(b.endpoint)+`, error="insufficient_scope"`, http.StatusForbidden
			}
			if code != wantCode || www != want || !strings.Contains(body, b.says) {
				t.Errorf("%s: %d %q %s", b.name, code, www, body)
			}
		}
	})

	t.Run("no token in any log", func(t *testing.T) {
		for _, name := range []string{"zest-gateway", "zest-mcpgateway", "zest-toolhost", "zest-inference"} {
			logs := s.Logs(name)
			for _, tok := range append([]string{token}, bad[3].token, bad[4].token, bad[5].token) {
				// A JWT's signature alone is enough to find it.
				if sig := tok[strings.LastIndex(tok, ".")+1:]; strings.Contains(logs, sig) {
					t.Errorf("%s logged a token", name)
				}
			}
		}
	})
}

// authorizeURL is the authorization URL a client printed in log (the line after "Please
// authorize this client by visiting:"), or "".
func authorizeURL(log string) string {
	_, after, ok := strings.Cut(log, "Please authorize this client by visiting:")
	if !ok {
		return ""
	}
	for _, f := range strings.Fields(after) {
		if strings.HasPrefix(f, "http") {
			return f
		}
	}
	return ""
}

// TestOAuthMcpRemote: mcp-remote, as Claude Desktop runs it (no key: it signs in), meets the
// 401 of /mcp/presets/signed, finds the issuer through the endpoint's metadata, sends the
// user to the authorization server (pre-registered public client, PKCE, resource=the
// endpoint) — the browser's part done by a headless request — and then lists and calls the
// preset's tool with the access token it got.
func TestOAuthMcpRemote(t *testing.T) {
	s, as := startOAuthSuite(t)
	// mcp-remote's callback port: a port free now, which mcp-remote binds itself.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	mr := startMCPRemote(t, []string{s.URL + "/mcp/presets/signed", port, "--static-oauth-client-info", `{"client_id":"` + oauthserver.ClientID + `"}`}, nil)
	mr.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"claude-ai","version":"0.1.0"}}}`)
	var u string
	if _, err := waitfor.Poll(30*time.Second, func() error {
		if u = authorizeURL(mr.stderr.String()); u == "" {
			return errors.New("mcp-remote asked for no authorization")
		}
		return nil
	}); err != nil {
		t.Fatalf("%v in 30s; its log:\n%s", err, mr.stderr.String())
	}
	if !strings.HasPrefix(u, as.Issuer+"/authorize?") || !strings.Contains(u, "resource="+url.QueryEscape(s.URL+"/mcp/presets/signed")) {
		t.Fatalf("mcp-remote's authorization URL %s: want the issuer's, with the endpoint as its resource", u)
	}
	if _, err := oauthserver.Approve(u); err != nil {
		t.Fatalf("approving: %v\nmcp-remote:\n%s", err, mr.stderr.String())
	}
	await := func(id string) string {
		l, ok := mr.await(id)
		if !ok {
			t.Fatalf("mcp-remote ended before answering %s; stderr:\n%s", id, mr.stderr.String())
		}
		return l
	}
	if l := await("1"); !strings.Contains(l, `"result"`) {
		t.Fatalf("initialize: %s\n%s", l, mr.stderr.String())
	}
	mr.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	mr.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp_echo__echo","arguments":{"text":"signed in"}}}`)
	if l := await("2"); !strings.Contains(l, "signed in") || strings.Contains(l, `"isError":true`) {
		t.Fatalf("tools/call: %s", l)
	}
	if n := as.Authorized(); n != 1 {
		t.Errorf("the authorization server approved %d sign-ins, want 1", n)
	}
	// The activity names the caller by its token's subject (the test server's user is id1).
	a, _ := listActivity(t, s, "")
	if len(a.Calls) != 1 || a.Calls[0].Who != "oauth:id1" || a.Calls[0].Tool != "echo" {
		t.Errorf("activity %+v: want the echo call by oauth:id1", a.Calls)
	}
	checkNoTokenLogged(t, s)
}

// checkNoTokenLogged fails when a log of the suite holds a JWT (an access token: a header
// and claims that are base64url JSON, "eyJ…").
func checkNoTokenLogged(t *testing.T, s *Suite) {
	t.Helper()
	for _, name := range []string{"zest-gateway", "zest-mcpgateway", "zest-toolhost", "zest-inference"} {
		if strings.Contains(s.Logs(name), "eyJ") {
			t.Errorf("%s logged what looks like a JWT", name)
		}
	}
}

// TestOAuthTypeScriptSDK: the official TypeScript SDK's auth flow (StreamableHTTPClientTransport
// with an authProvider) connects to /mcp/presets/signed without a key, is refused, finds the
// issuer through the endpoint's metadata, authorizes with the endpoint as its resource, and
// lists and calls the preset's tool with a token whose audience is the endpoint.
func TestOAuthTypeScriptSDK(t *testing.T) {
	s, as := startOAuthSuite(t)
	endpoint := s.URL + "/mcp/presets/signed"
	cmd := exec.Command("node", nodeScript(t, "oauth-client.mjs"), endpoint, oauthserver.ClientID, "mcp_echo__echo", `{"text":"sdk signed in"}`)
	b, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("oauth-client: %v\n%s\n%s", err, b, ee.Stderr)
		}
		t.Fatal(err)
	}
	var out struct {
		Unauthorized, AuthorizeURL string
		Audience                   any
		Tools                      []string
		IsError                    bool
		Text                       string
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("oauth-client printed %s: %v", b, err)
	}
	if out.Unauthorized == "" || !strings.HasPrefix(out.AuthorizeURL, as.Issuer+"/authorize?") {
		t.Errorf("the SDK was not sent to the issuer: %+v", out)
	}
	if out.Audience != endpoint && !(fmt.Sprint(out.Audience) == "["+endpoint+"]") {
		t.Errorf("the token's audience is %v, want %s", out.Audience, endpoint)
	}
	if !slices.Contains(out.Tools, "mcp_echo__echo") || out.IsError || !strings.Contains(out.Text, "sdk signed in") {
		t.Errorf("tools %v, call: error %v %q", out.Tools, out.IsError, out.Text)
	}
	checkNoTokenLogged(t, s)
}
