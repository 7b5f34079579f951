package keyauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

func TestCheckAdminFailsClosed(t *testing.T) {
	cases := []struct {
		name  string
		keys  Keys
		token string
		want  error
	}{
		{"no keys at all", Keys{}, "", ErrAdminNotConfigured},
		{"no keys, any token", Keys{}, "x", ErrAdminNotConfigured},
		{"admin key, right", Keys{Admin: "adm"}, "adm", nil},
		{"admin key, wrong", Keys{Admin: "adm"}, "nope", ErrInvalidAdminKey},
		{"admin key, api key given", Keys{API: "api", Admin: "adm"}, "api", ErrInvalidAdminKey},
		{"falls back to api key", Keys{API: "api"}, "api", nil},
		{"prefix of key", Keys{Admin: "adm"}, "ad", ErrInvalidAdminKey},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.keys.CheckAdmin(c.token); !errors.Is(err, c.want) {
				t.Fatalf("CheckAdmin(%q) = %v, want %v", c.token, err, c.want)
			}
		})
	}
}

func TestCheckAPI(t *testing.T) {
	cases := []struct {
		name  string
		keys  Keys
		token string
		ok    bool
	}{
		{"open when unset", Keys{}, "", true},
		{"api key", Keys{API: "api"}, "api", true},
		{"admin key accepted too", Keys{API: "api", Admin: "adm"}, "adm", true},
		{"wrong", Keys{API: "api"}, "apx", false},
		{"missing", Keys{API: "api"}, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.keys.CheckAPI(c.token); (err == nil) != c.ok {
				t.Fatalf("CheckAPI(%q) = %v, want ok=%v", c.token, err, c.ok)
			}
		})
	}
}

func TestBearerToken(t *testing.T) {
	for in, want := range map[string]string{"Bearer abc": "abc", "bearer  abc ": "abc", "Basic abc": "", "": "", "Bearer": ""} {
		if got := BearerToken(in); got != want {
			t.Errorf("BearerToken(%q) = %q, want %q", in, got, want)
		}
	}
}

// tapCall runs g's tap for a call of method whose headers carry auth (none when "").
func tapCall(t *testing.T, g Guard, method, auth string) error {
	t.Helper()
	md := metadata.MD{}
	if auth != "" {
		md = metadata.Pairs("authorization", auth)
	}
	_, err := g.Tap(t.Context(), &tap.Info{FullMethodName: method, Header: md})
	return err
}

func TestGuardCodes(t *testing.T) {
	g := Guard{Keys: Keys{API: "api"}, Level: func(m string) Level {
		switch m {
		case "/a.Admin/Do":
			return LevelAdmin
		case "/a.Svc/Do":
			return LevelService
		}
		return LevelAPI
	}}
	call := func(method, auth string) error {
		return tapCall(t, g, method, auth)
	}
	if err := call("/grpc.health.v1.Health/Check", ""); err != nil {
		t.Errorf("health must be exempt: %v", err)
	}
	if got := status.Code(call("/a.Api/Do", "")); got != codes.Unauthenticated {
		t.Errorf("missing api key: code %v", got)
	}
	if err := call("/a.Api/Do", "Bearer api"); err != nil {
		t.Errorf("right api key: %v", err)
	}
	if err := call("/a.Admin/Do", "Bearer api"); err != nil {
		t.Errorf("admin falls back to api key: %v", err)
	}
	g.Keys = Keys{}
	if got := status.Code(call("/a.Admin/Do", "Bearer x")); got != codes.PermissionDenied {
		t.Errorf("admin with no keys: code %v, want PermissionDenied", got)
	}
	if err := call("/a.Api/Do", ""); err != nil {
		t.Errorf("api open when no key: %v", err)
	}
}

// TestServiceLevelFailsClosed: a service method opens with the service key only — never with
// the API or admin key — and is refused to everyone while no service key is configured.
func TestServiceLevelFailsClosed(t *testing.T) {
	cases := []struct {
		name string
		keys Keys
		auth string
		want codes.Code
	}{
		{"no keys at all, no token", Keys{}, "", codes.PermissionDenied},
		{"no keys at all, any token", Keys{}, "Bearer anything", codes.PermissionDenied},
		{"only admin key, admin token", Keys{Admin: "adm"}, "Bearer adm", codes.PermissionDenied},
		{"both keys, api token", Keys{API: "api", Admin: "adm"}, "Bearer api", codes.PermissionDenied},
		{"service key set, api token", Keys{API: "api", Admin: "adm", Service: "svc-0123456789abcdef"}, "Bearer api", codes.Unauthenticated},
		{"service key set, admin token", Keys{API: "api", Admin: "adm", Service: "svc-0123456789abcdef"}, "Bearer adm", codes.Unauthenticated},
		{"service key set, no token", Keys{Service: "svc-0123456789abcdef"}, "", codes.Unauthenticated},
		{"service key set, right token", Keys{Service: "svc-0123456789abcdef"}, "Bearer svc-0123456789abcdef", codes.OK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := Guard{Keys: c.keys, Level: func(string) Level { return LevelService }}
			err := tapCall(t, g, "/zest.toolhost.v1.ToolHostService/EnsureStarted", c.auth)
			if got := status.Code(err); got != c.want {
				t.Fatalf("code %v (%v), want %v", got, err, c.want)
			}
		})
	}
	if err := (Keys{Service: "short"}).CheckServiceKeyStrength(); err == nil {
		t.Fatal("a 5-character service key was accepted")
	}
}

func TestCallerIsAdmin(t *testing.T) {
	with := func(auth string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", auth))
	}
	k := Keys{API: "api-key", Admin: "admin-key"}
	if !k.CallerIsAdmin(with("Bearer admin-key")) || k.CallerIsAdmin(with("Bearer api-key")) || k.CallerIsAdmin(context.Background()) {
		t.Fatal("admin key, API key or no key judged wrong")
	}
	if (Keys{}).CallerIsAdmin(with("Bearer ")) {
		t.Fatal("with no key configured nobody is an administrator")
	}
}

// TestLoadServiceKey: ZEST_SERVICE_KEY_FILE gives the service key from a file only this
// service's user may read; every mistake is refused with the variable and the fix.
func TestLoadServiceKey(t *testing.T) {
	const key = "0123456789abcdef0123456789abcdef"
	dir := t.TempDir()
	file := func(name, content string, mode os.FileMode) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name    string
		keys    Keys
		want    string // the key loaded, when no error
		wantErr string
	}{
		{"no file: the variable's key", Keys{Service: key}, key, ""},
		{"neither", Keys{}, "", ""},
		{"a file of mode 0600, with echo's newline", Keys{ServiceFile: file("ok", key+"\n", 0o600)}, key, ""},
		{"a file of mode 0400", Keys{ServiceFile: file("ro", key, 0o400)}, key, ""},
		{"both set", Keys{Service: key, ServiceFile: file("both", key, 0o600)}, "", "ZEST_SERVICE_KEY and ZEST_SERVICE_KEY_FILE are both set: keep one"},
		{"readable by others", Keys{ServiceFile: file("world", key, 0o644)}, "", "is open to group or others (mode 0644): chmod 600"},
		{"readable by the group", Keys{ServiceFile: file("group", key, 0o640)}, "", "is open to group or others (mode 0640): chmod 600"},
		{"writable by the group", Keys{ServiceFile: file("gw", key, 0o620)}, "", "is open to group or others (mode 0620)"},
		{"missing", Keys{ServiceFile: filepath.Join(dir, "nope")}, "", "ZEST_SERVICE_KEY_FILE: open " + filepath.Join(dir, "nope") + ": no such file"},
		{"a directory", Keys{ServiceFile: dir}, "", "is not a regular file"},
		{"empty", Keys{ServiceFile: file("empty", " \n", 0o600)}, "", "is empty: write the key in it (e.g. openssl rand -hex 32 >"},
		{"two lines", Keys{ServiceFile: file("two", key+"\n"+key+"\n", 0o600)}, "", "holds more than one line"},
		{"at the size limit", Keys{ServiceFile: file("max", strings.Repeat("k", MaxServiceKeyFileBytes), 0o600)}, strings.Repeat("k", MaxServiceKeyFileBytes), ""},
		{"past the size limit", Keys{ServiceFile: file("big", strings.Repeat("k", MaxServiceKeyFileBytes+1), 0o600)}, "", "is 4097 bytes long, more than 4096: it must hold the key alone"},
		{"too short a key in the file", Keys{ServiceFile: file("short", "short\n", 0o600)}, "", "is 5 characters long: use at least 16"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := c.keys
			err := k.LoadServiceKey()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("LoadServiceKey = %v, want an error containing %q", err, c.wantErr)
				}
				if strings.Contains(err.Error(), key) {
					t.Fatalf("the error shows the key: %v", err)
				}
				return
			}
			if err != nil || k.Service != c.want {
				t.Fatalf("LoadServiceKey = %v, key %q, want %q", err, k.Service, c.want)
			}
			if err := k.LoadServiceKey(); err != nil || k.Service != c.want { // a second Validate
				t.Fatalf("loaded again: %v, key %q", err, k.Service)
			}
		})
	}
}

// TestEndpointTokens: on a LevelEndpoint method, a token that is no key but looks like a JWT
// passes Tap (which only compares keys) and is verified by the interceptors before the
// handler runs: refused, the call fails Unauthenticated with the verifier's reason; accepted,
// the handler runs. Other levels, and a guard without Token, refuse it in Tap.
func TestEndpointTokens(t *testing.T) {
	verified := 0
	g := Guard{Keys: Keys{API: "api"}, Level: func(m string) Level {
		if m == "/a.Http/Exchange" {
			return LevelEndpoint
		}
		return LevelAPI
	}, Token: func(_ context.Context, token string) (TokenCaller, error) {
		verified++
		switch token {
		case "good.jwt.token":
			return TokenCaller{Subject: "alice"}, nil
		case "admin.jwt.token":
			return TokenCaller{Subject: "root", Admin: true}, nil
		}
		return TokenCaller{}, errors.New("Invalid access token: its audience is not this endpoint's")
	}}
	unary, _ := g.Interceptors()
	var admin bool
	var subject, callerToken string
	run := func(method, auth string) (handled bool, err error) {
		md := metadata.MD{}
		if auth != "" {
			md = metadata.Pairs("authorization", auth)
		}
		ctx, err := g.Tap(t.Context(), &tap.Info{FullMethodName: method, Header: md})
		if err != nil {
			return false, err
		}
		_, err = unary(ctx, nil, nil, func(ctx context.Context, _ any) (any, error) {
			handled, admin = true, g.Keys.CallerIsAdmin(ctx)
			c, _ := TokenCallerOf(ctx)
			subject = c.Subject
			tok, ok := CallerTokenOf(ctx)
			callerToken = tok.Reveal()
			if !ok {
				callerToken = "(none)"
			}
			return nil, nil
		})
		return handled, err
	}
	if ok, err := run("/a.Http/Exchange", "Bearer good.jwt.token"); !ok || err != nil || admin || subject != "alice" {
		t.Errorf("a good token: handled %v, %v, admin %v, subject %q", ok, err, admin, subject)
	}
	if callerToken != "good.jwt.token" {
		t.Errorf("the caller's token in its context: %q", callerToken)
	}
	if ok, err := run("/a.Http/Exchange", "Bearer admin.jwt.token"); !ok || err != nil || !admin {
		t.Errorf("an administrator's token: handled %v, %v, admin %v", ok, err, admin)
	}
	if ok, err := run("/a.Http/Exchange", "Bearer bad.jwt.token"); ok || status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "audience") {
		t.Errorf("a bad token: handled %v, %v", ok, err)
	}
	if ok, err := run("/a.Http/Exchange", "Bearer api"); !ok || err != nil || callerToken != "(none)" {
		t.Errorf("the API key: handled %v, %v, caller token %q", ok, err, callerToken)
	}
	n := verified
	if _, err := run("/a.Http/Exchange", "Bearer wrong-key"); status.Code(err) != codes.Unauthenticated || verified != n {
		t.Errorf("a wrong key (no JWT): %v, verified %d times", err, verified-n)
	}
	if _, err := run("/a.Api/Do", "Bearer good.jwt.token"); status.Code(err) != codes.Unauthenticated {
		t.Errorf("a token on an API method: %v", err)
	}
	g.Token = nil
	if err := tapCall(t, g, "/a.Http/Exchange", "Bearer good.jwt.token"); status.Code(err) != codes.Unauthenticated {
		t.Errorf("a token with no verifier: %v", err)
	}
}

// TestPublicLevel: a LevelPublic method answers without a key whatever keys are set; the
// others still take theirs.
func TestPublicLevel(t *testing.T) {
	g := Guard{Keys: Keys{API: "api", Admin: "adm", Service: "svc-0123456789abcdef"}, Level: func(m string) Level {
		if m == "/p.S/Public" {
			return LevelPublic
		}
		return LevelAdmin
	}}
	if err := tapCall(t, g, "/p.S/Public", ""); err != nil {
		t.Fatalf("public without a key: %v", err)
	}
	if err := tapCall(t, g, "/p.S/Other", ""); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("admin without a key: %v", err)
	}
}

// TestCallerTokenHidden: a caller's token formatted, logged or marshalled shows nothing of it.
func TestCallerTokenHidden(t *testing.T) {
	tok := CallerToken{token: "eyJhbGciOi.secret-payload.signature"}
	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "token", tok)
	js, _ := json.Marshal(map[string]any{"t": tok})
	for _, out := range []string{fmt.Sprint(tok), fmt.Sprintf("%v %+v %#v %s", tok, tok, tok, tok), logged.String(), string(js)} {
		if strings.Contains(out, "secret-payload") || strings.Contains(out, "signature") {
			t.Errorf("the token shows in %q", out)
		}
	}
	if tok.Reveal() != "eyJhbGciOi.secret-payload.signature" {
		t.Fatal("Reveal")
	}
}
