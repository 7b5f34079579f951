// Package httpstatus is the one table from a gRPC status code to the HTTP status the edge
// answers it with, on every route family: the admin routes (Lemonade's admin error shape), the
// OpenAI routes (OpenAI's shape) and /mcp (JSON-RPC). Each family writes the status in its own
// shape, and may say more than the code does from the status's details or its route (a tool
// call the server's filters refused is 400, an MCP server that failed behind a connect is
// 502), but never maps a code another way: each family's tests check every code against
// this table.
//
// The table is google.rpc.Code's documented mapping, as grpc-gateway's runtime applies it.
package httpstatus

import (
	"net/http"
	"strconv"
	"time"

	"github.com/zestmcp/zest/lib/ratelimit"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ClientClosedRequest is the status of a call its client cancelled (nginx's 499): nobody
// reads it, but a log does.
const ClientClosedRequest = 499

// table maps every gRPC code; a code outside it is 500.
var table = map[codes.Code]int{
	codes.OK:                 http.StatusOK,
	codes.Canceled:           ClientClosedRequest,
	codes.Unknown:            http.StatusInternalServerError,
	codes.InvalidArgument:    http.StatusBadRequest,
	codes.DeadlineExceeded:   http.StatusGatewayTimeout,
	codes.NotFound:           http.StatusNotFound,
	codes.AlreadyExists:      http.StatusConflict,
	codes.PermissionDenied:   http.StatusForbidden,
	codes.ResourceExhausted:  http.StatusTooManyRequests,
	codes.FailedPrecondition: http.StatusBadRequest,
	codes.Aborted:            http.StatusConflict,
	codes.OutOfRange:         http.StatusBadRequest,
	codes.Unimplemented:      http.StatusNotImplemented,
	codes.Internal:           http.StatusInternalServerError,
	codes.Unavailable:        http.StatusServiceUnavailable,
	codes.DataLoss:           http.StatusInternalServerError,
	codes.Unauthenticated:    http.StatusUnauthorized,
}

// FromCode is the HTTP status of a gRPC code.
func FromCode(c codes.Code) int {
	if s, ok := table[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// SetHeaders sets the headers a status's answer carries whatever its shape: a 429
// (ResourceExhausted) says when to try again (Retry-After, from the status's RetryInfo, at
// least a second).
func SetHeaders(h http.Header, st *status.Status) {
	if st.Code() == codes.ResourceExhausted {
		h.Set("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(RetryDelay(st))))
	}
}

// RetryDelay is the wait a status's RetryInfo asks for (0 without one).
func RetryDelay(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// BadField is the request field an InvalidArgument's BadRequest details name first, or "".
func BadField(st *status.Status) string {
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	return ""
}
