package serverconfig

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/proto"
)

// Limits of tools_allow and tools_deny (each).
const (
	MaxToolPatterns = 64
	// MaxToolPatternLength is counted in characters: MCP's longest tool name.
	MaxToolPatternLength = 128
)

// Fields of the tool filter, as errors name them.
const (
	FieldToolsAllow = "tools_allow"
	FieldToolsDeny  = "tools_deny"
)

// checkToolPatterns refuses what no filter should hold: more than MaxToolPatterns patterns, an
// empty or over-long one, and one that path.Match cannot read (path.ErrBadPattern).
func checkToolPatterns(field string, patterns []string) error {
	if len(patterns) > MaxToolPatterns {
		return invalid("%s holds %d patterns; at most %d are allowed", field, len(patterns), MaxToolPatterns)
	}
	for i, p := range patterns {
		switch n := utf8.RuneCountInString(p); {
		case n == 0:
			return invalid(`%s[%d] is empty: a pattern matches tool names, e.g. "get-*"`, field, i)
		case n > MaxToolPatternLength:
			return invalid("%s[%d] is %d characters long; a pattern has at most %d", field, i, n, MaxToolPatternLength)
		}
		// Since Go 1.16 Match reports a malformed pattern whatever the name, so "" tells.
		if _, err := path.Match(p, ""); err != nil {
			return invalid(`%s[%d] %q is not a valid glob pattern: %v; use * (any characters but /), ? (one character), [abc], [a-z] or [^abc] (one of a set; every [ needs its ]) and \ before a character to match it literally`,
				field, i, p, err)
		}
	}
	return nil
}

// ToolFilteredError is a tool that its server's tools_allow/tools_deny do not expose.
type ToolFilteredError struct {
	ServerID, Tool string
	// Field is the filter that hides the tool: FieldToolsDeny or FieldToolsAllow.
	Field string
	// Pattern is the tools_deny pattern that matched (empty for tools_allow, which no pattern
	// of matched).
	Pattern string
	// Allow are the server's tools_allow patterns, for the message.
	Allow []string
}

func (e *ToolFilteredError) Error() string {
	if e.Field == FieldToolsDeny {
		return fmt.Sprintf("tool %q of server %q is filtered out: it matches tools_deny pattern %q; change the server's tools_deny to expose it",
			e.Tool, e.ServerID, e.Pattern)
	}
	quoted := make([]string, len(e.Allow))
	for i, p := range e.Allow {
		quoted[i] = strconv.Quote(p)
	}
	return fmt.Sprintf("tool %q of server %q is filtered out: it matches no tools_allow pattern (%s); add one to the server's tools_allow to expose it",
		e.Tool, e.ServerID, truncate(strings.Join(quoted, ", "), 200))
}

// CheckTool decides whether the server of cfg exposes tool, by its own name: it does when
// tools_allow is empty or one of its patterns matches, and no tools_deny pattern matches
// (deny wins). Matching is path.Match's: case-sensitive, as MCP tool names are. The answer is
// nil for an exposed tool and a *ToolFilteredError naming the filter otherwise.
//
// Every path that shows or runs an external tool asks this one function: the admin tool
// lists, the chat tool loop, and tools/call.
//
// Parse refuses malformed patterns; one that reached the registry by another way hides
// tools rather than expose them: as a deny pattern it matches every tool, as an allow
// pattern none.
func CheckTool(cfg *mcpgatewayv1.ServerConfig, tool string) error {
	for _, p := range cfg.GetToolsDeny() {
		if ok, err := path.Match(p, tool); ok || err != nil {
			return &ToolFilteredError{ServerID: cfg.GetId(), Tool: tool, Field: FieldToolsDeny, Pattern: p}
		}
	}
	allow := cfg.GetToolsAllow()
	if len(allow) == 0 {
		return nil
	}
	for _, p := range allow {
		if ok, _ := path.Match(p, tool); ok {
			return nil
		}
	}
	return &ToolFilteredError{ServerID: cfg.GetId(), Tool: tool, Field: FieldToolsAllow, Allow: allow}
}

// Exposed reports whether the server of cfg exposes tool (CheckTool).
func Exposed(cfg *mcpgatewayv1.ServerConfig, tool string) bool { return CheckTool(cfg, tool) == nil }

// SameConnection reports whether two configs of a server differ at most in their tool
// filters, approvals and limits (rate_limit, max_concurrency). Such a change applies to an
// open connection as it is: the filters, approvals and limits are asked whenever tools are
// shown or called, so a server need not reconnect for them.
func SameConnection(a, b *mcpgatewayv1.ServerConfig) bool {
	if a == nil || b == nil {
		return a == b
	}
	if len(a.GetToolsAllow())+len(a.GetToolsDeny())+len(b.GetToolsAllow())+len(b.GetToolsDeny()) == 0 && a.GetExpose() == b.GetExpose() &&
		a.GetApproval() == b.GetApproval() && a.GetApprovalBy() == b.GetApprovalBy() && len(a.GetApprovalTools())+len(b.GetApprovalTools()) == 0 &&
		a.GetRateLimit() == b.GetRateLimit() && a.GetMaxConcurrency() == b.GetMaxConcurrency() {
		return proto.Equal(a, b)
	}
	a, b = proto.CloneOf(a), proto.CloneOf(b)
	a.ToolsAllow, a.ToolsDeny, b.ToolsAllow, b.ToolsDeny = nil, nil, nil, nil
	a.Expose, b.Expose = nil, nil
	a.Approval, a.ApprovalTools, b.Approval, b.ApprovalTools = nil, nil, nil, nil
	a.ApprovalBy, b.ApprovalBy = nil, nil
	a.RateLimit, b.RateLimit, a.MaxConcurrency, b.MaxConcurrency = nil, nil, nil, nil
	return proto.Equal(a, b)
}
