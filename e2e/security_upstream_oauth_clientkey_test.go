package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeClientKey writes a new P-256 private key (PKCS #8 PEM, 0600) to a file of a temporary
// directory, as an operator gives mcpgateway a client's key (oauth.client_key_file).
func writeClientKey(t *testing.T) (path string, der []byte, key *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if der, err = x509.MarshalPKCS8PrivateKey(key); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "client.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, der, key
}

// TestUpstreamOAuthClientKey: a server's oauth.client_key_file (private_key_jwt) is read by
// mcpgateway at registration through the admin API — a file that is missing or holds no key,
// and a key beside client_secret, are refused with 400 naming the field and nothing is
// registered; a key is taken, its path stored and shown, and the key itself is in no answer
// of the admin API, no log and no file of Zest's data directory (the registry).
// (auth/client-credentials-jwt of TestUpstreamOAuthConformance signs with such a key.)
func TestUpstreamOAuthClientKey(t *testing.T) {
	s := startSuite(t, "LEMONADE_ADMIN_API_KEY="+adminKey)
	keyFile, der, key := writeClientKey(t)
	dir := filepath.Dir(keyFile)
	notKey := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notKey, []byte("just notes"), 0o600); err != nil {
		t.Fatal(err)
	}
	server := func(o map[string]any) string {
		return jsonBody(t, map[string]any{"id": "m2m", "transport": "streamable-http", "url": "https://tools.example/mcp", "enabled": false, "oauth": o})
	}
	for _, c := range []struct {
		name string
		o    map[string]any
		want string
	}{
		{"missing", map[string]any{"client_id": "zest", "grant": "client_credentials", "client_key_file": filepath.Join(dir, "none.pem")}, "oauth.client_key_file"},
		{"not a key", map[string]any{"client_id": "zest", "grant": "client_credentials", "client_key_file": notKey}, "holds no PEM private key"},
		{"beside a secret", map[string]any{"client_id": "zest", "client_secret": "${UP_SECRET}", "client_key_file": keyFile}, "oauth.client_secret and oauth.client_key_file both set"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range []Response{admin(t, s, "POST", "/servers", server(c.o)), admin(t, s, "POST", "/servers/test", server(c.o))} {
				if msg := errMessage(t, r); r.Status != http.StatusBadRequest || !strings.Contains(msg, c.want) || !strings.Contains(msg, "oauth.client_key_file") {
					t.Fatalf("%d %s; want 400 naming %q", r.Status, r.Body, c.want)
				}
			}
			if r := admin(t, s, "GET", "/servers/m2m", ""); r.Status != http.StatusNotFound {
				t.Fatalf("a refused server is registered: %d %s", r.Status, r.Body)
			}
		})
	}

	registerServer(t, s, map[string]any{"id": "m2m", "transport": "streamable-http", "url": "https://tools.example/mcp", "enabled": false,
		"oauth": map[string]any{"client_id": "zest", "grant": "client_credentials", "client_key_file": keyFile, "client_key_id": "k1"}})
	r := admin(t, s, "GET", "/servers/m2m", "")
	o, _ := r.JSON(t)["server"].(map[string]any)["oauth"].(map[string]any)
	if r.Status != 200 || o["client_key_file"] != keyFile || o["client_key_id"] != "k1" {
		t.Fatalf("the registered server: %d %s", r.Status, r.Body)
	}
	// A key moved away after registration: a PATCH of the oauth block is refused, one of
	// another field is not (a server whose key is gone can still be renamed or disabled).
	if err := os.Rename(keyFile, keyFile+".moved"); err != nil {
		t.Fatal(err)
	}
	o["client_key_id"] = "k2"
	if r := admin(t, s, "PATCH", "/servers/m2m", jsonBody(t, map[string]any{"oauth": o})); r.Status != http.StatusBadRequest || !strings.Contains(errMessage(t, r), "oauth.client_key_file") {
		t.Fatalf("PATCH of oauth with the key gone: %d %s", r.Status, r.Body)
	}
	if r := admin(t, s, "PATCH", "/servers/m2m", `{"name":"Machine"}`); r.Status != 200 {
		t.Fatalf("PATCH of the name with the key gone: %d %s", r.Status, r.Body)
	}

	// The key's material shows nowhere: the PEM's second line (the key's own bytes, past the
	// header every P-256 key shares), the private scalar in base64 and as a JWK's d.
	d, err := key.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{base64.StdEncoding.EncodeToString(der)[64:128], base64.StdEncoding.EncodeToString(d), base64.RawURLEncoding.EncodeToString(d)}
	seen := []string{string(admin(t, s, "GET", "/servers", "").Body), string(r.Body)}
	for _, name := range []string{"zest-gateway", "zest-mcpgateway"} {
		seen = append(seen, s.Logs(name))
	}
	err = filepath.WalkDir(s.DataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		seen = append(seen, string(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range secrets {
		for i, text := range seen {
			if strings.Contains(text, sec) {
				t.Fatalf("the client's key shows in %d of the admin answers, logs and data files", i)
			}
		}
	}
}
