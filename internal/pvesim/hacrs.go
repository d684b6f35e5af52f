package pvesim

import (
	"hash/fnv"
	"math"
	"time"
)

// ---- the CRS load balancer (PVE 9.2, pve-ha-manager 5.2.0) ------------------------
//
// With Options.HARebalance set (PVE 9 only), the CRM's auto rebalancing
// runs every interval as Manager.pm load_balance does with the dynamic
// scheduler and its defaults (update_crs_scheduler_mode): threshold 0.3,
// method bruteforce, hold duration 3 rounds, margin 0.1. A round
//
//   - does nothing while any HA resource is migrating
//     (any_resource_motion_queued_or_running);
//   - computes the node imbalance; unless it exceeds the threshold for
//     3 consecutive rounds, nothing moves;
//   - takes as candidates the running, stationary resource bundles (a
//     resource and its positive-affinity partners on one node; leader
//     the first sid: get_active_stationary_resource_bundles) and, for
//     each, the preferred nodes of its node-affinity rule without the
//     nodes of its negative partners and its own
//     (get_resource_migration_candidates);
//   - picks the bundle move with the lowest resulting imbalance and
//     migrates the bundle when it improves the imbalance by at least the
//     margin (relative change).
//
// The imbalance is computed by the Rust crate proxmox-resource-scheduling,
// which is not in pve-ha-manager's tree; the simulator takes the
// coefficient of variation (population standard deviation over mean) of
// the nodes' loads, which gives the 1.41 of pve-ha-manager's test
// test-crs-dynamic-auto-rebalance-topsis2 for all load on one of three
// nodes. A guest's load is its CPUs times a usage factor in [0.05, 1]
// drawn anew each round from Options.Seed, the round and the vmid (FNV-1a
// hash), so a run is reproducible and keeps rebalancing round after round.

const (
	crsThreshold    = 0.3
	crsHoldDuration = 3
	crsMargin       = 0.1
)

// haCRS is the load balancer's state. Caller holds s.mu.
type haCRS struct {
	rounds    int
	sustained int // sustained_imbalance_round
	stop      chan struct{}
}

// startRebalance starts the rebalance ticker (New).
func (s *Sim) startRebalance() {
	if s.opts.HARebalance <= 0 {
		return
	}
	stop := make(chan struct{})
	s.crs.stop = stop
	go func() {
		t := time.NewTicker(s.opts.HARebalance)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				s.RebalanceNow()
			}
		}
	}()
}

func (s *Sim) stopRebalance() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.crs.stop != nil {
		close(s.crs.stop)
		s.crs.stop = nil
	}
}

// RebalanceNow runs one load-balancing round now, as the ticker of
// Options.HARebalance does (also without it, on PVE 9; a no-op before).
func (s *Sim) RebalanceNow() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.version.release < "9" {
		return
	}
	s.crs.rounds++
	s.loadBalance(s.crs.rounds)
}

// HARebalanceRounds is the number of load-balancing rounds run so far.
func (s *Sim) HARebalanceRounds() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.crs.rounds
}

// guestUsage is a guest's load in a round.
func (s *Sim) guestUsage(g *guest, round int) float64 {
	h := fnv.New64a()
	var b [24]byte
	for i, v := range []uint64{s.opts.Seed, uint64(round), uint64(g.vmid)} {
		for j := range 8 {
			b[i*8+j] = byte(v >> (8 * j))
		}
	}
	h.Write(b[:])
	u := float64(h.Sum64()>>11) / float64(1<<53)
	return g.cpus() * (0.05 + 0.95*u*u)
}

// imbalance is the coefficient of variation of the nodes' loads.
func imbalance(load map[string]float64, nodes []string) float64 {
	var sum float64
	for _, n := range nodes {
		sum += load[n]
	}
	if sum == 0 || len(nodes) == 0 {
		return 0
	}
	mean := sum / float64(len(nodes))
	var v float64
	for _, n := range nodes {
		v += (load[n] - mean) * (load[n] - mean)
	}
	return math.Sqrt(v/float64(len(nodes))) / mean
}

type crsCandidate struct {
	leader    string
	resources []string
	nodes     []string
	usage     float64
	from      string
}

// loadBalance is one round of Manager.pm load_balance. Caller holds s.mu.
func (s *Sim) loadBalance(round int) {
	all := s.nodeNamesLocked()
	load := map[string]float64{}
	usage := map[string]float64{}
	started := map[string]*guest{}
	for _, r := range s.haSorted() {
		g := s.guests[r.vmid]
		if g == nil {
			continue
		}
		if g.lock() == "migrate" {
			return // any_resource_motion_queued_or_running
		}
		if r.requested() == "started" && g.running() {
			usage[r.sid] = s.guestUsage(g, round)
			load[g.node] += usage[r.sid]
			started[r.sid] = g
		}
	}
	imb := imbalance(load, all)
	if imb <= crsThreshold {
		s.crs.sustained = 0
		return
	}
	s.crs.sustained++
	if s.crs.sustained < crsHoldDuration {
		return
	}
	s.crs.sustained = 0
	c := s.compileRules()
	var cands []crsCandidate
	seen := map[string]bool{}
	for _, r := range s.haSorted() {
		g := started[r.sid]
		if g == nil || seen[r.sid] {
			continue
		}
		bundle := []string{r.sid}
		ok := true
		for _, p := range sortedSet(c.together[r.sid]) {
			pr := s.ha[p]
			if pr == nil {
				continue
			}
			if pg := s.guests[pr.vmid]; pg != nil && pg.lock() == "migrate" {
				ok = false
			}
			if pg := started[p]; pg != nil {
				ok = ok && pg.node == g.node
				bundle = append(bundle, p)
			}
		}
		for _, p := range bundle {
			seen[p] = true
		}
		if !ok {
			continue
		}
		pref := c.preferred(r.sid, all)
		for p := range c.separate[r.sid] {
			if pg := started[p]; pg != nil {
				delete(pref, pg.node)
			}
		}
		delete(pref, g.node)
		cand := crsCandidate{leader: r.sid, resources: bundle, from: g.node}
		for _, n := range all {
			if pref[n] {
				cand.nodes = append(cand.nodes, n)
			}
		}
		for _, p := range bundle {
			cand.usage += usage[p]
		}
		if len(cand.nodes) > 0 {
			cands = append(cands, cand)
		}
	}
	best, bestNode, bestImb := -1, "", math.Inf(1)
	for i, cand := range cands {
		for _, n := range cand.nodes {
			load[cand.from] -= cand.usage
			load[n] += cand.usage
			if v := imbalance(load, all); v < bestImb {
				best, bestNode, bestImb = i, n, v
			}
			load[n] -= cand.usage
			load[cand.from] += cand.usage
		}
	}
	if best < 0 || (imb-bestImb)/imb < crsMargin {
		return
	}
	for _, sid := range cands[best].resources {
		r := s.ha[sid]
		s.haStartMove(r, s.guests[r.vmid], bestNode, "rebalance", round)
	}
}
