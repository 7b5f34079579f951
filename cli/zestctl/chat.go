package zestctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// maxMessageBytes bounds the chat message given on the command line or stdin.
const maxMessageBytes = 1 << 20

func (a *app) chatCmd() *cobra.Command {
	var model, preset, system, tool string
	var providers []string
	c := &cobra.Command{
		Use:   "chat MESSAGE",
		Short: "A tool-loop chat (ChatService): text streams as it comes, tool calls and results as lines",
		Long: `chat sends MESSAGE (- reads it from stdin) to mcpgateway's tool loop, which runs the
model's tool calls on the providers (the preset's, or --server ones) round after round until
the model answers. The table output prints the assistant's text as it streams, and each tool
call, tool result and warning on a line of its own starting with "» "; json prints one JSON
object per streamed item (NDJSON), yaml one document per item.`,
		Args: args(1, "MESSAGE"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			msg := argv[0]
			if msg == "-" {
				b, err := io.ReadAll(io.LimitReader(a.stdin, maxMessageBytes+1))
				if err != nil {
					return usagef("reading the message from stdin: %v", err)
				}
				msg = string(b)
			}
			if len(msg) > maxMessageBytes {
				return usagef("the message holds more than %d bytes", maxMessageBytes)
			}
			if model == "" && preset == "" {
				return usagef("--model or --preset: name the model, or a preset that names one")
			}
			chat := &inferencev1.ChatRequest{Model: model}
			if system != "" {
				chat.Messages = append(chat.Messages, &inferencev1.ChatMessage{Role: "system", Content: system})
			}
			chat.Messages = append(chat.Messages, &inferencev1.ChatMessage{Role: "user", Content: msg})
			if tool != "" {
				chat.ToolChoice, _ = structpb.NewValue(map[string]any{"type": "function", "function": map[string]any{"name": tool}})
			}
			req := &mcpgatewayv1.ChatRequest{Chat: chat, Preset: preset}
			if cmd.Flags().Changed("server") {
				req.Providers = &mcpgatewayv1.Providers{Ids: providers}
			}
			cc, err := a.conn(a.mcpgwAddr)
			if err != nil {
				return err
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			stream, err := mcpgatewayv1.NewChatServiceClient(cc).Chat(ctx, req)
			if err != nil {
				return err
			}
			p := &chatPrinter{a: a}
			for {
				item, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					p.endLine()
					return err
				}
				if err := p.print(item); err != nil {
					return err
				}
			}
			p.endLine()
			if !p.done {
				return fmt.Errorf("the chat ended without its outcome (no done item)")
			}
			return nil
		},
	}
	fs := c.Flags()
	fs.StringVar(&model, "model", "", "model id (default: the preset's)")
	fs.StringVar(&preset, "preset", "", "preset id: its model, system prompt and providers")
	fs.StringArrayVar(&providers, "server", nil, `provider replacing the preset's: a server id or "lemonade" (repeatable, 0-4)`)
	fs.StringVar(&system, "system", "", "system message put before MESSAGE")
	fs.StringVar(&tool, "tool", "", "force the first round to call this tool (its chat name, e.g. mcp_echo__echo): tool_choice")
	return c
}

// chatPrinter prints a chat's items as they come.
type chatPrinter struct {
	a       *app
	midLine bool // text was printed without its newline yet
	done    bool
	// textSeen is set once any text streamed: the done item's message then repeats it.
	textSeen bool
}

func (p *chatPrinter) endLine() {
	if p.midLine {
		fmt.Fprintln(p.a.stdout)
		p.midLine = false
	}
}

func (p *chatPrinter) print(item *mcpgatewayv1.ChatResponse) error {
	if item.GetDone() != nil {
		p.done = true
	}
	switch p.a.output {
	case "json":
		b, err := pj.Marshal(item)
		if err != nil {
			return err
		}
		// One compact object per line (NDJSON): re-encode protojson's output without spaces.
		var v any
		_ = json.Unmarshal(b, &v)
		b, _ = json.Marshal(v)
		_, err = fmt.Fprintf(p.a.stdout, "%s\n", b)
		return err
	case "yaml":
		fmt.Fprintln(p.a.stdout, "---")
		return writeYAML(p.a.stdout, plain(item))
	}
	w := p.a.stdout
	switch {
	case item.GetChunk() != nil:
		if t := item.GetChunk().GetDelta().GetContent(); t != "" {
			fmt.Fprint(w, t)
			p.textSeen = true
			p.midLine = !strings.HasSuffix(t, "\n")
		}
	case item.GetEvent() != nil:
		p.endLine()
		e := item.GetEvent()
		c := e.GetCall()
		switch e.GetType() {
		case "tool_call":
			fmt.Fprintf(w, "» tool_call %s (%s) %s\n", c.GetName(), c.GetServerId(), c.GetArguments())
		case "tool_result":
			outcome := "ok"
			if c.GetIsError() {
				outcome = "error"
			}
			fmt.Fprintf(w, "» tool_result %s %s %dms %s\n", c.GetName(), outcome, c.GetDurationMs(), cell(c.GetOutputPreview()))
		default:
			fmt.Fprintf(w, "» %s %s\n", e.GetType(), e.GetMessage())
		}
	case item.GetDone() != nil:
		d := item.GetDone()
		// Text that did not stream (a final message only) is printed now.
		if !p.textSeen && d.GetMessage().GetContent() != "" {
			fmt.Fprint(w, d.GetMessage().GetContent())
			p.midLine = true
		}
		p.endLine()
		for _, warn := range d.GetWarnings() {
			fmt.Fprintf(w, "» warning %s\n", warn)
		}
		fmt.Fprintf(w, "» done %s (%s, %d tokens, %d tool calls)\n", d.GetFinishReason(), d.GetModel(), d.GetUsage().GetTotalTokens(), len(d.GetToolCalls()))
	}
	return nil
}
