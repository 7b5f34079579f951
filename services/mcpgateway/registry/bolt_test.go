package registry

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
)

func TestBoltRoundTripSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "registry.db")
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, id := range []string{"b", "a"} {
		if err := r.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: id, Command: "node", Env: map[string]string{"K": "${K}"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v, want 0600", st.Mode().Perm())
	}

	r, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	list, err := r.ListServers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].GetId() != "a" || list[1].GetEnv()["K"] != "${K}" {
		t.Fatalf("list = %v", list)
	}
}

func TestOpenTightensLooseMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.db")
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v, want 0600", st.Mode().Perm())
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	path := oldFile(t, "99", nil)
	if _, err := Open(path); !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("Open = %v, want ErrNewerSchema", err)
	}
}

// TestMigrationFromV1 opens a file as the version-1 build wrote it; its sessions work after
// (what they promise is in the contract suite, contract_test.go).
func TestMigrationFromV1(t *testing.T) {
	path := oldFile(t, "1", nil, bucketServers)
	r, err := Open(path)
	if err != nil {
		t.Fatalf("migrating 1 → 2: %v", err)
	}
	defer r.Close()
	ctx := t.Context()
	if err := r.EndSession(ctx, "s1", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ended, err := r.SessionEnded(ctx, "s1"); err != nil || !ended {
		t.Fatalf("SessionEnded = %v, %v", ended, err)
	}
}

func TestLegacyPresetsReadBackMigrated(t *testing.T) {
	r, err := Open(filepath.Join(t.TempDir(), "registry.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Records as an older writer left them: tools_enabled only.
	err = r.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPresets)
		if err := b.Put([]byte("old-on"), []byte(`{"id":"old-on","name":"On","tools_enabled":true}`)); err != nil {
			return err
		}
		return b.Put([]byte("old-off"), []byte(`{"id":"old-off","tools_enabled":false}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	on, _ := r.GetPreset(t.Context(), "old-on")
	off, _ := r.GetPreset(t.Context(), "old-off")
	if len(on.GetMcpServerIds()) != 1 || on.GetMcpServerIds()[0] != "lemonade" || len(off.GetMcpServerIds()) != 0 {
		t.Fatalf("on %v off %v", on, off)
	}
}

func TestSessionLogLevelsMigrateSurviveReopenAndExpire(t *testing.T) {
	path := oldFile(t, "3", nil, bucketServers, bucketSessions, bucketPresets) // as the version-3 build wrote it
	r, err := Open(path)
	if err != nil {
		t.Fatalf("migrating 3 → 4: %v", err)
	}
	ctx := t.Context()
	if l, err := r.SessionLogLevel(ctx, "sess-id-kept-as-hash-1"); err != nil || l != "" {
		t.Fatalf("a session that set no level: %q %v", l, err)
	}
	if err := r.SetSessionLogLevel(ctx, "sess-id-kept-as-hash-1", "debug", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := r.SetSessionLogLevel(ctx, "old", "error", time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := r.SetSessionLogLevel(ctx, "sess-id-kept-as-hash-1", "warning", time.Now().Add(time.Hour)); err != nil { // replaces, prunes "old"
		t.Fatal(err)
	}
	r.Close()
	if r, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for id, want := range map[string]string{"sess-id-kept-as-hash-1": "warning", "old": "", "sess-id-kept-as-hash-2": ""} {
		if l, _ := r.SessionLogLevel(ctx, id); l != want {
			t.Errorf("SessionLogLevel(%s) = %q, want %q", id, l, want)
		}
	}
	raw, _ := os.ReadFile(path)
	if bytes.Contains(raw, []byte("sess-id-kept-as-hash-1")) {
		t.Error("a session id is stored in clear (ids are bearer credentials: only hashes are kept)")
	}
}

// oldFile writes a registry file of schema version with the given buckets, as an earlier
// (or later) build left it, and returns its path. fill, when not nil, writes entries into
// those buckets in the same transaction.
func oldFile(tb testing.TB, version string, fill func(tx *bolt.Tx) error, buckets ...[]byte) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "registry.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		tb.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		m, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		for _, b := range buckets {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		if fill != nil {
			if err := fill(tx); err != nil {
				return err
			}
		}
		return m.Put(keySchema, []byte(version))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		tb.Fatal(err)
	}
	return path
}

func TestSessionWritesPruneExpiredAndKeepUnexpired(t *testing.T) {
	r, err := Open(filepath.Join(t.TempDir(), "registry.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, now := t.Context(), time.Now()
	writes := []struct {
		id  string
		exp time.Time
	}{
		{"gone-1", now.Add(-time.Hour)},
		{"kept-1", now.Add(time.Hour)},
		{"gone-2", now.Add(-2 * time.Hour)},
		{"gone-3", time.Time{}}, // before 1970: sorts first in the index, and has expired
		{"kept-2", now.Add(2 * time.Hour)},
		{"kept-3", now.Add(time.Minute)},
		{"moved", now.Add(time.Minute)}, // written again with a later expiry: its index key moves
		{"moved", now.Add(3 * time.Hour)},
		{"back", now.Add(-time.Minute)}, // expired, then written again unexpired
		{"back", now.Add(time.Hour)},
		{"last", now.Add(time.Hour)}, // a write after all the others: it prunes
	}
	for _, w := range writes {
		if err := r.EndSession(ctx, w.id, w.exp); err != nil {
			t.Fatal(err)
		}
		if err := r.SetSessionLogLevel(ctx, w.id, "debug", w.exp); err != nil {
			t.Fatal(err)
		}
	}
	kept := []string{"kept-1", "kept-2", "kept-3", "moved", "back", "last"}
	for _, e := range []expiring{endedSessions, sessionLevels} {
		t.Run(string(e.entries), func(t *testing.T) {
			got := indexedEntries(t, r, e)
			if len(got) != len(kept) {
				t.Errorf("%d entries stored, want %d (the unexpired ones)", len(got), len(kept))
			}
			for _, id := range kept {
				if _, ok := got[string(sessionKey(id))]; !ok {
					t.Errorf("unexpired %s was pruned", id)
				}
			}
			if at := got[string(sessionKey("moved"))]; at != now.Add(3*time.Hour).Unix() {
				t.Errorf("moved expires at %d, want its later expiry", at)
			}
		})
	}
	for id, want := range map[string]bool{"kept-1": true, "moved": true, "back": true, "gone-1": false, "gone-3": false} {
		if ended, _ := r.SessionEnded(ctx, id); ended != want {
			t.Errorf("SessionEnded(%s) = %v, want %v", id, ended, want)
		}
		if l, _ := r.SessionLogLevel(ctx, id); (l == "debug") != want {
			t.Errorf("SessionLogLevel(%s) = %q", id, l)
		}
	}
}

// TestPruningIsCappedPerWrite: a batch of entries that expired together is deleted at most
// prunePerWrite a write, oldest first, until none is left; unexpired entries stay.
func TestPruningIsCappedPerWrite(t *testing.T) {
	r, err := Open(filepath.Join(t.TempDir(), "registry.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, now := t.Context(), time.Now()
	const batch = 2*prunePerWrite + 500
	err = r.db.Update(func(tx *bolt.Tx) error { // stored as if written before they expired
		for i := range batch {
			id := fmt.Sprintf("expired-%d", i)
			exp := now.Add(-time.Hour - time.Duration(i)*time.Second) // the highest i expired first
			if err := endedSessions.put(tx, sessionKey(id), exp, "", 0); err != nil {
				return err
			}
			if err := sessionLevels.put(tx, sessionKey(id), exp, "debug", 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for write, left := 1, batch; left > 0; write++ {
		left = max(left-prunePerWrite, 0)
		id := fmt.Sprintf("live-%d", write)
		if err := r.EndSession(ctx, id, now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := r.SetSessionLogLevel(ctx, id, "info", now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		for _, e := range []expiring{endedSessions, sessionLevels} {
			got := indexedEntries(t, r, e)
			if len(got) != left+write {
				t.Fatalf("%s after write %d: %d entries, want %d expired and %d live", e.entries, write, len(got), left, write)
			}
			// The oldest go first: what is left are the entries that expired last.
			for i := range left {
				if _, ok := got[string(sessionKey(fmt.Sprintf("expired-%d", i)))]; !ok {
					t.Fatalf("%s after write %d: expired-%d was pruned before older entries", e.entries, write, i)
				}
			}
		}
	}
}

func TestMigrationFromV4IndexesSessionEntries(t *testing.T) {
	now := time.Now()
	entries := map[string]time.Time{"live-1": now.Add(time.Hour), "live-2": now.Add(time.Minute), "old-1": now.Add(-time.Hour), "old-2": now.Add(-time.Second * 2)}
	path := oldFile(t, "4", func(tx *bolt.Tx) error { // as the version-4 build wrote it
		for id, exp := range entries {
			v := binary.BigEndian.AppendUint64(nil, uint64(exp.Unix()))
			if err := tx.Bucket(bucketSessions).Put(sessionKey(id), v); err != nil {
				return err
			}
			if err := tx.Bucket(bucketLevels).Put(sessionKey(id), append(v, "info"...)); err != nil {
				return err
			}
		}
		// A value too short to hold an expiry was never pruned by schema 4; it is kept.
		return tx.Bucket(bucketSessions).Put(sessionKey("short"), []byte{1})
	}, bucketServers, bucketSessions, bucketPresets, bucketLevels)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatalf("migrating 4 → 5: %v", err)
	}
	ctx := t.Context()
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v, want 0600", st.Mode().Perm())
	}
	_ = r.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keySchema); string(v) != strconv.Itoa(SchemaVersion) {
			t.Errorf("schema_version = %q, want %d", v, SchemaVersion)
		}
		return nil
	})
	// Every entry is indexed, expired ones too until the next write prunes them.
	if got := indexedEntries(t, r, endedSessions); len(got) != 5 {
		t.Fatalf("ended sessions after the migration: %d, want 5", len(got))
	}
	if got := indexedEntries(t, r, sessionLevels); len(got) != 4 {
		t.Fatalf("log levels after the migration: %d, want 4", len(got))
	}
	if err := r.EndSession(ctx, "new", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := r.SetSessionLogLevel(ctx, "live-1", "debug", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if r, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ended, levels := indexedEntries(t, r, endedSessions), indexedEntries(t, r, sessionLevels)
	for _, id := range []string{"live-1", "live-2", "new", "short"} {
		if _, ok := ended[string(sessionKey(id))]; !ok {
			t.Errorf("ended session %s is gone", id)
		}
	}
	if len(ended) != 4 || len(levels) != 2 {
		t.Errorf("after a write: %d ended sessions (want 4), %d levels (want 2): the expired ones were not pruned", len(ended), len(levels))
	}
	for id, want := range map[string]string{"live-1": "debug", "live-2": "info", "old-1": ""} {
		if l, _ := r.SessionLogLevel(ctx, id); l != want {
			t.Errorf("SessionLogLevel(%s) = %q, want %q", id, l, want)
		}
	}
}

// indexedEntries returns the entries of e (hashed id → expiry) after checking that the index
// holds exactly one key for each entry that has an expiry, and no other key.
func indexedEntries(t *testing.T, r *Bolt, e expiring) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := r.db.View(func(tx *bolt.Tx) error {
		want := map[string]bool{}
		err := tx.Bucket(e.entries).ForEach(func(k, v []byte) error {
			at, ok := expiryOf(v)
			out[string(k)] = at
			if ok {
				want[string(expiryKey(at, k))] = true
			}
			return nil
		})
		if err != nil {
			return err
		}
		n := 0
		err = tx.Bucket(e.byExpiry).ForEach(func(k, _ []byte) error {
			n++
			if !want[string(k)] {
				t.Errorf("%s: index key %x names no entry with that expiry", e.byExpiry, k)
			}
			return nil
		})
		if n != len(want) {
			t.Errorf("%s: %d index keys for %d entries", e.byExpiry, n, len(want))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Tool filters are stored with the config; a record written before they existed (no
// tools_allow or tools_deny) reads back with none, which exposes every tool.
func TestToolFiltersRoundTripAndOldRecordsRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.db")
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := r.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "new", Command: "node", ToolsAllow: []string{"echo", "get-*"}, ToolsDeny: []string{"get-env"}}); err != nil {
		t.Fatal(err)
	}
	// As an earlier build stored it: protojson of a ServerConfig without the filter fields.
	old := `{"id":"old","name":"old","transport":"stdio","command":"node","args":["a.js"],"enabled":true,"timeout_ms":30000}`
	if err := r.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketServers).Put([]byte("old"), []byte(old)) }); err != nil {
		t.Fatal(err)
	}
	var stored []byte
	if err := r.db.View(func(tx *bolt.Tx) error {
		stored = bytes.Clone(tx.Bucket(bucketServers).Get([]byte("new")))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var fields map[string]any // protojson varies its spacing: read it back as JSON
	if err := json.Unmarshal(stored, &fields); err != nil || fmt.Sprint(fields["tools_allow"]) != "[echo get-*]" || fmt.Sprint(fields["tools_deny"]) != "[get-env]" {
		t.Fatalf("stored %s (%v)", stored, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	list, err := r.ListServers(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("%v %v", list, err)
	}
	got, err := r.GetServer(ctx, "new")
	if err != nil || strings.Join(got.GetToolsAllow(), ",") != "echo,get-*" || strings.Join(got.GetToolsDeny(), ",") != "get-env" {
		t.Fatalf("new: %v %v", got, err)
	}
	got, err = r.GetServer(ctx, "old")
	if err != nil || got.GetToolsAllow() != nil || got.GetToolsDeny() != nil || got.GetTimeoutMs() != 30000 || !got.GetEnabled() {
		t.Fatalf("old: %v %v", got, err)
	}
}

// TestMigrationFromV5ExposesStoredServers: a server stored before expose existed reads as
// exposed after the migration (protojson omits a false bool, so without it every old server
// would be hidden from /mcp/servers/{id}); a later expose:false is kept.
func TestMigrationFromV5ExposesStoredServers(t *testing.T) {
	path := oldFile(t, "5", func(tx *bolt.Tx) error {
		return tx.Bucket(bucketServers).Put([]byte("old"), []byte(`{"id":"old","transport":"stdio","command":"node","enabled":true,"timeout_ms":30000}`))
	}, bucketServers, bucketSessions, bucketPresets, bucketLevels, bucketSessionsByExpiry, bucketLevelsByExpiry)
	r, err := Open(path)
	if err != nil {
		t.Fatalf("migrating 5 → 6: %v", err)
	}
	defer r.Close()
	ctx := t.Context()
	cfg, err := r.GetServer(ctx, "old")
	if err != nil || !cfg.GetExpose() || cfg.GetCommand() != "node" || !cfg.GetEnabled() {
		t.Fatalf("old server after the migration: %v, %v", cfg, err)
	}
	cfg.Expose = proto.Bool(false)
	if err := r.PutServer(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.GetServer(ctx, "old"); got.GetExpose() {
		t.Fatal("expose:false was not kept")
	}
}
