package logging

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// TestLevelOf: the level of a logger New made can be changed while it runs.
func TestLevelOf(t *testing.T) {
	var b bytes.Buffer
	l, err := New(&b, "svc", "warn", "text")
	if err != nil {
		t.Fatal(err)
	}
	l = l.With("k", "v") // the level survives With
	l.Info("hidden")
	lv := LevelOf(l)
	if lv == nil || lv.Level() != slog.LevelWarn {
		t.Fatalf("LevelOf: %v", lv)
	}
	lv.Set(slog.LevelDebug)
	l.Debug("shown")
	if s := b.String(); strings.Contains(s, "hidden") || !strings.Contains(s, "shown") {
		t.Errorf("log: %q", s)
	}
	if LevelOf(slog.New(slog.NewTextHandler(&b, nil))) != nil || !l.Enabled(context.Background(), slog.LevelDebug) {
		t.Error("LevelOf of a foreign logger")
	}
}
