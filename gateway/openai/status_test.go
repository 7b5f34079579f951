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
// OpenAI routes (chat, models, media: writeStatus) with the one table's status (httpstatus), in OpenAI's
// shape: api_error for a failure, authentication_error for a 401, requests for a 429 (with
// Retry-After), invalid_request_error for another refusal; a call its client cancelled is not
// answered.
func TestErrorsAnswerTheTable(t *testing.T) {
	for name, write := range map[string]func(http.ResponseWriter, error){
		"writeStatus": writeStatus, "writeModelStatus": writeModelStatus,
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

// TestWriteErrorIsOpenAIs: the answers the edge gives in these routes' place are OpenAI's: a
// key refused is authentication_error with code invalid_api_key, a throttled caller OpenAI's
// rate-limit error, anything else invalid_request_error.
func TestWriteErrorIsOpenAIs(t *testing.T) {
	for code, want := range map[int][2]string{
		http.StatusUnauthorized:    {"authentication_error", "invalid_api_key"},
		http.StatusTooManyRequests: {"requests", "rate_limit_exceeded"},
		http.StatusNotFound:        {"invalid_request_error", ""},
	} {
		w := httptest.NewRecorder()
		WriteError(w, code, "refused")
		var body struct {
			Error struct {
				Type, Message string
				Code          *string
			} `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != code || body.Error.Type != want[0] || body.Error.Message != "refused" ||
			(want[1] == "") != (body.Error.Code == nil) || (body.Error.Code != nil && *body.Error.Code != want[1]) {
			t.Errorf("%d: %d %s", code, w.Code, w.Body)
		}
	}
}
