package upstream

import (
	"context"
	"strings"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Process reports the tool host's view of a stdio server's process, for administrators: its
// state, pid, restarts, last error and stderr tail. A server the tool host has not started
// (or forgot in a restart) is "unknown".
func (m *Manager) Process(ctx context.Context, id string) (*mcpgatewayv1.ProcessState, error) {
	r, err := m.toolhost.GetStatus(ctx, &toolhostv1.GetStatusRequest{Id: id})
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
	}, nil
}
