package registry

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

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
	path := filepath.Join(t.TempDir(), "registry.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		return b.Put(keySchema, []byte("99"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("Open = %v, want ErrNewerSchema", err)
	}
}
