package lease

import (
	"fmt"
	"regexp"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/clock"
)

// validToken is what a group or member may be: one key token.
var validToken = regexp.MustCompile(`^[-_=a-zA-Z0-9]+$`)

// Config configures a [Manager].
type Config struct {
	// Group names the set of instances sharing partitions, e.g.
	// "executor-pve". Letters, digits, '-' and '_' only.
	Group string
	// Member is this instance's id, unique among the group's live members.
	Member string
	// Partitions is how many partitions there are (0..Partitions-1).
	Partitions int
	// TTL is how long a lease or a membership outlives its last renewal
	// (default 5s). It is the store's TTL: the first manager to create the
	// store sets it for all.
	TTL time.Duration
	// Renew is the time between rounds (default TTL/5).
	Renew time.Duration
	// Replicas of the store when it is created (default 1).
	Replicas int
	// ReleaseTimeout bounds how long Run waits for OnRelease of every held
	// partition when its context ends (default 60s).
	ReleaseTimeout time.Duration
	// OnAcquire is called when a lease is won: start the partition's work.
	OnAcquire func(p int)
	// OnRelease is called when a lease is given up voluntarily (a member
	// preferred for it joined, or shutdown): stop taking work and finish
	// what is in flight, then return; the lease is deleted afterwards.
	OnRelease func(p int)
	// OnLost is called when a lease could not be renewed: stop the
	// partition's work at once; another member may already own it.
	OnLost func(p int)
	// Clock reads the time and paces rounds, retries and timeouts
	// (default clock.Real). [Manager.Held] decides on it.
	Clock clock.Clock
	// Logger receives structured logs.
	Logger zerolog.Logger
}

// Defaults and bounds of Config, each with its reason.
const (
	// defaultTTL: a dead member's partitions are taken over within about
	// TTL + Renew, while a stall shorter than TTL - Renew (a GC pause, a
	// NATS cluster electing a leader) costs no lease.
	defaultTTL = 5 * time.Second
	// minTTL: a round is a few store round trips per partition; much
	// shorter and renewals would fail from latency alone.
	minTTL = 100 * time.Millisecond
	// defaultRenewDivisor: Renew = TTL/5 leaves four more rounds to renew
	// a lease before it is stale (TTL - Renew after its last renewal).
	defaultRenewDivisor = 5
	// defaultReleaseTimeout: enough for in-flight work to finish at
	// shutdown; work that takes longer has its leases expire instead.
	defaultReleaseTimeout = 60 * time.Second
)

// CheckTTL checks a TTL as an operator gives it (a flag), where 0 is a
// value, not the default; Config.TTL is checked by it once defaulted. Its
// error reads after the setting's name.
func CheckTTL(d time.Duration) error {
	if d < minTTL {
		return fmt.Errorf("must be at least %s, got %s", minTTL, d)
	}
	return nil
}

// withDefaults checks c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	if !validToken.MatchString(c.Group) {
		return c, fmt.Errorf("lease: Config.Group %q must be letters, digits, '-', '_' or '='", c.Group)
	}
	if !validToken.MatchString(c.Member) {
		return c, fmt.Errorf("lease: Config.Member %q must be letters, digits, '-', '_' or '=' (see MemberID)", c.Member)
	}
	if c.Partitions < 1 {
		return c, fmt.Errorf("lease: Config.Partitions must be >= 1, got %d", c.Partitions)
	}
	if c.TTL == 0 {
		c.TTL = defaultTTL
	}
	if err := CheckTTL(c.TTL); err != nil {
		return c, fmt.Errorf("lease: Config.TTL %w", err)
	}
	if c.Renew <= 0 {
		c.Renew = c.TTL / defaultRenewDivisor
	}
	// A lease must be renewable at least once more before it goes stale.
	if c.Renew >= c.TTL/2 {
		return c, fmt.Errorf("lease: Config.Renew (%s) must be below TTL/2 (%s)", c.Renew, c.TTL/2)
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.ReleaseTimeout == 0 {
		c.ReleaseTimeout = defaultReleaseTimeout
	}
	for _, f := range []*func(int){&c.OnAcquire, &c.OnRelease, &c.OnLost} {
		if *f == nil {
			*f = func(int) {}
		}
	}
	c.Clock = clock.Or(c.Clock)
	return c, nil
}
