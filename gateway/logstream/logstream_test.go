package logstream

import (
	"io"
	"log/slog"
	"testing"
)

func TestRingAndSlowSubscriber(t *testing.T) {
	h := New(nil, 3)
	log := slog.New(h.Wrap(slog.NewTextHandler(io.Discard, nil), "t"))
	_, ch, cancel := h.Subscribe(0)
	defer cancel()
	for i := 0; i < SubscriberBuffer+5; i++ {
		log.Info("line", "i", i)
	}
	snap, _, c2 := h.Subscribe(0)
	c2()
	if len(snap) != 3 || snap[2].Seq != SubscriberBuffer+5 || snap[0].Severity != "info" || snap[0].Tag != "t" {
		t.Fatalf("ring: %+v", snap)
	}
	n := 0
	for range ch {
		n++
	}
	if n != SubscriberBuffer {
		t.Errorf("a slow subscriber got %d lines before being dropped", n)
	}
	log.Debug("hidden")
	h.Level().Set(slog.LevelDebug)
	if !log.Enabled(t.Context(), slog.LevelDebug) {
		t.Error("the level did not change")
	}
	for s, want := range map[string]slog.Level{"trace": slog.LevelDebug - 4, "warning": slog.LevelWarn, "WARN": slog.LevelWarn, "fatal": slog.LevelError + 4} {
		if l, ok := ParseLevel(s); !ok || l != want || (Severity(l) != s && s != "WARN") {
			t.Errorf("%s: %v %v %s", s, l, ok, Severity(l))
		}
	}
}
