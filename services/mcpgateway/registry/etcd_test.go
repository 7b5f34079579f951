package registry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/etcdtest"
	"github.com/zestmcp/zest/lib/waitfor"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// leaderOf returns the index of the cluster's leader, as the members see it.
func leaderOf(t *testing.T, r *Etcd, eps []string) int {
	t.Helper()
	for i, ep := range eps {
		st, err := r.cli.Status(t.Context(), "http://"+ep)
		if err == nil && st.Leader == st.Header.MemberId {
			return i
		}
	}
	t.Fatal("no member says it leads")
	return -1
}

// TestEtcdAcknowledgedWriteSurvivesLeaderKill: a write acknowledged before the leader of three
// is SIGKILLed is read after, through the two left and a write goes on; the killed member
// restarts on its data and serves both, alone through its own endpoint.
func TestEtcdAcknowledgedWriteSurvivesLeaderKill(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 3)
	eps := c.Endpoints()
	r := openTestEtcd(t, eps, func(cfg *EtcdConfig) { cfg.RequestTimeout = 3 * time.Second })
	ctx := t.Context()
	if err := r.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "before", Command: "node"}); err != nil {
		t.Fatal(err)
	}
	leader := leaderOf(t, r, eps)
	c.Kill(leader)
	start := time.Now()
	if got, err := r.GetServer(ctx, "before"); err != nil || got.GetCommand() != "node" {
		t.Fatalf("after SIGKILL of the leader: %v, %v", got, err)
	}
	if err := r.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "during", Command: "python"}); err != nil {
		t.Fatalf("a write with two of three members up: %v", err)
	}
	t.Logf("read and write after the leader's SIGKILL: %v", time.Since(start))
	c.Restart(leader)
	alone := openTestEtcd(t, eps[leader:leader+1], nil)
	list, err := alone.ListServers(ctx)
	if err != nil || len(list) != 2 || list[0].GetId() != "before" || list[1].GetId() != "during" {
		t.Fatalf("the restarted member serves %v, %v; want before and during", list, err)
	}
}

// TestEtcdWithoutQuorumFailsInTime: with two of three members killed, calls fail within the
// request timeout with an error that says what to check, and succeed again once a member is
// back, on the same registry.
func TestEtcdWithoutQuorumFailsInTime(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 3)
	const timeout = time.Second
	r := openTestEtcd(t, c.Endpoints(), func(cfg *EtcdConfig) { cfg.RequestTimeout = timeout })
	ctx := t.Context()
	c.Kill(1)
	c.Kill(2)
	for name, call := range map[string]func() error{
		"PutServer":  func() error { return r.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "x", Command: "node"}) },
		"GetServer":  func() error { _, err := r.GetServer(ctx, "x"); return err },
		"EndSession": func() error { return r.EndSession(ctx, "s", time.Now().Add(time.Hour)) },
	} {
		start := time.Now()
		err := call()
		took := time.Since(start)
		if err == nil {
			t.Fatalf("%s succeeded without a quorum", name)
		}
		if took > timeout+time.Second {
			t.Errorf("%s took %v, want about %v", name, took, timeout)
		}
		if !strings.Contains(err.Error(), "majority") {
			t.Errorf("%s: %v; want an error that names the fix (a majority of the members up)", name, err)
		}
		t.Logf("%s without a quorum: %v after %v", name, err, took.Round(time.Millisecond))
	}
	c.Restart(1)
	if err := r.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "x", Command: "node"}); err != nil {
		t.Fatalf("with two of three back: %v", err)
	}
}

// TestEtcdWatch: a replica's watch sees another replica's writes in order within a second;
// after a compaction past it (its member was down meanwhile) it resyncs and goes on.
func TestEtcdWatch(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 3)
	eps := c.Endpoints()
	// The watcher talks to member 0 only, so that killing it breaks its watch; the writer to
	// the two others.
	watcher := openTestEtcd(t, eps[:1], nil)
	writer := openTestEtcd(t, eps[1:], nil)
	ctx, cancel := context.WithCancel(t.Context())
	changes := make(chan Change, 100)
	done := make(chan error, 1)
	go func() { done <- watcher.Watch(ctx, func(ch Change) { changes <- ch }) }()
	next := func(within time.Duration) Change {
		t.Helper()
		select {
		case ch := <-changes:
			return ch
		case <-time.After(within):
			t.Fatalf("no change within %v", within)
			return Change{}
		}
	}
	if ch := next(5 * time.Second); ch.Kind != Resync {
		t.Fatalf("first change %+v, want Resync (the watch is in place)", ch)
	}

	writes := []struct {
		do   func() error
		want Change
	}{
		{func() error { return writer.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "a", Command: "node"}) }, Change{Kind: ServerPut, ID: "a"}},
		{func() error { return writer.PutPreset(ctx, &mcpgatewayv1.Preset{Id: "p", Name: "P"}) }, Change{Kind: PresetPut, ID: "p"}},
		{func() error { return writer.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "b", Command: "python"}) }, Change{Kind: ServerPut, ID: "b"}},
		{func() error { return writer.EndSession(ctx, "not-watched", time.Now().Add(time.Hour)) }, Change{}},
		{func() error { return writer.DeleteServer(ctx, "a") }, Change{Kind: ServerDeleted, ID: "a"}},
		{func() error { return writer.DeletePreset(ctx, "p") }, Change{Kind: PresetDeleted, ID: "p"}},
	}
	for _, w := range writes {
		if err := w.do(); err != nil {
			t.Fatal(err)
		}
	}
	wrote := time.Now()
	for _, w := range writes {
		if w.want.Kind == 0 {
			continue
		}
		ch := next(time.Second - time.Since(wrote))
		if ch.Kind != w.want.Kind || ch.ID != w.want.ID {
			t.Fatalf("got %v %q, want %v %q (in the order written)", ch.Kind, ch.ID, w.want.Kind, w.want.ID)
		}
		if ch.Kind == ServerPut && ch.Server.GetId() != ch.ID || ch.Kind == PresetPut && ch.Preset.GetName() != "P" {
			t.Fatalf("change %+v does not carry the record as stored", ch)
		}
	}
	t.Logf("six writes seen by another replica's watch %v after the last", time.Since(wrote))

	// Member 0 down: the watcher's watch breaks; writes go on and etcd compacts past them.
	c.Kill(0)
	for _, id := range []string{"c", "d"} {
		if err := writer.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: id, Command: "node"}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := writer.cli.Get(ctx, writer.prefix+keyEtcdSchema)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	c.Restart(0)
	for {
		ch := next(5 * time.Second)
		if ch.Kind == Resync {
			break
		}
		t.Fatalf("after the compaction: %v %q before a Resync (those revisions are gone)", ch.Kind, ch.ID)
	}
	t.Logf("Resync %v after the member came back", time.Since(restarted))
	if list, err := watcher.ListServers(ctx); err != nil || len(list) != 3 {
		t.Fatalf("a resync reads %v, %v; want b, c and d", list, err)
	}
	if err := writer.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "e", Command: "node"}); err != nil {
		t.Fatal(err)
	}
	if ch := next(time.Second); ch.Kind != ServerPut || ch.ID != "e" {
		t.Fatalf("after the resync: %v %q, want ServerPut e", ch.Kind, ch.ID)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Watch returned %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Watch did not return after its context was cancelled")
	}
}

// TestEtcdSessionEntries: session entries are keyed by a hash of the id, share leases, expire
// with them, and a lease etcd lost is granted again.
func TestEtcdSessionEntries(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	ctx := t.Context()

	t.Run("ExpireWithTheirLease", func(t *testing.T) {
		r := openTestEtcd(t, c.Endpoints(), func(cfg *EtcdConfig) { cfg.LeaseGranularity = time.Second })
		exp := time.Now().Add(2 * time.Second)
		if err := r.EndSession(ctx, "short-lived", exp); err != nil {
			t.Fatal(err)
		}
		if err := r.SetSessionLogLevel(ctx, "short-lived", "debug", exp); err != nil {
			t.Fatal(err)
		}
		if ended, _ := r.SessionEnded(ctx, "short-lived"); !ended {
			t.Fatal("not ended right after EndSession")
		}
		waitfor.NoError(t, 6*time.Second, func() error { // a 2 s expiry
			kvs, err := r.cli.Get(ctx, r.prefix+"sessions/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				return err
			}
			if kvs.Count != 0 {
				return fmt.Errorf("%d session entries left", kvs.Count)
			}
			return nil
		})
		t.Logf("entries gone %v after their expiry", time.Since(exp).Round(time.Millisecond))
		if ended, _ := r.SessionEnded(ctx, "short-lived"); ended {
			t.Fatal("ended after the lease expired")
		}
	})

	t.Run("ShareLeasesAndHashIDs", func(t *testing.T) {
		r := openTestEtcd(t, c.Endpoints(), nil) // leases by the minute
		before, err := r.cli.Leases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		base := time.Now().Truncate(time.Minute).Add(10 * time.Minute)
		var wg sync.WaitGroup
		for i := range 50 { // a burst of sessions ending within one minute, at once
			wg.Go(func() {
				id := fmt.Sprintf("sess-id-kept-as-hash-%d", i)
				if err := r.EndSession(ctx, id, base.Add(time.Duration(i+1)*time.Second)); err != nil {
					t.Error(err)
				}
				if err := r.SetSessionLogLevel(ctx, id, "info", base.Add(time.Duration(i+1)*time.Second)); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		after, err := r.cli.Leases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(after.Leases) - len(before.Leases); n != 1 {
			t.Errorf("100 session entries in one minute made %d leases, want 1", n)
		}
		all, err := r.cli.Get(ctx, r.prefix, clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range all.Kvs {
			if strings.Contains(string(kv.Key)+string(kv.Value), "sess-id") {
				t.Fatalf("%s holds a session id in clear (ids are bearer credentials: only hashes are kept)", kv.Key)
			}
		}
		if ended, _ := r.SessionEnded(ctx, "sess-id-kept-as-hash-7"); !ended {
			t.Fatal("a session of the burst is not ended")
		}
		// A lease etcd no longer has (revoked here; expired early, or lost in a restore) is
		// granted again on the next write of its window.
		for _, l := range r.leases {
			if _, err := r.cli.Revoke(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.EndSession(ctx, "after-revoke", base.Add(30*time.Second)); err != nil {
			t.Fatalf("a write on a revoked lease: %v", err)
		}
		if ended, _ := r.SessionEnded(ctx, "after-revoke"); !ended {
			t.Fatal("the write on a re-granted lease is not there")
		}
	})
}

// TestEtcdSchema: replicas initialising one store at once agree; a newer store is refused; an
// older one is migrated step by step, by one replica when several start at once.
func TestEtcdSchema(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	ctx := t.Context()

	t.Run("ReplicasInitialiseAtOnce", func(t *testing.T) {
		cfg := EtcdConfig{Endpoints: c.Endpoints(), Prefix: testPrefix(t)}
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() {
				r, err := OpenEtcd(ctx, cfg)
				if err == nil {
					err = r.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "s" + strconv.Itoa(i), Command: "node"})
					r.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("replica %d: %v", i, err)
			}
		}
		r := openTestEtcd(t, c.Endpoints(), nil)
		resp, err := r.cli.Get(ctx, r.prefix+keyEtcdSchema)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatal(resp, err)
		}
		if kv := resp.Kvs[0]; string(kv.Value) != strconv.Itoa(SchemaVersion) || kv.Version != 1 {
			t.Fatalf("schema_version %q written %d times, want %d written once", kv.Value, kv.Version, SchemaVersion)
		}
		if list, _ := r.ListServers(ctx); len(list) != len(errs) {
			t.Fatalf("%d servers, want %d", len(list), len(errs))
		}
	})

	t.Run("NewerRefused", func(t *testing.T) {
		r := openTestEtcd(t, c.Endpoints(), nil)
		if _, err := r.cli.Put(ctx, r.prefix+keyEtcdSchema, "99"); err != nil {
			t.Fatal(err)
		}
		_, err := OpenEtcd(ctx, EtcdConfig{Endpoints: c.Endpoints(), Prefix: r.prefix})
		if !errors.Is(err, ErrNewerSchema) {
			t.Fatalf("OpenEtcd = %v, want ErrNewerSchema", err)
		}
		if _, err := r.cli.Put(ctx, r.prefix+keyEtcdSchema, "six"); err != nil {
			t.Fatal(err)
		}
		_, err = OpenEtcd(ctx, EtcdConfig{Endpoints: c.Endpoints(), Prefix: r.prefix})
		if err == nil || !strings.Contains(err.Error(), "another prefix") {
			t.Fatalf("OpenEtcd on a prefix holding something else = %v", err)
		}
	})

	// A build of schema 8 meets a store of schema 6: its steps run in order, each once,
	// however many replicas start together.
	t.Run("OlderMigrated", func(t *testing.T) {
		r := openTestEtcd(t, c.Endpoints(), nil)
		if err := r.PutServer(ctx, &mcpgatewayv1.ServerConfig{Id: "old", Command: "node"}); err != nil {
			t.Fatal(err)
		}
		steps := append(etcdSteps[:len(etcdSteps):len(etcdSteps)],
			etcdStep{from: 6, to: 7, ops: func(ctx context.Context, kv clientv3.KV, prefix string) ([]clientv3.Op, error) {
				resp, err := kv.Get(ctx, prefix+dirServers, clientv3.WithPrefix(), clientv3.WithCountOnly())
				if err != nil {
					return nil, err
				}
				return []clientv3.Op{clientv3.OpPut(prefix+"meta/step7", fmt.Sprint(resp.Count, " servers"))}, nil
			}},
			etcdStep{from: 7, to: 8, ops: func(ctx context.Context, kv clientv3.KV, prefix string) ([]clientv3.Op, error) {
				return []clientv3.Op{clientv3.OpPut(prefix+"meta/step8", "after 7")}, nil
			}},
		)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() { errs[i] = r.migrate(ctx, steps, 8) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("replica %d: %v", i, err)
			}
		}
		for _, k := range []struct {
			key, want string
			writes    int64
		}{{keyEtcdSchema, "8", 3}, {"meta/step7", "1 servers", 1}, {"meta/step8", "after 7", 1}} {
			resp, err := r.cli.Get(ctx, r.prefix+k.key)
			if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != k.want || resp.Kvs[0].Version != k.writes {
				t.Fatalf("%s = %v, %v; want %q written %d times (6, then a step each)", k.key, resp.Kvs, err, k.want, k.writes)
			}
		}
		if err := r.migrate(ctx, etcdSteps, SchemaVersion); !errors.Is(err, ErrNewerSchema) {
			t.Fatalf("this build on the migrated store: %v, want ErrNewerSchema", err)
		}
	})
}

// TestEtcdStepsReachSchemaVersion: the etcd migrations lead from an empty store to this
// build's SchemaVersion (a new schema needs an etcd step, even an empty one).
func TestEtcdStepsReachSchemaVersion(t *testing.T) {
	v := 0
	for _, s := range etcdSteps {
		if s.from != v || s.to <= s.from {
			t.Fatalf("step %d → %d does not follow %d", s.from, s.to, v)
		}
		v = s.to
	}
	if v != SchemaVersion {
		t.Fatalf("etcd steps end at %d, SchemaVersion is %d: add a step", v, SchemaVersion)
	}
}

// TestEtcdUnreachableFailsInTime: nothing listens at the endpoint: Open fails within its
// request timeout, naming what to check.
func TestEtcdUnreachableFailsInTime(t *testing.T) {
	start := time.Now()
	_, err := OpenEtcd(t.Context(), EtcdConfig{Endpoints: []string{"127.0.0.1:1"}, RequestTimeout: 500 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "majority") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("OpenEtcd = %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("took %v", took)
	}
}

// TestEtcdWatchEndsOnClose: closing the registry ends its watch (no retry loop on a closed
// client).
func TestEtcdWatchEndsOnClose(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	r, err := OpenEtcd(t.Context(), EtcdConfig{Endpoints: c.Endpoints(), Prefix: testPrefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	resynced, done := make(chan struct{}, 1), make(chan error, 1)
	go func() {
		done <- r.Watch(t.Context(), func(ch Change) {
			if ch.Kind == Resync {
				resynced <- struct{}{}
			}
		})
	}()
	<-resynced
	r.Close()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "closed") {
			t.Fatalf("Watch after Close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Watch goes on after Close")
	}
}
