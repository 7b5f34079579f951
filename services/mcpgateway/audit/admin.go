package audit

import (
	"context"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// adminActions are the AdminService calls that change something, and their action names:
// the registry's writes, and the calls that start, stop or (test) launch a server.
// CallTool is a tool call: activity records it, as every path's.
var adminActions = map[string]string{
	mcpgatewayv1.AdminService_UpsertServer_FullMethodName:     "upsert_server",
	mcpgatewayv1.AdminService_UpdateServer_FullMethodName:     "update_server",
	mcpgatewayv1.AdminService_TestServer_FullMethodName:       "test_server",
	mcpgatewayv1.AdminService_DeleteServer_FullMethodName:     "delete_server",
	mcpgatewayv1.AdminService_ConnectServer_FullMethodName:    "connect_server",
	mcpgatewayv1.AdminService_DisconnectServer_FullMethodName: "disconnect_server",
	mcpgatewayv1.AdminService_RefreshTools_FullMethodName:     "refresh_tools",
	mcpgatewayv1.AdminService_UpsertPreset_FullMethodName:     "upsert_preset",
	mcpgatewayv1.AdminService_DeletePreset_FullMethodName:     "delete_preset",
	mcpgatewayv1.AdminService_ApproveToolCall_FullMethodName:  "approve_tool_call",
	mcpgatewayv1.AdminService_DenyToolCall_FullMethodName:     "deny_tool_call",
	mcpgatewayv1.AdminService_RecordEdgeChange_FullMethodName: "set_edge_settings",
	// Signing Zest in to an upstream by OAuth (oauthclient), and the browser's callback.
	mcpgatewayv1.UpstreamOAuthService_StartSignIn_FullMethodName:  "start_sign_in",
	mcpgatewayv1.UpstreamOAuthService_FinishSignIn_FullMethodName: "finish_sign_in",
	mcpgatewayv1.UpstreamOAuthService_SignOut_FullMethodName:      "sign_out",
}

// UnaryInterceptor records every call of adminActions when it ends: who, the action, its
// target, its outcome and duration, and the fields the handler named with NoteChanged. Other
// methods pass through untouched. A nil *Log gives a pass-through.
func (l *Log) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		action, ok := adminActions[info.FullMethod]
		if !ok || l == nil {
			return handler(ctx, req)
		}
		n := &note{}
		began := time.Now()
		resp, err := handler(context.WithValue(ctx, noteKey{}, n), req)
		target, server := targetOf(req, resp)
		e := adminEntry(ctx, action, target, server, err, time.Since(began), n.changed)
		if n.who != "" {
			e.Who = n.who
		}
		e.UpstreamSubject = n.upstreamSubject
		l.enqueue(e)
		return resp, err
	}
}

type noteKey struct{}

type note struct {
	changed              []string
	who, upstreamSubject string
}

// NoteSignIn tells the audit entry of a finished upstream sign-in (the authorization server's
// callback, which carries no key) who started it — named as WhoOf named them then — and
// whom the upstream's tokens were issued to.
func NoteSignIn(ctx context.Context, who, upstreamSubject string) {
	if n, ok := ctx.Value(noteKey{}).(*note); ok {
		n.who, n.upstreamSubject = who, upstreamSubject
	}
}

// NoteChanged tells the audit entry of the admin call of ctx which fields it changed (none
// when ctx is not an audited call's).
func NoteChanged(ctx context.Context, fields []string) {
	if n, ok := ctx.Value(noteKey{}).(*note); ok {
		n.changed = fields
	}
}

// targetOf is the id an admin call targets, and the server's id when the target is a server
// (the stored config's for an upsert, whose id may be derived).
func targetOf(req, resp any) (target, server string) {
	switch r := req.(type) {
	case *mcpgatewayv1.UpsertServerRequest:
		target = r.GetServer().GetId()
		if out, ok := resp.(*mcpgatewayv1.UpsertServerResponse); ok && out.GetServer().GetId() != "" {
			target = out.GetServer().GetId()
		}
		return target, target
	case *mcpgatewayv1.UpdateServerRequest:
		return r.GetServer().GetId(), r.GetServer().GetId()
	case *mcpgatewayv1.TestServerRequest:
		return r.GetServer().GetId(), r.GetServer().GetId()
	case *mcpgatewayv1.UpsertPresetRequest:
		target = r.GetPreset().GetId()
		if out, ok := resp.(*mcpgatewayv1.UpsertPresetResponse); ok && out.GetPreset().GetId() != "" {
			target = out.GetPreset().GetId()
		}
		return target, ""
	case *mcpgatewayv1.DeletePresetRequest:
		return r.GetId(), ""
	case *mcpgatewayv1.ApproveToolCallRequest: // the approval's id; its server once decided
		out, _ := resp.(*mcpgatewayv1.ApproveToolCallResponse)
		return r.GetId(), out.GetApproval().GetServerId()
	case *mcpgatewayv1.DenyToolCallRequest:
		out, _ := resp.(*mcpgatewayv1.DenyToolCallResponse)
		return r.GetId(), out.GetApproval().GetServerId()
	case *mcpgatewayv1.FinishSignInRequest: // the server signed in to (none when refused)
		out, _ := resp.(*mcpgatewayv1.FinishSignInResponse)
		return out.GetId(), out.GetId()
	case *mcpgatewayv1.RecordEdgeChangeRequest: // the edge, by its address
		return r.GetEdge(), ""
	case interface{ GetId() string }:
		return r.GetId(), r.GetId()
	}
	return "", ""
}

// Changed names the fields (proto names, as the JSON shapes spell them) whose values differ
// between old and new; old nil is an empty message (a creation lists the fields set). Values
// are never read out: a config holds only ${VAR} references to secrets, and the trail keeps
// none of it anyway.
func Changed[M proto.Message](old, new M) []string {
	nm := new.ProtoReflect()
	om := old.ProtoReflect()
	if !om.IsValid() {
		om = nm.Type().Zero()
	}
	var out []string
	fields := nm.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if om.Has(fd) != nm.Has(fd) || !om.Get(fd).Equal(nm.Get(fd)) {
			out = append(out, string(fd.Name()))
		}
	}
	return out
}
