package incident

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/zestmcp/zest/services/mcpgateway/oauthclient"
	"github.com/zestmcp/zest/services/mcpgateway/upstream"
)

// An administrator reads the cause; anyone else an incident id, which the log line carries
// with the cause.
func TestDescribe(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cause := errors.New("exit status 3: stderr secret")
	if got := Describe(t.Context(), log, true, "s1", "The tool failed", cause); got != "The tool failed: exit status 3: stderr secret" || logs.Len() != 0 {
		t.Fatalf("admin: %q, log %q", got, logs.String())
	}
	got := Describe(t.Context(), log, false, "s1", "The tool failed", cause)
	id := regexp.MustCompile(`incident (\S+):`).FindStringSubmatch(got)
	if strings.Contains(got, "secret") || id == nil || !strings.HasPrefix(got, "The tool failed (incident ") {
		t.Fatalf("API user: %q", got)
	}
	if l := logs.String(); !strings.Contains(l, "incident="+id[1]) || !strings.Contains(l, "stderr secret") || !strings.Contains(l, "server=s1") {
		t.Fatalf("log line %q lacks the incident or the cause", l)
	}
}

// TestDescribeNeedsSignIn: a server Zest cannot sign in to is no incident — an administrator
// and anyone else read the fix alone, as the admin API words it, and nothing is logged.
func TestDescribeNeedsSignIn(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	want := &oauthclient.NeedsSignInError{ID: "tracker", Why: "Zest holds no token for it"}
	err := fmt.Errorf("%w: %q: initialize: transport error: failed to send request: %w", upstream.ErrUpstream, "tracker", want)
	for _, admin := range []bool{true, false} {
		if got := Describe(t.Context(), log, admin, "tracker", `Internal error: connecting MCP server "tracker" failed`, err); got != want.Error() ||
			!strings.HasSuffix(got, "zestctl servers sign-in tracker") {
			t.Errorf("admin %v: %q, want %q", admin, got, want.Error())
		}
	}
	if got := Describe(t.Context(), log, false, "tracker", "The tool failed", fmt.Errorf("connect: %w", oauthclient.ErrNoSecretKey)); got != oauthclient.ErrNoSecretKey.Error() {
		t.Errorf("no secret key: %q", got)
	}
	if logs.Len() != 0 {
		t.Errorf("logged %q", logs.String())
	}
}

// TestDescribeSaysItOnce: an administrator's cause does not repeat what the summary says (the
// upstream's "MCP server failed: \"id\": ") nor a part a library said twice in a row.
func TestDescribeSaysItOnce(t *testing.T) {
	log := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: %q: initialize: transport error: failed to send request: failed to send request: Post \"http://x\": connection refused", upstream.ErrUpstream, "up"),
			`Internal error: connecting MCP server "up" failed: initialize: transport error: failed to send request: Post "http://x": connection refused`},
		{fmt.Errorf("%w: %q: context deadline exceeded: context deadline exceeded", upstream.ErrUpstream, "up"),
			`Internal error: connecting MCP server "up" failed: context deadline exceeded`},
		{fmt.Errorf("%w: %q: exit status 1", upstream.ErrUpstream, "other"),
			`Internal error: connecting MCP server "up" failed: MCP server failed: "other": exit status 1`},
		{errors.New("a: b: a"), `Internal error: connecting MCP server "up" failed: a: b: a`},
	} {
		if got := Describe(t.Context(), log, true, "up", `Internal error: connecting MCP server "up" failed`, c.err); got != c.want {
			t.Errorf("%v:\n got %s\nwant %s", c.err, got, c.want)
		}
	}
}
