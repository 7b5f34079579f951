// Package audit keeps mcpgateway's audit trail: every admin change (each mutating AdminService
// call, an approval's decision among them, and whatever else calls Admin) and every tool call
// on every path (fed by package activity, which sees them all), appended to the registry
// (registry.AuditLog) so that every replica on the same registry shares one trail, trimmed by
// age (ZEST_AUDIT_RETENTION) and by count, each kind apart: the tool calls by
// ZEST_AUDIT_MAX_ENTRIES, the admin entries by ZEST_AUDIT_MAX_ADMIN_ENTRIES, so that no
// amount of tool calls pushes an admin change out. A trim that removes entries says which in
// an entry of its own (kind "trim": their kind, how many, the time span) and in a log line at
// info. A tool call's arguments and result are kept only with ZEST_AUDIT_DETAILS, cut at
// activity.DetailBytes each.
//
// Appending is on the hot path of every tool call, so a call never waits for the registry:
// an entry goes into a bounded queue (QueueSize) without blocking, and one goroutine writes
// the queue in batches (at most what one transaction of the registry holds, its
// MaxAuditBatch, one transaction each, at least every FlushEvery), and flushes what is left on
// Close. An entry that finds the queue full is
// dropped and counted (Stats, and ListAuditResponse.dropped), and logged at most once a
// minute; an entry whose write failed is counted as failed.
package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/activity"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Kinds of entries; the registry keeps and bounds each apart.
const (
	// KindAdmin is an admin change (an approval's decision among them).
	KindAdmin = registry.AuditKindAdmin
	// KindTool is a tool call.
	KindTool = registry.AuditKindTool
	// KindTrim is a trim's report of the entries it removed.
	KindTrim = registry.AuditKindTrim
)

// A trim's entry: who made it (the replica that trimmed, not a caller) and its action.
const (
	TrimWho    = "mcpgateway"
	TrimAction = "trim"
)

// Defaults and limits.
const (
	// DefaultRetention is how long entries are kept unless ZEST_AUDIT_RETENTION says otherwise.
	DefaultRetention = 720 * time.Hour
	// MinRetention bounds ZEST_AUDIT_RETENTION from below: shorter is not an audit trail.
	MinRetention = time.Hour
	// DefaultMaxEntries is how many tool calls are kept at most unless ZEST_AUDIT_MAX_ENTRIES
	// says otherwise: ~300 bytes each without details, up to ~9 KiB with them.
	DefaultMaxEntries = 100000
	// MaxMaxEntries bounds ZEST_AUDIT_MAX_ENTRIES (0 turns the audit trail off) and
	// ZEST_AUDIT_MAX_ADMIN_ENTRIES.
	MaxMaxEntries = 10000000
	// DefaultMaxAdminEntries is how many admin entries are kept at most, apart from the tool
	// calls, unless ZEST_AUDIT_MAX_ADMIN_ENTRIES says otherwise (1 to MaxMaxEntries): ~300
	// bytes each. The trims' own entries are bounded by it too, apart from both: a replica
	// writes at most one per TrimEvery.
	DefaultMaxAdminEntries = 100000
	// FlushEvery is the longest an entry waits in the queue before its batch is written.
	FlushEvery = 100 * time.Millisecond
	// QueueSize is how many entries wait at most; past it entries are dropped and counted.
	QueueSize = 10000
	// TrimEvery is how often each replica trims the trail (and once when it starts).
	TrimEvery = 5 * time.Minute
	// writeTimeout bounds one batch's write and one trim.
	writeTimeout = 10 * time.Second
)

// Config configures a Log.
type Config struct {
	// Retention bounds the trail by age; MaxEntries the tool calls it keeps, MaxAdminEntries
	// the admin entries (DefaultRetention, DefaultMaxEntries and DefaultMaxAdminEntries when 0).
	Retention       time.Duration
	MaxEntries      int
	MaxAdminEntries int
	// Details keeps tool calls' arguments and results.
	Details bool
	// Logger receives failed writes, drops and trims; default slog.Default().
	Logger *slog.Logger
	// FlushEvery, QueueSize and TrimEvery default to the package's constants (tests shorten them).
	FlushEvery time.Duration
	QueueSize  int
	TrimEvery  time.Duration
}

// Log is the audit trail's writer. A nil *Log records nothing (the trail is off).
type Log struct {
	store registry.AuditLog
	cfg   Config
	log   *slog.Logger
	q     chan *mcpgatewayv1.AuditEntry
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once

	closed          atomic.Bool
	dropped, failed atomic.Uint64
	lastDropLog     atomic.Int64 // Unix seconds of the last log line about drops
}

// New starts the writer of the trail on store; Close stops it.
func New(store registry.AuditLog, cfg Config) *Log {
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.MaxAdminEntries <= 0 {
		cfg.MaxAdminEntries = DefaultMaxAdminEntries
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = FlushEvery
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = QueueSize
	}
	if cfg.TrimEvery <= 0 {
		cfg.TrimEvery = TrimEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Log{store: store, cfg: cfg, log: cfg.Logger, q: make(chan *mcpgatewayv1.AuditEntry, cfg.QueueSize),
		stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

// Details reports whether tool calls keep their arguments and results.
func (l *Log) Details() bool { return l != nil && l.cfg.Details }

// Retention is how long entries are kept.
func (l *Log) Retention() time.Duration {
	if l == nil {
		return 0
	}
	return l.cfg.Retention
}

// MaxEntries is how many tool calls are kept at most.
func (l *Log) MaxEntries() int {
	if l == nil {
		return 0
	}
	return l.cfg.MaxEntries
}

// MaxAdminEntries is how many admin entries are kept at most, apart from the tool calls.
func (l *Log) MaxAdminEntries() int {
	if l == nil {
		return 0
	}
	return l.cfg.MaxAdminEntries
}

// Stats counts the entries lost since New: dropped (the queue was full or the log closed)
// and failed (their write failed).
func (l *Log) Stats() (dropped, failed uint64) {
	if l == nil {
		return 0, 0
	}
	return l.dropped.Load(), l.failed.Load()
}

// Store is the registry the trail is kept in.
func (l *Log) Store() registry.AuditLog {
	if l == nil {
		return nil
	}
	return l.store
}

// Record implements activity.Sink: one tool call, as activity recorded it. It returns at
// once.
func (l *Log) Record(_ context.Context, r activity.Record) {
	if l == nil {
		return
	}
	e := &mcpgatewayv1.AuditEntry{
		Time: r.Time.Add(r.Duration).UTC().Format(activity.TimeLayout), Kind: KindTool, Who: r.Who, Action: r.Path,
		ServerId: r.Server, Tool: r.Tool, PresetId: r.Preset, Outcome: r.Outcome, Error: r.Error,
		DurationMs: durationMs(r.Duration),
	}
	if l.cfg.Details {
		e.Arguments, e.ArgumentsTruncated, e.Result, e.ResultTruncated = r.Arguments, r.ArgumentsTruncated, r.Result, r.ResultTruncated
	}
	l.enqueue(e)
}

// Admin records an admin change that ended now: action (snake case, "upsert_server"),
// target (the id changed; server, when it is a server's, so that the server filter finds
// it), its outcome from err (nil: "ok"), how long it took, and the names of the fields it
// changed (never their values). Approvals and any other admin action call it too. It
// returns at once.
func (l *Log) Admin(ctx context.Context, action, target, server string, err error, took time.Duration, changed []string) {
	if l == nil {
		return
	}
	l.enqueue(adminEntry(ctx, action, target, server, err, took, changed))
}

// adminEntry is the entry of an admin change, by the caller of ctx.
func adminEntry(ctx context.Context, action, target, server string, err error, took time.Duration, changed []string) *mcpgatewayv1.AuditEntry {
	e := &mcpgatewayv1.AuditEntry{Time: time.Now().UTC().Format(activity.TimeLayout), Kind: KindAdmin, Who: activity.WhoOf(ctx),
		Action: action, Target: target, ServerId: server, Outcome: activity.OK, DurationMs: durationMs(took), Changed: changed}
	if err != nil {
		e.Outcome, e.Error = Outcome(err), activity.Cut(status.Convert(err).Message(), activity.MessageBytes)
	}
	return e
}

// Outcome names an error as an entry's outcome: its gRPC code in snake case
// ("invalid_argument"); "ok" for nil.
func Outcome(err error) string {
	c := status.Code(err)
	if c == codes.OK {
		return activity.OK
	}
	var b strings.Builder
	for i, r := range c.String() {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func durationMs(d time.Duration) int32 { return int32(min(max(d.Milliseconds(), 0), math.MaxInt32)) }

// enqueue queues e without blocking; a full queue, or a closed log, drops it.
func (l *Log) enqueue(e *mcpgatewayv1.AuditEntry) {
	if l.closed.Load() {
		l.drop("the audit log is closed")
		return
	}
	select {
	case l.q <- e:
	default:
		l.drop("the audit queue is full: the registry does not keep up with the calls")
	}
}

// drop counts a lost entry and logs at most once a minute.
func (l *Log) drop(why string) {
	n := l.dropped.Add(1)
	now := time.Now().Unix()
	if last := l.lastDropLog.Load(); now-last >= 60 && l.lastDropLog.CompareAndSwap(last, now) {
		l.log.Warn("audit entries dropped; they are in no listing (ListAudit's dropped counts them)", "why", why, "dropped_total", n, "queue", l.cfg.QueueSize)
	}
}

// run writes the queue in batches and trims the trail, until Close.
func (l *Log) run() {
	defer close(l.done)
	trim := time.NewTicker(l.cfg.TrimEvery)
	defer trim.Stop()
	l.trim()
	maxBatch := max(1, l.store.MaxAuditBatch())
	batch := make([]*mcpgatewayv1.AuditEntry, 0, maxBatch)
	flush := func() {
		if len(batch) > 0 {
			l.write(batch)
			batch = batch[:0]
		}
	}
	var timer *time.Timer
	var timeout <-chan time.Time // the first queued entry's flush time
	for {
		select {
		case e := <-l.q:
			batch = append(batch, e)
			switch {
			case len(batch) >= maxBatch:
				if timer != nil {
					timer.Stop()
				}
				timeout = nil
				flush()
			case timeout == nil:
				timer = time.NewTimer(l.cfg.FlushEvery)
				timeout = timer.C
			}
		case <-timeout:
			timeout = nil
			flush()
		case <-trim.C:
			l.trim()
		case <-l.stop:
			if timer != nil {
				timer.Stop()
			}
		drain:
			for {
				select {
				case e := <-l.q:
					if batch = append(batch, e); len(batch) >= maxBatch {
						flush()
					}
				default:
					break drain
				}
			}
			flush()
			return
		}
	}
}

// write stores one batch; a failure counts its entries as failed.
func (l *Log) write(batch []*mcpgatewayv1.AuditEntry) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	if err := l.store.AppendAudit(ctx, batch); err != nil {
		n := l.failed.Add(uint64(len(batch)))
		l.log.Error("audit entries not written to the registry", "entries", len(batch), "failed_total", n, "err", err)
	}
}

// trim applies the retention and each kind's bound, and reports what it removed: a log line
// at info per kind and reason, and one entry of kind trim, written at once (a full queue
// does not lose it).
func (l *Log) trim() {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	began := time.Now()
	trimmed, err := l.store.TrimAudit(ctx, registry.AuditBounds{OlderThan: began.Add(-l.cfg.Retention),
		MaxTool: l.cfg.MaxEntries, MaxAdmin: l.cfg.MaxAdminEntries})
	if err != nil {
		// What was removed before the failure is reported all the same.
		l.log.Warn("audit trail not trimmed; the next trim tries again", "err", err, "every", l.cfg.TrimEvery)
	}
	if len(trimmed) == 0 {
		return
	}
	e := &mcpgatewayv1.AuditEntry{Time: time.Now().UTC().Format(activity.TimeLayout), Kind: KindTrim, Who: TrimWho, Action: TrimAction,
		Outcome: activity.OK, DurationMs: durationMs(time.Since(began))}
	for _, t := range trimmed {
		from, to := t.From.UTC().Format(activity.TimeLayout), t.To.UTC().Format(activity.TimeLayout)
		l.log.Info("audit entries trimmed", "kind", t.Kind, "reason", t.Reason, "removed", t.Count, "from", from, "to", to)
		e.Trimmed = append(e.Trimmed, &mcpgatewayv1.AuditTrimmed{Kind: t.Kind, Reason: t.Reason, Count: int32(min(t.Count, math.MaxInt32)), From: from, To: to})
	}
	l.write([]*mcpgatewayv1.AuditEntry{e})
}

// Close writes what is queued and stops the writer; entries recorded after it are dropped.
// It returns ctx's error when the flush outlasts it.
func (l *Log) Close(ctx context.Context) error {
	if l == nil {
		return nil
	}
	l.once.Do(func() {
		l.closed.Store(true)
		close(l.stop)
	})
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("audit: flush on close: %w", ctx.Err())
	}
}

// ErrOff is the error of a listing when the trail is off.
var ErrOff = errors.New("the audit trail is off (ZEST_AUDIT_MAX_ENTRIES=0): set ZEST_AUDIT_MAX_ENTRIES to keep one")
