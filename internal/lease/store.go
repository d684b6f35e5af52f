package lease

import (
	"context"
	"errors"
	"time"
)

// Bucket is the key-value bucket holding every group's leases (the name
// a [Store] over JetStream uses; see bus.Bus.LeaseStore).
const Bucket = "converge_leases"

// Store is the key-value bucket leases live in: a [Manager]'s only way to
// the outside. Keys are NATS subject-like tokens joined by '.'; every key
// expires TTL after its last write; each write (a delete too) gets a new,
// higher revision.
//
// An error that is not one of the sentinels below means the store could
// not be reached (a timeout, no responders, a closed connection): the
// manager then keeps what it holds until it is certainly gone.
type Store interface {
	// Put writes key whatever its state.
	Put(ctx context.Context, key string, value []byte) (rev uint64, err error)
	// Create writes key only if it is absent (never written, deleted or
	// expired); [ErrExists] otherwise.
	Create(ctx context.Context, key string, value []byte) (rev uint64, err error)
	// Update writes key only if its revision is still rev; [ErrRejected]
	// (or [ErrNotFound]) otherwise.
	Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error)
	// Get reports whether key is present (a deleted or expired key is not).
	Get(ctx context.Context, key string) (present bool, err error)
	// Delete removes key; with rev > 0 only at that revision ([ErrRejected]
	// otherwise).
	Delete(ctx context.Context, key string, rev uint64) error
	// Keys lists the present keys matching a NATS subject filter ('*' one
	// token, '>' the rest), sorted; none is an empty list, not an error.
	Keys(ctx context.Context, filter string) ([]string, error)
	// TTL is the store's TTL, set by whoever created it.
	TTL(ctx context.Context) (time.Duration, error)
}

// Opener opens the store, creating it with ttl and replicas if it does
// not exist yet (an existing store keeps its own TTL: see [Store.TTL]).
// bus.Bus.LeaseStore is the JetStream one; package leasetest has one in
// memory.
type Opener func(ctx context.Context, ttl time.Duration, replicas int) (Store, error)

// The store's answers that are not about reachability. A [Store] wraps
// them (errors.Is) around its own error, which stays visible.
var (
	// ErrExists: Create found the key present.
	ErrExists = errors.New("lease: key exists")
	// ErrNotFound: the key to update is absent.
	ErrNotFound = errors.New("lease: key not found")
	// ErrRejected: the store refused the write, e.g. a compare-and-set at
	// a revision that is no longer the key's.
	ErrRejected = errors.New("lease: write rejected")
)

// refused reports whether err is the store's answer rather than its
// silence: for a lease being renewed, that it is lost.
func refused(err error) bool {
	return errors.Is(err, ErrRejected) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrExists)
}
