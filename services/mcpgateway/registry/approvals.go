package registry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// States of an approval.
const (
	ApprovalPending   = "pending"
	ApprovalApproved  = "approved"
	ApprovalDenied    = "denied"
	ApprovalExpired   = "expired"
	ApprovalWithdrawn = "withdrawn"
)

// ApprovalKeep is how long an approval is kept past its expiry: long enough for the replica
// whose call waits to read a decision taken at the last moment. The waiting replica deletes it
// once it has; one that died leaves it to this bound.
const ApprovalKeep = time.Minute

// ErrDecided means the approval is no longer pending: DecideApproval returns it with the
// approval as stored.
var ErrDecided = errors.New("the approval was already decided")

// Approvals keeps the tool calls that wait for a person's approval and their decisions, so
// that a decision taken through any replica reaches the replica whose call waits (it reads
// the approval again until it is decided). Both stores implement it; bbolt creates its bucket
// on the first write, so a registry file needs no new schema version for it (an older build
// ignores the bucket).
type Approvals interface {
	// PutApproval stores an approval (a new one: pending, with its id, created and expires).
	PutApproval(ctx context.Context, a *mcpgatewayv1.Approval) error
	// GetApproval returns an approval or ErrNotFound.
	GetApproval(ctx context.Context, id string) (*mcpgatewayv1.Approval, error)
	// ListApprovals returns every approval kept, pending or decided, oldest first.
	ListApprovals(ctx context.Context) ([]*mcpgatewayv1.Approval, error)
	// DecideApproval moves a pending approval to state, with reason and by, and returns it as
	// stored: ErrNotFound when there is none, ErrDecided (and the stored approval) when it is
	// no longer pending. Two deciders racing: one wins, the other gets ErrDecided.
	DecideApproval(ctx context.Context, id, state, reason, by string) (*mcpgatewayv1.Approval, error)
	// DeleteApproval forgets an approval (none: no error).
	DeleteApproval(ctx context.Context, id string) error
}

// keptUntil is when an approval may be forgotten; an expiry that does not parse counts as now.
func keptUntil(a *mcpgatewayv1.Approval) time.Time {
	t, err := time.Parse(time.RFC3339Nano, a.GetExpires())
	if err != nil {
		return time.Now()
	}
	return t.Add(ApprovalKeep)
}

func checkApproval(a *mcpgatewayv1.Approval) error {
	if a.GetId() == "" {
		return errors.New("approval id is empty")
	}
	if _, err := time.Parse(time.RFC3339Nano, a.GetExpires()); err != nil {
		return fmt.Errorf("approval %q: expires %q is not RFC 3339", a.GetId(), a.GetExpires())
	}
	return nil
}

func decodeApproval(id string, v []byte) (*mcpgatewayv1.Approval, error) {
	a := &mcpgatewayv1.Approval{}
	if err := protojson.Unmarshal(v, a); err != nil {
		return nil, fmt.Errorf("approval %q: %w", id, err)
	}
	return a, nil
}

// decide applies a decision to a stored approval: the new value, or ErrDecided.
func decide(a *mcpgatewayv1.Approval, state, reason, by string) ([]byte, error) {
	if a.GetState() != ApprovalPending {
		return nil, fmt.Errorf("approval %q is %s: %w", a.GetId(), a.GetState(), ErrDecided)
	}
	a.State, a.Reason, a.DecidedBy = state, reason, by
	return protojson.Marshal(a)
}

func sortApprovals(out []*mcpgatewayv1.Approval) {
	slices.SortFunc(out, func(a, b *mcpgatewayv1.Approval) int {
		return cmp.Or(cmp.Compare(a.GetCreated(), b.GetCreated()), cmp.Compare(a.GetId(), b.GetId()))
	})
}

var bucketApprovals = []byte("approvals")

// PutApproval implements Approvals; it also forgets the approvals kept past ApprovalKeep.
func (b *Bolt) PutApproval(_ context.Context, a *mcpgatewayv1.Approval) error {
	if err := checkApproval(a); err != nil {
		return err
	}
	v, err := protojson.Marshal(a)
	if err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(bucketApprovals)
		if err != nil {
			return err
		}
		var old [][]byte
		now := time.Now()
		_ = bk.ForEach(func(k, v []byte) error {
			if prev, err := decodeApproval(string(k), v); err != nil || keptUntil(prev).Before(now) {
				old = append(old, slices.Clone(k))
			}
			return nil
		})
		for _, k := range old {
			if err := bk.Delete(k); err != nil {
				return err
			}
		}
		return bk.Put([]byte(a.GetId()), v)
	})
}

// GetApproval implements Approvals.
func (b *Bolt) GetApproval(_ context.Context, id string) (*mcpgatewayv1.Approval, error) {
	var a *mcpgatewayv1.Approval
	err := b.db.View(func(tx *bolt.Tx) error {
		var v []byte
		if bk := tx.Bucket(bucketApprovals); bk != nil {
			v = bk.Get([]byte(id))
		}
		if v == nil {
			return fmt.Errorf("approval %q: %w", id, ErrNotFound)
		}
		var err error
		a, err = decodeApproval(id, v)
		return err
	})
	return a, err
}

// ListApprovals implements Approvals (those kept past ApprovalKeep are left out).
func (b *Bolt) ListApprovals(context.Context) ([]*mcpgatewayv1.Approval, error) {
	var out []*mcpgatewayv1.Approval
	now := time.Now()
	err := b.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketApprovals)
		if bk == nil {
			return nil
		}
		return bk.ForEach(func(k, v []byte) error {
			a, err := decodeApproval(string(k), v)
			if err != nil {
				return err
			}
			if !keptUntil(a).Before(now) {
				out = append(out, a)
			}
			return nil
		})
	})
	sortApprovals(out)
	return out, err
}

// DecideApproval implements Approvals in one transaction.
func (b *Bolt) DecideApproval(_ context.Context, id, state, reason, by string) (*mcpgatewayv1.Approval, error) {
	var a *mcpgatewayv1.Approval
	err := b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketApprovals)
		var v []byte
		if bk != nil {
			v = bk.Get([]byte(id))
		}
		if v == nil {
			return fmt.Errorf("approval %q: %w", id, ErrNotFound)
		}
		var err error
		if a, err = decodeApproval(id, v); err != nil {
			return err
		}
		nv, err := decide(a, state, reason, by)
		if err != nil {
			return err
		}
		return bk.Put([]byte(id), nv)
	})
	if err != nil && !errors.Is(err, ErrDecided) {
		return nil, err
	}
	return a, err
}

// DeleteApproval implements Approvals.
func (b *Bolt) DeleteApproval(_ context.Context, id string) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		if bk := tx.Bucket(bucketApprovals); bk != nil {
			return bk.Delete([]byte(id))
		}
		return nil
	})
}

// dirApprovals holds approvals/<id> = an Approval as protojson, on a lease that ends at most
// LeaseGranularity after its expiry plus ApprovalKeep. It sorts before presets/, outside the
// watched range.
const dirApprovals = "approvals/"

// PutApproval implements Approvals.
func (e *Etcd) PutApproval(ctx context.Context, a *mcpgatewayv1.Approval) error {
	if err := checkApproval(a); err != nil {
		return err
	}
	v, err := protojson.Marshal(a)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		lease, end, err := e.lease(ctx, keptUntil(a))
		if err != nil {
			return err
		}
		err = e.put(ctx, "put approval "+a.GetId(), dirApprovals+a.GetId(), string(v), clientv3.WithLease(lease))
		if attempt == 0 && errors.Is(err, rpctypes.ErrLeaseNotFound) {
			e.forgetLease(end, lease) // as putSession: granted again once
			continue
		}
		return err
	}
}

// GetApproval implements Approvals.
func (e *Etcd) GetApproval(ctx context.Context, id string) (*mcpgatewayv1.Approval, error) {
	v, err := e.get(ctx, "get approval "+id, dirApprovals+id)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, fmt.Errorf("approval %q: %w", id, ErrNotFound)
	}
	return decodeApproval(id, v)
}

// ListApprovals implements Approvals.
func (e *Etcd) ListApprovals(ctx context.Context) ([]*mcpgatewayv1.Approval, error) {
	kvs, err := e.list(ctx, "list approvals", dirApprovals)
	if err != nil {
		return nil, err
	}
	out := make([]*mcpgatewayv1.Approval, 0, len(kvs))
	now := time.Now()
	for _, kv := range kvs {
		a, err := decodeApproval(string(kv.Key), kv.Value)
		if err != nil {
			return nil, err
		}
		if !keptUntil(a).Before(now) { // its lease may outlive it by LeaseGranularity
			out = append(out, a)
		}
	}
	sortApprovals(out)
	return out, nil
}

// DecideApproval implements Approvals: a read, then a write guarded by the value's revision
// (kept on its lease), again when another write came between.
func (e *Etcd) DecideApproval(ctx context.Context, id, state, reason, by string) (*mcpgatewayv1.Approval, error) {
	key := e.prefix + dirApprovals + id
	for attempt := range migrateAttempts {
		var resp *clientv3.GetResponse
		err := e.call(ctx, "get approval "+id, func(ctx context.Context) (err error) {
			resp, err = e.cli.Get(ctx, key)
			return err
		})
		if err != nil {
			return nil, err
		}
		if len(resp.Kvs) == 0 {
			return nil, fmt.Errorf("approval %q: %w", id, ErrNotFound)
		}
		kv := resp.Kvs[0]
		a, err := decodeApproval(id, kv.Value)
		if err != nil {
			return nil, err
		}
		if attempt > 0 && a.GetState() == state && a.GetReason() == reason && a.GetDecidedBy() == by {
			return a, nil // an earlier attempt's write committed though its answer was lost
		}
		nv, err := decide(a, state, reason, by)
		if err != nil {
			return a, err
		}
		var txn *clientv3.TxnResponse
		err = e.call(ctx, "decide approval "+id, func(ctx context.Context) (err error) {
			txn, err = e.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
				Then(clientv3.OpPut(key, string(nv), clientv3.WithIgnoreLease())).Commit()
			return err
		})
		if err != nil {
			return nil, err
		}
		if txn.Succeeded {
			return a, nil
		}
		// An earlier attempt of this call may have committed the write: the next read tells.
	}
	return nil, fmt.Errorf("registry on etcd %s: approval %q kept changing under %d attempts to decide it", e.prefix, id, migrateAttempts)
}

// DeleteApproval implements Approvals.
func (e *Etcd) DeleteApproval(ctx context.Context, id string) error {
	return e.call(ctx, "delete approval "+id, func(ctx context.Context) error {
		_, err := e.cli.Delete(ctx, e.prefix+dirApprovals+id)
		return err
	})
}
