package mcpserve

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/mcpbatch"
	"github.com/zestmcp/zest/services/mcpgateway/jsonrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Batch answers a JSON-RPC batch body as every endpoint of this transport does (/mcp,
// /mcp/servers/{id}, /mcp/presets/{id}): accepted only in a session that negotiated
// 2025-03-26, at most mcpbatch.MaxMessages items, each item checked as a message of its own,
// initialize refused inside it. session checks the request's session and returns the version
// it negotiated; answer answers one valid item (nil for a notification or a response), or
// fails the whole exchange. The result is the final message (nil: nothing to answer) and
// whether it answers a batch that could not be accepted (HTTP 400).
//
// The answer is one message, so it stops growing at MaxAnswer(ctx): every item keeps room
// for an error answer from the start; the item whose answer would take more than is left is
// answered with an error saying that it ran and what its answer's size was, and the items
// after it are not run (each answered with an error saying so). Nothing is built past the
// limit, and the answer always fits.
func Batch(ctx context.Context, payload []byte, session func() (string, error), answer func(item []byte, msg jsonrpc.Message) ([]byte, error)) (final []byte, malformed bool, err error) {
	var items []json.RawMessage
	if err := json.Unmarshal(payload, &items); err != nil {
		return jsonrpc.ErrorResponse(nil, mcp.PARSE_ERROR, "Parse error: the body is not valid JSON"), true, nil
	}
	if len(items) > mcpbatch.MaxMessages {
		return jsonrpc.ErrorResponse(nil, mcp.INVALID_REQUEST, mcpbatch.TooLong(len(items))), true, nil
	}
	version, err := session()
	if err != nil {
		return nil, false, err
	}
	if version != "2025-03-26" || len(items) == 0 {
		return jsonrpc.ErrorResponse(nil, mcp.INVALID_REQUEST, "Invalid Request: JSON-RPC batches are accepted only in sessions that negotiated 2025-03-26"), true, nil
	}
	limit := MaxAnswer(ctx)
	type checked struct {
		env     jsonrpc.Message
		code    int
		problem string
		room    int // what its error answer takes at most, kept for it until it is answered
	}
	checks := make([]checked, len(items))
	kept := 0
	for i, item := range items {
		c := &checks[i]
		c.env, c.code, c.problem = jsonrpc.Check(item)
		c.room = len(jsonrpc.ErrorResponse(c.env.ID, mcp.INTERNAL_ERROR, tooLarge(math.MaxInt, limit))) + len(`,`) // the longer error
		kept += c.room
	}
	var out []json.RawMessage
	size, full := len(`[]`), false
	for i, item := range items {
		c := checks[i]
		kept -= c.room
		var resp []byte
		switch {
		case c.problem != "":
			code, problem := c.code, c.problem
			if code == mcp.PARSE_ERROR { // valid JSON as a whole: the item is just not an object
				code, problem = mcp.INVALID_REQUEST, "Invalid Request: a batch item must be a JSON-RPC object"
			}
			resp = jsonrpc.ErrorResponse(c.env.ID, code, problem)
		case c.env.Method == string(mcp.MethodInitialize):
			resp = jsonrpc.ErrorResponse(c.env.ID, mcp.INVALID_REQUEST, "Invalid Request: initialize must not be part of a batch")
		case full && c.env.IsRequest():
			resp = jsonrpc.ErrorResponse(c.env.ID, mcp.INTERNAL_ERROR, notRun(limit))
		default: // notifications and responses still go through once the answer is full: they add nothing to it
			if resp, err = answer(item, c.env); err != nil {
				return nil, false, err
			}
			switch {
			case resp == nil || size+len(resp)+len(`,`)+kept <= limit:
			case c.env.IsRequest():
				resp, full = jsonrpc.ErrorResponse(c.env.ID, mcp.INTERNAL_ERROR, tooLarge(len(resp), limit)), true
			default:
				resp = nil // the refusal of a notification or response, which names no id: dropped
			}
		}
		if resp != nil {
			out = append(out, resp)
			size += len(resp) + len(`,`)
		}
	}
	if len(out) == 0 {
		return nil, false, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, false, status.Error(codes.Internal, err.Error())
	}
	return b, false, nil
}

// notRun is the error answer of a batch item not run because the batch's answer was full.
func notRun(limit int) string {
	return fmt.Sprintf("Not run: this batch's answer reached its limit of %d bytes (one gRPC message, ZEST_GRPC_MAX_MESSAGE_BYTES, less %s); send the request again in a smaller batch", limit, grpcdial.OverheadText)
}

// tooLarge is the error answer of a batch item that ran but whose answer did not fit.
func tooLarge(n, limit int) string {
	return fmt.Sprintf("This request ran, but its answer of %d bytes did not fit in what was left of this batch's answer limit of %d bytes (one gRPC message, ZEST_GRPC_MAX_MESSAGE_BYTES, less %s): send it alone, or in a smaller batch; the requests after it in the batch were not run", n, limit, grpcdial.OverheadText)
}

type maxAnswerKey struct{}

// MaxAnswer is the largest answer an exchange of ctx may send in one message: what
// WithMaxAnswer set (the stream's gRPC message limit less grpcdial.MessageOverhead), or that
// of grpcdial.DefaultMaxMessageBytes.
func MaxAnswer(ctx context.Context) int {
	if n, ok := ctx.Value(maxAnswerKey{}).(int); ok {
		return n
	}
	return grpcdial.MaxBodyBytes(0)
}

// WithMaxAnswer tells the exchanges of ctx that their messages travel in gRPC messages of at
// most maxMsg bytes.
func WithMaxAnswer(ctx context.Context, maxMsg int) context.Context {
	return context.WithValue(ctx, maxAnswerKey{}, grpcdial.MaxBodyBytes(maxMsg))
}

// MaxAnswerInterceptor gives every stream of the server the message limit it sends under
// (ZEST_GRPC_MAX_MESSAGE_BYTES), which Batch keeps its answer within.
func MaxAnswerInterceptor(maxMsg int) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return handler(srv, maxAnswerStream{ServerStream: ss, ctx: WithMaxAnswer(ss.Context(), maxMsg)})
	}
}

type maxAnswerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s maxAnswerStream) Context() context.Context { return s.ctx }
