package leasetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/converge-pve/converge/internal/clock"
	"github.com/converge-pve/converge/internal/lease"
)

// ErrUnreachable is what a cut [Conn] answers: not one of lease's
// sentinels, so a manager treats it as the bus being away.
var ErrUnreachable = errors.New("leasetest: store unreachable")

// Store is a lease store in memory, shared by the members of a test. Like
// a JetStream bucket with History 1, every write (a delete too) takes the
// next revision of the whole store, and a key not written for TTL is
// gone, deletion marker included. Its TTL is set by the first Open. It is
// safe for concurrent use and is itself a lease.Store that is never cut.
type Store struct {
	clk clock.Clock

	mu   sync.Mutex
	ttl  time.Duration // 0 until the first Open: nothing expires
	rev  uint64
	keys map[string]entry
}

type entry struct {
	value   []byte
	rev     uint64
	written time.Time
	deleted bool
}

var (
	_ lease.Store  = (*Store)(nil)
	_ lease.Store  = (*Conn)(nil)
	_ lease.Opener = (*Store)(nil).Open
)

// New returns an empty store whose keys expire on clk (nil: clock.Real).
func New(clk clock.Clock) *Store {
	return &Store{clk: clock.Or(clk), keys: map[string]entry{}}
}

// Open is a lease.Opener on s: the first call sets the TTL, as creating a
// bucket does; later calls keep it.
func (s *Store) Open(ctx context.Context, ttl time.Duration, _ int) (lease.Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ttl == 0 {
		s.ttl = ttl
	}
	return s, nil
}

// Value returns key's value and whether it is present, without a
// connection: for a test to look at the store.
func (s *Store) Value(key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.lookup(key)
	if !ok || e.deleted {
		return nil, false
	}
	return append([]byte(nil), e.value...), true
}

// lookup returns key's entry, forgetting it if it has expired. Under mu.
func (s *Store) lookup(key string) (entry, bool) {
	e, ok := s.keys[key]
	if ok && s.ttl > 0 && !s.clk.Now().Before(e.written.Add(s.ttl)) {
		delete(s.keys, key)
		return entry{}, false
	}
	return e, ok
}

// write stores key at the next revision. Under mu.
func (s *Store) write(key string, value []byte, deleted bool) uint64 {
	s.rev++
	s.keys[key] = entry{value: append([]byte(nil), value...), rev: s.rev, written: s.clk.Now(), deleted: deleted}
	return s.rev
}

// Put implements lease.Store.
func (s *Store) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(key, value, false), nil
}

// Create implements lease.Store.
func (s *Store) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.lookup(key); ok && !e.deleted {
		return 0, fmt.Errorf("%w: %s at revision %d", lease.ErrExists, key, e.rev)
	}
	return s.write(key, value, false), nil
}

// Update implements lease.Store: like a JetStream compare-and-set, it
// compares rev with the key's last revision, a deletion's included, 0 if
// there is none.
func (s *Store) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if last := s.lastRev(key); last != rev {
		return 0, fmt.Errorf("%w: %s is at revision %d, not %d", lease.ErrRejected, key, last, rev)
	}
	return s.write(key, value, false), nil
}

// lastRev is key's last revision, 0 if it has none. Under mu.
func (s *Store) lastRev(key string) uint64 {
	e, _ := s.lookup(key)
	return e.rev
}

// Get implements lease.Store.
func (s *Store) Get(ctx context.Context, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.lookup(key)
	return ok && !e.deleted, nil
}

// Delete implements lease.Store: it writes a deletion marker.
func (s *Store) Delete(ctx context.Context, key string, rev uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if last := s.lastRev(key); rev > 0 && last != rev {
		return fmt.Errorf("%w: %s is at revision %d, not %d", lease.ErrRejected, key, last, rev)
	}
	s.write(key, nil, true)
	return nil
}

// Keys implements lease.Store.
func (s *Store) Keys(ctx context.Context, filter string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.keys {
		if e, ok := s.lookup(k); ok && !e.deleted && Match(filter, k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, nil
}

// TTL implements lease.Store.
func (s *Store) TTL(ctx context.Context) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ttl, nil
}

// Match reports whether a NATS subject filter matches key: '*' matches one
// token, a final '>' one or more.
func Match(filter, key string) bool {
	fs, ks := strings.Split(filter, "."), strings.Split(key, ".")
	for i, f := range fs {
		if f == ">" && i == len(fs)-1 {
			return len(ks) > i
		}
		if i >= len(ks) || (f != "*" && f != ks[i]) {
			return false
		}
	}
	return len(fs) == len(ks)
}

// Conn is one member's connection to a [Store]: the store itself while
// up, [ErrUnreachable] for every call (Open included) while cut.
type Conn struct {
	s   *Store
	cut atomic.Bool
}

// Conn returns a new connection to s, up.
func (s *Store) Conn() *Conn { return &Conn{s: s} }

// Cut makes the store unreachable through c (cut true) or reachable again.
func (c *Conn) Cut(cut bool) { c.cut.Store(cut) }

func (c *Conn) up() error {
	if c.cut.Load() {
		return ErrUnreachable
	}
	return nil
}

// Open is a lease.Opener through c.
func (c *Conn) Open(ctx context.Context, ttl time.Duration, replicas int) (lease.Store, error) {
	if err := c.up(); err != nil {
		return nil, err
	}
	if _, err := c.s.Open(ctx, ttl, replicas); err != nil {
		return nil, err
	}
	return c, nil
}

// Put implements lease.Store.
func (c *Conn) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	if err := c.up(); err != nil {
		return 0, err
	}
	return c.s.Put(ctx, key, value)
}

// Create implements lease.Store.
func (c *Conn) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	if err := c.up(); err != nil {
		return 0, err
	}
	return c.s.Create(ctx, key, value)
}

// Update implements lease.Store.
func (c *Conn) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if err := c.up(); err != nil {
		return 0, err
	}
	return c.s.Update(ctx, key, value, rev)
}

// Get implements lease.Store.
func (c *Conn) Get(ctx context.Context, key string) (bool, error) {
	if err := c.up(); err != nil {
		return false, err
	}
	return c.s.Get(ctx, key)
}

// Delete implements lease.Store.
func (c *Conn) Delete(ctx context.Context, key string, rev uint64) error {
	if err := c.up(); err != nil {
		return err
	}
	return c.s.Delete(ctx, key, rev)
}

// Keys implements lease.Store.
func (c *Conn) Keys(ctx context.Context, filter string) ([]string, error) {
	if err := c.up(); err != nil {
		return nil, err
	}
	return c.s.Keys(ctx, filter)
}

// TTL implements lease.Store.
func (c *Conn) TTL(ctx context.Context) (time.Duration, error) {
	if err := c.up(); err != nil {
		return 0, err
	}
	return c.s.TTL(ctx)
}
