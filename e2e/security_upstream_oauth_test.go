package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zestmcp/zest/e2e/internal/oauthserver"
	"github.com/zestmcp/zest/lib/oauthrs"
	"github.com/zestmcp/zest/lib/tracing/otlptest"
	"github.com/zestmcp/zest/lib/waitfor"
)

// oauthUpstream is a streamable-http MCP server that requires access tokens of the test
// authorization server for its own URL (verified with lib/oauthrs, as Zest's endpoints are):
// its 401 points to its RFC 9728 metadata. expire makes the tokens it has seen so far count as
// expired (401 invalid_token), as an upstream whose tokens ran out would.
type oauthUpstream struct {
	URL string

	mu      sync.Mutex
	seen    map[string]bool
	expired map[string]bool
}

func startOAuthUpstream(t *testing.T, issuer string) *oauthUpstream {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + lis.Addr().String()
	u := &oauthUpstream{URL: base + "/mcp", seen: map[string]bool{}, expired: map[string]bool{}}
	cfg := oauthrs.Config{Issuer: issuer, PublicURL: base}
	verifier := oauthrs.New(cfg)
	mcpSrv := server.NewMCPServer("oauth-upstream", "1.0.0")
	mcpSrv.AddTool(mcp.NewTool("hello"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("hello from the protected upstream"), nil
	})
	// whoami says whom the request's token names: its subject, and the act claim's subject
	// when the authorization server set one (a token exchanged on a caller's behalf).
	mcpSrv.AddTool(mcp.NewTool("whoami"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c, _ := ctx.Value(upstreamClaimsKey{}).(tokenClaims)
		return mcp.NewToolResultText("sub=" + c.Sub + " act=" + c.Act.Sub), nil
	})
	streamable := server.NewStreamableHTTPServer(mcpSrv, server.WithStateLess(true),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			return context.WithValue(ctx, upstreamClaimsKey{}, claimsOf(tok))
		}))
	mux := http.NewServeMux()
	mux.HandleFunc(oauthrs.MetadataPath+"/mcp", func(w http.ResponseWriter, _ *http.Request) {
		m, _ := cfg.MetadataFor("/mcp")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(jsonBody(t, m)))
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		u.mu.Lock()
		if ok {
			u.seen[tok] = true
		}
		expired := u.expired[tok]
		u.mu.Unlock()
		if !ok || expired {
			w.Header().Set("WWW-Authenticate", cfg.ChallengeFor("/mcp", nil))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if _, err := verifier.VerifyFor(r.Context(), tok, "/mcp"); err != nil {
			w.Header().Set("WWW-Authenticate", cfg.ChallengeFor("/mcp", err))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		streamable.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	return u
}

type upstreamClaimsKey struct{}

// tokenClaims are the claims of a JWT the tests read (after a verifier checked it).
type tokenClaims struct {
	Sub string   `json:"sub"`
	Aud []string `json:"aud"`
	Act struct {
		Sub string `json:"sub"`
	} `json:"act"`
}

// claimsOf reads a JWT's claims without checking it.
func claimsOf(tok string) tokenClaims {
	var c tokenClaims
	if parts := strings.Split(tok, "."); len(parts) == 3 {
		b, _ := base64.RawURLEncoding.DecodeString(parts[1])
		_ = json.Unmarshal(b, &c)
	}
	return c
}

// expire makes every token seen so far refused.
func (u *oauthUpstream) expire() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for tok := range u.seen {
		u.expired[tok] = true
	}
}

func (u *oauthUpstream) tokens() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for tok := range u.seen {
		out = append(out, tok)
	}
	return out
}

// upstreamOAuthSuite is a suite with the admin key and a secret key file (ZEST_SECRET_KEY_FILE;
// UP_SECRET holds the test server's service client secret), the test authorization server
// and an upstream that requires its tokens.
func upstreamOAuthSuite(t *testing.T, extra ...string) (*Suite, *oauthserver.Server, *oauthUpstream) {
	t.Helper()
	as := oauthserver.Start(t, "mcp")
	up := startOAuthUpstream(t, as.Issuer)
	s := startSuite(t, append([]string{"LEMONADE_ADMIN_API_KEY=" + adminKey, "ZEST_SECRET_KEY_FILE=" + secretKeyFile(t),
		"UP_SECRET=" + oauthserver.ServiceClientSecret}, extra...)...)
	return s, as, up
}

// secretKeyFile writes a new random secret key for ZEST_SECRET_KEY_FILE and returns its path.
func secretKeyFile(t *testing.T) string {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "secret.key")
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)), 0o600); err != nil {
		t.Fatal(err)
	}
	return keyFile
}

// TestUpstreamOAuth: Zest signs in to an upstream that requires OAuth — by client
// credentials (machine to machine), and by authorization code started through the admin API
// (the console's Sign in; the browser follows the authorization server back to the edge's
// callback); it calls the tool, refreshes without a person when the upstream refuses the
// token as expired, and once the refresh token is revoked the server's state says
// "needs_sign_in" and calls are refused naming the fix. No token, code or state is in any
// service's log, the admin API's answers, the metrics, the traces, the audit trail or, in the
// clear, the registry file.
func TestUpstreamOAuth(t *testing.T) {
	rcv := otlptest.Start(t) // every span of every service, looked through at the end
	s, as, up := upstreamOAuthSuite(t, "ZEST_LOG_LEVEL=debug", "ZEST_EDGE_METRICS_ADDR=127.0.0.1:0", "ZEST_MCPGATEWAY_METRICS_ADDR=127.0.0.1:0",
		"OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.Endpoint, "OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_TRACES_EXPORTER=", "OTEL_SDK_DISABLED=", "OTEL_SERVICE_NAME=", "OTEL_EXPORTER_OTLP_PROTOCOL=")
	call := func(id string) Response {
		return admin(t, s, "POST", "/servers/"+id+"/tools/call", `{"name":"hello","arguments":{}}`)
	}
	oauthState := func(id string) map[string]any {
		r := admin(t, s, "GET", "/servers/"+id, "")
		st, _ := r.JSON(t)["server"].(map[string]any)["oauth_state"].(map[string]any)
		return st
	}
	var secrets []string // what must never show: codes, states (tokens: up.tokens())

	t.Run("client credentials", func(t *testing.T) {
		registerServer(t, s, map[string]any{"id": "m2m", "url": up.URL,
			"oauth": map[string]any{"client_id": oauthserver.ServiceClientID, "client_secret": "${UP_SECRET}", "grant": "client_credentials", "scopes": []string{"mcp"}}})
		if r := call("m2m"); r.Status != 200 || !strings.Contains(string(r.Body), "hello from the protected upstream") {
			t.Fatalf("call: %d %s", r.Status, r.Body)
		}
		if st := oauthState("m2m"); st["status"] != "signed_in" || st["subject"] != oauthserver.ServiceClientID || st["expires"] == "" {
			t.Fatalf("oauth_state = %v", st)
		}
	})

	t.Run("sign in, call, refresh, revoked", func(t *testing.T) {
		registerServer(t, s, map[string]any{"id": "tracker", "url": up.URL,
			"oauth": map[string]any{"client_id": oauthserver.ZestClientID, "scopes": []string{"mcp", "offline_access"}}})
		// Refused with the fix alone, not the chain of transports it failed through.
		r := call("tracker")
		if msg := errMessage(t, r); r.Status != http.StatusBadGateway || !strings.HasPrefix(msg, `server "tracker" needs sign-in: Zest holds no token for it; sign in from the console`) ||
			!strings.HasSuffix(msg, "zestctl servers sign-in tracker") {
			t.Fatalf("a call before sign-in: %d %s", r.Status, r.Body)
		}
		if st := oauthState("tracker"); st["status"] != "needs_sign_in" {
			t.Fatalf("before sign-in: %v", st)
		}
		r = admin(t, s, "POST", "/servers/tracker/sign-in", jsonBody(t, map[string]string{"redirect_uri": s.URL + "/internal/mcp/oauth/callback"}))
		authURL, _ := r.JSON(t)["authorization_url"].(string)
		if r.Status != 200 || !strings.HasPrefix(authURL, as.Issuer) || !strings.Contains(authURL, "code_challenge_method=S256") ||
			!strings.Contains(authURL, "resource="+url.QueryEscape(up.URL)) {
			t.Fatalf("sign-in: %d %s", r.Status, r.Body)
		}
		// The browser: through the authorization server (its user signs in at once) back to
		// the edge's callback.
		var callback *url.URL
		browser := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			if req.URL.Path == "/internal/mcp/oauth/callback" {
				callback = req.URL
			}
			return nil
		}}
		resp, err := browser.Get(authURL)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || callback == nil || !strings.Contains(string(page), "Zest is signed in to tracker as ") {
			t.Fatalf("callback %v: %d %s", callback, resp.StatusCode, page)
		}
		secrets = append(secrets, callback.Query().Get("code"), callback.Query().Get("state"))
		// The same callback again (a replayed state) is refused.
		resp, err = http.Get(callback.String())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("a replayed callback: %d", resp.StatusCode)
		}
		if r := call("tracker"); r.Status != 200 || !strings.Contains(string(r.Body), "hello from the protected upstream") {
			t.Fatalf("call after sign-in: %d %s", r.Status, r.Body)
		}
		st := oauthState("tracker")
		if st["status"] != "signed_in" || st["subject"] == "" || st["expires"] == "" || st["refreshable"] != true {
			t.Fatalf("after sign-in: %v", st)
		}

		// The upstream refuses the token as expired: Zest refreshes it, no person involved.
		before := as.Refreshed()
		up.expire()
		if r := call("tracker"); r.Status != 200 || !strings.Contains(string(r.Body), "hello from the protected upstream") {
			t.Fatalf("call after expiry: %d %s", r.Status, r.Body)
		}
		if as.Refreshed() <= before {
			t.Fatal("the call after expiry went through without a refresh")
		}

		// Revoked: refused cleanly, the state says so.
		as.RevokeRefreshTokens()
		up.expire()
		r = call("tracker")
		if msg := errMessage(t, r); r.Status != http.StatusBadGateway || !strings.HasPrefix(msg, `server "tracker" needs sign-in: its authorization server refused the refresh token (invalid_grant)`) ||
			!strings.HasSuffix(msg, "zestctl servers sign-in tracker") {
			t.Fatalf("a call after revocation: %d %s", r.Status, r.Body)
		}
		if st := oauthState("tracker"); st["status"] != "needs_sign_in" || !strings.Contains(st["message"].(string), "refused the refresh token") {
			t.Fatalf("after revocation: %v", st)
		}
	})

	// zestctl servers sign-in prints the URL and waits for the sign-in, through Zest's callback.
	t.Run("zestctl sign-in", func(t *testing.T) {
		registerServer(t, s, map[string]any{"id": "ctl", "url": up.URL,
			"oauth": map[string]any{"client_id": oauthserver.ZestClientID, "scopes": []string{"mcp", "offline_access"}}})
		cmd := exec.CommandContext(t.Context(), filepath.Join(binDir, "zestctl"), "servers", "sign-in", "ctl", "--timeout", "60s")
		cmd.Env = s.Env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		if !lines.Scan() {
			_ = cmd.Wait()
			t.Fatalf("zestctl printed no URL: %s", stderr.String())
		}
		authURL := lines.Text()
		resp, err := http.Get(authURL) // the browser, back to the edge's callback
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(page), "Zest is signed in to ctl") {
			t.Fatalf("callback: %d %s", resp.StatusCode, page)
		}
		var rest strings.Builder
		for lines.Scan() {
			rest.WriteString(lines.Text() + "\n")
		}
		if err := cmd.Wait(); err != nil || !strings.Contains(rest.String(), "signed in to ctl as ") {
			t.Fatalf("zestctl: %v\nstdout: %s\nstderr: %s", err, rest.String(), stderr.String())
		}
		if r := call("ctl"); r.Status != 200 {
			t.Fatalf("call after zestctl's sign-in: %d %s", r.Status, r.Body)
		}
	})

	// The sign-ins are admin changes in the audit trail (never with their state or code).
	t.Run("audited", func(t *testing.T) {
		var a auditAnswer
		r := admin(t, s, "GET", "/audit?limit=500&kind=admin", "")
		if err := json.Unmarshal(r.Body, &a); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		ctlSubject, _ := oauthState("ctl")["subject"].(string)
		for _, e := range a.Entries {
			if e.ServerID == "tracker" || e.ServerID == "ctl" {
				seen[e.Action+" "+e.ServerID] = true
			}
			// The callback comes without a key: its entry names the administrator who started
			// the sign-in (the console's, zestctl's admin key) and whom the upstream's tokens
			// were issued to.
			if e.Action == "finish_sign_in" && e.Outcome == "ok" {
				if e.Who != who(adminKey) || e.UpstreamSubject == "" || (e.ServerID == "ctl" && e.UpstreamSubject != ctlSubject) {
					t.Errorf("finish_sign_in %s: who %q, upstream_subject %q; want %q, %q", e.ServerID, e.Who, e.UpstreamSubject, who(adminKey), ctlSubject)
				}
			}
		}
		for _, want := range []string{"start_sign_in tracker", "finish_sign_in tracker", "start_sign_in ctl", "finish_sign_in ctl"} {
			if !seen[want] {
				t.Errorf("no audit entry %q among %v", want, seen)
			}
		}
	})

	t.Run("no secret anywhere", func(t *testing.T) {
		toks := up.tokens()
		if len(toks) < 3 {
			t.Fatalf("the upstream saw %d tokens", len(toks))
		}
		// A JWT's signature is its own: look for it (its header is shared by every token).
		var needles []string
		for _, tok := range toks {
			needles = append(needles, tok[strings.LastIndex(tok, ".")+1:])
		}
		for _, sec := range secrets {
			if sec == "" {
				t.Fatal("a code or state was not captured")
			}
			needles = append(needles, sec)
		}
		// The traces too: the spans of the calls above, the sign-in's and the refresh's among them.
		noSecretAnywhere(t, s, needles, &spansOf{rcv, "UpstreamOAuthService/FinishSignIn"}, "/servers", "/servers/tracker", "/servers/m2m")
	})
}

// spansOf is the trace receiver of a suite whose services export their spans, and the name
// (part of it) of an mcpgateway span to wait for: the last the test made.
type spansOf struct {
	rcv  *otlptest.Receiver
	last string
}

// noSecretAnywhere fails t when a needle (a token's signature, a code, a state) is in a
// service's log, an admin API answer (adminPaths under /internal/mcp, with the audit trail
// and the activity), the edge's and mcpgateway's metrics, the spans of traces (when not nil)
// or, in the clear, the registry file.
func noSecretAnywhere(t *testing.T, s *Suite, needles []string, traces *spansOf, adminPaths ...string) {
	t.Helper()
	var places = map[string]string{}
	if traces != nil {
		// Each service exports within 0.1 s of a span's end (OTEL_BSP_SCHEDULE_DELAY).
		waitfor.NoError(t, 10*time.Second, func() error {
			for _, sp := range traces.rcv.Spans() {
				if sp.Service == "zest-mcpgateway" && strings.Contains(sp.Name, traces.last) {
					return nil
				}
			}
			return fmt.Errorf("no span of %s among %d spans", traces.last, len(traces.rcv.Spans()))
		})
		var spans []byte
		for _, sp := range traces.rcv.Spans() {
			spans = append(spans, sp.Raw...)
		}
		places[fmt.Sprintf("traces (%d spans)", len(traces.rcv.Spans()))] = string(spans)
	}
	for _, name := range []string{"zest-gateway", "zest-mcpgateway", "zest-toolhost", "zest-inference"} {
		places["log of "+name] = s.Logs(name)
	}
	for _, path := range append(adminPaths, "/audit?limit=500", "/activity?limit=500") {
		places["GET /internal/mcp"+path] = string(admin(t, s, "GET", path, "").Body)
	}
	for _, name := range []string{"zest-gateway", "zest-mcpgateway"} {
		if m := metricsServing.FindStringSubmatch(s.Logs(name)); m != nil {
			places["metrics of "+name] = get(t, "http://"+m[1]+"/metrics")
		} else {
			t.Errorf("%s logged no metrics address", name)
		}
	}
	matches, _ := filepath.Glob(filepath.Join(s.DataDir, "*.db"))
	if len(matches) == 0 {
		t.Errorf("no registry file in %s", s.DataDir)
	}
	for _, m := range matches {
		db, _ := os.ReadFile(m)
		places["registry file "+filepath.Base(m)] = string(db)
	}
	for where, text := range places {
		for _, n := range needles {
			if strings.Contains(text, n) {
				t.Errorf("%s holds a token, code or state", where)
				break
			}
		}
	}
}

func get(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestUpstreamOAuthClientMetadataDocument: an upstream whose authorization server takes client
// ID metadata documents (MCP authorization 2025-11-25) and knows no client of Zest's: Zest
// names itself by the URL of the document the edge serves under ZEST_PUBLIC_URL (no key), the
// authorization server fetches it, and the sign-in through the console's route and the edge's
// callback ends signed in; the tool is called, and the token refreshed, as that client.
func TestUpstreamOAuthClientMetadataDocument(t *testing.T) {
	s, as, up := upstreamOAuthSuite(t)
	as.AcceptClientMetadataDocuments()
	docURL := s.URL + "/internal/mcp/oauth/client-metadata.json"
	callbackURL := s.URL + "/internal/mcp/oauth/callback"

	resp, err := http.Get(docURL) // no key: the authorization server fetches it
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		ClientID     string   `json:"client_id"`
		RedirectURIs []string `json:"redirect_uris"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
		GrantTypes   []string `json:"grant_types"`
	}
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || doc.ClientID != docURL || len(doc.RedirectURIs) != 1 || doc.RedirectURIs[0] != callbackURL ||
		doc.AuthMethod != "none" || !slices.Contains(doc.GrantTypes, "refresh_token") {
		t.Fatalf("GET %s: %d %+v %v", docURL, resp.StatusCode, doc, err)
	}

	registerServer(t, s, map[string]any{"id": "linear", "url": up.URL, "oauth": map[string]any{"scopes": []string{"mcp", "offline_access"}}})
	r := admin(t, s, "POST", "/servers/linear/sign-in", jsonBody(t, map[string]string{"redirect_uri": callbackURL}))
	authURL, _ := r.JSON(t)["authorization_url"].(string)
	if r.Status != 200 || !strings.Contains(authURL, "client_id="+url.QueryEscape(docURL)) {
		t.Fatalf("sign-in: %d %s", r.Status, r.Body)
	}
	resp, err = http.Get(authURL) // the browser, back to the edge's callback
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "Zest is signed in to linear as ") {
		t.Fatalf("callback: %d %s", resp.StatusCode, page)
	}
	if fetched := as.ClientDocumentsFetched(); len(fetched) == 0 || fetched[0] != docURL {
		t.Fatalf("the authorization server fetched %v, want %s", fetched, docURL)
	}
	call := func() Response {
		return admin(t, s, "POST", "/servers/linear/tools/call", `{"name":"hello","arguments":{}}`)
	}
	if r := call(); r.Status != 200 || !strings.Contains(string(r.Body), "hello from the protected upstream") {
		t.Fatalf("call after sign-in: %d %s", r.Status, r.Body)
	}
	before := as.Refreshed()
	up.expire()
	if r := call(); r.Status != 200 || as.Refreshed() <= before {
		t.Fatalf("call after expiry (refreshed %d → %d): %d %s", before, as.Refreshed(), r.Status, r.Body)
	}
}

// TestNeedsSignInEveryEntryPoint: a call to a server Zest has not signed in to reads the same
// fix on every entry point — the admin API's tool call, /mcp/servers/{id} (the session
// revisions and 2026-07-28, through mcp-go's client), /mcp/presets/{id} and the chat loop —
// naming the server and how to sign in, to an API caller as to an administrator: no incident
// id to chase.
func TestNeedsSignInEveryEntryPoint(t *testing.T) {
	s, _, up := upstreamOAuthSuite(t, "LEMONADE_API_KEY="+fedAPIKey)
	registerServer(t, s, map[string]any{"id": "tracker", "url": up.URL, "oauth": map[string]any{"client_id": oauthserver.ZestClientID}})
	if r := admin(t, s, "POST", "/presets", `{"id":"p","model":"builtin-llm","mcp_server_ids":["tracker","lemonade"]}`); r.Status != 200 {
		t.Fatalf("preset: %d %s", r.Status, r.Body)
	}
	const fix = `server "tracker" needs sign-in: Zest holds no token for it; sign in from the console (Servers → tracker → Sign in) or with zestctl servers sign-in tracker`
	auth := "Authorization: Bearer " + fedAPIKey
	rpcError := func(r Response) string { // error.message
		e, _ := r.JSON(t)["error"].(map[string]any)
		msg, _ := e["message"].(string)
		return msg
	}
	mcpGo := func(url, tool string, legacy bool) string {
		opts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + fedAPIKey})}
		tr, err := transport.NewStreamableHTTP(url, opts...)
		if err != nil {
			t.Fatal(err)
		}
		var copts []mcpclient.ClientOption
		if legacy {
			copts = append(copts, mcpclient.WithProtocolVersion("2025-11-25"))
		}
		cl := mcpclient.NewClient(tr, copts...)
		t.Cleanup(func() { cl.Close() })
		if err := cl.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		init := mcp.InitializeRequest{}
		init.Params.ClientInfo = mcp.Implementation{Name: "e2e", Version: "1"}
		if _, err := cl.Initialize(t.Context(), init); err != nil {
			return err.Error()
		}
		req := mcp.CallToolRequest{}
		req.Params.Name = tool
		out, err := cl.CallTool(t.Context(), req)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("a result: %+v", out)
	}
	for _, c := range []struct {
		name string
		call func() string
	}{
		{"admin API", func() string {
			return errMessage(t, admin(t, s, "POST", "/servers/tracker/tools/call", `{"name":"hello","arguments":{}}`))
		}},
		{"/mcp/servers/{id} initialize", func() string {
			return rpcError(do(t, "POST", fedURL(s, "tracker"), sprintf(initBody, "2025-11-25"), append(mcpHeaders, auth)...))
		}},
		{"/mcp/servers/{id} mcp-go", func() string { return mcpGo(fedURL(s, "tracker"), "hello", false) }},
		{"/mcp/servers/{id} mcp-go legacy", func() string { return mcpGo(fedURL(s, "tracker"), "hello", true) }},
		{"/mcp/presets/{id} tools/call", func() string {
			sid, _ := presetInit(t, s, "p", auth)
			return rpcError(presetCall(t, s, "p", sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mcp_tracker__hello","arguments":{}}}`, auth))
		}},
		{"/mcp/presets/{id} mcp-go", func() string { return mcpGo(presetURL(s, "p"), "mcp_tracker__hello", false) }},
		{"chat", func() string {
			body := jsonBody(t, map[string]any{"model": "builtin-llm", "mcp_server_ids": []string{"tracker"},
				"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "mcp_tracker__hello"}},
				"messages":    []map[string]any{{"role": "user", "content": "{}"}}})
			return rpcError(do(t, "POST", s.URL+"/api/v1/chat/completions", body, "Content-Type: application/json", auth)) // OpenAI's error.message
		}},
		{"chat warnings", func() string {
			body := jsonBody(t, map[string]any{"model": "builtin-llm", "mcp_server_ids": []string{"tracker", "lemonade"},
				"messages": []map[string]any{{"role": "user", "content": "hello"}}})
			r := do(t, "POST", s.URL+"/api/v1/chat/completions", body, "Content-Type: application/json", auth)
			var a toolChatAnswer
			if r.Status != 200 || json.Unmarshal(r.Body, &a) != nil {
				return fmt.Sprintf("%d %s", r.Status, r.Body)
			}
			return strings.Join(a.ZestWarnings, "\n")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.call(); !strings.Contains(got, fix) || strings.Contains(got, "incident") {
				t.Fatalf("got %q\nwant it to hold %q", got, fix)
			}
		})
	}
}
