package registry

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkSessionWrites measures one durable write (a bbolt transaction with fsync) of an
// ended session and of a session's log level while n unexpired entries of each kind are
// stored. The entries are written as a schema-4 build left them, so that Open migrates them
// as it would a real file. The benchmark writes 1,000 new ids, then overwrites them, so the
// live count stays within n and n+1,000 however long it runs. "nosync" leaves out the fsync
// to show the CPU part alone.
//
//	go test -run '^$' -bench SessionWrites -benchtime 2s ./registry/
func BenchmarkSessionWrites(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		for _, bc := range []struct {
			name  string
			write func(r *Bolt, id string, exp time.Time) error
			sync  bool
		}{
			{"EndSession", func(r *Bolt, id string, exp time.Time) error { return r.EndSession(b.Context(), id, exp) }, true},
			{"SetSessionLogLevel", func(r *Bolt, id string, exp time.Time) error {
				return r.SetSessionLogLevel(b.Context(), id, "debug", exp)
			}, true},
			{"EndSession-nosync", func(r *Bolt, id string, exp time.Time) error { return r.EndSession(b.Context(), id, exp) }, false},
		} {
			b.Run(fmt.Sprintf("%s/live=%d", bc.name, n), func(b *testing.B) {
				exp := time.Now().Add(time.Hour)
				path := oldFile(b, "4", liveSessions(n, exp), bucketServers, bucketSessions, bucketPresets, bucketLevels)
				r, err := Open(path)
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close()
				r.db.NoSync = !bc.sync
				i := 0
				for b.Loop() {
					if err := bc.write(r, "bench-"+strconv.Itoa(i%1000), exp); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}

// liveSessions fills the ended-session and log-level buckets of a schema-4 file with n
// entries each that expire at exp.
func liveSessions(n int, exp time.Time) func(tx *bolt.Tx) error {
	return func(tx *bolt.Tx) error {
		ended, levels := tx.Bucket(bucketSessions), tx.Bucket(bucketLevels)
		v := binary.BigEndian.AppendUint64(nil, uint64(exp.Unix()))
		for i := range n {
			k := sessionKey("live-" + strconv.Itoa(i))
			if err := ended.Put(k, v); err != nil {
				return err
			}
			if err := levels.Put(k, append(v[:8:8], "info"...)); err != nil {
				return err
			}
		}
		return nil
	}
}
