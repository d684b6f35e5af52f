package lease

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/clock"
)

// Run's pace while the store cannot be opened: from openRetryMin, doubling
// up to openRetryMax (a NATS cluster electing leaders after a crash takes
// seconds; a role should wait for it rather than end).
const (
	openRetryMin = 250 * time.Millisecond
	openRetryMax = 5 * time.Second
)

// Manager holds and balances one member's leases. See the package
// documentation.
type Manager struct {
	cfg   Config
	open  Opener
	store Store
	clk   clock.Clock
	log   zerolog.Logger
	// roundDone, if set (by tests, before Run), is called after each round.
	roundDone func()

	mu   sync.Mutex
	held map[int]*holding
	// freeSince is when each partition was first seen free by this member.
	freeSince map[int]time.Time
	members   []string
}

type holding struct {
	rev       uint64
	renewedAt time.Time
	releasing chan struct{} // closed when OnRelease returned; nil if not releasing
}

// New checks cfg. Run opens the store with open and does the work.
func New(cfg Config, open Opener) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for _, f := range []*func(int){&cfg.OnAcquire, &cfg.OnRelease, &cfg.OnLost} {
		if *f == nil {
			*f = func(int) {}
		}
	}
	if open == nil {
		return nil, errors.New("lease: New needs a store Opener")
	}
	return &Manager{cfg: cfg, open: open, clk: cfg.Clock,
		log:  cfg.Logger.With().Str("group", cfg.Group).Str("member", cfg.Member).Logger(),
		held: map[int]*holding{}, freeSince: map[int]time.Time{}}, nil
}

// Held reports whether this member holds p's lease and renewed it recently
// enough that no other member can have claimed it since.
func (m *Manager) Held(p int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.held[p]
	return h != nil && m.clk.Now().Sub(h.renewedAt) < m.cfg.TTL-m.cfg.Renew
}

// Owned returns the partitions this member holds, in order.
func (m *Manager) Owned() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := make([]int, 0, len(m.held))
	for p := range m.held {
		ps = append(ps, p)
	}
	sort.Ints(ps)
	return ps
}

// Members returns the live members seen in the last round.
func (m *Manager) Members() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.members...)
}

func (m *Manager) memberKey(id string) string { return m.cfg.Group + ".m." + id }

// MembersFilter matches the membership keys of group's live members in the
// store: what tells, from outside, whether any member runs.
func MembersFilter(group string) string  { return group + ".m.*" }
func (m *Manager) leaseKey(p int) string { return m.cfg.Group + ".p." + strconv.Itoa(p) }

// Run takes part in the group until ctx ends, then releases everything.
func (m *Manager) Run(ctx context.Context) error {
	// The store may be unreachable for a while: wait for it rather than
	// give up the role.
	delay := openRetryMin
	for {
		store, err := m.open(ctx, m.cfg.TTL, m.cfg.Replicas)
		if err == nil {
			m.store = store
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		m.log.Warn().Err(err).Dur("retry_in", delay).Msg("lease bucket unavailable; retrying")
		if clock.Sleep(ctx, m.clk, delay) != nil {
			return nil
		}
		delay = min(2*delay, openRetryMax)
	}
	if ttl, err := m.store.TTL(ctx); err == nil && ttl != m.cfg.TTL {
		m.log.Warn().Dur("bucket_ttl", ttl).Dur("ttl", m.cfg.TTL).Msg("lease bucket has another TTL; it applies")
		if ttl > 0 {
			m.cfg.TTL = ttl
			if m.cfg.Renew >= m.cfg.TTL/2 {
				m.cfg.Renew = m.cfg.TTL / RenewDivisor
			}
		}
	}
	m.log.Info().Int("partitions", m.cfg.Partitions).Dur("ttl", m.cfg.TTL).Msg("joining partition group")
	t := m.clk.NewTicker(m.cfg.Renew)
	defer t.Stop()
	for {
		m.round(ctx)
		if m.roundDone != nil {
			m.roundDone()
		}
		select {
		case <-ctx.Done():
			m.leave()
			return nil
		case <-t.C():
		}
	}
}

// withTimeout is context.WithTimeout on m's clock: ctx ends d from now
// (its cause is then context.DeadlineExceeded), or when cancel is called.
func (m *Manager) withTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	t := m.clk.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() { t.Stop(); cancel(context.Canceled) }
}
