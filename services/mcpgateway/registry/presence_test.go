package registry

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/etcdtest"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
)

// schema6Servers are server configs as the registry stored them before ServerConfig had field
// presence: testdata/servers-schema6.jsonl was written by that build's protojson.Marshal of
// that build's ServerConfig (what bolt.go and etcd.go did), which left out every false, 0 and
// "" field — "disabled" has no enabled, "hidden" no expose.
func schema6Servers(t *testing.T) map[string][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "servers-schema6.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		cfg, err := decodeServer(line)
		if err != nil {
			t.Fatal(err)
		}
		out[cfg.GetId()] = line
	}
	return out
}

// schema6Meaning is what those records meant to the build that wrote them, as this build
// stores it: enabled and expose always set.
var schema6Meaning = map[string]*mcpgatewayv1.ServerConfig{
	"disabled": {Id: "disabled", Name: "disabled", Transport: "stdio", Command: "node", Args: []string{"a.js"},
		Enabled: proto.Bool(false), TimeoutMs: proto.Int32(30000), Expose: proto.Bool(true)},
	"hidden": {Id: "hidden", Name: "Hidden", Transport: "streamable-http", Url: "https://h.example/mcp", Enabled: proto.Bool(true),
		TimeoutMs: proto.Int32(5000), Expose: proto.Bool(false), ToolsDeny: []string{"get-env"}, MaxOutputBytes: proto.Int32(4096),
		RateLimit: proto.String("10/s"), MaxConcurrency: proto.Int32(2), Approval: proto.String("required"), ApprovalBy: proto.String("client")},
	"plain": {Id: "plain", Name: "plain", Transport: "stdio", Command: "npx", Enabled: proto.Bool(true), TimeoutMs: proto.Int32(30000),
		Expose: proto.Bool(true), ToolHost: proto.String("th-1"), Sandbox: &mcpgatewayv1.Sandbox{Enabled: proto.Bool(false)}},
}

// checkSchema6Meaning reads every record through r and compares it with what it meant.
func checkSchema6Meaning(t *testing.T, r Registry) {
	t.Helper()
	list, err := r.ListServers(t.Context())
	if err != nil || len(list) != len(schema6Meaning) {
		t.Fatalf("ListServers: %d servers, %v", len(list), err)
	}
	for _, got := range list {
		if want := schema6Meaning[got.GetId()]; !proto.Equal(got, want) {
			t.Errorf("listed %s = %v\nwant %v", got.GetId(), got, want)
		}
	}
	for id, want := range schema6Meaning {
		if got, err := r.GetServer(t.Context(), id); err != nil || !proto.Equal(got, want) {
			t.Errorf("GetServer(%s) = %v, %v\nwant %v", id, got, err, want)
		}
	}
}

// TestBoltServersStoredBeforePresence: a schema-6 file's servers read as they meant — a
// disabled server's enabled is false, not unset (which an update would take as "the default,
// true"), a hidden one's expose likewise — and written back and read again they are the same.
func TestBoltServersStoredBeforePresence(t *testing.T) {
	records := schema6Servers(t)
	path := oldFile(t, "6", func(tx *bolt.Tx) error {
		for id, v := range records {
			if err := tx.Bucket(bucketServers).Put([]byte(id), v); err != nil {
				return err
			}
		}
		return nil
	}, bucketServers, bucketSessions, bucketPresets, bucketLevels, bucketSessionsByExpiry, bucketLevelsByExpiry)
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	checkSchema6Meaning(t, r)
	for id := range schema6Meaning {
		cfg, err := r.GetServer(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.PutServer(t.Context(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if r, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	checkSchema6Meaning(t, r)
}

// TestEtcdServersStoredBeforePresence: the same on etcd, where a replica of the older build
// may keep writing such records after this one started: they read as they meant through
// GetServer, ListServers and the watch.
func TestEtcdServersStoredBeforePresence(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	r := openTestEtcd(t, c.Endpoints(), nil)
	ctx := t.Context()
	changes := make(chan Change, 16)
	go func() { _ = r.Watch(ctx, func(ch Change) { changes <- ch }) }()
	next := func() Change {
		t.Helper()
		select {
		case ch := <-changes:
			return ch
		case <-time.After(10 * time.Second):
			t.Fatal("no change from the watch within 10s")
			return Change{}
		}
	}
	if ch := next(); ch.Kind != Resync {
		t.Fatalf("first change %+v, want Resync", ch)
	}
	records := schema6Servers(t)
	for id, v := range records { // as an older replica writes them
		if _, err := r.cli.Put(ctx, r.prefix+dirServers+id, string(v)); err != nil {
			t.Fatal(err)
		}
	}
	for range records {
		ch := next()
		if want := schema6Meaning[ch.ID]; ch.Kind != ServerPut || !proto.Equal(ch.Server, want) {
			t.Errorf("watched %+v\nwant %v", ch, want)
		}
	}
	checkSchema6Meaning(t, r)
}
