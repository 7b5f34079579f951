package registry

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// The etcd layout, under the prefix (docs/operator/scale-out.md):
//
//	meta/schema_version        "6" (decimal, as bbolt's)
//	presets/<id>               a Preset as protojson, unpopulated fields included (as bbolt's)
//	servers/<id>               a ServerConfig as protojson (as bbolt's)
//	sessions/ended/<hash>      the session's expiry (Unix seconds), on a lease
//	sessions/log_level/<hash>  expiry, a space, the level; on a lease
//	audit/<id>                 a tool call's AuditEntry as protobuf (registry.AuditLog; no lease: TrimAudit)
//	audit_admin/<id>           an admin change's AuditEntry, as audit/ (auditSpaces)
//	audit_trim/<id>            a trim's own AuditEntry, as audit/
//	meta/audit_split           "1" once the admin entries an older build kept in audit/ were moved
//	approvals/<id>             an Approval as protojson, on a lease (approvals.go)
//	oauth_tokens/<id>          a server's OAuth tokens, sealed (oauthtokens.go)
//
// <hash> is the hex SHA-256 of the session id: the id is a bearer credential of its session
// and is never stored. presets/ and servers/ are neighbours in key order, so one watch over
// [presets/, servers0) sees both in the store's order; no other key falls in that range.
const (
	keyEtcdSchema   = "meta/schema_version"
	dirPresets      = "presets/"
	dirServers      = "servers/"
	dirEndedSession = "sessions/ended/"
	dirSessionLevel = "sessions/log_level/"
)

// Defaults of EtcdConfig.
const (
	// DefaultEtcdDialTimeout bounds connecting and authenticating.
	DefaultEtcdDialTimeout = 2 * time.Second
	// DefaultEtcdRequestTimeout bounds every read and write, retries included: past it the call
	// returns an error (no quorum, no leader, no route) instead of waiting. It covers an etcd
	// leader election (about 1 s with etcd's defaults) with room to spare.
	DefaultEtcdRequestTimeout = 3 * time.Second
	// DefaultEtcdLeaseGranularity: session entries whose expiries fall in the same window share
	// one lease that ends with the window.
	DefaultEtcdLeaseGranularity = time.Minute
)

// Watch restarts back off from watchRetryMin to watchRetryMax between attempts.
const (
	watchRetryMin = 50 * time.Millisecond
	watchRetryMax = time.Second
)

// retryPause is the pause before a call that failed for a transient reason is sent again (to
// another member, or once a leader is elected); minAttempt the least time an attempt has.
const (
	retryPause = 50 * time.Millisecond
	minAttempt = 250 * time.Millisecond
)

// EtcdConfig says how to reach etcd; OpenURL builds it from ZEST_REGISTRY and ZEST_ETCD_*.
type EtcdConfig struct {
	// Endpoints are host:port of the cluster's members.
	Endpoints []string
	// Prefix starts and ends with "/" (DefaultEtcdPrefix when empty).
	Prefix string
	// TLS, when set, dials every endpoint over TLS.
	TLS *tls.Config
	// Username and Password authenticate to etcd (its auth enabled).
	Username, Password string
	// DialTimeout, RequestTimeout and LeaseGranularity default to the DefaultEtcd* values.
	DialTimeout, RequestTimeout, LeaseGranularity time.Duration
	// Logger receives what Watch cannot return (a restart, an undecodable record); default
	// slog.Default().
	Logger *slog.Logger
}

// Etcd is the registry on etcd, shared by every mcpgateway replica that names the same
// cluster and prefix. Writes return once a quorum committed them; reads are linearizable,
// so a write acknowledged through one replica is seen by the next read of any replica.
type Etcd struct {
	cli    *clientv3.Client
	cfg    EtcdConfig
	prefix string
	log    *slog.Logger

	leaseMu sync.Mutex
	leases  map[int64]clientv3.LeaseID // lease end (Unix seconds) → lease

	audit *auditIDs
}

// OpenEtcd connects to etcd and brings the store under cfg.Prefix to SchemaVersion
// (initialising an empty one).
func OpenEtcd(ctx context.Context, cfg EtcdConfig) (*Etcd, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("registry on etcd: no endpoint: give ZEST_REGISTRY=etcd://host:port[,host:port…]")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultEtcdPrefix
	}
	if !strings.HasPrefix(cfg.Prefix, "/") || !strings.HasSuffix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("registry on etcd: prefix %q must start and end with /", cfg.Prefix)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultEtcdDialTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultEtcdRequestTimeout
	}
	if cfg.LeaseGranularity <= 0 {
		cfg.LeaseGranularity = DefaultEtcdLeaseGranularity
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	scheme := "http://"
	if cfg.TLS != nil {
		scheme = "https://"
		if err := checkEtcdTLS(ctx, cfg); err != nil {
			return nil, err
		}
	}
	eps := make([]string, len(cfg.Endpoints))
	for i, ep := range cfg.Endpoints {
		eps[i] = scheme + ep
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   eps,
		DialTimeout: cfg.DialTimeout,
		// While a watch is open, a member that stops answering without closing the
		// connection (a cut cable; a killed process closes it at once) is noticed in 13 s.
		// Not more often: etcd refuses pings closer than 5 s, and pings with no stream open.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		TLS:                  cfg.TLS,
		Username:             cfg.Username,
		Password:             cfg.Password,
		// Errors are returned and logged here; the client's own zap log would be a second,
		// differently formatted stream.
		Logger: zap.NewNop(),
		// gRPC's reconnect backoff grows to 2 minutes; a restarted member is back in use
		// within a second.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: cfg.DialTimeout,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("registry on etcd %s: connect: %w (%s)", strings.Join(cfg.Endpoints, ","), err, hint(err))
	}
	e := &Etcd{cli: cli, cfg: cfg, prefix: cfg.Prefix, log: cfg.Logger, leases: map[int64]clientv3.LeaseID{}, audit: newAuditIDs()}
	if err := e.migrate(ctx, etcdSteps, SchemaVersion); err != nil {
		cli.Close()
		return nil, err
	}
	if err := e.splitAudit(ctx); err != nil {
		cli.Close()
		return nil, err
	}
	return e, nil
}

// etcdStep moves an etcd store from schema from to schema to. ops reads what the step needs and
// returns its writes; they commit in one transaction with the new version, and only if the
// version key still holds from (a replica that lost the race reads again and finds the store
// migrated). A step's writes must fit one transaction (etcd's --max-txn-ops, 128 by default);
// the transaction compares the version only, so a step that rewrites records written by
// replicas still running the older build must tolerate (or compare) their concurrent writes.
type etcdStep struct {
	from, to int
	ops      func(ctx context.Context, kv clientv3.KV, prefix string) ([]clientv3.Op, error)
}

// etcdSteps: step 0 initialises an empty store, straight to schema 6, the first version
// stored on etcd (bbolt's steps to 5 made buckets and indexes that etcd has no use for, and
// 5 → 6 set expose on records an etcd store never held). A schema 7 adds its step {6, 7, …}.
var etcdSteps = []etcdStep{{from: 0, to: 6}}

// migrateAttempts bounds how often migrate reads again after losing a race to another replica.
const migrateAttempts = 16

// migrate brings the store to target through steps.
func (e *Etcd) migrate(ctx context.Context, steps []etcdStep, target int) error {
	key := e.prefix + keyEtcdSchema
	for range migrateAttempts {
		var resp *clientv3.GetResponse
		err := e.call(ctx, "read the schema version", func(ctx context.Context) (err error) {
			resp, err = e.cli.Get(ctx, key)
			return err
		})
		if err != nil {
			return err
		}
		v, cmp := 0, clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		if len(resp.Kvs) > 0 {
			raw := string(resp.Kvs[0].Value)
			if v, err = strconv.Atoi(raw); err != nil {
				return fmt.Errorf("registry on etcd: %s%s is %q, not a number: the prefix holds something other than a Zest registry (choose another prefix in ZEST_REGISTRY)", e.prefix, keyEtcdSchema, raw)
			}
			cmp = clientv3.Compare(clientv3.Value(key), "=", raw)
		}
		if v > target {
			return fmt.Errorf("registry on etcd %s: %w: the store has %d, this build %d (upgrade this mcpgateway to the release the others run)", e.prefix, ErrNewerSchema, v, target)
		}
		if v == target {
			return nil
		}
		i := 0
		for i < len(steps) && steps[i].from != v {
			i++
		}
		if i == len(steps) || steps[i].to <= v || steps[i].to > target {
			return fmt.Errorf("registry on etcd %s: no migration from schema %d to %d in this build", e.prefix, v, target)
		}
		step := steps[i]
		var ops []clientv3.Op
		if step.ops != nil {
			err := e.call(ctx, fmt.Sprintf("migrate schema %d to %d", v, step.to), func(ctx context.Context) (err error) {
				ops, err = step.ops(ctx, e.cli, e.prefix)
				return err
			})
			if err != nil {
				return err
			}
		}
		ops = append(ops, clientv3.OpPut(key, strconv.Itoa(step.to)))
		err = e.call(ctx, fmt.Sprintf("migrate schema %d to %d", v, step.to), func(ctx context.Context) error {
			_, err := e.cli.Txn(ctx).If(cmp).Then(ops...).Commit()
			return err
		})
		if err != nil {
			return err
		}
		// Committed or not (another replica moved the version first), read it again.
	}
	return fmt.Errorf("registry on etcd %s: the schema version kept changing under %d attempts to migrate it", e.prefix, migrateAttempts)
}

// call runs f until it succeeds, fails for good, or RequestTimeout (within ctx's deadline)
// has passed. Each attempt has a third of that: a request that a member forwarded to a leader
// that just died is never answered (etcd gives up on it only after its own 5 s or more), and a
// new attempt reaches the new leader instead. Sending again is safe because every call here
// is idempotent: puts of whole values, reads, deletes that take "already gone" on a later
// attempt as done, and transactions guarded by a compare. Transient errors (no leader, leader
// changed, a connection lost: gRPC's Unavailable) are retried after a pause; any other etcd
// error is returned at once. The error names the operation and the likely fix.
func (e *Etcd) call(ctx context.Context, op string, f func(ctx context.Context) error) error {
	rctx, cancel := context.WithTimeout(ctx, e.cfg.RequestTimeout)
	defer cancel()
	// A member without a leader refuses at once rather than queueing the request.
	rctx = clientv3.WithRequireLeader(rctx)
	perAttempt := max(e.cfg.RequestTimeout/3, minAttempt)
	for {
		actx, cancelAttempt := context.WithTimeout(rctx, perAttempt)
		err := f(actx)
		cancelAttempt()
		if err == nil {
			return nil
		}
		if !transient(err) || rctx.Err() != nil {
			if ctx.Err() != nil { // the caller gave up: no hint about etcd
				return fmt.Errorf("registry on etcd: %s: %w", op, err)
			}
			if rctx.Err() != nil {
				err = fmt.Errorf("%w (after %v)", err, e.cfg.RequestTimeout)
			}
			return fmt.Errorf("registry on etcd %s: %s: %w (%s)", strings.Join(e.cfg.Endpoints, ","), op, err, hint(err))
		}
		if errors.Is(err, context.DeadlineExceeded) {
			continue // the attempt used its time: no pause
		}
		select {
		case <-rctx.Done():
		case <-time.After(retryPause):
		}
	}
}

// transient reports whether a call may succeed if sent again: its attempt timed out, or etcd
// or gRPC said Unavailable (no leader, leader changed, server stopping, connection lost).
func transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ee rpctypes.EtcdError
	if errors.As(rpctypes.Error(err), &ee) {
		return ee.Code() == codes.Unavailable
	}
	return status.Code(err) == codes.Unavailable
}

// hint names the likely fix of an etcd error.
func hint(err error) string {
	msg := err.Error()
	switch ev := rpctypes.Error(err); {
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(msg, "DeadlineExceeded") || strings.Contains(msg, "context deadline exceeded"):
		return "no answer in time: is a majority of the etcd members in ZEST_REGISTRY up and reachable from this machine?"
	case errors.Is(ev, rpctypes.ErrNoLeader):
		return "the etcd cluster has no leader: is a majority of its members up?"
	case errors.Is(ev, rpctypes.ErrTimeout), errors.Is(ev, rpctypes.ErrTimeoutDueToLeaderFail), errors.Is(ev, rpctypes.ErrTimeoutDueToConnectionLost):
		// The member took the request but could not commit it: without a quorum it never can.
		return "etcd took the request but did not commit it in time: is a majority of its members up?"
	case errors.Is(ev, rpctypes.ErrAuthFailed), errors.Is(ev, rpctypes.ErrInvalidAuthToken), errors.Is(ev, rpctypes.ErrUserEmpty):
		return "etcd refused the credentials: check " + EnvEtcdUsername + " and " + EnvEtcdPassword
	case errors.Is(ev, rpctypes.ErrPermissionDenied):
		// With auth on and no user given, etcd takes the client certificate's CN as the user.
		return "the etcd user " + EnvEtcdUsername + " names (when unset: the CN of the client certificate in " + EnvEtcdCertFile + ") needs read and write permission on the registry's prefix"
	case errors.Is(ev, rpctypes.ErrNoSpace):
		return "etcd's database is full (alarm NOSPACE): compact and defragment it, or raise its --quota-backend-bytes, then disarm the alarm"
	case errors.Is(ev, rpctypes.ErrRequestTooLarge):
		return "the record is larger than etcd's --max-request-bytes"
	case strings.Contains(msg, "x509") || strings.Contains(msg, "tls:") || strings.Contains(msg, "handshake"):
		return "TLS failed: check etcds:// and " + EnvEtcdCAFile + ", " + EnvEtcdCertFile + ", " + EnvEtcdKeyFile
	default:
		return "check that the etcd cluster in ZEST_REGISTRY is up and healthy (etcdctl endpoint health)"
	}
}

// ListServers implements Registry (a linearizable read, ordered by id as etcd orders keys).
func (e *Etcd) ListServers(ctx context.Context) ([]*mcpgatewayv1.ServerConfig, error) {
	kvs, err := e.list(ctx, "list servers", dirServers)
	if err != nil {
		return nil, err
	}
	out := make([]*mcpgatewayv1.ServerConfig, 0, len(kvs))
	for _, kv := range kvs {
		cfg, err := decodeServer(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("server %q: %w", strings.TrimPrefix(string(kv.Key), e.prefix+dirServers), err)
		}
		out = append(out, cfg)
	}
	return out, nil
}

// GetServer implements Registry.
func (e *Etcd) GetServer(ctx context.Context, id string) (*mcpgatewayv1.ServerConfig, error) {
	v, err := e.get(ctx, "get server "+id, dirServers+id)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, fmt.Errorf("server %q: %w", id, ErrNotFound)
	}
	cfg, err := decodeServer(v)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", id, err)
	}
	return cfg, nil
}

// PutServer implements Registry.
func (e *Etcd) PutServer(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) error {
	if cfg.GetId() == "" {
		return errors.New("server id is empty")
	}
	v, err := encodeServer(cfg)
	if err != nil {
		return err
	}
	return e.put(ctx, "put server "+cfg.GetId(), dirServers+cfg.GetId(), string(v))
}

// DeleteServer implements Registry.
func (e *Etcd) DeleteServer(ctx context.Context, id string) error {
	return e.delete(ctx, "server", dirServers, id)
}

// ListPresets implements Registry.
func (e *Etcd) ListPresets(ctx context.Context) ([]*mcpgatewayv1.Preset, error) {
	kvs, err := e.list(ctx, "list presets", dirPresets)
	if err != nil {
		return nil, err
	}
	out := make([]*mcpgatewayv1.Preset, 0, len(kvs))
	for _, kv := range kvs {
		p, err := decodePreset(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("preset %q: %w", strings.TrimPrefix(string(kv.Key), e.prefix+dirPresets), err)
		}
		out = append(out, p)
	}
	return out, nil
}

// GetPreset implements Registry.
func (e *Etcd) GetPreset(ctx context.Context, id string) (*mcpgatewayv1.Preset, error) {
	v, err := e.get(ctx, "get preset "+id, dirPresets+id)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, fmt.Errorf("preset %q: %w", id, ErrNotFound)
	}
	p, err := decodePreset(v)
	if err != nil {
		return nil, fmt.Errorf("preset %q: %w", id, err)
	}
	return p, nil
}

// PutPreset implements Registry.
func (e *Etcd) PutPreset(ctx context.Context, p *mcpgatewayv1.Preset) error {
	if p.GetId() == "" {
		return errors.New("preset id is empty")
	}
	v, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(p)
	if err != nil {
		return err
	}
	return e.put(ctx, "put preset "+p.GetId(), dirPresets+p.GetId(), string(v))
}

// DeletePreset implements Registry.
func (e *Etcd) DeletePreset(ctx context.Context, id string) error {
	return e.delete(ctx, "preset", dirPresets, id)
}

// EndSession implements Registry: the entry lives on a lease that ends at most
// LeaseGranularity after expires. An expiry already past deletes the entry (bbolt's would be
// pruned by its next write).
func (e *Etcd) EndSession(ctx context.Context, id string, expires time.Time) error {
	return e.putSession(ctx, "end session", dirEndedSession, id, strconv.FormatInt(expires.Unix(), 10), expires)
}

// SessionEnded implements Registry.
func (e *Etcd) SessionEnded(ctx context.Context, id string) (bool, error) {
	v, err := e.get(ctx, "read an ended session", dirEndedSession+hashedID(id))
	return v != nil, err
}

// SetSessionLogLevel implements Registry, on a lease as EndSession.
func (e *Etcd) SetSessionLogLevel(ctx context.Context, id, level string, expires time.Time) error {
	return e.putSession(ctx, "set a session's log level", dirSessionLevel, id, strconv.FormatInt(expires.Unix(), 10)+" "+level, expires)
}

// SessionLogLevel implements Registry. The value's own expiry is checked, as bbolt does: the
// lease may outlive it by up to LeaseGranularity (and etcd renews leases when its leader
// changes).
func (e *Etcd) SessionLogLevel(ctx context.Context, id string) (string, error) {
	v, err := e.get(ctx, "read a session's log level", dirSessionLevel+hashedID(id))
	if err != nil || v == nil {
		return "", err
	}
	at, level, ok := strings.Cut(string(v), " ")
	if unix, err := strconv.ParseInt(at, 10, 64); !ok || err != nil || unix < time.Now().Unix() {
		return "", nil
	}
	return level, nil
}

// Close implements Registry.
func (e *Etcd) Close() error { return e.cli.Close() }

// hashedID is a session's key: the hex SHA-256 of its id, as bbolt stores its bytes.
func hashedID(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:])
}

func (e *Etcd) list(ctx context.Context, op, dir string) ([]*mvccpb.KeyValue, error) {
	var resp *clientv3.GetResponse
	err := e.call(ctx, op, func(ctx context.Context) (err error) {
		resp, err = e.cli.Get(ctx, e.prefix+dir, clientv3.WithPrefix())
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp.Kvs, nil
}

// get returns the value at prefix+key, nil when there is none.
func (e *Etcd) get(ctx context.Context, op, key string) ([]byte, error) {
	var resp *clientv3.GetResponse
	err := e.call(ctx, op, func(ctx context.Context) (err error) {
		resp, err = e.cli.Get(ctx, e.prefix+key)
		return err
	})
	if err != nil || len(resp.Kvs) == 0 {
		return nil, err
	}
	return resp.Kvs[0].Value, nil
}

func (e *Etcd) put(ctx context.Context, op, key, value string, opts ...clientv3.OpOption) error {
	return e.call(ctx, op, func(ctx context.Context) error {
		_, err := e.cli.Put(ctx, e.prefix+key, value, opts...)
		return err
	})
}

// delete removes dir+id or returns ErrNotFound naming kind. When an earlier attempt may have
// deleted it (it went unanswered, or its connection was lost), a later attempt that finds
// nothing counts as done; a refusal by a member without a leader changed nothing.
func (e *Etcd) delete(ctx context.Context, kind, dir, id string) error {
	uncertain, deleted := false, int64(0)
	err := e.call(ctx, "delete "+kind+" "+id, func(ctx context.Context) error {
		resp, err := e.cli.Delete(ctx, e.prefix+dir+id)
		if err != nil {
			uncertain = uncertain || !errors.Is(rpctypes.Error(err), rpctypes.ErrNoLeader)
			return err
		}
		deleted = resp.Deleted
		return nil
	})
	if err != nil {
		return err
	}
	if deleted == 0 && !uncertain {
		return fmt.Errorf("%s %q: %w", kind, id, ErrNotFound)
	}
	return nil
}

// putSession writes dir+hash(id) = value on the lease of expires' window, or deletes it when
// expires has passed. A lease that etcd no longer knows (it expired early, or the cache is
// stale) is granted again once.
func (e *Etcd) putSession(ctx context.Context, op, dir, id, value string, expires time.Time) error {
	key := dir + hashedID(id)
	if !expires.After(time.Now()) {
		return e.call(ctx, op, func(ctx context.Context) error {
			_, err := e.cli.Delete(ctx, e.prefix+key)
			return err
		})
	}
	for attempt := 0; ; attempt++ {
		lease, end, err := e.lease(ctx, expires)
		if err != nil {
			return err
		}
		err = e.put(ctx, op, key, value, clientv3.WithLease(lease))
		if attempt == 0 && errors.Is(err, rpctypes.ErrLeaseNotFound) {
			e.forgetLease(end, lease)
			continue
		}
		return err
	}
}

// lease returns the lease that ends at the close of expires' window (granted on first use, then
// shared by every session entry of the window) and that end, in Unix seconds.
func (e *Etcd) lease(ctx context.Context, expires time.Time) (clientv3.LeaseID, int64, error) {
	g := int64(e.cfg.LeaseGranularity / time.Second)
	if g < 1 {
		g = 1
	}
	at := expires.Unix()
	if expires.Nanosecond() > 0 {
		at++ // the lease must not end before expires
	}
	end := (at + g - 1) / g * g
	e.leaseMu.Lock()
	defer e.leaseMu.Unlock()
	now := time.Now().Unix()
	for at := range e.leases { // windows that have closed: their leases are gone
		if at <= now {
			delete(e.leases, at)
		}
	}
	if id, ok := e.leases[end]; ok {
		return id, end, nil
	}
	// Granting under the lock: one grant per window even when a burst of sessions ends at
	// once; the others wait for it (bounded by the request timeout).
	var resp *clientv3.LeaseGrantResponse
	err := e.call(ctx, "grant a lease for session entries", func(ctx context.Context) (err error) {
		resp, err = e.cli.Grant(ctx, max(end-now, 1))
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	e.leases[end] = resp.ID
	return resp.ID, end, nil
}

func (e *Etcd) forgetLease(end int64, id clientv3.LeaseID) {
	e.leaseMu.Lock()
	defer e.leaseMu.Unlock()
	if e.leases[end] == id {
		delete(e.leases, end)
	}
}

// Watch implements Watcher. It reads the store's revision, watches servers/ and presets/ from
// the next one, then calls fn(Resync) (what the caller read before may be older than the
// watch: it reads again) and every change in order. When the watch ends (etcd compacted
// past it, the member it was on lost its leader, the connection could not be resumed) it
// calls fn(Resync) again once a new watch is in place, retrying while etcd does not answer.
// It returns ctx's error when ctx is done.
func (e *Etcd) Watch(ctx context.Context, fn func(Change)) error {
	wait := watchRetryMin
	from, to := e.prefix+dirPresets, clientv3.GetPrefixRangeEnd(e.prefix+dirServers)
	for {
		var resp *clientv3.GetResponse
		err := e.call(ctx, "read the revision to watch from", func(ctx context.Context) (err error) {
			resp, err = e.cli.Get(ctx, e.prefix+keyEtcdSchema)
			return err
		})
		if err == nil {
			started := time.Now()
			// Require a leader: a member cut off from the others would otherwise keep the
			// watch open and silent.
			wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
			ch := e.cli.Watch(wctx, from, clientv3.WithRange(to), clientv3.WithRev(resp.Header.Revision+1))
			fn(Change{Kind: Resync})
			err = e.follow(ch, fn)
			cancel()
			if time.Since(started) > watchRetryMax {
				wait = watchRetryMin
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if e.cli.Ctx().Err() != nil {
			return errors.New("registry on etcd: watch: the registry was closed")
		}
		e.log.Warn("registry watch on etcd restarts; replicas resync", "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, watchRetryMax)
	}
}

// follow delivers the events of ch until it ends, and says why it did.
func (e *Etcd) follow(ch clientv3.WatchChan, fn func(Change)) error {
	for resp := range ch {
		if err := resp.Err(); err != nil {
			if resp.CompactRevision != 0 {
				return fmt.Errorf("etcd compacted past the watch (revision %d): %w", resp.CompactRevision, err)
			}
			return err
		}
		if resp.Canceled {
			return errors.New("etcd cancelled the watch")
		}
		for _, ev := range resp.Events {
			if c, ok := e.change(ev); ok {
				fn(c)
			}
		}
	}
	return errors.New("the watch channel closed")
}

// change decodes a watch event; ok is false for a key outside servers/ and presets/ or a
// value that does not decode (logged: the record reads as an error on every get too).
func (e *Etcd) change(ev *clientv3.Event) (Change, bool) {
	key := strings.TrimPrefix(string(ev.Kv.Key), e.prefix)
	put := ev.Type == mvccpb.PUT
	var c Change
	var err error
	switch {
	case strings.HasPrefix(key, dirServers):
		c.ID = strings.TrimPrefix(key, dirServers)
		c.Kind = ServerDeleted
		if put {
			c.Kind = ServerPut
			c.Server, err = decodeServer(ev.Kv.Value)
		}
	case strings.HasPrefix(key, dirPresets):
		c.ID = strings.TrimPrefix(key, dirPresets)
		c.Kind = PresetDeleted
		if put {
			c.Kind = PresetPut
			c.Preset, err = decodePreset(ev.Kv.Value)
		}
	default:
		return Change{}, false
	}
	if err != nil {
		e.log.Error("registry watch on etcd: a record does not decode; it is skipped", "key", string(ev.Kv.Key), "err", err)
		return Change{}, false
	}
	return c, true
}

// The audit trail: <space>/<id> → AuditEntry (protobuf), one directory per kind
// (auditSpaces). Each is outside the watched range [presets/, servers0).

// auditDir is the key prefix of a space.
func (e *Etcd) auditDir(sp auditSpace) string { return e.prefix + sp.name + "/" }

// auditScan is how many keys one read of ListAudit or TrimAudit asks etcd for.
const auditScan = 500

// keyAuditSplit marks a store whose audit/ holds tool calls only (splitAudit).
const keyAuditSplit = "meta/audit_split"

// auditSplitBatch is how many entries one transaction of splitAudit moves (a put and a delete
// each, under etcd's default --max-txn-ops of 128).
const auditSplitBatch = 50

// splitAudit moves the admin entries an older build kept in audit/, among the tool calls,
// to their own directory, once per store (keyAuditSplit). Replicas that open the store at
// once move the same entries: the puts and deletes are idempotent. An older build still
// writing to the store keeps its admin entries in audit/.
func (e *Etcd) splitAudit(ctx context.Context) error {
	var done bool
	err := e.call(ctx, "read "+keyAuditSplit, func(ctx context.Context) error {
		resp, err := e.cli.Get(ctx, e.prefix+keyAuditSplit, clientv3.WithCountOnly())
		if err == nil {
			done = resp.Count > 0
		}
		return err
	})
	if err != nil || done {
		return err
	}
	tools, admins := e.auditDir(auditSpaces[0]), e.auditDir(auditSpaceOf(AuditKindAdmin))
	var ops []clientv3.Op
	commit := func() error {
		if len(ops) == 0 {
			return nil
		}
		err := e.call(ctx, "move admin entries out of "+auditSpaces[0].name+"/", func(ctx context.Context) error {
			_, err := e.cli.Txn(ctx).Then(ops...).Commit()
			return err
		})
		ops = ops[:0]
		return err
	}
	from, to := tools, clientv3.GetPrefixRangeEnd(tools)
	for from < to {
		var resp *clientv3.GetResponse
		err := e.call(ctx, "read the audit trail to split it", func(ctx context.Context) (err error) {
			resp, err = e.cli.Get(ctx, from, clientv3.WithRange(to), clientv3.WithLimit(auditScan))
			return err
		})
		if err != nil {
			return err
		}
		for _, kv := range resp.Kvs {
			en := &mcpgatewayv1.AuditEntry{}
			if err := proto.Unmarshal(kv.Value, en); err != nil {
				return fmt.Errorf("registry on etcd: audit entry %q: %w", kv.Key, err)
			}
			if en.GetKind() != AuditKindAdmin {
				continue
			}
			ops = append(ops, clientv3.OpPut(admins+strings.TrimPrefix(string(kv.Key), tools), string(kv.Value)), clientv3.OpDelete(string(kv.Key)))
			if len(ops) >= 2*auditSplitBatch {
				if err := commit(); err != nil {
					return err
				}
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	if err := commit(); err != nil {
		return err
	}
	return e.call(ctx, "write "+keyAuditSplit, func(ctx context.Context) error {
		_, err := e.cli.Put(ctx, e.prefix+keyAuditSplit, "1")
		return err
	})
}

// EtcdMaxAuditBatch is the most audit entries one etcd transaction writes: one operation
// each, under etcd's --max-txn-ops (128 by default).
const EtcdMaxAuditBatch = 100

// MaxAuditBatch implements AuditLog.
func (e *Etcd) MaxAuditBatch() int { return EtcdMaxAuditBatch }

// AppendAudit implements AuditLog: one transaction for the batch (at most EtcdMaxAuditBatch
// entries).
func (e *Etcd) AppendAudit(ctx context.Context, entries []*mcpgatewayv1.AuditEntry) error {
	e.audit.assign(entries)
	ops := make([]clientv3.Op, 0, len(entries))
	for _, en := range entries {
		v, err := proto.Marshal(en)
		if err != nil {
			return err
		}
		ops = append(ops, clientv3.OpPut(e.auditDir(auditSpaceOf(en.GetKind()))+en.GetId(), string(v)))
	}
	return e.call(ctx, fmt.Sprintf("append %d audit entries", len(entries)), func(ctx context.Context) error {
		_, err := e.cli.Txn(ctx).Then(ops...).Commit()
		return err
	})
}

// ListAudit implements AuditLog: linearizable reads of auditScan keys at a time of each space
// q reads, in order, merged.
func (e *Etcd) ListAudit(ctx context.Context, q AuditQuery, fn func(*mcpgatewayv1.AuditEntry) bool) error {
	scan := int64(auditScan)
	if q.Limit > 0 && !q.filtered() {
		scan = min(scan, int64(q.Limit))
	}
	var cursors []auditCursor
	for _, sp := range q.spaces() {
		base := e.auditDir(sp)
		c := &etcdAuditCursor{e: e, ctx: ctx, base: base, from: base, to: clientv3.GetPrefixRangeEnd(base), scan: scan, asc: q.Ascending}
		if q.After != "" {
			c.from = base + q.After + "\x00"
		}
		if q.Before != "" {
			c.to = base + q.Before
		}
		cursors = append(cursors, c)
	}
	return mergeAudit(q, cursors, fn)
}

// etcdAuditCursor reads one space's range [from, to) a page at a time, in order.
type etcdAuditCursor struct {
	e        *Etcd
	ctx      context.Context
	base     string
	from, to string
	scan     int64
	asc      bool
	page     []*mvccpb.KeyValue
	done     bool
}

func (c *etcdAuditCursor) next() (string, []byte, bool, error) {
	if len(c.page) == 0 && !c.done && c.from < c.to {
		order := clientv3.SortDescend
		if c.asc {
			order = clientv3.SortAscend
		}
		var resp *clientv3.GetResponse
		err := c.e.call(c.ctx, "list audit entries", func(ctx context.Context) (err error) {
			resp, err = c.e.cli.Get(ctx, c.from, clientv3.WithRange(c.to), clientv3.WithSort(clientv3.SortByKey, order), clientv3.WithLimit(c.scan))
			return err
		})
		if err != nil {
			return "", nil, false, err
		}
		c.page, c.done = resp.Kvs, !resp.More || len(resp.Kvs) == 0
		if n := len(resp.Kvs); n > 0 {
			if last := string(resp.Kvs[n-1].Key); c.asc {
				c.from = last + "\x00"
			} else {
				c.to = last
			}
		}
	}
	if len(c.page) == 0 {
		return "", nil, false, nil
	}
	kv := c.page[0]
	c.page = c.page[1:]
	return strings.TrimPrefix(string(kv.Key), c.base), kv.Value, true, nil
}

// TrimAudit implements AuditLog: in each space, the ids before olderThan's bound, then the
// oldest past the space's bound, auditScan keys a round (trimRound). The bound by count is
// counted again before each round: replicas trimming at once then never delete more than the
// excess between them.
func (e *Etcd) TrimAudit(ctx context.Context, b AuditBounds) ([]AuditTrimmed, error) {
	var out []AuditTrimmed
	for _, sp := range auditSpaces {
		base := e.auditDir(sp)
		age := AuditTrimmed{Kind: sp.kind, Reason: AuditTrimRetention}
		for {
			read, err := e.trimRound(ctx, base, base+AuditTimeBound(b.OlderThan), auditScan, &age)
			if err != nil {
				return reported(out, age), err
			}
			if read < auditScan {
				break
			}
		}
		out = reported(out, age)
		max := b.max(sp.kind)
		if max <= 0 {
			continue
		}
		bound := AuditTrimmed{Kind: sp.kind, Reason: AuditTrimMaxEntries}
		for {
			// The count and the oldest keys come from one read, one revision: a count read
			// apart from the keys could be another replica's, before its trim, and make this
			// one delete past the bound (it did: two replicas at once left none).
			var kvs []*mvccpb.KeyValue
			var count int64
			err := e.call(ctx, "find the oldest audit entries", func(ctx context.Context) error {
				resp, err := e.cli.Get(ctx, base, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(auditScan))
				if err == nil {
					kvs, count = resp.Kvs, resp.Count
				}
				return err
			})
			excess := count - int64(max)
			if err != nil || excess <= 0 || len(kvs) == 0 {
				if out = reported(out, bound); err != nil {
					return out, err
				}
				break
			}
			if err := e.deleteOldest(ctx, base, kvs[:min(excess, int64(len(kvs)))], &bound); err != nil {
				return reported(out, bound), err
			}
		}
	}
	return out, nil
}

// trimRound deletes the oldest keys of base before end, at most limit, and counts them in t
// (deleteOldest). It returns how many keys it read.
func (e *Etcd) trimRound(ctx context.Context, base, end string, limit int64, t *AuditTrimmed) (int, error) {
	var kvs []*mvccpb.KeyValue
	err := e.call(ctx, "find the oldest audit entries", func(ctx context.Context) error {
		resp, err := e.cli.Get(ctx, base, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(limit))
		if err == nil {
			kvs = resp.Kvs
		}
		return err
	})
	if err != nil || len(kvs) == 0 {
		return 0, err
	}
	return len(kvs), e.deleteOldest(ctx, base, kvs, t)
}

// deleteOldest deletes the range of base from the first of kvs to the last, read in one read
// as the oldest keys, and counts it in t — only if both are still there: another replica
// trimming at once deletes from the oldest too (and counts what it deleted), so a range whose
// first key is gone was another's to delete.
func (e *Etcd) deleteOldest(ctx context.Context, base string, kvs []*mvccpb.KeyValue, t *AuditTrimmed) error {
	first, last := string(kvs[0].Key), string(kvs[len(kvs)-1].Key)
	var resp *clientv3.TxnResponse
	err := e.call(ctx, "trim the audit trail", func(ctx context.Context) (err error) {
		resp, err = e.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(first), ">", 0), clientv3.Compare(clientv3.CreateRevision(last), ">", 0)).
			Then(clientv3.OpDelete(first, clientv3.WithRange(last+"\x00"))).Commit()
		return err
	})
	if err != nil {
		return err
	}
	if resp.Succeeded {
		deleted := resp.Responses[0].GetResponseDeleteRange().GetDeleted()
		t.removed(strings.TrimPrefix(first, base), strings.TrimPrefix(last, base), int(deleted))
	}
	return nil
}
