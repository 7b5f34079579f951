package httpstatus

import (
	"net/http"
	"testing"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestTableIsGoogles: every gRPC code has its status, the one google.rpc.Code documents and
// grpc-gateway's runtime applies to the routes it serves; a code beyond them is 500.
func TestTableIsGoogles(t *testing.T) {
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if _, ok := table[c]; !ok {
			t.Errorf("%v has no status", c)
		}
		if got, want := FromCode(c), runtime.HTTPStatusFromCode(c); got != want {
			t.Errorf("%v: %d, grpc-gateway answers %d", c, got, want)
		}
	}
	if got := FromCode(codes.Code(99)); got != http.StatusInternalServerError {
		t.Errorf("an unknown code: %d", got)
	}
}

// TestRetryAfter: a 429 says when to try again, from its RetryInfo (rounded up, at least 1 s);
// other statuses carry no Retry-After.
func TestRetryAfter(t *testing.T) {
	withInfo, _ := status.New(codes.ResourceExhausted, "slow down").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(2500 * time.Millisecond)})
	for _, c := range []struct {
		st   *status.Status
		want string
	}{
		{withInfo, "3"},
		{status.New(codes.ResourceExhausted, "slow down"), "1"},
		{status.New(codes.Unavailable, "down"), ""},
	} {
		h := http.Header{}
		SetHeaders(h, c.st)
		if got := h.Get("Retry-After"); got != c.want {
			t.Errorf("%v: Retry-After %q, want %q", c.st.Code(), got, c.want)
		}
	}
}
