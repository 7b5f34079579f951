package keyauth

import (
	"context"
	"errors"
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
