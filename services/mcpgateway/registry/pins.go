package registry

import (
	"context"
	"errors"
	"fmt"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/encoding/protojson"
)

// Pins keeps each server's pinned tool definitions and the changes held until an
// administrator decides (pins.Gate). Both stores implement it; bbolt creates its bucket on
// the first write, so a registry file needs no new schema version for it (an older build
// ignores the bucket).
type Pins interface {
	// GetToolPins returns the pins of a server or ErrNotFound.
	GetToolPins(ctx context.Context, serverID string) (*mcpgatewayv1.ToolPins, error)
	// PutToolPins inserts or replaces the pins of p's server.
	PutToolPins(ctx context.Context, p *mcpgatewayv1.ToolPins) error
	// ListToolPins returns the pins of every server, ordered by server id.
	ListToolPins(ctx context.Context) ([]*mcpgatewayv1.ToolPins, error)
	// DeleteToolPins forgets the pins of a server (none: no error).
	DeleteToolPins(ctx context.Context, serverID string) error
}

func decodePins(id string, v []byte) (*mcpgatewayv1.ToolPins, error) {
	p := &mcpgatewayv1.ToolPins{}
	if err := protojson.Unmarshal(v, p); err != nil {
		return nil, fmt.Errorf("tool pins of %q: %w", id, err)
	}
	return p, nil
}

func encodePins(p *mcpgatewayv1.ToolPins) ([]byte, error) {
	if p.GetServerId() == "" {
		return nil, errors.New("tool pins without a server_id")
	}
	return protojson.Marshal(p)
}

var bucketPins = []byte("tool_pins")

// GetToolPins implements Pins.
func (b *Bolt) GetToolPins(_ context.Context, id string) (*mcpgatewayv1.ToolPins, error) {
	var p *mcpgatewayv1.ToolPins
	err := b.db.View(func(tx *bolt.Tx) error {
		var v []byte
		if bk := tx.Bucket(bucketPins); bk != nil {
			v = bk.Get([]byte(id))
		}
		if v == nil {
			return fmt.Errorf("tool pins of %q: %w", id, ErrNotFound)
		}
		var err error
		p, err = decodePins(id, v)
		return err
	})
	return p, err
}

// PutToolPins implements Pins.
func (b *Bolt) PutToolPins(_ context.Context, p *mcpgatewayv1.ToolPins) error {
	v, err := encodePins(p)
	if err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(bucketPins)
		if err != nil {
			return err
		}
		return bk.Put([]byte(p.GetServerId()), v)
	})
}

// ListToolPins implements Pins.
func (b *Bolt) ListToolPins(context.Context) ([]*mcpgatewayv1.ToolPins, error) {
	var out []*mcpgatewayv1.ToolPins
	err := b.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketPins)
		if bk == nil {
			return nil
		}
		return bk.ForEach(func(k, v []byte) error {
			p, err := decodePins(string(k), v)
			if err == nil {
				out = append(out, p)
			}
			return err
		})
	})
	return out, err
}

// DeleteToolPins implements Pins.
func (b *Bolt) DeleteToolPins(_ context.Context, id string) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		if bk := tx.Bucket(bucketPins); bk != nil {
			return bk.Delete([]byte(id))
		}
		return nil
	})
}

// dirPins holds pins/<server id> = a ToolPins as protojson. It sorts before presets/, outside
// the watched range.
const dirPins = "pins/"

// GetToolPins implements Pins.
func (e *Etcd) GetToolPins(ctx context.Context, id string) (*mcpgatewayv1.ToolPins, error) {
	v, err := e.get(ctx, "get tool pins "+id, dirPins+id)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, fmt.Errorf("tool pins of %q: %w", id, ErrNotFound)
	}
	return decodePins(id, v)
}

// PutToolPins implements Pins.
func (e *Etcd) PutToolPins(ctx context.Context, p *mcpgatewayv1.ToolPins) error {
	v, err := encodePins(p)
	if err != nil {
		return err
	}
	return e.put(ctx, "put tool pins "+p.GetServerId(), dirPins+p.GetServerId(), string(v))
}

// ListToolPins implements Pins (etcd's keys are ordered, so by server id).
func (e *Etcd) ListToolPins(ctx context.Context) ([]*mcpgatewayv1.ToolPins, error) {
	kvs, err := e.list(ctx, "list tool pins", dirPins)
	if err != nil {
		return nil, err
	}
	out := make([]*mcpgatewayv1.ToolPins, 0, len(kvs))
	for _, kv := range kvs {
		p, err := decodePins(string(kv.Key), kv.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// DeleteToolPins implements Pins.
func (e *Etcd) DeleteToolPins(ctx context.Context, id string) error {
	return e.call(ctx, "delete tool pins "+id, func(ctx context.Context) error {
		_, err := e.cli.Delete(ctx, e.prefix+dirPins+id)
		return err
	})
}
