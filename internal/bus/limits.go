package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/internal/journal"
)

// LimitsBucket holds the planners' limits ledger (planner.Claim): one key
// per limit (a node's concurrency, the mass-change guard), each a JSON list
// of admitted actions, updated by compare-and-set so that two planners
// never both take the last room.
const LimitsBucket = "converge_limits"

// LimitsStore is the limits ledger's bucket.
type LimitsStore struct{ kv jetstream.KeyValue }

// LimitsStore opens the limits bucket, creating it if missing (bound
// first: a role without the right to create buckets uses the one an admin
// provisioned).
func (b *Bus) LimitsStore(ctx context.Context, replicas int) (*LimitsStore, error) {
	kv, err := b.JS.KeyValue(ctx, LimitsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = b.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: LimitsBucket,
			Description: "converge limits ledger (per-node concurrency, mass-change guard)",
			History:     1, Replicas: max(replicas, 1), Storage: jetstream.FileStorage})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = b.JS.KeyValue(ctx, LimitsBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("limits bucket %s: %w", LimitsBucket, err)
	}
	return &LimitsStore{kv: kv}, nil
}

// Load returns key's value and revision; a missing key is (nil, 0).
func (s *LimitsStore) Load(ctx context.Context, key string) ([]byte, uint64, error) {
	e, err := s.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, 0, nil
	case err != nil:
		return nil, 0, err
	}
	return e.Value(), e.Revision(), nil
}

// Store writes key's value if it is still at revision rev (0: absent);
// otherwise journal.ErrStale.
func (s *LimitsStore) Store(ctx context.Context, key string, val []byte, rev uint64) error {
	var err error
	if rev == 0 {
		_, err = s.kv.Create(ctx, key, val)
	} else {
		_, err = s.kv.Update(ctx, key, val, rev)
	}
	var apiErr *jetstream.APIError
	if errors.Is(err, jetstream.ErrKeyExists) || errors.As(err, &apiErr) {
		return fmt.Errorf("%w: %w", journal.ErrStale, err)
	}
	return err
}
