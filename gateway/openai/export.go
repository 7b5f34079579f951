package openai

import "net/http"

// WriteParamError writes OpenAI's error shape as invalid_request_error naming the request
// field param: for the edge's own routes under the four prefixes (gateway/edge/lemond.go).
func WriteParamError(w http.ResponseWriter, code int, param, msg string) {
	writeError(w, code, "invalid_request_error", param, msg)
}

// WriteStatus answers an inference service error as the OpenAI routes do.
func WriteStatus(w http.ResponseWriter, err error) { writeStatus(w, err) }
