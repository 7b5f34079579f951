package openai

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/zestmcp/zest/lib/httpstatus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestErrorsAnswerTheTable: every gRPC code of the inference service is answered on the
// OpenAI routes (chat, models, media) with the one table's status (httpstatus), in OpenAI's
// shape: api_error for a failure, authentication_error for a 401, requests for a 429 (with
// Retry-After), invalid_request_error for another refusal; a call its client cancelled is not
// answered.
func TestErrorsAnswerTheTable(t *testing.T) {
	for name, write := range map[string]func(http.ResponseWriter, error){
		"writeStatus": writeStatus, "writeModelStatus": writeModelStatus, "writeMediaStatus": writeMediaStatus,
	} {
		for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
			w := httptest.NewRecorder()
			write(w, status.Error(c, "refused"))
			if c == codes.Canceled {
				if w.Body.Len() != 0 {
					t.Errorf("%s: a cancelled call answered %d %s", name, w.Code, w.Body)
				}
				continue
			}
			var body struct {
				Error struct {
					Type string `json:"type"`
				} `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("%s %v: not OpenAI's shape: %s", name, c, w.Body)
			}
			want := httpstatus.FromCode(c)
			typ := "invalid_request_error"
			switch {
			case want >= 500:
				typ = "api_error"
			case want == http.StatusUnauthorized:
				typ = "authentication_error"
			case want == http.StatusTooManyRequests:
				typ = "requests"
				if w.Header().Get("Retry-After") == "" {
					t.Errorf("%s %v: a 429 without Retry-After", name, c)
				}
			}
			if w.Code != want || body.Error.Type != typ {
				t.Errorf("%s %v: %d %s, want %d %s", name, c, w.Code, body.Error.Type, want, typ)
			}
		}
	}
}
