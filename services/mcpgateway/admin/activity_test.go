package admin

import (
	"regexp"
	"testing"

	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/mcptest"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/activity"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// CallTool records each call it makes (who, server, tool, outcome; the arguments only with
// details on), and ListActivity answers them newest first, after and limit applied.
func TestCallToolActivity(t *testing.T) {
	for _, details := range []bool{false, true} {
		u := mcptest.Start(t, mcptest.Options{})
		calls, _ := activity.New(4, details)
		s := newRecordingService(t, calls)
		ctx := activity.NewCallers(keyauth.Keys{Admin: "admin-key-for-activity"}).Context(
			metadata.NewIncomingContext(t.Context(), metadata.Pairs("authorization", "Bearer admin-key-for-activity")))
		in := &mcpgatewayv1.ServerConfig{Id: "echo", Transport: "http", Url: u.URL}
		if _, err := s.UpsertServer(ctx, &mcpgatewayv1.UpsertServerRequest{Server: in}); err != nil {
			t.Fatal(err)
		}
		args, _ := structpb.NewStruct(map[string]any{"text": "hi"})
		if _, err := s.CallTool(ctx, &mcpgatewayv1.CallToolRequest{Id: "echo", Name: "echo", Arguments: args}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CallTool(ctx, &mcpgatewayv1.CallToolRequest{Id: "echo", Name: "nope"}); err == nil {
			t.Fatal("an unknown tool answered")
		}
		r, err := s.ListActivity(ctx, &mcpgatewayv1.ListActivityRequest{})
		if err != nil || len(r.GetCalls()) != 2 || r.GetLatest() != 2 || r.GetDetails() != details || r.GetSize() != 4 {
			t.Fatalf("details %v: %v %v", details, r, err)
		}
		failed, ok := r.GetCalls()[0], r.GetCalls()[1]
		if ok.GetId() != 1 || ok.GetPath() != "admin" || ok.GetServerId() != "echo" || ok.GetTool() != "echo" || ok.GetOutcome() != "ok" ||
			ok.GetWho() != activity.Who("admin-key-for-activity") || ok.GetError() != "" || ok.GetChatName() != "" ||
			!regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(ok.GetTime()) {
			t.Errorf("the call: %v", ok)
		}
		if failed.GetId() != 2 || failed.GetOutcome() != "error" || failed.GetError() != "Unknown tool: nope" {
			t.Errorf("the failed call: %v", failed)
		}
		if wantArgs := map[bool]string{false: "", true: `{"text":"hi"}`}[details]; ok.GetArguments() != wantArgs ||
			(ok.GetResult() == "") == details || ok.GetArgumentsTruncated() || ok.GetResultTruncated() {
			t.Errorf("details %v: arguments %q, result %q", details, ok.GetArguments(), ok.GetResult())
		}
		if r, _ := s.ListActivity(ctx, &mcpgatewayv1.ListActivityRequest{After: 1}); len(r.GetCalls()) != 1 || r.GetCalls()[0].GetId() != 2 {
			t.Errorf("after 1: %v", r)
		}
		if r, _ := s.ListActivity(ctx, &mcpgatewayv1.ListActivityRequest{Limit: 1}); len(r.GetCalls()) != 1 || r.GetCalls()[0].GetId() != 2 {
			t.Errorf("limit 1: %v", r)
		}
		if r, _ := s.ListActivity(ctx, &mcpgatewayv1.ListActivityRequest{After: 2}); len(r.GetCalls()) != 0 || r.GetLatest() != 2 {
			t.Errorf("after 2: %v", r)
		}
	}
}

func TestListActivityLimit(t *testing.T) {
	s := newService(t)
	for _, limit := range []int32{-1, activity.MaxSize + 1} {
		_, err := s.ListActivity(t.Context(), &mcpgatewayv1.ListActivityRequest{Limit: limit})
		if status.Code(err) != codes.InvalidArgument || !regexp.MustCompile(`limit .* from 1 to 10000`).MatchString(err.Error()) {
			t.Errorf("limit %d: %v", limit, err)
		}
	}
	// Without a ring (a service built without one) the answer is empty, not an error.
	if r, err := s.ListActivity(t.Context(), &mcpgatewayv1.ListActivityRequest{Limit: activity.MaxSize}); err != nil || len(r.GetCalls()) != 0 {
		t.Fatalf("%v %v", r, err)
	}
}
