package upstream

import (
	"context"
	"fmt"
	"strings"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"github.com/zestmcp/zest/services/mcpgateway/toolhosts"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Process reports the view of a stdio server's process of the tool host it runs on (connected
// here, else where its placement puts it), for administrators: its state, pid, restarts, last
// error and stderr tail. A server the tool host has not started (or forgot in a restart) is
// "unknown".
func (m *Manager) Process(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) (*mcpgatewayv1.ProcessState, error) {
	id := cfg.GetId()
	h := toolhosts.Host{}
	if s, _ := m.connected(id); s != nil {
		h = hostOf(s)
	}
	if h.Client == nil {
		var err error
		if h, err = m.hosts.Placement(id, cfg.GetToolHost()); err != nil {
			return nil, fmt.Errorf("%w: %q: %w", ErrUpstream, id, err)
		}
	}
	r, err := h.Client.GetStatus(ctx, &toolhostv1.GetStatusRequest{Id: id})
	if status.Code(err) == codes.NotFound {
		return &mcpgatewayv1.ProcessState{State: "unknown"}, nil
	}
	if err != nil {
		return nil, upstreamErr(id, err)
	}
	st := r.GetStatus()
	return &mcpgatewayv1.ProcessState{
		State:        strings.ToLower(strings.TrimPrefix(st.GetState().String(), "SERVER_STATE_")),
		Pid:          st.GetPid(),
		StartTime:    st.GetStartTime(),
		RestartCount: st.GetRestartCount(),
		LastError:    st.GetLastError(),
		StderrTail:   st.GetStderrTail(),
		Sandbox:      sandboxStatus(st.GetSandbox()),
	}, nil
}

// sandboxStatus is the tool host's account of a child's confinement, for administrators
// (nil: it runs unconfined).
func sandboxStatus(st *toolhostv1.SandboxStatus) *mcpgatewayv1.SandboxStatus {
	if st == nil {
		return nil
	}
	return &mcpgatewayv1.SandboxStatus{Active: st.GetActive(), Missing: st.GetMissing()}
}
