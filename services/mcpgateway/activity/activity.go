// Package activity keeps the latest tool calls mcpgateway ran, on every path (the admin
// API, /mcp and its federated endpoints, the chat loop), in a bounded ring that the admin API
// lists for the console (GET /internal/mcp/activity). A record says who (a short hash of the
// caller's key when it is a configured key, never the key; else anonymous: Callers), which
// server and tool, how long and how it ended; the arguments and the result only when the
// operator turns that on (ZEST_ACTIVITY_DETAILS), and then cut to DetailBytes each. The ring is per process: each mcpgateway replica keeps its
// own.
//
// Recording is on the hot path of every tools/call, so it is cheap: one mutex-guarded copy of
// a small struct into a preallocated slot, the caller's name read from the context (Callers
// named it once per gRPC call), and with details off no argument or result is read or kept.
package activity

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"
)

// Paths a call came by.
const (
	// PathAdmin is POST /internal/mcp/servers/{id}/tools/call.
	PathAdmin = "admin"
	// PathMCP is a tools/call on /mcp, /mcp/servers/{id} or /mcp/presets/{id}.
	PathMCP = "mcp"
	// PathChat is a tool call of the chat loop (a chat with mcp_server_ids or a preset).
	PathChat = "chat"
)

// Outcomes of a recorded call.
const (
	// OK is a result.
	OK = "ok"
	// ToolError is a result with isError: true (the tool ran and reported a failure).
	ToolError = "tool_error"
	// Error is no result: a JSON-RPC error, a transport failure, a timeout, a cancellation,
	// or a call the chat loop could not make.
	Error = "error"
	// InputRequired is a call that asked its client for input (MCP 2026-07-28's
	// input_required): the client's retry is recorded as a call of its own.
	InputRequired = "input_required"
)

// Limits.
const (
	// DefaultSize is the ring's size unless ZEST_ACTIVITY_SIZE says otherwise.
	DefaultSize = 500
	// MaxSize bounds ZEST_ACTIVITY_SIZE: with details on, a record keeps up to
	// 2×DetailBytes, so the ring holds at most ~80 MiB of them.
	MaxSize = 10000
	// DetailBytes is how much of a call's arguments, and of its result, a record keeps when
	// details are on; longer ones are cut (at a UTF-8 boundary) and flagged as truncated.
	DetailBytes = 4 << 10
	// MessageBytes is how much of an error's message a record keeps.
	MessageBytes = 240
	// Anonymous is who made a call that presented no configured key (Callers).
	Anonymous = "anonymous"
	// BuiltinServer is the server id of the built-in lemonade_* tools (the provider id
	// registry.LemonadeProvider, spelled here for the packages that import no registry).
	BuiltinServer = "lemonade"
)

// Call is what a path tells of one tool call when it ends. Result and Params may be the
// path's own buffers: they are read only while Add runs, and kept (copied, cut) only with
// details on.
type Call struct {
	Path     string
	Server   string // the server's id ("lemonade" for the built-in tools)
	Tool     string // the tool's own name on its server
	ChatName string // the name the call used when it differs (a preset's or the chat's chat_name)
	Preset   string // the preset the call came through, if any
	Began    time.Time
	Outcome  string // OK, ToolError, Error or InputRequired (FromUpstream maps upstream's)
	// Err or Message says why an Error call failed (Message wins); a ToolError's message is
	// read from Result when neither is set.
	Err     error
	Message string
	// Args are the call's arguments (a JSON object); Params, a tools/call's params, whose
	// arguments are read when details are on and Args is nil.
	Args   []byte
	Params []byte
	// Result is the tool's CallToolResult (JSON), when there is one.
	Result []byte
	// Unlisted is set when the server has not listed Tool (a name the caller made up): the
	// metrics count it as UnlistedTool, so that callers cannot grow their label sets.
	Unlisted bool
}

// Record is one recorded call.
type Record struct {
	ID       uint64
	Time     time.Time // when the call began
	Path     string
	Who      string
	Server   string
	Tool     string
	ChatName string
	Preset   string
	Duration time.Duration
	Outcome  string
	Error    string
	// Arguments and Result are kept only with details on (JSON text, cut at DetailBytes).
	Arguments, Result                   string
	ArgumentsTruncated, ResultTruncated bool
}

// Sink receives every record Add makes, on the caller's goroutine, so it must return at once
// (the audit trail queues it). Details says whether it wants arguments and results: they are
// read when the ring or the sink wants them, and each gets them only if it does.
type Sink interface {
	Details() bool
	Record(ctx context.Context, r Record)
}

// Log is the ring. A nil *Log records nothing and lists nothing.
type Log struct {
	details bool
	sink    Sink
	mu      sync.Mutex
	ring    []Record
	last    uint64 // the id of the newest record; ids start at 1
}

// Option configures a Log.
type Option func(*Log)

// WithSink makes every record go to sink too (the audit trail).
func WithSink(sink Sink) Option { return func(l *Log) { l.sink = sink } }

// New returns a ring of size records (1 to MaxSize); details keeps arguments and results.
func New(size int, details bool, opts ...Option) (*Log, error) {
	if size < 1 || size > MaxSize {
		return nil, fmt.Errorf("activity ring size %d: want a whole number from 1 to %d", size, MaxSize)
	}
	l := &Log{details: details, ring: make([]Record, size)}
	for _, o := range opts {
		o(l)
	}
	return l, nil
}

// Details reports whether records keep arguments and results.
func (l *Log) Details() bool { return l != nil && l.details }

// WantsDetails reports whether Add reads arguments and results: the ring keeps them, or the
// sink does. A path that copies them for Add does so only then.
func (l *Log) WantsDetails() bool {
	return l != nil && (l.details || l.sink != nil && l.sink.Details())
}

// Size is how many records the ring keeps.
func (l *Log) Size() int {
	if l == nil {
		return 0
	}
	return len(l.ring)
}

// Add records c as the newest call; who made it is read from ctx (WhoOf: the name Callers
// gave the caller when its call arrived).
func (l *Log) Add(ctx context.Context, c Call) {
	d := time.Since(c.Began)
	countCall(c, d) // metrics.go: counted with or without a ring
	if l == nil {
		return
	}
	r := Record{Time: c.Began, Path: c.Path, Who: WhoOf(ctx), Server: c.Server, Tool: c.Tool, Preset: c.Preset,
		Duration: d, Outcome: c.Outcome}
	if c.ChatName != c.Tool {
		r.ChatName = c.ChatName
	}
	switch {
	case c.Outcome == OK || c.Outcome == InputRequired:
	case c.Message != "":
		r.Error = Cut(c.Message, MessageBytes)
	case c.Err != nil:
		r.Error = Cut(c.Err.Error(), MessageBytes)
	case c.Outcome == ToolError:
		r.Error = Cut(toolErrorText(c.Result), MessageBytes)
	}
	sinkDetails := l.sink != nil && l.sink.Details()
	if l.details || sinkDetails {
		args := c.Args
		if args == nil && c.Params != nil {
			args = arguments(c.Params)
		}
		r.Arguments, r.ArgumentsTruncated = cutDetail(args)
		r.Result, r.ResultTruncated = cutDetail(c.Result)
	}
	if l.sink != nil {
		s := r
		if !sinkDetails {
			s.Arguments, s.ArgumentsTruncated, s.Result, s.ResultTruncated = "", false, "", false
		}
		l.sink.Record(ctx, s)
	}
	if !l.details {
		r.Arguments, r.ArgumentsTruncated, r.Result, r.ResultTruncated = "", false, "", false
	}
	l.mu.Lock()
	l.last++
	r.ID = l.last
	l.ring[(l.last-1)%uint64(len(l.ring))] = r
	l.mu.Unlock()
}

// List returns the calls with an id above after, newest first, at most limit of them (the
// newest ones when more match; limit < 1 means all the ring holds), and the id of the newest
// call recorded (0 when none: pass it back as after to get only what came since).
func (l *Log) List(after uint64, limit int) (calls []Record, latest uint64) {
	if l == nil {
		return nil, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	latest = l.last
	if after >= latest {
		return nil, latest
	}
	n := uint64(len(l.ring))
	oldest := uint64(1)
	if latest > n {
		oldest = latest - n + 1 // older ones were overwritten
	}
	from := max(after+1, oldest)
	count := latest - from + 1
	if limit > 0 && count > uint64(limit) {
		count = uint64(limit)
	}
	calls = make([]Record, 0, count)
	for id := latest; id > latest-count; id-- {
		calls = append(calls, l.ring[(id-1)%n])
	}
	return calls, latest
}

// FromUpstream maps the outcome of upstream.Outcome (its log line's) to a record's.
func FromUpstream(outcome string) string {
	switch outcome {
	case "ok":
		return OK
	case "is_error":
		return ToolError
	case "input_required":
		return InputRequired
	}
	return Error // rpc_error, failed, timeout, canceled
}

// Cut returns at most n bytes of s, never splitting a UTF-8 character.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// cutDetail copies up to DetailBytes of b.
func cutDetail(b []byte) (string, bool) {
	if len(b) <= DetailBytes {
		return string(b), false
	}
	n := DetailBytes
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n]), true
}

// arguments is the arguments member of tools/call params.
func arguments(params []byte) []byte {
	var p struct {
		Arguments json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(params, &p) != nil {
		return nil
	}
	return p.Arguments
}

// toolErrorText is the first text block of an isError result.
func toolErrorText(result []byte) string {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(result, &r) == nil {
		for _, c := range r.Content {
			if c.Type == "text" && c.Text != "" {
				return c.Text
			}
		}
	}
	return "the tool reported an error (isError) with no text"
}

// TimeLayout is how the activity, the audit trail and approvals write a time: RFC 3339 in UTC
// with milliseconds, always three digits (so that the text sorts as the time does).
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"
