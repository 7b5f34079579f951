package e2e

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/e2e/internal/oauthserver"
	"github.com/zestmcp/zest/lib/tracing/otlptest"
)

// bearerMCPClient opens a 2025-11-25 session of url with mark3labs/mcp-go's client, sending
// authorization as its bearer token (an API key or an access token).
func bearerMCPClient(t *testing.T, url, bearer string) *mcpclient.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + bearer}))
	if err != nil {
		t.Fatal(err)
	}
	cl := mcpclient.NewClient(tr)
	if err := cl.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "zest-e2e-token-exchange", Version: "1"}
	if _, err := cl.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	return cl
}

// callNoArgs calls tool without arguments and returns isError and its first text.
func callNoArgs(t *testing.T, cl *mcpclient.Client, tool string) (bool, string) {
	t.Helper()
	call := mcp.CallToolRequest{}
	call.Params.Name = tool
	out, err := cl.CallTool(t.Context(), call)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	text := ""
	if len(out.Content) > 0 {
		if tc, ok := mcp.AsTextContent(out.Content[0]); ok {
			text = tc.Text
		}
	}
	return out.IsError, text
}

// TestUpstreamTokenExchange: a server whose oauth block says grant token_exchange is called on
// behalf of each caller. A caller who came to /mcp/presets/team with an access token of the
// test authorization server calls the server's tool, and the upstream — which takes only
// tokens whose audience is itself — sees a token exchanged for the caller's (RFC 8693): the
// caller's subject, Zest's exchange client as its act; two callers get two tokens, each
// exchanged once; an API-key caller (MCP endpoint and admin API) is refused with the error
// that names the setting; the admin API's state says "on behalf of each caller" and holds no
// token; no token of the callers' or the exchanged ones is in any log, admin answer, metric,
// audit entry, trace or the registry file.
func TestUpstreamTokenExchange(t *testing.T) {
	as := oauthserver.Start(t, "mcp")
	up := startOAuthUpstream(t, as.Issuer)
	rcv := otlptest.Start(t) // every span of every service, looked through at the end
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_OAUTH_ISSUER="+as.Issuer,
		"TX_SECRET="+oauthserver.ExchangeClientSecret, "ZEST_LOG_LEVEL=debug", "ZEST_EDGE_METRICS_ADDR=127.0.0.1:0", "ZEST_MCPGATEWAY_METRICS_ADDR=127.0.0.1:0",
		"OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.Endpoint, "OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_TRACES_EXPORTER=", "OTEL_SDK_DISABLED=", "OTEL_SERVICE_NAME=", "OTEL_EXPORTER_OTLP_PROTOCOL=")
	registerServer(t, s, map[string]any{"id": "tx", "url": up.URL,
		"oauth": map[string]any{"client_id": oauthserver.ExchangeClientID, "client_secret": "${TX_SECRET}", "grant": "token_exchange", "scopes": []string{"mcp"}}})
	putPreset(t, s, "team", "tx")
	preset := s.URL + "/mcp/presets/team"

	// Two callers: the test server's user (authorization code, as an MCP client signs in), and
	// another subject with a token the server signed.
	alice := as.Token(t, preset, "mcp")
	bob := as.Sign(t, map[string]any{"iss": as.Issuer, "sub": "second-user", "aud": []string{preset}, "scope": "mcp", "client_id": oauthserver.ClientID,
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}, nil, "")
	aliceSub := claimsOf(alice).Sub
	if aliceSub == "" || aliceSub == "second-user" {
		t.Fatalf("the user's token names %q", aliceSub)
	}

	whoami := ""
	t.Run("the upstream sees each caller", func(t *testing.T) {
		cl := bearerMCPClient(t, preset, alice)
		tools, err := cl.ListTools(t.Context(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools.Tools {
			if strings.HasSuffix(tool.Name, "whoami") {
				whoami = tool.Name
			}
		}
		if whoami == "" {
			t.Fatalf("the preset lists no whoami: %+v", tools.Tools)
		}
		want := "sub=" + aliceSub + " act=" + oauthserver.ExchangeClientID
		for range 2 {
			if isErr, text := callNoArgs(t, cl, whoami); isErr || text != want {
				t.Fatalf("alice's call: isError %v, %q; want %q", isErr, text, want)
			}
		}
		if isErr, text := callNoArgs(t, bearerMCPClient(t, preset, bob), whoami); isErr || text != "sub=second-user act="+oauthserver.ExchangeClientID {
			t.Fatalf("bob's call: isError %v, %q", isErr, text)
		}
		// One exchange per caller: the second call of alice's reused hers.
		if n := as.Exchanged(); n != 2 {
			t.Errorf("%d token exchanges; want 2 (one per caller)", n)
		}
		// What reached the upstream: tokens for it alone, two of them, never a caller's own.
		subjects := map[string]bool{}
		for _, tok := range up.tokens() {
			c := claimsOf(tok)
			if !slices.Equal(c.Aud, []string{up.URL}) || c.Act.Sub != oauthserver.ExchangeClientID {
				t.Errorf("the upstream got a token for %v acted by %q", c.Aud, c.Act.Sub)
			}
			subjects[c.Sub] = true
			if tok == alice || tok == bob {
				t.Error("a caller's own token reached the upstream")
			}
		}
		if len(subjects) != 2 || !subjects[aliceSub] || !subjects["second-user"] {
			t.Errorf("the upstream saw the subjects %v", subjects)
		}
	})

	const refusal = `server "tx" is called on behalf of each caller (its oauth.grant is token_exchange), and this caller holds no OAuth access token`
	t.Run("a caller by key is refused", func(t *testing.T) {
		before := len(up.tokens())
		isErr, text := callNoArgs(t, bearerMCPClient(t, preset, fedAPIKey), whoami)
		if !isErr || !strings.HasPrefix(text, refusal) || !strings.Contains(text, "ZEST_OAUTH_ISSUER") {
			t.Errorf("the API key on the preset: isError %v, %q", isErr, text)
		}
		r := admin(t, s, "POST", "/servers/tx/tools/call", `{"name":"whoami","arguments":{}}`)
		if msg := errMessage(t, r); r.Status != http.StatusBadGateway || !strings.HasPrefix(msg, refusal) {
			t.Errorf("the admin API's call: %d %s", r.Status, r.Body)
		}
		if len(up.tokens()) != before || as.Exchanged() != 2 {
			t.Error("a caller without a token reached the upstream or the authorization server")
		}
	})

	t.Run("state and activity", func(t *testing.T) {
		r := admin(t, s, "GET", "/servers/tx", "")
		st, _ := r.JSON(t)["server"].(map[string]any)["oauth_state"].(map[string]any)
		if r.Status != 200 || st["status"] != "on_behalf_of_caller" || !strings.Contains(st["message"].(string), "on behalf of each caller") ||
			st["subject"] != "" || st["expires"] != "" {
			t.Errorf("oauth_state = %v", st)
		}
		r = admin(t, s, "POST", "/servers/tx/sign-in", `{"redirect_uri":"`+s.URL+`/internal/mcp/oauth/callback"}`)
		if r.Status == http.StatusOK {
			t.Errorf("a sign-in of an on-behalf server: %d %s", r.Status, r.Body)
		}
		activity := string(admin(t, s, "GET", "/activity?limit=50", "").Body)
		for _, who := range []string{"oauth:" + aliceSub, "oauth:second-user"} {
			if !strings.Contains(activity, who) {
				t.Errorf("no activity by %s: %s", who, activity)
			}
		}
	})

	t.Run("no token anywhere", func(t *testing.T) {
		toks := append(up.tokens(), alice, bob)
		var needles []string
		for _, tok := range toks {
			needles = append(needles, tok[strings.LastIndex(tok, ".")+1:])
		}
		noSecretAnywhere(t, s, needles, &spansOf{rcv, "UpstreamOAuthService/StartSignIn"}, "/servers", "/servers/tx")
	})
}
