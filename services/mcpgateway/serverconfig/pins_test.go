package serverconfig

import (
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/proto"
)

func TestPinsToolsDefaultsToTrue(t *testing.T) {
	for _, c := range []struct {
		set  *bool
		want bool
	}{{nil, true}, {proto.Bool(true), true}, {proto.Bool(false), false}} {
		if got := PinsTools(&mcpgatewayv1.ServerConfig{PinTools: c.set}); got != c.want {
			t.Errorf("pin_tools %v: PinsTools = %v", c.set, got)
		}
	}
}

func TestSameProgram(t *testing.T) {
	base := func() *mcpgatewayv1.ServerConfig {
		return &mcpgatewayv1.ServerConfig{Id: "s", Transport: "stdio", Command: "node", Args: []string{"a.js"}, WorkingDir: "/srv", Enabled: proto.Bool(true)}
	}
	same := map[string]func(*mcpgatewayv1.ServerConfig){
		"disabled":    func(c *mcpgatewayv1.ServerConfig) { c.Enabled = proto.Bool(false) },
		"renamed":     func(c *mcpgatewayv1.ServerConfig) { c.Name = "S" },
		"env":         func(c *mcpgatewayv1.ServerConfig) { c.Env = map[string]string{"K": "${K}"} },
		"limits":      func(c *mcpgatewayv1.ServerConfig) { c.RateLimit = proto.String("1/s") },
		"not pinning": func(c *mcpgatewayv1.ServerConfig) { c.PinTools = proto.Bool(false) },
	}
	for name, edit := range same {
		c := base()
		edit(c)
		if !SameProgram(base(), c) {
			t.Errorf("%s: not the same program", name)
		}
	}
	other := map[string]func(*mcpgatewayv1.ServerConfig){
		"command":     func(c *mcpgatewayv1.ServerConfig) { c.Command = "python" },
		"args":        func(c *mcpgatewayv1.ServerConfig) { c.Args = []string{"b.js"} },
		"working_dir": func(c *mcpgatewayv1.ServerConfig) { c.WorkingDir = "/other" },
		"url": func(c *mcpgatewayv1.ServerConfig) {
			c.Transport, c.Command, c.Url = "streamable-http", "", "https://x/mcp"
		},
	}
	for name, edit := range other {
		c := base()
		edit(c)
		if SameProgram(base(), c) {
			t.Errorf("%s changed, yet the same program", name)
		}
	}
}
