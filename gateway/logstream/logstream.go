// Package logstream keeps the edge's latest log lines and hands them to Lemonade's GUI log
// panel (WebSocket /logs/stream): a slog handler that records every line it passes on in a
// bounded ring, numbered, and fans new ones out to subscribers. Its level is the logger's
// own (a *slog.LevelVar shared with the handler it wraps), so changing it changes both what
// the service writes and what the panel sees.
package logstream

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Entry is one log line in Lemonade's shape (LogStreamEntry): seq increases by one per line.
type Entry struct {
	Seq       uint64 `json:"seq"`
	Timestamp string `json:"timestamp"`
	Severity  string `json:"severity"`
	Tag       string `json:"tag"`
	Line      string `json:"line"`
}

// Limits.
const (
	// DefaultKeep is how many lines the ring keeps (Lemonade keeps a bounded history too).
	DefaultKeep = 1000
	// SubscriberBuffer is how many lines may wait for one slow subscriber; past it the
	// subscriber is dropped (its channel closed) rather than slowing the service's logging.
	SubscriberBuffer = 256
	// maxLine caps one line's text: a log line is a line, not a payload.
	maxLine = 8 << 10
)

// Hub is the ring and its subscribers.
type Hub struct {
	level *slog.LevelVar
	keep  int

	mu      sync.Mutex
	entries []Entry // ring in order, at most keep
	next    uint64
	subs    map[chan Entry]struct{}

	// format writes a line as the panel shows it (message then attributes, as slog's text
	// handler writes them; time and level go in their own fields) into line. Every handler's
	// formatter derives from it (WithAttrs, WithGroup: their attributes are encoded once, not
	// per line); formatting holds fmtMu, so line holds the one line being formatted.
	format slog.Handler
	fmtMu  sync.Mutex
	line   lineWriter
}

// lineWriter keeps the last line written to it (a text handler writes a record in one Write).
type lineWriter struct{ b []byte }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.b = append(w.b[:0], p...)
	return len(p), nil
}

// New returns a hub keeping keep lines (DefaultKeep when ≤ 0) at level (a new LevelVar at
// info when nil).
func New(level *slog.LevelVar, keep int) *Hub {
	if level == nil {
		level = new(slog.LevelVar)
	}
	if keep <= 0 {
		keep = DefaultKeep
	}
	h := &Hub{level: level, keep: keep, next: 1, subs: map[chan Entry]struct{}{}}
	h.format = slog.NewTextHandler(&h.line, &slog.HandlerOptions{Level: slog.LevelDebug - 8, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey) {
			return slog.Attr{}
		}
		return a
	}})
	return h
}

// Level is the level the hub's handlers log at.
func (h *Hub) Level() *slog.LevelVar { return h.level }

// Wrap returns a handler that records each line it passes on to next, with tag as the
// lines' tag until a "service" attribute names another.
func (h *Hub) Wrap(next slog.Handler, tag string) slog.Handler {
	return &handler{hub: h, next: next, tag: tag, format: h.format}
}

// Subscribe returns the kept lines after afterSeq (all of them when afterSeq is 0) and a
// channel of the lines to come, in one step so that none is missed or repeated. The
// channel is closed when the subscriber falls SubscriberBuffer lines behind or cancel is
// called.
func (h *Hub) Subscribe(afterSeq uint64) (snapshot []Entry, ch <-chan Entry, cancel func()) {
	c := make(chan Entry, SubscriberBuffer)
	h.mu.Lock()
	for _, e := range h.entries {
		if e.Seq > afterSeq {
			snapshot = append(snapshot, e)
		}
	}
	h.subs[c] = struct{}{}
	h.mu.Unlock()
	return snapshot, c, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[c]; ok {
			delete(h.subs, c)
			close(c)
		}
	}
}

// Subscribers counts the current subscribers.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

func (h *Hub) publish(e Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e.Seq = h.next
	h.next++
	if len(h.entries) == h.keep {
		copy(h.entries, h.entries[1:])
		h.entries = h.entries[:len(h.entries)-1]
	}
	h.entries = append(h.entries, e)
	for c := range h.subs {
		select {
		case c <- e:
		default: // too slow: dropped, so that logging never waits for a browser
			delete(h.subs, c)
			close(c)
		}
	}
}

// Severity names a slog level as Lemonade's GUI does (trace, debug, info, warning, error,
// fatal).
func Severity(l slog.Level) string {
	switch {
	case l < slog.LevelDebug:
		return "trace"
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warning"
	case l < slog.LevelError+4:
		return "error"
	}
	return "fatal"
}

// ParseLevel reads Lemonade's level names (and slog's "warn"), case-insensitively.
func ParseLevel(s string) (slog.Level, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "trace":
		return slog.LevelDebug - 4, true
	case "debug":
		return slog.LevelDebug, true
	case "info":
		return slog.LevelInfo, true
	case "warning", "warn":
		return slog.LevelWarn, true
	case "error":
		return slog.LevelError, true
	case "fatal":
		return slog.LevelError + 4, true
	}
	return 0, false
}

type handler struct {
	hub    *Hub
	next   slog.Handler
	tag    string
	format slog.Handler // the hub's formatter with this handler's attributes and groups
	group  bool         // a group is open: a "service" attribute is no longer the tag
}

// Enabled follows the hub's level (the wrapped handler may have its own, lower or not).
func (h *handler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.hub.level.Level()
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	h.hub.fmtMu.Lock()
	_ = h.format.Handle(ctx, r)
	line := strings.TrimSuffix(string(h.hub.line.b), "\n")
	h.hub.fmtMu.Unlock()
	if len(line) > maxLine {
		line = line[:maxLine] + "…"
	}
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	h.hub.publish(Entry{Timestamp: t.Format("2006-01-02 15:04:05.000"), Severity: Severity(r.Level), Tag: h.tag, Line: line})
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(as)
	c.format = h.format.WithAttrs(as)
	if !h.group {
		for _, a := range as {
			if a.Key == "service" {
				c.tag = a.Value.String()
			}
		}
	}
	return &c
}

func (h *handler) WithGroup(name string) slog.Handler {
	c := *h
	c.next = h.next.WithGroup(name)
	c.format = h.format.WithGroup(name)
	c.group = true
	return &c
}
