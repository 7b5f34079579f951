package registry

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/proto"
)

// AuditLog is the registry's audit trail (package audit writes it): an append-only log of
// entries whose ids sort in time order and are unique across every writer of the same store
// (several mcpgateway replicas on one etcd), bounded by age and by count. Each kind of entry
// is kept in a space of its own (auditSpaces) and bounded by count on its own, so that no
// amount of tool calls pushes an admin change out. Both stores implement it; its buckets
// (bbolt) and directories (etcd) are additive, so an older build that does not know them
// ignores them and the schema version is unchanged.
type AuditLog interface {
	// AppendAudit stores entries in one write, each in its kind's space, setting each one's Id
	// from its Time (RFC 3339; now when it does not parse), moved on by a nanosecond when this
	// writer already used that instant: the ids of one writer grow in the order it appends.
	AppendAudit(ctx context.Context, entries []*mcpgatewayv1.AuditEntry) error
	// MaxAuditBatch is the most entries one AppendAudit takes: what one transaction of the
	// store holds (BoltMaxAuditBatch, EtcdMaxAuditBatch).
	MaxAuditBatch() int
	// ListAudit calls fn with the entries q selects, of every kind's space merged in id order
	// (newest first unless q.Ascending), until fn returns false or none is left.
	ListAudit(ctx context.Context, q AuditQuery, fn func(*mcpgatewayv1.AuditEntry) bool) error
	// TrimAudit deletes, in each kind's space, the entries stored before b.OlderThan, then the
	// oldest ones past that kind's bound in b, and says what it deleted: one AuditTrimmed per
	// kind and reason that removed entries (a trim's own reports, AuditKindTrim, are removed
	// without a word: reporting them would write another). Every replica may run it: two at
	// once delete the same entries, and each reports what it deleted.
	TrimAudit(ctx context.Context, b AuditBounds) ([]AuditTrimmed, error)
}

// Kinds of audit entries; each is kept in a space of its own (auditSpaces).
const (
	// AuditKindTool is a tool call, on any path.
	AuditKindTool = "tool"
	// AuditKindAdmin is an admin change, an approval's decision among them.
	AuditKindAdmin = "admin"
	// AuditKindTrim is the trail's own report of a trim that removed entries.
	AuditKindTrim = "trim"
)

// auditSpace is where the entries of one kind are kept: the bbolt bucket, and the etcd
// directory name+"/" under the prefix.
type auditSpace struct{ kind, name string }

// auditSpaces are the spaces of the kinds, in order; the tool calls' space is the trail's
// first (the only one of older builds, which kept every kind there).
var auditSpaces = []auditSpace{
	{kind: AuditKindTool, name: "audit"},
	{kind: AuditKindAdmin, name: "audit_admin"},
	{kind: AuditKindTrim, name: "audit_trim"},
}

// auditSpaceOf is the space an entry of kind is kept in: its own, or the tool calls' for a
// kind without one.
func auditSpaceOf(kind string) auditSpace {
	for _, sp := range auditSpaces {
		if sp.kind == kind {
			return sp
		}
	}
	return auditSpaces[0]
}

// Reasons a trim removes entries (AuditTrimmed.Reason).
const (
	// AuditTrimRetention: stored before AuditBounds.OlderThan.
	AuditTrimRetention = "retention"
	// AuditTrimMaxEntries: past their kind's bound by count.
	AuditTrimMaxEntries = "max_entries"
)

// AuditBounds are what TrimAudit keeps.
type AuditBounds struct {
	// OlderThan: the entries of every kind stored before it are deleted.
	OlderThan time.Time
	// MaxTool bounds the tool calls kept; MaxAdmin the admin entries, and the trims' own
	// reports, in a count of their own. 0: no bound by count.
	MaxTool, MaxAdmin int
}

// max is the bound by count of kind's space.
func (b AuditBounds) max(kind string) int {
	if auditSpaceOf(kind).kind == AuditKindTool {
		return b.MaxTool
	}
	return b.MaxAdmin
}

// AuditTrimmed is what one trim removed of one kind for one reason.
type AuditTrimmed struct {
	Kind   string // AuditKindTool or AuditKindAdmin
	Reason string // AuditTrimRetention or AuditTrimMaxEntries
	Count  int
	// From and To are when the oldest and the newest entries removed were stored (the times of
	// their ids).
	From, To time.Time
}

// removed counts n more entries removed, the ids from oldest to newest (removals come
// oldest first).
func (t *AuditTrimmed) removed(oldest, newest string, n int) {
	if t.Count == 0 {
		t.From, _ = auditTimeOf(oldest)
	}
	t.To, _ = auditTimeOf(newest)
	t.Count += n
}

// reported appends t to out when it removed entries of a kind that is reported.
func reported(out []AuditTrimmed, t AuditTrimmed) []AuditTrimmed {
	if t.Count == 0 || t.Kind == AuditKindTrim {
		return out
	}
	return append(out, t)
}

// AuditQuery selects audit entries. After and Before are exclusive bounds on the id (an id,
// or AuditTimeBound of a time); the others keep the entries whose field is equal.
type AuditQuery struct {
	After, Before string
	Kind          string
	Server        string
	Who           string
	Ascending     bool
	// Limit, when above 0, says the caller stops after that many entries: a store that reads
	// in pages reads no bigger ones while no field filter can skip entries.
	Limit int
}

// spaces are the spaces q reads: its kind's, or every one.
func (q AuditQuery) spaces() []auditSpace {
	for _, sp := range auditSpaces {
		if sp.kind == q.Kind {
			return []auditSpace{sp}
		}
	}
	return auditSpaces
}

// filtered reports whether q has a field filter (entries read may be skipped).
func (q AuditQuery) filtered() bool { return q.Kind != "" || q.Server != "" || q.Who != "" }

// matches reports whether e passes q's field filters (the bounds are the store's range).
func (q AuditQuery) matches(e *mcpgatewayv1.AuditEntry) bool {
	return (q.Kind == "" || e.GetKind() == q.Kind) && (q.Server == "" || e.GetServerId() == q.Server) &&
		(q.Who == "" || e.GetWho() == q.Who)
}

// AuditIDLen is the length of an audit id: 16 hex digits of Unix nanoseconds, "-", 16 hex
// digits of the writer.
const AuditIDLen = 33

// AuditTimeBound is the bound that stands for the time t in AuditQuery: it sorts before
// every id stored at t or later and after every id stored before t, so that After=
// AuditTimeBound(t) keeps the entries stored at t and later and Before=AuditTimeBound(t)
// those stored before t (a half-open interval, as a time range usually is).
func AuditTimeBound(t time.Time) string {
	return fmt.Sprintf("%016x-", uint64(max(t.UnixNano(), 0)))
}

// auditTimeOf reads the time an id was stored at (ok false for a malformed id).
func auditTimeOf(id string) (time.Time, bool) {
	if len(id) != AuditIDLen || id[16] != '-' {
		return time.Time{}, false
	}
	n, err := strconv.ParseUint(id[:16], 16, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, int64(n)), true
}

// auditIDs hands out this writer's ids.
type auditIDs struct {
	writer uint64
	mu     sync.Mutex
	last   int64
}

// newAuditIDs draws a random writer id: two replicas collide with a chance of 2^-64.
func newAuditIDs() *auditIDs {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &auditIDs{writer: binary.BigEndian.Uint64(b[:])}
}

// assign sets the ids of entries, in order.
func (a *auditIDs) assign(entries []*mcpgatewayv1.AuditEntry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range entries {
		at, err := time.Parse(time.RFC3339Nano, e.GetTime())
		n := at.UnixNano()
		if err != nil || n <= 0 {
			n = time.Now().UnixNano()
		}
		if n <= a.last {
			n = a.last + 1
		}
		a.last = n
		e.Id = fmt.Sprintf("%016x-%016x", uint64(n), a.writer)
	}
}

// auditCursor yields the entries of one space in a listing's order.
type auditCursor interface {
	// next returns the next entry's id and its stored bytes; ok is false past the last.
	next() (id string, val []byte, ok bool, err error)
}

// mergeAudit calls fn with the entries of cursors, merged in id order (the cursors' own:
// newest first unless q.Ascending), that q's field filters keep, until fn returns false or
// every cursor is done.
func mergeAudit(q AuditQuery, cursors []auditCursor, fn func(*mcpgatewayv1.AuditEntry) bool) error {
	type head struct {
		id  string
		val []byte
		ok  bool
	}
	heads := make([]head, len(cursors))
	for i, c := range cursors {
		id, val, ok, err := c.next()
		if err != nil {
			return err
		}
		heads[i] = head{id, val, ok}
	}
	for {
		best := -1
		for i, h := range heads {
			if h.ok && (best < 0 || (q.Ascending && h.id < heads[best].id) || (!q.Ascending && h.id > heads[best].id)) {
				best = i
			}
		}
		if best < 0 {
			return nil
		}
		e := &mcpgatewayv1.AuditEntry{}
		if err := proto.Unmarshal(heads[best].val, e); err != nil {
			return fmt.Errorf("audit entry %q: %w", heads[best].id, err)
		}
		id, val, ok, err := cursors[best].next()
		if err != nil {
			return err
		}
		heads[best] = head{id, val, ok}
		if q.matches(e) && !fn(e) {
			return nil
		}
	}
}
