package serverconfig

import (
	"fmt"

	"github.com/zestmcp/zest/lib/sandboxspec"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"google.golang.org/protobuf/proto"
)

// parseSandbox checks a server's sandbox (docs/operator/untrusted-tools.md) with the tool host's own
// rules and returns it as stored. A sandbox object that leaves enabled out is enabled: giving
// the details says the wish; only enabled false (or "sandbox": false) opts out of the
// operator's default, and a server without any sandbox takes that default.
func parseSandbox(in *mcpgatewayv1.Sandbox, transport string) (*mcpgatewayv1.Sandbox, error) {
	if in == nil {
		return nil, nil
	}
	if transport != TransportStdio {
		return nil, invalid("sandbox is a stdio field: the tool host sandboxes the processes it starts, and a streamable-http server is not one (remove sandbox, or confine that server where it runs)")
	}
	if err := sandboxspec.Check(ToToolHost(in)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	out := proto.Clone(in).(*mcpgatewayv1.Sandbox)
	if out.Enabled == nil {
		out.Enabled = proto.Bool(true)
	}
	return out, nil
}

// ToToolHost is a stored sandbox as the tool host's ServerSpec carries it (nil stays nil:
// the tool host's default applies).
func ToToolHost(in *mcpgatewayv1.Sandbox) *toolhostv1.Sandbox {
	if in == nil {
		return nil
	}
	return &toolhostv1.Sandbox{
		Enabled: in.Enabled, Network: in.Network, AllowHosts: in.GetAllowHosts(),
		WritablePaths: in.GetWritablePaths(), ReadablePaths: in.GetReadablePaths(),
		MemoryBytes: in.MemoryBytes, MaxPids: in.MaxPids, CpuSeconds: in.CpuSeconds, OpenFiles: in.OpenFiles,
	}
}
