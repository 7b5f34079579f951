// Package registry stores the MCP client host's registry: external server configs (and,
// later, presets) with a schema version. Registry is an interface so that a deployment with
// several mcpgateway replicas can put it on etcd; Open gives the bbolt implementation,
// OpenEtcd the etcd one, OpenURL the one a ZEST_REGISTRY value names.
package registry

import (
	"context"
	"errors"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// SchemaVersion is the layout this build reads and writes (2 added ended /mcp sessions,
// 3 chat presets, 4 the log levels of /mcp sessions, 5 an index of both by expiry, 6 expose on
// every server config).
const SchemaVersion = 6

// Errors of the registry.
var (
	// ErrNotFound means no entry has the id.
	ErrNotFound = errors.New("not found")
	// ErrNewerSchema means the file was written by a newer Zest.
	ErrNewerSchema = errors.New("registry schema is newer than this build understands")
)

// Registry holds server configs. Every write is durable before it returns.
type Registry interface {
	// ListServers returns every server config ordered by id.
	ListServers(ctx context.Context) ([]*mcpgatewayv1.ServerConfig, error)
	// GetServer returns one server config or ErrNotFound.
	GetServer(ctx context.Context, id string) (*mcpgatewayv1.ServerConfig, error)
	// PutServer inserts or replaces a server config.
	PutServer(ctx context.Context, cfg *mcpgatewayv1.ServerConfig) error
	// DeleteServer removes a server config or returns ErrNotFound.
	DeleteServer(ctx context.Context, id string) error
	// ListPresets returns every chat preset ordered by id.
	ListPresets(ctx context.Context) ([]*mcpgatewayv1.Preset, error)
	// GetPreset returns one preset or ErrNotFound.
	GetPreset(ctx context.Context, id string) (*mcpgatewayv1.Preset, error)
	// PutPreset inserts or replaces a preset.
	PutPreset(ctx context.Context, p *mcpgatewayv1.Preset) error
	// DeletePreset removes a preset or returns ErrNotFound.
	DeletePreset(ctx context.Context, id string) error
	// EndSession records that an /mcp session was ended (DELETE), until its id expires anyway.
	EndSession(ctx context.Context, sessionID string, expires time.Time) error
	// SessionEnded reports whether an /mcp session was ended.
	SessionEnded(ctx context.Context, sessionID string) (bool, error)
	// SetSessionLogLevel remembers an /mcp session's logging/setLevel until its id expires.
	SetSessionLogLevel(ctx context.Context, sessionID, level string, expires time.Time) error
	// SessionLogLevel returns the level an /mcp session set ("" when it set none).
	SessionLogLevel(ctx context.Context, sessionID string) (string, error)
	// Close releases the store.
	Close() error
}

// ChangeKind tells what a Change is about.
type ChangeKind int

// Kinds of changes.
const (
	// ServerPut: a server config was written (Server holds it as stored).
	ServerPut ChangeKind = iota + 1
	// ServerDeleted: the server config ID was removed.
	ServerDeleted
	// PresetPut: a preset was written (Preset holds it as stored).
	PresetPut
	// PresetDeleted: the preset ID was removed.
	PresetDeleted
	// Resync: changes may have been missed (a watch restarted after compaction or a lost
	// connection): the watcher must read every server and preset again.
	Resync
)

// Change is one write to the registry, by any replica, as a watcher sees it.
type Change struct {
	Kind   ChangeKind
	ID     string
	Server *mcpgatewayv1.ServerConfig
	Preset *mcpgatewayv1.Preset
}

// Watcher is a registry shared by several mcpgateway replicas (etcd): Watch calls fn with
// every change of servers and presets made through any replica, this one's own writes
// included, in the store's order, until ctx is done; fn must not block for long. The etcd
// implementation's first call is a Resync, once its watch is in place: what the caller read
// before Watch may be older than where the watch starts. bbolt is held by one process and
// does not implement it.
type Watcher interface {
	Watch(ctx context.Context, fn func(Change)) error
}

// encodeServer is a server config as both stores keep it: protojson, unpopulated fields left
// out (a field with presence is written when set, even to its zero value).
func encodeServer(cfg *mcpgatewayv1.ServerConfig) ([]byte, error) { return protojson.Marshal(cfg) }

// decodeServer reads a stored server config. enabled and expose are set as stored configs
// always have them: a record written before they had presence left a false one out (protojson
// omits a false bool without presence), and an absent one still means false there, never
// "unset, so the default true" — a disabled or hidden server stays so when an update merges
// into it (schema 6 set expose on every record, so absent is false for both). A replica of an
// older build keeps writing records so while a newer one reads them: this read, not a one-time
// migration, is what keeps their meaning.
func decodeServer(v []byte) (*mcpgatewayv1.ServerConfig, error) {
	cfg := &mcpgatewayv1.ServerConfig{}
	if err := protojson.Unmarshal(v, cfg); err != nil {
		return nil, err
	}
	if cfg.Enabled == nil {
		cfg.Enabled = proto.Bool(false)
	}
	if cfg.Expose == nil {
		cfg.Expose = proto.Bool(false)
	}
	return cfg, nil
}
