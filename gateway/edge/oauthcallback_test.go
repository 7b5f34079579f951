package edge

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc"
)

// finishRecorder is an UpstreamOAuthServiceClient that keeps the FinishSignIn request.
type finishRecorder struct {
	mcpgatewayv1.UpstreamOAuthServiceClient
	got *mcpgatewayv1.FinishSignInRequest
}

func (f *finishRecorder) FinishSignIn(_ context.Context, req *mcpgatewayv1.FinishSignInRequest, _ ...grpc.CallOption) (*mcpgatewayv1.FinishSignInResponse, error) {
	f.got = req
	return &mcpgatewayv1.FinishSignInResponse{Id: "up", OauthState: &mcpgatewayv1.UpstreamOAuthState{Status: "signed_in"}}, nil
}

// TestOAuthCallbackRelaysIss: the callback's iss (RFC 9207) reaches mcpgateway as sent, an
// empty one as present and a missing one as absent — it did not reach it at all, so a response
// of another issuer could not be refused.
func TestOAuthCallbackRelaysIss(t *testing.T) {
	for query, want := range map[string]*string{
		"state=s&code=c":                         nil,
		"state=s&code=c&iss=":                    new(string),
		"state=s&code=c&iss=https%3A%2F%2Fas%2F": func() *string { v := "https://as/"; return &v }(),
	} {
		rec := &finishRecorder{}
		w := httptest.NewRecorder()
		oauthCallback{client: rec, log: slog.New(slog.DiscardHandler)}.ServeHTTP(w, httptest.NewRequest("GET", oauthCallbackPath+"?"+query, nil))
		if w.Code != 200 || rec.got.GetState() != "s" || rec.got.GetCode() != "c" {
			t.Fatalf("%s: %d, request %v", query, w.Code, rec.got)
		}
		if (want == nil) != (rec.got.Iss == nil) || (want != nil && *want != rec.got.GetIss()) {
			t.Errorf("%s: iss %q (present %v), want present %v", query, rec.got.GetIss(), rec.got.Iss != nil, want != nil)
		}
	}
}
