package planner

import (
	"fmt"
	"time"
)

// Policy are the planner's knobs. Zero fields take the defaults of
// [DefaultPolicy]; [Policy.Validate] fills and checks them in one place.
type Policy struct {
	// ObserverTimeout: with no heartbeat for this long the observations are
	// stale and every guest is blocked. Default 3 × 10 s observe interval.
	ObserverTimeout time.Duration
	// RebootForPending reboots a running guest whose desired config only
	// sits in Proxmox's pending section (cores, for example, never
	// hotplug). Only when the desired power is "running": converge does not
	// reboot guests whose power it does not manage. Default true, as
	// Terraform's bpg provider does.
	RebootForPending *bool
	// ShutdownTimeout bounds a graceful shutdown before it is forced.
	ShutdownTimeout time.Duration
	// BackoffBase and BackoffMax bound retry delays after failures:
	// base × 2^(n-1), capped, with ±25 % jitter. A new desired revision
	// starts again from the base.
	BackoffBase, BackoffMax time.Duration
	// ObserveOnly plans and reports but never acts.
	ObserveOnly bool
}

// DefaultPolicy returns the defaults, each with its reason above.
func DefaultPolicy() Policy {
	t := true
	return Policy{
		ObserverTimeout:  30 * time.Second,
		RebootForPending: &t,
		ShutdownTimeout:  60 * time.Second,
		BackoffBase:      time.Second,
		BackoffMax:       5 * time.Minute,
	}
}

// Validate fills zero fields with defaults and checks the rest.
func (p *Policy) Validate() error {
	d := DefaultPolicy()
	if p.ObserverTimeout == 0 {
		p.ObserverTimeout = d.ObserverTimeout
	}
	if p.RebootForPending == nil {
		p.RebootForPending = d.RebootForPending
	}
	if p.ShutdownTimeout == 0 {
		p.ShutdownTimeout = d.ShutdownTimeout
	}
	if p.BackoffBase == 0 {
		p.BackoffBase = d.BackoffBase
	}
	if p.BackoffMax == 0 {
		p.BackoffMax = d.BackoffMax
	}
	switch {
	case p.ObserverTimeout < 0:
		return fmt.Errorf("planner.Policy.ObserverTimeout must be > 0, got %v", p.ObserverTimeout)
	case p.ShutdownTimeout < time.Second:
		return fmt.Errorf("planner.Policy.ShutdownTimeout must be >= 1s, got %v", p.ShutdownTimeout)
	case p.BackoffBase <= 0 || p.BackoffMax < p.BackoffBase:
		return fmt.Errorf("planner.Policy backoff must satisfy 0 < BackoffBase <= BackoffMax, got %v..%v", p.BackoffBase, p.BackoffMax)
	}
	return nil
}

// Backoff is the delay before retry n (n >= 1) of a guest's revision:
// exponential, capped, with deterministic ±25 % jitter derived from the
// guest and n, so that Plan stays pure and replays agree while retries of
// many guests still spread out.
func (p Policy) Backoff(vmid, n int) time.Duration {
	if n < 1 {
		return 0
	}
	d := p.BackoffBase
	for i := 1; i < n && d < p.BackoffMax; i++ {
		d *= 2
	}
	if d > p.BackoffMax {
		d = p.BackoffMax
	}
	// splitmix64 of (vmid, n) → [0.75, 1.25)
	x := uint64(vmid)*0x9e3779b97f4a7c15 + uint64(n)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	f := 0.75 + float64(x%1000)/2000
	return time.Duration(float64(d) * f)
}
