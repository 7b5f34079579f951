package registry

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	bolt "go.etcd.io/bbolt"
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
	if err := r.DeleteServer(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetServer(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if err := r.DeleteServer(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
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

func TestEndedSessionsAndMigrationFromV1(t *testing.T) {
	path := oldFile(t, "1", nil, bucketServers) // as the version-1 build wrote it
	r, err := Open(path)
	if err != nil {
		t.Fatalf("migrating 1 → 2: %v", err)
	}
	defer r.Close()
	ctx := t.Context()
	if ended, _ := r.SessionEnded(ctx, "s1"); ended {
		t.Fatal("a fresh session reads as ended")
	}
	if err := r.EndSession(ctx, "s1", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := r.EndSession(ctx, "old", time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := r.EndSession(ctx, "s2", time.Now().Add(time.Hour)); err != nil { // prunes "old"
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"s1": true, "s2": true, "old": false, "s3": false} {
		if ended, _ := r.SessionEnded(ctx, id); ended != want {
			t.Errorf("SessionEnded(%s) = %v, want %v", id, ended, want)
		}
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
	// A saved preset keeps an explicit empty list even with the legacy flag set.
	if err := r.PutPreset(t.Context(), &mcpgatewayv1.Preset{Id: "new", ToolsEnabled: false}); err != nil {
		t.Fatal(err)
	}
	if p, _ := r.GetPreset(t.Context(), "new"); len(p.GetMcpServerIds()) != 0 {
		t.Fatalf("new = %v", p)
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
