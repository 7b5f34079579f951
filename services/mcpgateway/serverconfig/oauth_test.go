package serverconfig

import (
	"errors"
	"strings"
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// TestParseOAuth: the oauth block of a streamable-http server, its grant's default, and each
// refusal naming the field and the fix.
func TestParseOAuth(t *testing.T) {
	const url = `"url":"https://tools.example/mcp"`
	cfg, err := parse(`{"id":"h",`+url+`,"oauth":{"client_id":"zest","scopes":["mcp","read:all"]}}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o := cfg.GetOauth(); o.GetGrant() != GrantAuthorizationCode || o.GetClientId() != "zest" || len(o.GetScopes()) != 2 {
		t.Fatalf("oauth = %v; want grant authorization_code by default", o)
	}
	cfg, err = parse(`{"id":"h",`+url+`,"oauth":{"client_id":"zest","client_secret":"${UP_SECRET}","grant":"client_credentials","authorization_server":"https://login.example.com/tenant"}}`, nil)
	if err != nil || cfg.GetOauth().GetGrant() != GrantClientCredentials {
		t.Fatalf("client_credentials: %v, %v", cfg, err)
	}
	cfg, err = parse(`{"id":"h",`+url+`,"oauth":{"client_id":"zest","client_secret":"${UP_SECRET}","grant":"token_exchange","audience":"tools"}}`, nil)
	if o := cfg.GetOauth(); err != nil || o.GetGrant() != GrantTokenExchange || o.GetAudience() != "tools" || o.GetRequestedTokenType() != TokenTypeAccessToken {
		t.Fatalf("token_exchange: %v, %v; want the access token type by default", cfg, err)
	}
	cfg, err = parse(`{"id":"h",`+url+`,"oauth":{"client_id":"zest","dpop":false}}`, nil)
	if o := cfg.GetOauth(); err != nil || o.Dpop == nil || o.GetDpop() {
		t.Fatalf("dpop false: %v, %v; want it kept (absent means bind where offered)", cfg, err)
	}
	cfg, err = parse(`{"id":"h",`+url+`,"oauth":{"client_id":"zest","grant":"client_credentials","client_key_file":"/etc/zest/up.pem","client_key_id":"k1"}}`, nil)
	if o := cfg.GetOauth(); err != nil || o.GetClientKeyFile() != "/etc/zest/up.pem" || o.GetClientKeyId() != "k1" {
		t.Fatalf("client_credentials with a key (private_key_jwt): %v, %v", cfg, err)
	}
	if _, err := parse(`{"id":"h",`+url+`,"oauth":{}}`, nil); err != nil {
		t.Fatalf("an empty oauth block (discovery, registration later) is refused: %v", err)
	}
	many := `"` + strings.Repeat(`s","`, MaxOAuthScopes) + `s"`
	for _, c := range []struct{ name, body, want string }{
		{"stdio", `{"id":"h","command":"node","oauth":{"client_id":"z"}}`, "oauth is a streamable-http field"},
		{"beside bearer_token", `{"id":"h",` + url + `,"bearer_token":"${T}","oauth":{"client_id":"z"}}`, "oauth and bearer_token both set"},
		{"raw secret", `{"id":"h",` + url + `,"oauth":{"client_id":"z","client_secret":"hunter2"}}`, "oauth.client_secret"},
		{"reserved secret", `{"id":"h",` + url + `,"oauth":{"client_id":"z","client_secret":"${ZEST_ADMIN_KEY}"}}`, "oauth.client_secret refers to ${ZEST_ADMIN_KEY}"},
		{"secret without id", `{"id":"h",` + url + `,"oauth":{"client_secret":"${S}"}}`, "oauth.client_secret is set without oauth.client_id"},
		{"unknown grant", `{"id":"h",` + url + `,"oauth":{"grant":"password"}}`, `oauth.grant "password": use authorization_code`},
		{"client_credentials without secret", `{"id":"h",` + url + `,"oauth":{"client_id":"z","grant":"client_credentials"}}`, "client_credentials needs oauth.client_id and oauth.client_secret"},
		{"secret and key", `{"id":"h",` + url + `,"oauth":{"client_id":"z","client_secret":"${S}","client_key_file":"/etc/zest/z.pem"}}`, "oauth.client_secret and oauth.client_key_file both set"},
		{"key without id", `{"id":"h",` + url + `,"oauth":{"client_key_file":"/etc/zest/z.pem"}}`, "oauth.client_key_file is set without oauth.client_id"},
		{"relative key file", `{"id":"h",` + url + `,"oauth":{"client_id":"z","client_key_file":"z.pem"}}`, "oauth.client_key_file must be an absolute path"},
		{"long key file", `{"id":"h",` + url + `,"oauth":{"client_id":"z","client_key_file":"/` + strings.Repeat("k", MaxOAuthKeyFileLen) + `"}}`, "oauth.client_key_file must be an absolute path"},
		{"key id without key", `{"id":"h",` + url + `,"oauth":{"client_id":"z","client_key_id":"k1"}}`, "oauth.client_key_id is read with oauth.client_key_file only"},
		{"key id with a space", `{"id":"h",` + url + `,"oauth":{"client_id":"z","client_key_file":"/k.pem","client_key_id":"k 1"}}`, "oauth.client_key_id must be"},
		{"long key id", `{"id":"h",` + url + `,"oauth":{"client_id":"z","client_key_file":"/k.pem","client_key_id":"` + strings.Repeat("k", MaxOAuthKeyIDLen+1) + `"}}`, "oauth.client_key_id must be"},
		{"token_exchange without client", `{"id":"h",` + url + `,"oauth":{"grant":"token_exchange"}}`, "oauth.grant token_exchange needs oauth.client_id"},
		{"unknown token type", `{"id":"h",` + url + `,"oauth":{"client_id":"z","grant":"token_exchange","requested_token_type":"urn:ietf:params:oauth:token-type:id_token"}}`, "oauth.requested_token_type"},
		{"audience with a space", `{"id":"h",` + url + `,"oauth":{"client_id":"z","grant":"token_exchange","audience":"a b"}}`, "oauth.audience must be"},
		{"long audience", `{"id":"h",` + url + `,"oauth":{"client_id":"z","grant":"token_exchange","audience":"` + strings.Repeat("a", MaxOAuthAudienceLen+1) + `"}}`, "oauth.audience must be"},
		{"dpop with token_exchange", `{"id":"h",` + url + `,"oauth":{"client_id":"z","grant":"token_exchange","dpop":false}}`, "oauth.dpop is read with oauth.grant authorization_code and client_credentials only"},
		{"audience of another grant", `{"id":"h",` + url + `,"oauth":{"client_id":"z","audience":"tools"}}`, "read with oauth.grant token_exchange only"},
		{"scope with a space", `{"id":"h",` + url + `,"oauth":{"scopes":["a b"]}}`, `oauth.scopes: "a b" is not a scope`},
		{"empty scope", `{"id":"h",` + url + `,"oauth":{"scopes":[""]}}`, `oauth.scopes: "" is not a scope`},
		{"too many scopes", `{"id":"h",` + url + `,"oauth":{"scopes":[` + many + `]}}`, "at most 32"},
		{"long scope", `{"id":"h",` + url + `,"oauth":{"scopes":["` + strings.Repeat("s", MaxOAuthScopeLen+1) + `"]}}`, "is not a scope"},
		{"client id with a space", `{"id":"h",` + url + `,"oauth":{"client_id":"a b"}}`, "oauth.client_id must be"},
		{"long client id", `{"id":"h",` + url + `,"oauth":{"client_id":"` + strings.Repeat("c", MaxOAuthClientIDLen+1) + `"}}`, "oauth.client_id must be"},
		{"issuer over plain http", `{"id":"h",` + url + `,"oauth":{"authorization_server":"http://login.example.com"}}`, "oauth.authorization_server (the issuer URL"},
		{"issuer with a query", `{"id":"h",` + url + `,"oauth":{"authorization_server":"https://login.example.com/?a=b"}}`, "oauth.authorization_server must not have a query"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse(c.body, nil)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v; want ErrInvalid naming %q", err, c.want)
			}
		})
	}
}

// TestUpsertToStdioDropsOAuth: moving a server to stdio drops its stored oauth block, as
// moving it off stdio drops the stdio-only fields; an upsert that keeps it on streamable-http
// without naming oauth keeps it (a Zest field).
func TestUpsertToStdioDropsOAuth(t *testing.T) {
	stored := &mcpgatewayv1.ServerConfig{Id: "h", Transport: TransportHTTP, Url: "https://tools.example/mcp",
		Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "z"}}
	out, err := Upsert(stored, &mcpgatewayv1.ServerConfig{Id: "h", Command: "node"}, nil)
	if err != nil || out.GetOauth() != nil {
		t.Fatalf("moved to stdio: %v, %v; want oauth dropped", out, err)
	}
	if _, err := Parse(out, nil); err != nil {
		t.Fatal(err)
	}
	out, err = Upsert(stored, &mcpgatewayv1.ServerConfig{Id: "h", Url: "https://tools.example/v2/mcp"}, nil)
	if err != nil || out.GetOauth().GetClientId() != "z" {
		t.Fatalf("kept on http: %v, %v; want oauth kept", out, err)
	}
}
