package host

import (
	"strings"
	"testing"
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
