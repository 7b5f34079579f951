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
)

// AuditLog is the registry's audit trail (package audit writes it): an append-only log of
// entries whose ids sort in time order and are unique across every writer of the same store
// (several mcpgateway replicas on one etcd), bounded by age and by count. Both stores
// implement it; the audit bucket (bbolt) and the audit/ keys (etcd) are additive, so an older
// build that does not know them ignores them and the schema version is unchanged.
type AuditLog interface {
	// AppendAudit stores entries in one write, setting each one's Id from its Time (RFC 3339;
	// now when it does not parse), moved on by a nanosecond when this writer already used that
	// instant: the ids of one writer grow in the order it appends.
	AppendAudit(ctx context.Context, entries []*mcpgatewayv1.AuditEntry) error
	// ListAudit calls fn with the entries q selects, in id order (newest first unless
	// q.Ascending), until fn returns false or none is left.
	ListAudit(ctx context.Context, q AuditQuery, fn func(*mcpgatewayv1.AuditEntry) bool) error
	// TrimAudit deletes the entries stored before olderThan, then the oldest ones past
	// maxEntries (when maxEntries > 0), and returns how many it deleted. Every replica may run
	// it: two at once delete the same entries.
	TrimAudit(ctx context.Context, olderThan time.Time, maxEntries int) (int, error)
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
