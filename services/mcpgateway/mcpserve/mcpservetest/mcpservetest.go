// Package mcpservetest drives McpService as the edge does, for the tests of its endpoints
// (/mcp, /mcp/servers/{id}, /mcp/presets/{id}).
package mcpservetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc/metadata"
)

// WithKey returns ctx with the bearer key the edge passes on.
func WithKey(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
}

// Exchange sends one POST body and returns the session id it started (if any) and the
// messages of the answer.
func Exchange(ctx context.Context, c mcpgatewayv1.McpServiceClient, req *mcpgatewayv1.ExchangeRequest) (string, [][]byte, error) {
	stream, err := c.Exchange(ctx, req)
	if err != nil {
		return "", nil, err
	}
	started := ""
	var msgs [][]byte
	for {
		item, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return started, msgs, nil
		}
		if err != nil {
			return started, msgs, err
		}
		if s := item.GetSession(); s != nil {
			started = s.GetSessionId()
			continue
		}
		msgs = append(msgs, item.GetMessage())
	}
}

// Initialize sends an initialize body and returns the session id it started and the
// result; an answer without both is an error that quotes it.
func Initialize(ctx context.Context, c mcpgatewayv1.McpServiceClient, req *mcpgatewayv1.ExchangeRequest) (string, map[string]any, error) {
	sess, msgs, err := Exchange(ctx, c, req)
	if err != nil {
		return "", nil, err
	}
	var resp struct {
		Result map[string]any `json:"result"`
	}
	if sess == "" || len(msgs) != 1 || json.Unmarshal(msgs[0], &resp) != nil || resp.Result == nil {
		return "", nil, fmt.Errorf("initialize answered session %q, messages %q", sess, msgs)
	}
	return sess, resp.Result, nil
}

// Listen opens a GET stream, waits for its first item (the session is valid and the stream
// registered) and returns its messages as they come; the channel closes when the stream ends.
func Listen(ctx context.Context, c mcpgatewayv1.McpServiceClient, req *mcpgatewayv1.ListenRequest) (<-chan string, error) {
	stream, err := c.Listen(ctx, req)
	if err != nil {
		return nil, err
	}
	if _, err := stream.Recv(); err != nil {
		return nil, err
	}
	out := make(chan string, 16)
	go func() {
		defer close(out)
		for {
			it, err := stream.Recv()
			if err != nil {
				return
			}
			out <- string(it.GetMessage())
		}
	}()
	return out, nil
}

// ProgressThenResult checks the messages of a call made with progress token token: one
// notifications/progress or more, each with that token, then the answer, which must hold
// every string of want.
func ProgressThenResult(msgs [][]byte, token any, want ...string) error {
	if len(msgs) < 2 {
		return fmt.Errorf("messages %q: want progress, then the answer", msgs)
	}
	last := string(msgs[len(msgs)-1])
	for _, w := range want {
		if !strings.Contains(last, w) {
			return fmt.Errorf("the answer %s lacks %s", last, w)
		}
	}
	for _, m := range msgs[:len(msgs)-1] {
		var n struct {
			Method string
			Params struct {
				ProgressToken any `json:"progressToken"`
			}
		}
		if json.Unmarshal(m, &n) != nil || n.Method != "notifications/progress" || n.Params.ProgressToken != token {
			return fmt.Errorf("notification %s: want progress with the token %v", m, token)
		}
	}
	return nil
}
