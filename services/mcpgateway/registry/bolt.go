package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

var (
	bucketMeta     = []byte("meta")
	bucketServers  = []byte("servers")
	bucketSessions = []byte("ended_sessions")
	bucketPresets  = []byte("presets")
	bucketLevels   = []byte("session_log_levels")
	keySchema      = []byte("schema_version")

	bucketSessionsByExpiry = []byte("ended_sessions_by_expiry")
	bucketLevelsByExpiry   = []byte("session_log_levels_by_expiry")
)

// The session buckets map a hashed session id to its expiry (Unix seconds, big-endian, 8
// bytes) and a payload; each has an index in expiry order so that a write prunes the expired
// entries without reading the others.
var (
	endedSessions = expiring{entries: bucketSessions, byExpiry: bucketSessionsByExpiry}
	sessionLevels = expiring{entries: bucketLevels, byExpiry: bucketLevelsByExpiry}
)

// migrations[v] upgrades a file from schema v to v+1; migrations[0] creates an empty file.
var migrations = []func(tx *bolt.Tx) error{
	func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketServers)
		return err
	},
	func(tx *bolt.Tx) error { // 1 → 2: ended /mcp sessions
		_, err := tx.CreateBucketIfNotExists(bucketSessions)
		return err
	},
	func(tx *bolt.Tx) error { // 2 → 3: chat presets
		_, err := tx.CreateBucketIfNotExists(bucketPresets)
		return err
	},
	func(tx *bolt.Tx) error { // 3 → 4: the logging/setLevel of /mcp sessions
		_, err := tx.CreateBucketIfNotExists(bucketLevels)
		return err
	},
	func(tx *bolt.Tx) error { // 4 → 5: the session entries indexed by expiry
		if err := endedSessions.buildIndex(tx); err != nil {
			return err
		}
		return sessionLevels.buildIndex(tx)
	},
	exposeStoredServers, // 5 → 6: expose (/mcp/servers/{id}), true for every server stored before it
}

// exposeStoredServers sets expose on every stored server config: the field came with schema 6,
// defaults to true, and protojson omits a false bool, so a record written before it would
// otherwise read as hidden.
func exposeStoredServers(tx *bolt.Tx) error {
	b := tx.Bucket(bucketServers)
	if b == nil {
		return nil
	}
	type kv struct{ k, v []byte }
	var out []kv
	err := b.ForEach(func(k, v []byte) error {
		cfg, err := decodeServer(v)
		if err != nil {
			return fmt.Errorf("server %q: %w", k, err)
		}
		cfg.Expose = proto.Bool(true)
		nv, err := encodeServer(cfg)
		if err != nil {
			return err
		}
		out = append(out, kv{append([]byte(nil), k...), nv})
		return nil
	})
	if err != nil {
		return err
	}
	for _, e := range out {
		if err := b.Put(e.k, e.v); err != nil {
			return err
		}
	}
	return nil
}

// Bolt is the bbolt registry: one file, mode 0600, fsync on every commit.
type Bolt struct {
	db    *bolt.DB
	audit *auditIDs
}

// Open opens (creating if needed) the registry file at path and migrates it to SchemaVersion.
func Open(path string) (*Bolt, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("registry directory: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("registry %s is locked by another process (is another mcpgateway running on it?): %w", path, err)
		}
		return nil, fmt.Errorf("open registry %s: %w", path, err)
	}
	// A file created by hand or copied in may be looser than 0600: tighten it.
	if err := os.Chmod(path, 0o600); err != nil {
		db.Close()
		return nil, fmt.Errorf("registry %s: set mode 0600: %w", path, err)
	}
	if err := db.Update(migrate); err != nil {
		db.Close()
		return nil, fmt.Errorf("registry %s: %w", path, err)
	}
	if err := db.Update(openAudit); err != nil {
		db.Close()
		return nil, fmt.Errorf("registry %s: audit buckets: %w", path, err)
	}
	return &Bolt{db: db, audit: newAuditIDs()}, nil
}

func migrate(tx *bolt.Tx) error {
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return err
	}
	v := 0
	if raw := meta.Get(keySchema); raw != nil {
		if v, err = strconv.Atoi(string(raw)); err != nil {
			return fmt.Errorf("schema_version %q is not a number", raw)
		}
	}
	if v > SchemaVersion {
		return fmt.Errorf("%w: file has %d, this build %d", ErrNewerSchema, v, SchemaVersion)
	}
	for ; v < SchemaVersion; v++ {
		if err := migrations[v](tx); err != nil {
			return fmt.Errorf("migrate schema %d to %d: %w", v, v+1, err)
		}
	}
	return meta.Put(keySchema, []byte(strconv.Itoa(SchemaVersion)))
}

// ListServers implements Registry.
func (b *Bolt) ListServers(context.Context) ([]*mcpgatewayv1.ServerConfig, error) {
	var out []*mcpgatewayv1.ServerConfig
	err := b.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketServers).ForEach(func(k, v []byte) error {
			cfg, err := decodeServer(v)
			if err != nil {
				return fmt.Errorf("server %q: %w", k, err)
			}
			out = append(out, cfg)
			return nil
		})
	})
	return out, err
}

// GetServer implements Registry.
func (b *Bolt) GetServer(_ context.Context, id string) (*mcpgatewayv1.ServerConfig, error) {
	var cfg *mcpgatewayv1.ServerConfig
	err := b.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketServers).Get([]byte(id))
		if v == nil {
			return fmt.Errorf("server %q: %w", id, ErrNotFound)
		}
		var err error
		cfg, err = decodeServer(v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// PutServer implements Registry.
func (b *Bolt) PutServer(_ context.Context, cfg *mcpgatewayv1.ServerConfig) error {
	if cfg.GetId() == "" {
		return errors.New("server id is empty")
	}
	v, err := encodeServer(cfg)
	if err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketServers).Put([]byte(cfg.GetId()), v) })
}

// DeleteServer implements Registry.
func (b *Bolt) DeleteServer(_ context.Context, id string) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketServers)
		if bk.Get([]byte(id)) == nil {
			return fmt.Errorf("server %q: %w", id, ErrNotFound)
		}
		return bk.Delete([]byte(id))
	})
}

// Close implements Registry.
func (b *Bolt) Close() error { return b.db.Close() }

// sessionKey stores a hash of the id: the id itself is a bearer credential of its session.
func sessionKey(id string) []byte {
	h := sha256.Sum256([]byte(id))
	return h[:]
}

// EndSession implements Registry; expired entries are pruned on the way.
func (b *Bolt) EndSession(_ context.Context, id string, expires time.Time) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		return endedSessions.put(tx, sessionKey(id), expires, "", time.Now().Unix())
	})
}

// SetSessionLogLevel implements Registry; expired entries are pruned on the way.
func (b *Bolt) SetSessionLogLevel(_ context.Context, id, level string, expires time.Time) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		return sessionLevels.put(tx, sessionKey(id), expires, level, time.Now().Unix())
	})
}

// expiring names a bucket of hashed session id → expiry + payload, and its index: expiry +
// hashed id → nothing, whose keys sort in expiry order. Every write keeps the two in step.
type expiring struct {
	entries, byExpiry []byte
}

// expiryKey is an index key: the expiry in Unix seconds, big-endian (a time before 1970 as
// 0, so that byte order is time order), then the hashed id.
func expiryKey(unix int64, hashed []byte) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(hashed)), uint64(max(unix, 0)))
	return append(k, hashed...)
}

// expiryOf reads the expiry at the start of an entry's value; ok is false for a value too
// short to hold one (such an entry is never indexed, and so never pruned, as before the
// index).
func expiryOf(v []byte) (unix int64, ok bool) {
	if len(v) < 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(v)), true
}

// prunePerWrite is the most expired entries one write deletes: a batch that expired
// together is spread over the next writes rather than held in one transaction.
const prunePerWrite = 1000

// put prunes up to prunePerWrite entries that expired before now, then stores hashed →
// expires + payload and moves the entry's index key to its new expiry. Each step is a lookup
// or an update of one key (O(log n)), and pruning reads the index only up to the first
// unexpired key.
func (e expiring) put(tx *bolt.Tx, hashed []byte, expires time.Time, payload string, now int64) error {
	entries, index := tx.Bucket(e.entries), tx.Bucket(e.byExpiry)
	if err := prune(entries, index, now, prunePerWrite); err != nil {
		return err
	}
	if old, ok := expiryOf(entries.Get(hashed)); ok {
		if err := index.Delete(expiryKey(old, hashed)); err != nil {
			return err
		}
	}
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(payload)), uint64(expires.Unix()))
	if err := entries.Put(hashed, append(v, payload...)); err != nil {
		return err
	}
	return index.Put(expiryKey(expires.Unix(), hashed), nil)
}

// prune deletes the first limit entries whose expiry is before now. It walks the index from
// its first key and stops at the first that has not expired.
func prune(entries, index *bolt.Bucket, now int64, limit int) error {
	var expired [][]byte
	c := index.Cursor()
	for k, _ := c.First(); k != nil && len(expired) < limit && int64(binary.BigEndian.Uint64(k)) < now; k, _ = c.Next() {
		expired = append(expired, bytes.Clone(k)) // k is invalid once the bucket changes
	}
	for _, k := range expired {
		hashed := k[8:]
		// The entry goes only if the index key is its own (it always is while the two are
		// kept in step by put).
		if at, ok := expiryOf(entries.Get(hashed)); ok && bytes.Equal(expiryKey(at, hashed), k) {
			if err := entries.Delete(hashed); err != nil {
				return err
			}
		}
		if err := index.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// buildIndex creates the index of a schema-4 bucket from its entries.
func (e expiring) buildIndex(tx *bolt.Tx) error {
	index, err := tx.CreateBucketIfNotExists(e.byExpiry)
	if err != nil {
		return err
	}
	return tx.Bucket(e.entries).ForEach(func(hashed, v []byte) error {
		if at, ok := expiryOf(v); ok {
			return index.Put(expiryKey(at, hashed), nil)
		}
		return nil
	})
}

// SessionLogLevel implements Registry.
func (b *Bolt) SessionLogLevel(_ context.Context, id string) (string, error) {
	level := ""
	err := b.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketLevels).Get(sessionKey(id)); len(v) > 8 && int64(binary.BigEndian.Uint64(v)) >= time.Now().Unix() {
			level = string(v[8:])
		}
		return nil
	})
	return level, err
}

// SessionEnded implements Registry.
func (b *Bolt) SessionEnded(_ context.Context, id string) (bool, error) {
	ended := false
	err := b.db.View(func(tx *bolt.Tx) error {
		ended = tx.Bucket(bucketSessions).Get(sessionKey(id)) != nil
		return nil
	})
	return ended, err
}

// ListPresets implements Registry.
func (b *Bolt) ListPresets(context.Context) ([]*mcpgatewayv1.Preset, error) {
	var out []*mcpgatewayv1.Preset
	err := b.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPresets).ForEach(func(k, v []byte) error {
			p, err := decodePreset(v)
			if err != nil {
				return fmt.Errorf("preset %q: %w", k, err)
			}
			out = append(out, p)
			return nil
		})
	})
	return out, err
}

// GetPreset implements Registry.
func (b *Bolt) GetPreset(_ context.Context, id string) (*mcpgatewayv1.Preset, error) {
	var p *mcpgatewayv1.Preset
	err := b.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketPresets).Get([]byte(id))
		if v == nil {
			return fmt.Errorf("preset %q: %w", id, ErrNotFound)
		}
		var err error
		p, err = decodePreset(v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// PutPreset implements Registry.
func (b *Bolt) PutPreset(_ context.Context, p *mcpgatewayv1.Preset) error {
	if p.GetId() == "" {
		return errors.New("preset id is empty")
	}
	v, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(p)
	if err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketPresets).Put([]byte(p.GetId()), v) })
}

// DeletePreset implements Registry.
func (b *Bolt) DeletePreset(_ context.Context, id string) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketPresets)
		if bk.Get([]byte(id)) == nil {
			return fmt.Errorf("preset %q: %w", id, ErrNotFound)
		}
		return bk.Delete([]byte(id))
	})
}

// decodePreset reads a stored preset. A legacy record has only tools_enabled: it reads back
// migrated (true → ["lemonade"], false → []); the next save writes both fields.
func decodePreset(v []byte) (*mcpgatewayv1.Preset, error) {
	p := &mcpgatewayv1.Preset{}
	if err := protojson.Unmarshal(v, p); err != nil {
		return nil, err
	}
	if !bytes.Contains(v, []byte(`"mcp_server_ids"`)) {
		p.McpServerIds = nil
		if p.GetToolsEnabled() {
			p.McpServerIds = []string{LemonadeProvider}
		}
	}
	return p, nil
}

// LemonadeProvider is the provider id of the built-in lemonade_* tools.
const LemonadeProvider = "lemonade"

// The audit trail is kept in one bucket per kind (auditSpaces: "audit" for the tool calls,
// "audit_admin", "audit_trim"), id → AuditEntry (protobuf). Ids sort in time order, so a
// bucket's first keys are its oldest. The buckets are created on open, outside the
// migrations: an older build ignores them.

// openAudit creates the audit buckets. When it creates the admin entries' bucket, it moves
// into it the admin entries an older build kept among the tool calls (once: the bucket's
// existence says it was done).
func openAudit(tx *bolt.Tx) error {
	admin := auditSpaceOf(AuditKindAdmin)
	split := tx.Bucket([]byte(admin.name)) == nil
	for _, sp := range auditSpaces {
		if _, err := tx.CreateBucketIfNotExists([]byte(sp.name)); err != nil {
			return err
		}
	}
	if !split {
		return nil
	}
	tools, admins := tx.Bucket([]byte(auditSpaces[0].name)), tx.Bucket([]byte(admin.name))
	var moved [][]byte
	err := tools.ForEach(func(k, v []byte) error {
		e := &mcpgatewayv1.AuditEntry{}
		if err := proto.Unmarshal(v, e); err != nil {
			return fmt.Errorf("audit entry %q: %w", k, err)
		}
		if e.GetKind() != AuditKindAdmin {
			return nil
		}
		moved = append(moved, k)
		return admins.Put(bytes.Clone(k), bytes.Clone(v))
	})
	if err != nil {
		return err
	}
	for _, k := range moved {
		if err := tools.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// BoltMaxAuditBatch is the most audit entries one bbolt transaction writes. A transaction's
// commit (its pages written, then fdatasync) costs CPU whatever it holds, so the trail's
// writer, which batches what arrives within audit.FlushEvery, spends less per entry in
// bigger ones: 6.0–7.9 µs of CPU an entry in batches of 100, 2.9–4.2 in batches of 1,000
// (BenchmarkAppendBatch in package audit). 1,000 entries are ~300 KB, ~3 MB with details.
const BoltMaxAuditBatch = 1000

// MaxAuditBatch implements AuditLog.
func (b *Bolt) MaxAuditBatch() int { return BoltMaxAuditBatch }

// AppendAudit implements AuditLog: one transaction (one fsync) for the whole batch.
func (b *Bolt) AppendAudit(_ context.Context, entries []*mcpgatewayv1.AuditEntry) error {
	b.audit.assign(entries)
	return b.db.Update(func(tx *bolt.Tx) error {
		for _, e := range entries {
			v, err := proto.Marshal(e)
			if err != nil {
				return err
			}
			if err := tx.Bucket([]byte(auditSpaceOf(e.GetKind()).name)).Put([]byte(e.GetId()), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// ListAudit implements AuditLog with a cursor over the id range of each space q reads.
func (b *Bolt) ListAudit(_ context.Context, q AuditQuery, fn func(*mcpgatewayv1.AuditEntry) bool) error {
	return b.db.View(func(tx *bolt.Tx) error {
		var cursors []auditCursor
		for _, sp := range q.spaces() {
			cursors = append(cursors, &boltAuditCursor{c: tx.Bucket([]byte(sp.name)).Cursor(), q: q})
		}
		return mergeAudit(q, cursors, fn)
	})
}

// boltAuditCursor walks one bucket's id range of q, in q's order.
type boltAuditCursor struct {
	c       *bolt.Cursor
	q       AuditQuery
	started bool
}

func (a *boltAuditCursor) next() (string, []byte, bool, error) {
	var k, v []byte
	q, c := a.q, a.c
	switch {
	case a.started && q.Ascending:
		k, v = c.Next()
	case a.started:
		k, v = c.Prev()
	case q.Ascending && q.After == "":
		k, v = c.First()
	case q.Ascending:
		if k, v = c.Seek([]byte(q.After)); k != nil && string(k) == q.After {
			k, v = c.Next()
		}
	case q.Before == "":
		k, v = c.Last()
	default:
		if k, _ = c.Seek([]byte(q.Before)); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev() // the first key at or past Before is outside
		}
	}
	a.started = true
	if k == nil || (q.After != "" && string(k) <= q.After) || (q.Before != "" && string(k) >= q.Before) {
		return "", nil, false, nil
	}
	return string(k), v, true, nil
}

// TrimAudit implements AuditLog in one transaction. The count is each bucket's (bbolt keeps
// none, so Stats walks its pages: TrimAudit runs every few minutes, not per call).
func (b *Bolt) TrimAudit(_ context.Context, bd AuditBounds) ([]AuditTrimmed, error) {
	var out []AuditTrimmed
	err := b.db.Update(func(tx *bolt.Tx) error {
		out = nil
		bound := []byte(AuditTimeBound(bd.OlderThan))
		for _, sp := range auditSpaces {
			bk := tx.Bucket([]byte(sp.name))
			c := bk.Cursor()
			age := AuditTrimmed{Kind: sp.kind, Reason: AuditTrimRetention}
			for k, _ := c.First(); k != nil && bytes.Compare(k, bound) < 0; k, _ = c.First() {
				age.removed(string(k), string(k), 1)
				if err := c.Delete(); err != nil {
					return err
				}
			}
			out = reported(out, age)
			max := bd.max(sp.kind)
			if max <= 0 {
				continue
			}
			count := AuditTrimmed{Kind: sp.kind, Reason: AuditTrimMaxEntries}
			for excess := bk.Stats().KeyN - max; excess > 0; excess-- {
				k, _ := c.First()
				if k == nil {
					break
				}
				count.removed(string(k), string(k), 1)
				if err := c.Delete(); err != nil {
					return err
				}
			}
			out = reported(out, count)
		}
		return nil
	})
	return out, err
}
