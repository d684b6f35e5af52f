package observer

import (
	"context"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
)

// Cluster facts and HA placement (PVE 9). Each pass reads what the cluster
// runs and how its HA stack places guests (events.PVEFacts, published in
// the heartbeat) and, when HA rules are in force and some guest is
// HA-managed, the rules and the HA resources (failback): each HA guest's
// snapshot then carries its placement (events.HAPlacement), which the
// planner reads to place the guest through a rule rather than a
// migration; under HA groups the placement says so (Groups). The facts can change
// under a running observer (a cluster finishing its upgrade), so they are
// read again every factsEvery passes (two small calls; a resync reads them
// at once); the rules and resources, with HA guests under rules, every pass.

// HAReader is what the observer reads of the cluster besides its guests.
// It is optional: with a Proxmox that lacks it the observer knows no
// facts, and HA guests carry no placement (unknown: converge moves none).
type HAReader interface {
	ClusterFacts(ctx context.Context) (events.PVEFacts, error)
	pve.PlacementReader
}

var _ HAReader = (*pve.Client)(nil)

// factsEvery is how many passes the cluster's facts are kept before they
// are read again: five minutes at the default interval.
const factsEvery = 30

// factsRetry is how many passes a failed read of the facts waits.
const factsRetry = 3

// haState is what the last passes found of the cluster.
type haState struct {
	facts events.PVEFacts
	// next is the pass that reads the facts next (0: the first).
	next uint64
	// resync reads the facts at the next pass.
	resync bool
	// placements are the HA guests' placements by vmid under HA rules,
	// nil when the rules are not in force or not read since they are.
	placements map[int]*events.HAPlacement
}

// readCluster reads the facts and, under HA rules, the placements of the
// inventory's HA guests. A failed read keeps what the last pass found:
// guests must not flip between placement by rules and by migration
// because one call failed.
func (o *Observer) readCluster(ctx context.Context, inv []pve.Resource) {
	hr, ok := o.px.(HAReader)
	if !ok {
		return
	}
	facts := o.ha.facts
	if o.pass >= o.ha.next || o.ha.resync {
		f, err := hr.ClusterFacts(ctx)
		if err != nil {
			// Tried again in factsRetry passes, not every pass (a token
			// without Sys.Audit on / is refused every time).
			o.log.Warn().Err(err).Msg("cluster facts not read; keeping the last ones")
			o.ha.next, o.ha.resync = o.pass+factsRetry, false
			return
		}
		if f != o.ha.facts {
			o.log.Info().Str("version", f.Version).Str("ha", f.HA).Msg("Proxmox VE cluster facts")
		}
		facts, o.ha.next, o.ha.resync = f, o.pass+factsEvery, false
	}
	if facts.HA == events.HAGroups && pve.HasHA(inv) {
		// A cluster finishing its upgrade moves its groups to rules at
		// once: with HA guests to place, the mode is read every pass
		// (one call), so that converge stops asking HA to migrate them
		// within a pass, not within factsEvery.
		if mode, err := hr.HAMode(ctx); err == nil && mode != facts.HA {
			facts.HA, o.ha.next = mode, o.pass+1 // the release too, next pass
		}
	}
	if facts.HA != events.HARules {
		o.ha.facts, o.ha.placements = facts, nil
		return
	}
	if o.ha.facts.HA != events.HARules {
		o.ha.placements = nil // placements read under rules only
	}
	o.ha.facts = facts
	if !pve.HasHA(inv) {
		o.ha.placements = map[int]*events.HAPlacement{}
		return
	}
	_, placements, err := pve.ReadPlacements(ctx, hr, events.HARules)
	if err != nil {
		// Guests read now, or put under HA since the last read, carry no
		// placement (unknown): converge moves none of them meanwhile.
		o.log.Warn().Err(err).Msg("HA rules not read; keeping the last placements")
		return
	}
	o.ha.placements = placements
}

// groupsPlacement is every HA guest's placement under HA groups.
var groupsPlacement = &events.HAPlacement{Groups: true}

// placement is an HA guest's placement: under HA groups, Groups; under HA
// rules, the rule that places it as last read. nil for a guest HA does
// not manage, and for an HA guest whose placement is unknown (the facts
// or rules not read, or the guest put under HA since they were).
func (o *Observer) placement(r *pve.Resource) *events.HAPlacement {
	switch {
	case r.HAState == "":
		return nil
	case o.ha.facts.HA == events.HAGroups:
		return groupsPlacement
	case o.ha.facts.HA == events.HARules && o.ha.placements != nil:
		return o.ha.placements[r.VMID]
	}
	return nil
}

// pveFacts is what the heartbeat says the cluster runs, nil when unknown.
func (o *Observer) pveFacts() *events.PVEFacts {
	if o.ha.facts == (events.PVEFacts{}) {
		return nil
	}
	f := o.ha.facts
	return &f
}
