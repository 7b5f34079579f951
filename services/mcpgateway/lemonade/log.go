package lemonade

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Logger is the logger name of the built-in tools' log messages.
const Logger = "lemonade"

// logf sends a log message (notifications/message) to the calling session when the level it
// chose with logging/setLevel admits level; the message is only formatted then.
func logf(ctx context.Context, level mcp.LoggingLevel, format string, a ...any) {
	srv := server.ServerFromContext(ctx)
	sess, ok := server.ClientSessionFromContext(ctx).(server.SessionWithLogging)
	if srv == nil || !ok || !level.ShouldSendTo(sess.GetLogLevel()) {
		return
	}
	_ = srv.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(level, Logger, fmt.Sprintf(format, a...)))
}
