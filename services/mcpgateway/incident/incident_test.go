package incident

import (
	"bytes"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
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
