package observer

import (
	"context"
	"strconv"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
)

// Cluster facts and HA placement (PVE 9). Each pass reads what the cluster
// runs and how its HA stack places guests (events.PVEFacts, published in
// the heartbeat) and, when HA rules are in force and some guest is
// HA-managed, the rules: each HA guest's snapshot then carries its
// placement (events.HAPlacement), which the planner reads to place the
// guest through a rule rather than a migration. The facts can change
// under a running observer (a cluster finishing its upgrade), so they are
// read again every factsEvery passes (two small calls; a resync reads them
// at once); the rules, with HA guests under rules, every pass (one call).

// HAReader is what the observer reads of the cluster besides its guests.
// It is optional: with a Proxmox that lacks it the observer knows no
// facts, and HA guests carry no placement (as under HA groups).
type HAReader interface {
	ClusterFacts(ctx context.Context) (events.PVEFacts, error)
	HARules(ctx context.Context) ([]pve.HARule, error)
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
	// nil when the rules are not in force or were never read.
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
	if facts.HA != events.HARules {
		o.ha.facts, o.ha.placements = facts, nil
		return
	}
	var ha []pve.HAResource
	for i := range inv {
		r := &inv[i]
		if r.HAState == "" {
			continue
		}
		typ := "vm"
		if r.Kind == pve.KindLXC {
			typ = "ct"
		}
		ha = append(ha, pve.HAResource{SID: typ + ":" + strconv.Itoa(r.VMID), Type: typ, VMID: r.VMID, State: r.HAState})
	}
	if len(ha) == 0 {
		o.ha.facts, o.ha.placements = facts, map[int]*events.HAPlacement{}
		return
	}
	rules, err := hr.HARules(ctx)
	if err != nil {
		o.log.Debug().Err(err).Msg("HA rules not read; keeping the last placements")
		if o.ha.placements != nil {
			o.ha.facts = facts
		}
		return
	}
	o.ha.facts, o.ha.placements = facts, pve.HAPlacements(rules, ha)
}

// placement is an HA guest's placement under HA rules, nil when HA does
// not manage it or the rules are not in force.
func (o *Observer) placement(r *pve.Resource) *events.HAPlacement {
	if r.HAState == "" || o.ha.placements == nil {
		return nil
	}
	if p := o.ha.placements[r.VMID]; p != nil {
		return p
	}
	return &events.HAPlacement{} // put under HA since the rules were read
}

// pveFacts is what the heartbeat says the cluster runs, nil when unknown.
func (o *Observer) pveFacts() *events.PVEFacts {
	if o.ha.facts == (events.PVEFacts{}) {
		return nil
	}
	f := o.ha.facts
	return &f
}
