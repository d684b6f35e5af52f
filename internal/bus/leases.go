package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/internal/lease"
)

// LeaseStore is a [lease.Opener]: it creates the lease bucket
// ([lease.Bucket], one revision per key, ttl, replicas, file storage), or
// opens it as it is if it exists (its TTL then stays the one it was
// created with), and returns it as a [lease.Store].
func (b *Bus) LeaseStore(ctx context.Context, ttl time.Duration, replicas int) (lease.Store, error) {
	// Bound first: a role without the right to create buckets (NATS
	// permissions, deploy/nats) uses the one an admin provisioned.
	kv, err := b.JS.KeyValue(ctx, lease.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = b.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: lease.Bucket, Description: "converge partition leases",
			History: 1, TTL: ttl, Replicas: max(replicas, 1), Storage: jetstream.FileStorage})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = b.JS.KeyValue(ctx, lease.Bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("lease bucket %s: %w", lease.Bucket, err)
	}
	return leaseKV{kv}, nil
}

// leaseKV is a lease.Store over a JetStream key-value bucket.
type leaseKV struct{ kv jetstream.KeyValue }

// leaseErr maps a write's error to lease's sentinels, wrapping the
// original so that it stays visible:
//   - the key found where none is expected (jetstream.ErrKeyExists) is
//     exists: lease.ErrExists for Create; for Update and Delete that same
//     answer is a revision mismatch, lease.ErrRejected;
//   - a missing key is lease.ErrNotFound;
//   - any other answer of the server (a *jetstream.APIError, e.g. a
//     revision mismatch on a replicated bucket) is lease.ErrRejected.
//
// Anything else (a timeout, no responders, a closed connection) means the
// bus is unreachable and is returned as it is.
func leaseErr(err, exists error) error {
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrKeyExists):
		return fmt.Errorf("%w: %w", exists, err)
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("%w: %w", lease.ErrNotFound, err)
	case errors.As(err, &apiErr):
		return fmt.Errorf("%w: %w", lease.ErrRejected, err)
	}
	return err
}

func (s leaseKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	return s.kv.Put(ctx, key, value)
}

func (s leaseKV) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := s.kv.Create(ctx, key, value)
	return rev, leaseErr(err, lease.ErrExists)
}

func (s leaseKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	nrev, err := s.kv.Update(ctx, key, value, rev)
	return nrev, leaseErr(err, lease.ErrRejected)
}

func (s leaseKV) Get(ctx context.Context, key string) (bool, error) {
	e, err := s.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound): // deleted or expired too
		return false, nil
	case err != nil:
		return false, err
	}
	return e.Operation() == jetstream.KeyValuePut, nil
}

func (s leaseKV) Delete(ctx context.Context, key string, rev uint64) error {
	var opts []jetstream.KVDeleteOpt
	if rev > 0 {
		opts = append(opts, jetstream.LastRevision(rev))
	}
	return leaseErr(s.kv.Delete(ctx, key, opts...), lease.ErrRejected)
}

func (s leaseKV) Keys(ctx context.Context, filter string) ([]string, error) {
	lister, err := s.kv.ListKeysFiltered(ctx, filter)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = lister.Stop() }()
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	// The lister ends early, without an error, when ctx does.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A key written while it is listed may come twice.
	slices.Sort(keys)
	return slices.Compact(keys), nil
}

func (s leaseKV) TTL(ctx context.Context) (time.Duration, error) {
	st, err := s.kv.Status(ctx)
	if err != nil {
		return 0, err
	}
	return st.TTL(), nil
}
