package host

import (
	"os"
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/services/toolhost/stdio"
)

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		want string // substring of the error; empty: valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"env allow", func(c *Config) { c.EnvAllow = "NODE_*,PYTHONPATH" }, ""},
		{"env allow names a key", func(c *Config) { c.EnvAllow = "PYTHONPATH,LEMONADE_ADMIN_API_KEY" },
			"toolhost-env-allow (ZEST_TOOLHOST_ENV_ALLOW): LEMONADE_ADMIN_API_KEY is reserved for Zest's own services"},
		{"env allow covers ZEST_", func(c *Config) { c.EnvAllow = "Z*" }, "Z* would match ZEST* variables"},
		{"sandbox on", func(c *Config) { c.Sandbox, c.SandboxUID = "on", "1000:1000" }, ""},
		{"sandbox mode unknown", func(c *Config) { c.Sandbox = "yes" }, `toolhost-sandbox (ZEST_TOOLHOST_SANDBOX) "yes": want off`},
		{"sandbox uid root", func(c *Config) { c.SandboxUID = "0" }, `toolhost-sandbox-uid (ZEST_TOOLHOST_SANDBOX_UID) "0": want a uid above 0 (not root)`},
		{"server uid by default nobody", func(c *Config) {
			if c.ServerUID != "65534" {
				c.ServerUID = "wrong default " + c.ServerUID
			}
		}, ""},
		{"server uid and gid", func(c *Config) { c.ServerUID = "1000:1000" }, ""},
		{"server uid root, the operator's choice", func(c *Config) { c.ServerUID = "0" }, ""},
		{"server uid not a number", func(c *Config) { c.ServerUID = "nobody" }, `toolhost-server-uid (ZEST_TOOLHOST_SERVER_UID) "nobody": want a uid[:gid] such as 65534 (nobody), or 0 to run servers as root`},
		{"server gid root", func(c *Config) { c.ServerUID = "1000:0" }, `toolhost-server-uid (ZEST_TOOLHOST_SERVER_UID) "1000:0"`},
		{"line limit at the gRPC limit", func(c *Config) { c.MaxLineBytes = 39 << 20 }, ""},
		{"line limit beyond the gRPC limit", func(c *Config) { c.MaxLineBytes = 39<<20 + 1 },
			"toolhost-max-line-bytes 40894465: want 0 (follow grpc-max-message-bytes) or 1024 to 40894464 (grpc-max-message-bytes 41943040 − 1 MiB)"},
		{"line limit beyond a lowered gRPC limit", func(c *Config) { c.GRPCMaxMessageBytes = 8 << 20; c.MaxLineBytes = 8 << 20 }, "1024 to 7340032"},
		{"default line limit follows a lowered gRPC limit", func(c *Config) { c.GRPCMaxMessageBytes = 8 << 20 }, ""},
		{"line limit too small", func(c *Config) { c.MaxLineBytes = 100 }, "toolhost-max-line-bytes 100"},
		{"negative line limit", func(c *Config) { c.MaxLineBytes = -1 }, "toolhost-max-line-bytes -1"},
		{"stdin queue too small", func(c *Config) { c.MaxStdinQueueBytes = 1000 }, "toolhost-max-stdin-queue-bytes 1000: want at least 65536"},
		{"no relays", func(c *Config) { c.MaxRelays = 0 }, "toolhost-max-relays 0: want at least 1"},
		{"name", func(c *Config) { c.Name = "th-1.zone_a" }, ""},
		{"empty name", func(c *Config) { c.Name = "" }, `toolhost-name (ZEST_TOOLHOST_NAME) "": want letters, digits`},
		{"name with a slash", func(c *Config) { c.Name = "a/b" }, `toolhost-name (ZEST_TOOLHOST_NAME) "a/b"`},
		{"name too long", func(c *Config) { c.Name = strings.Repeat("a", 254) }, "1 to 253 of them"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestDefaultNameIsTheHostName(t *testing.T) {
	h, err := os.Hostname()
	if err != nil || h == "" {
		t.Skip("no host name")
	}
	if got := DefaultConfig().Name; got != h {
		t.Fatalf("default name %q, want the host name %q", got, h)
	}
}

func TestLineLimitFollowsTheGRPCLimit(t *testing.T) {
	c := DefaultConfig()
	if got, want := c.LineLimit(), grpcdial.DefaultMaxMessageBytes-grpcdial.MessageOverhead; got != want || got != 39<<20 {
		t.Fatalf("default line limit %d, want %d (39 MiB)", got, want)
	}
	if stdio.DefaultMaxLineBytes != c.LineLimit() {
		t.Fatalf("stdio's default %d differs from the tool host's %d", stdio.DefaultMaxLineBytes, c.LineLimit())
	}
	c.GRPCMaxMessageBytes = 100 << 20
	if c.LineLimit() != 99<<20 {
		t.Fatalf("line limit %d with a 100 MiB gRPC limit, want 99 MiB", c.LineLimit())
	}
	c.MaxLineBytes = 4096
	if c.LineLimit() != 4096 {
		t.Fatalf("an explicit line limit: %d", c.LineLimit())
	}
}
