package lemonade

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

// ChatProgressChunks is how many streamed chunks lemonade_chat and lemonade_omni receive
// between two progress notifications (besides the first and the last): one per token would
// cost more than the answer.
const ChatProgressChunks = 32

// progress sends notifications/progress when the caller asked for it (_meta.progressToken),
// to the caller's MCP session: /mcp's own, or the session of the endpoint whose call the
// pipeline runs (mcpserve's Builtin and WithSession carry it). total 0 means unknown, and is
// left out; so is an empty message.
func progress(ctx context.Context, req mcp.CallToolRequest, done, total float64, msg string) {
	if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
		return
	}
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		return
	}
	params := map[string]any{"progressToken": req.Params.Meta.ProgressToken, "progress": done}
	if total > 0 {
		params["total"] = total
	}
	if msg != "" {
		params["message"] = msg
	}
	_ = srv.SendNotificationToClient(ctx, "notifications/progress", params)
}

// pullDefault downloads model, the default a tool chose because the caller passed
// allow_download, through ModelAdminService (the pull lemonade_pull_model runs), relaying its
// progress (percent of 100). Without an admin client the engine fetches the model on first use.
func (t *Tools) pullDefault(ctx context.Context, req mcp.CallToolRequest, model string) error {
	if t.admin == nil {
		return nil
	}
	logf(ctx, mcp.LoggingLevelInfo, "allow_download: pulling the default model %s", model)
	stream, err := t.admin.Pull(ctx, &inferencev1.PullRequest{ModelName: model})
	if err != nil {
		return fmt.Errorf("pull %s: %w", model, err)
	}
	complete := false
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("pull %s: %w", model, err)
		}
		complete = complete || ev.GetComplete()
		msg := "pulling " + model
		if ev.GetFile() != "" {
			msg += ": " + ev.GetFile()
		}
		progress(ctx, req, ev.GetPercent(), 100, msg)
	}
	if !complete {
		return fmt.Errorf("pull %s: the engine ended without completing the download", model)
	}
	return nil
}
