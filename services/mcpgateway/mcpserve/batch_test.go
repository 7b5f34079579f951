package mcpserve

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/mcpbatch"
	"github.com/zestmcp/zest/services/mcpgateway/jsonrpc"
	"google.golang.org/grpc"
)

func batchOf(n int, item func(i int) string) []byte {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = item(i)
	}
	return []byte("[" + strings.Join(parts, ",") + "]")
}

func ping(i int) string { return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i+1) }

func in20250326() (string, error) { return "2025-03-26", nil }

// TestBatchHoldsAtMostMaxMessages: a batch of mcpbatch.MaxMessages is answered, one more is
// refused whole (HTTP 400) before the session is even checked, naming the limit.
func TestBatchHoldsAtMostMaxMessages(t *testing.T) {
	ran := 0
	answer := func(_ []byte, msg jsonrpc.Message) ([]byte, error) {
		ran++
		return jsonrpc.Result(msg.ID, json.RawMessage(`{}`)), nil
	}
	final, malformed, err := Batch(t.Context(), batchOf(mcpbatch.MaxMessages, ping), in20250326, answer)
	var out []map[string]any
	if err != nil || malformed || json.Unmarshal(final, &out) != nil || len(out) != mcpbatch.MaxMessages || ran != mcpbatch.MaxMessages {
		t.Fatalf("a batch of %d: %v %v, %d answers, %d run", mcpbatch.MaxMessages, err, malformed, len(out), ran)
	}
	ran = 0
	checked := false
	final, malformed, err = Batch(t.Context(), batchOf(mcpbatch.MaxMessages+1, ping), func() (string, error) { checked = true; return "2025-03-26", nil }, answer)
	if err != nil || !malformed || ran != 0 || checked || !strings.Contains(string(final), `"code":-32600`) ||
		!strings.Contains(string(final), fmt.Sprintf("at most %d messages; this one holds %d", mcpbatch.MaxMessages, mcpbatch.MaxMessages+1)) {
		t.Fatalf("a batch of %d: %s %v %v (%d run, session checked %v)", mcpbatch.MaxMessages+1, final, malformed, err, ran, checked)
	}
}

// TestBatchAnswerStopsAtTheLimit: the answer never passes MaxAnswer — the request whose answer
// does not fit gets an error saying it ran and how large its answer was, the requests after it
// are not run (an error each), and a notification after them still goes through.
func TestBatchAnswerStopsAtTheLimit(t *testing.T) {
	const limit, answerBytes = 10_000, 3000
	ctx := WithMaxAnswer(t.Context(), limit+grpcdial.MessageOverhead)
	if MaxAnswer(ctx) != limit {
		t.Fatalf("MaxAnswer = %d", MaxAnswer(ctx))
	}
	payload := batchOf(11, func(i int) string {
		if i == 10 {
			return `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`
		}
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, i+1)
	})
	var ran []string
	final, malformed, err := Batch(ctx, payload, in20250326, func(_ []byte, msg jsonrpc.Message) ([]byte, error) {
		ran = append(ran, string(msg.ID)+msg.Method)
		if msg.Method != "tools/list" {
			return nil, nil
		}
		return jsonrpc.Result(msg.ID, json.RawMessage(`{"tools":[],"pad":"`+strings.Repeat("x", answerBytes)+`"}`)), nil
	})
	var out []struct {
		ID     int `json:"id"`
		Result any `json:"result"`
		Error  struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err != nil || malformed || json.Unmarshal(final, &out) != nil || len(out) != 10 {
		t.Fatalf("answer: %v %v %.300s", err, malformed, final)
	}
	t.Logf("%d bytes answer the batch (limit %d); run: %v", len(final), limit, ran)
	if len(final) > limit {
		t.Errorf("the answer is %d bytes, over its limit of %d", len(final), limit)
	}
	if strings.Join(ran, " ") != "1tools/list 2tools/list 3tools/list notifications/cancelled" {
		t.Errorf("run: %v; want the first three requests and the notification", ran)
	}
	for i, o := range out {
		switch {
		case i < 2 && o.Result == nil:
			t.Errorf("answer %d: no result: %+v", i+1, o)
		case i == 2 && (o.Error.Code != -32603 || !strings.Contains(o.Error.Message, "This request ran, but its answer of 30") ||
			!strings.Contains(o.Error.Message, "ZEST_GRPC_MAX_MESSAGE_BYTES")):
			t.Errorf("answer 3: %+v; want the error of an answer that did not fit", o)
		case i > 2 && (o.ID != i+1 || o.Error.Code != -32603 || !strings.HasPrefix(o.Error.Message, "Not run: this batch's answer reached its limit of 10000 bytes")):
			t.Errorf("answer %d: %+v; want not run", i+1, o)
		}
	}
}

// TestMaxAnswerInterceptor: every stream learns the message limit it sends under; without
// the interceptor, the default's.
func TestMaxAnswerInterceptor(t *testing.T) {
	if got := MaxAnswer(context.Background()); got != grpcdial.DefaultMaxBodyBytes {
		t.Fatalf("default MaxAnswer = %d", got)
	}
	var got int
	err := MaxAnswerInterceptor(8<<20)(nil, fakeStream{ctx: t.Context()}, &grpc.StreamServerInfo{}, func(_ any, s grpc.ServerStream) error {
		got = MaxAnswer(s.Context())
		return nil
	})
	if err != nil || got != 8<<20-grpcdial.MessageOverhead {
		t.Fatalf("MaxAnswer under an 8 MiB limit = %d, %v", got, err)
	}
}

type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (f fakeStream) Context() context.Context { return f.ctx }
