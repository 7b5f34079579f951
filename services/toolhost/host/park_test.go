package host

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// recvRequestThenEnd reads a parked call's stream: one ServerRequest with a call id, then the
// end of the stream.
// resumeItems reads a Resume stream as the CallStream items it carries.
type resumeItems struct {
	stream toolhostv1.ToolHostService_ResumeClient
}

func (r resumeItems) Recv() (*toolhostv1.CallStreamResponse, error) {
	m, err := r.stream.Recv()
	return m.GetItem(), err
}

func recvRequestThenEnd(t *testing.T, stream interface {
	Recv() (*toolhostv1.CallStreamResponse, error)
}) *toolhostv1.ServerRequest {
	t.Helper()
	item, err := stream.Recv()
	if err != nil || item.GetRequest() == nil || item.GetRequest().GetCallId() == "" {
		t.Fatalf("want a request with a call id: %v, %v", item, err)
	}
	if more, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the request the stream must end: %v, %v", more, err)
	}
	return item.GetRequest()
}

func answer(relayID, text string) *toolhostv1.AnswerRequest {
	return &toolhostv1.AnswerRequest{RelayId: relayID, Answer: &toolhostv1.AnswerRequest_Result{
		Result: []byte(`{"role":"assistant","content":{"type":"text","text":"` + text + `"}}`)}}
}

// TestParkedCallResumes: with park_ms, a call's stream ends after the child's request, the
// call waits parked, and Resume (with the answer) streams the rest: the child's next request,
// then, resumed again, the answer. A call that has answered is no longer resumable.
func TestParkedCallResumes(t *testing.T) {
	c := startHost(t)
	startFixture(t, c)
	stream, err := c.CallStream(t.Context(), &toolhostv1.CallStreamRequest{Call: &toolhostv1.CallRequest{
		Id: "fx", Method: "tools/call", Params: json.RawMessage(`{"name":"ask","arguments":{"method":"sampling/createMessage","n":2}}`),
		Relays: &toolhostv1.Relays{Sampling: true}, ParkMs: 60000}})
	if err != nil {
		t.Fatal(err)
	}
	first := recvRequestThenEnd(t, stream)
	resumed, err := c.Resume(t.Context(), &toolhostv1.ResumeRequest{CallId: first.GetCallId(), Answers: []*toolhostv1.AnswerRequest{answer(first.GetRelayId(), "one")}})
	if err != nil {
		t.Fatal(err)
	}
	second := recvRequestThenEnd(t, resumeItems{resumed})
	if second.GetCallId() != first.GetCallId() || second.GetRelayId() == first.GetRelayId() {
		t.Fatalf("second request %v after %v", second, first)
	}
	resumed, err = c.Resume(t.Context(), &toolhostv1.ResumeRequest{CallId: first.GetCallId(), Answers: []*toolhostv1.AnswerRequest{answer(second.GetRelayId(), "two")}})
	if err != nil {
		t.Fatal(err)
	}
	item, err := resumed.Recv()
	if res := string(item.GetItem().GetAnswer().GetResult()); err != nil || !strings.Contains(res, "one") || !strings.Contains(res, "two") {
		t.Fatalf("the call's answer: %v, %v", item, err)
	}
	if _, err := resumed.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the answer: %v", err)
	}
	again, err := c.Resume(t.Context(), &toolhostv1.ResumeRequest{CallId: first.GetCallId()})
	if err == nil {
		_, err = again.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Fatalf("resuming a call that answered: %v, want NotFound", err)
	}
}

// TestParkedCallExpires: a parked call nobody resumes within park_ms is cancelled: Resume is
// NotFound, and its request's relay id is spent (the child was answered with an error).
func TestParkedCallExpires(t *testing.T) {
	h, c := startHostAnd(t)
	startFixture(t, c)
	stream, err := c.CallStream(t.Context(), &toolhostv1.CallStreamRequest{Call: &toolhostv1.CallRequest{
		Id: "fx", Method: "tools/call", Params: json.RawMessage(`{"name":"ask","arguments":{"method":"elicitation/create"}}`),
		Relays: &toolhostv1.Relays{Elicitation: true}, ParkMs: 50}})
	if err != nil {
		t.Fatal(err)
	}
	req := recvRequestThenEnd(t, stream)
	waitfor.True(t, 10*time.Second, "no call parked", func() bool { return h.Parked() == 0 })
	s, err := c.Resume(t.Context(), &toolhostv1.ResumeRequest{CallId: req.GetCallId()})
	if err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Fatalf("resuming an expired parked call: %v, want NotFound", err)
	}
	_, err = c.Answer(t.Context(), answer(req.GetRelayId(), "late"))
	if status.Code(err) != codes.NotFound {
		t.Fatalf("answer to an expired parked call: %v, want NotFound", err)
	}
}

// TestParkableCallEndsWithItsCaller: a call with park_ms whose caller goes away before the
// child asked anything is cancelled at once, as any call whose caller left: nothing is
// parked, and the child is told (notifications/cancelled).
func TestParkableCallEndsWithItsCaller(t *testing.T) {
	h, c := startHostAnd(t)
	startFixture(t, c)
	before, err := call(t.Context(), c, "fx", "cancelled_count", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	stream, err := c.CallStream(ctx, &toolhostv1.CallStreamRequest{Call: &toolhostv1.CallRequest{
		Id: "fx", Method: "tools/call", Params: json.RawMessage(`{"name":"hang","arguments":{}}`),
		Relays: &toolhostv1.Relays{Sampling: true}, ParkMs: 60000}})
	if err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, 10*time.Second, "1 call parked", func() bool { return h.Parked() == 1 })
	cancel()
	if _, err := stream.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("the cancelled stream: %v", err)
	}
	waitfor.True(t, 10*time.Second, "no call parked", func() bool { return h.Parked() == 0 })
	waitfor.True(t, 10*time.Second, "the child counted the cancellation", func() bool {
		after, err := call(t.Context(), c, "fx", "cancelled_count", nil)
		return err == nil && text(after) != text(before)
	})
}
