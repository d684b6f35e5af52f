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

// Config configures a [Manager]. Start from [DefaultConfig]: a field left
// zero is refused by [Config.Validate], not read as its default.
type Config struct {
	// Group names the set of instances sharing partitions, e.g.
	// "executor-pve". Letters, digits, '-' and '_' only.
	Group string
	// Member is this instance's id, unique among the group's live members.
	Member string
	// Partitions is how many partitions there are (0..Partitions-1).
	Partitions int
	// TTL is how long a lease or a membership outlives its last renewal.
	// It is the store's TTL: the first manager to create the store sets it
	// for all.
	TTL time.Duration
	// Renew is the time between rounds, below TTL/2 (TTL/RenewDivisor
	// by default).
	Renew time.Duration
	// Replicas of the store when it is created.
	Replicas int
	// ReleaseTimeout bounds how long Run waits for OnRelease of every held
	// partition when its context ends.
	ReleaseTimeout time.Duration
	// OnAcquire is called when a lease is won: start the partition's work
	// (nil: nothing to start).
	OnAcquire func(p int)
	// OnRelease is called when a lease is given up voluntarily (a member
	// preferred for it joined, or shutdown): stop taking work and finish
	// what is in flight, then return; the lease is deleted afterwards.
	OnRelease func(p int)
	// OnLost is called when a lease could not be renewed: stop the
	// partition's work at once; another member may already own it.
	OnLost func(p int)
	// Clock reads the time and paces rounds, retries and timeouts.
	// [Manager.Held] decides on it.
	Clock clock.Clock
	// Logger receives structured logs.
	Logger zerolog.Logger
}

// Defaults and bounds of Config, each with its reason.
const (
	// DefaultTTL: a dead member's partitions are taken over within about
	// TTL + Renew, while a stall shorter than TTL - Renew (a GC pause, a
	// NATS cluster electing a leader) costs no lease.
	DefaultTTL = 5 * time.Second
	// MinTTL: a round is a few store round trips per partition; much
	// shorter and renewals would fail from latency alone.
	MinTTL = 100 * time.Millisecond
	// RenewDivisor: Renew = TTL/5 leaves four more rounds to renew a
	// lease before it is stale (TTL - Renew after its last renewal).
	RenewDivisor = 5
	// defaultReleaseTimeout: enough for in-flight work to finish at
	// shutdown; work that takes longer has its leases expire instead.
	defaultReleaseTimeout = 60 * time.Second
)

// DefaultConfig returns the defaults above; Group, Member and Partitions
// are the caller's to set (they have none).
func DefaultConfig() Config {
	return Config{TTL: DefaultTTL, Renew: DefaultTTL / RenewDivisor, Replicas: 1,
		ReleaseTimeout: defaultReleaseTimeout, Clock: clock.Real}
}

// Validate refuses a Config that cannot work, naming the field.
func (c Config) Validate() error {
	switch {
	case !validToken.MatchString(c.Group):
		return fieldErr("Group", "%q must be letters, digits, '-', '_' or '='", c.Group)
	case !validToken.MatchString(c.Member):
		return fieldErr("Member", "%q must be letters, digits, '-', '_' or '=' (see MemberID)", c.Member)
	case c.Partitions < 1:
		return fieldErr("Partitions", "must be >= 1, got %d", c.Partitions)
	case c.TTL < MinTTL:
		return fieldErr("TTL", "must be at least %s, got %s", MinTTL, c.TTL)
	// A lease must be renewable at least once more before it goes stale.
	case c.Renew <= 0 || c.Renew >= c.TTL/2:
		return fieldErr("Renew", "must be above 0 and below TTL/2 (%s), got %s", c.TTL/2, c.Renew)
	case c.Replicas < 1 || c.Replicas > 5:
		return fieldErr("Replicas", "must be within 1..5, got %d", c.Replicas)
	case c.ReleaseTimeout < 0:
		return fieldErr("ReleaseTimeout", "must be >= 0, got %s", c.ReleaseTimeout)
	case c.Clock == nil:
		return fieldErr("Clock", "must be set (clock.Real)")
	}
	return nil
}

// fieldErr names a field of Config in an error of Validate.
func fieldErr(field, format string, args ...any) error {
	return fmt.Errorf("lease.Config."+field+": "+format, args...)
}
