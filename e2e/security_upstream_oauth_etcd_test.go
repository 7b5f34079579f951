package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/e2e/internal/oauthserver"
	"github.com/zestmcp/zest/lib/etcdtest"
	"github.com/zestmcp/zest/lib/waitfor"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestUpstreamOAuthTokensOnEtcd: two mcpgateways on one etcd registry, with the same secret
// key. A server signed in through one is called through the other with the tokens the first
// stored (no new sign-in, no refresh); once the upstream refuses the token as expired, the
// second refreshes it, and the first then calls with the refreshed token it reads from etcd
// rather than refreshing again. What etcd holds under oauth_tokens/ is ciphertext: no token,
// nor a field name of the record, in the raw values.
func TestUpstreamOAuthTokensOnEtcd(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	as := oauthserver.Start(t, "mcp")
	up := startOAuthUpstream(t, as.Issuer)
	keyFile := filepath.Join(t.TempDir(), "secret.key")
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)), 0o600); err != nil {
		t.Fatal(err)
	}
	const prefix = "/e2e-oauth/"
	r := startReplicas(t, "LEMONADE_ADMIN_API_KEY="+adminKey, "ZEST_SECRET_KEY_FILE="+keyFile,
		"ZEST_REGISTRY=etcd://"+strings.Join(etcd.Endpoints(), ",")+prefix)
	a, b := &Suite{URL: r.urls[0], t: t}, &Suite{URL: r.urls[1], t: t}
	call := func(s *Suite) Response {
		return admin(t, s, "POST", "/servers/tracker/tools/call", `{"name":"hello","arguments":{}}`)
	}

	registerServer(t, a, map[string]any{"id": "tracker", "url": up.URL,
		"oauth": map[string]any{"client_id": oauthserver.ZestClientID, "scopes": []string{"mcp", "offline_access"}}})
	res := admin(t, a, "POST", "/servers/tracker/sign-in", jsonBody(t, map[string]string{"redirect_uri": a.URL + "/internal/mcp/oauth/callback"}))
	authURL, _ := res.JSON(t)["authorization_url"].(string)
	if res.Status != 200 || authURL == "" {
		t.Fatalf("sign-in through A: %d %s", res.Status, res.Body)
	}
	resp, err := http.Get(authURL) // the browser, back to A's callback
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "Zest is signed in to tracker") {
		t.Fatalf("callback: %d %s", resp.StatusCode, page)
	}

	// B: A's tokens, read from etcd.
	waitForCall := func(s *Suite, name string) {
		t.Helper()
		var last Response
		if _, err := waitfor.Poll(10*time.Second, func() error {
			if last = call(s); last.Status != 200 || !strings.Contains(string(last.Body), "hello from the protected upstream") {
				return fmt.Errorf("%d", last.Status)
			}
			return nil
		}); err != nil {
			t.Fatalf("a call through %s: %d %s", name, last.Status, last.Body)
		}
	}
	waitForCall(b, "B") // B follows the registry's watch for the server
	if n, got := as.Refreshed(), len(up.tokens()); n != 0 || got != 1 {
		t.Fatalf("B's call: %d refreshes, the upstream saw %d tokens; want 0 and A's one", n, got)
	}

	// Expired: B refreshes; A then uses B's token, and refreshes nothing.
	up.expire()
	waitForCall(b, "B after expiry")
	if n := as.Refreshed(); n != 1 {
		t.Fatalf("B's call after expiry: %d refreshes, want 1", n)
	}
	waitForCall(a, "A after B's refresh")
	if n, got := as.Refreshed(), len(up.tokens()); n != 1 || got != 2 {
		t.Fatalf("A's call after B's refresh: %d refreshes, the upstream saw %d tokens; want 1 and 2", n, got)
	}
	if st, _ := admin(t, a, "GET", "/servers/tracker", "").JSON(t)["server"].(map[string]any)["oauth_state"].(map[string]any); st["status"] != "signed_in" {
		t.Fatalf("A's state: %v", st)
	}

	// What etcd holds is sealed.
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	kv, err := cli.Get(ctx, prefix+"oauth_tokens/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range kv.Kvs {
		if string(e.Key) == prefix+"oauth_tokens/tracker" {
			found = true
		}
		for _, tok := range up.tokens() {
			if strings.Contains(string(e.Value), tok[strings.LastIndex(tok, ".")+1:]) {
				t.Errorf("%s holds an access token in the clear", e.Key)
			}
		}
		for _, field := range []string{"access_token", "refresh_token", as.Issuer} {
			if strings.Contains(string(e.Value), field) {
				t.Errorf("%s holds %q in the clear", e.Key, field)
			}
		}
	}
	if !found {
		t.Fatalf("no %soauth_tokens/tracker among %d keys", prefix, len(kv.Kvs))
	}
}
