package pvesim

import (
	"maps"
	"slices"
)

// ---- the CRM places resources by the rules (Manager.pm select_service_node) ----
//
// After a rule, group or resource change, or a guest moving, the CRM's
// next round (HADelay later) moves every HA resource requested started
// whose node is not among the preferred nodes of its node-affinity rule
// (NodeAffinity.pm get_node_affinity: the online nodes of the rule's
// highest priority; a non-strict rule adds every other node at priority
// -1, plugin_compile) to the least loaded of them (the basic scheduler:
// fewest HA resources), unless failback is 0 and its node is allowed.
// Rules with feasibility errors are dropped first (Rules.pm transform).
// A positive resource-affinity partner follows to the same node, and a
// resource sharing a node with a negative partner moves away
// (ResourceAffinity.pm apply_positive/negative_resource_affinity). Every
// node is online in the simulator.

// HAMove is a migration the simulated HA stack started.
type HAMove struct {
	SID      string
	VMID     int
	From, To string
	// Cause: "rebalance", "node-affinity", "resource-affinity" or "request".
	Cause string
	// Round is the rebalance round, 0 otherwise.
	Round int
}

// HAMoves returns every migration the HA stack started, in order.
func (s *Sim) HAMoves() []HAMove {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.haMoves)
}

// haRulesChanged makes the CRM act on a rules change. Caller holds s.mu.
func (s *Sim) haRulesChanged() { s.haPlaceAll("node-affinity") }

// haGuestMoved makes the CRM check a guest that moved without it.
// Caller holds s.mu.
func (s *Sim) haGuestMoved(g *guest) {
	if s.haMoving[g.vmid] {
		delete(s.haMoving, g.vmid)
		return
	}
	if s.haOf(g) != nil {
		s.haPlaceAll("node-affinity")
	}
}

// haPlaceAll queues one placement round unless one is queued already.
// Caller holds s.mu.
func (s *Sim) haPlaceAll(cause string) {
	if len(s.haRules) == 0 && len(s.haGroups) == 0 || s.placeQueued {
		return
	}
	s.placeQueued = true
	s.haSchedule("", func() *task {
		s.placeQueued = false
		s.placeRound(cause)
		return nil
	})
}

// compiledAffinity is the rules the CRM uses: feasible, enabled, with
// the groups' generated ones. Caller holds s.mu.
type compiledAffinity struct {
	nodes    map[string]map[string]int // sid -> node -> priority
	together map[string]map[string]bool
	separate map[string]map[string]bool
}

func (s *Sim) compileRules() compiledAffinity {
	rules := s.haFullRules()
	for id := range checkFeasibility(rules, s.nodeNamesLocked()) {
		delete(rules, id)
	}
	c := compiledAffinity{nodes: map[string]map[string]int{}, together: map[string]map[string]bool{}, separate: map[string]map[string]bool{}}
	for _, r := range haRulesSorted(rules) {
		if r.disable {
			continue
		}
		switch r.typ {
		case "node-affinity":
			eff := maps.Clone(r.nodes)
			if r.strict != "1" {
				for _, n := range s.nodeNamesLocked() {
					if _, ok := eff[n]; !ok {
						eff[n] = -1
					}
				}
			}
			for sid := range r.resources {
				c.nodes[sid] = eff
			}
		case "resource-affinity":
			set := c.separate
			if r.affinity == "positive" {
				set = c.together
			}
			for a := range r.resources {
				for b := range r.resources {
					if a != b {
						if set[a] == nil {
							set[a] = map[string]bool{}
						}
						set[a][b] = true
					}
				}
			}
		}
	}
	// ResourceAffinity.pm create_implicit_negative_resource_affinity_rules:
	// a resource is kept apart from its positive partners' negative ones.
	for sid, partners := range c.together {
		for p := range partners {
			for x := range c.separate[p] {
				if x == sid {
					continue
				}
				for _, pair := range [][2]string{{sid, x}, {x, sid}} {
					if c.separate[pair[0]] == nil {
						c.separate[pair[0]] = map[string]bool{}
					}
					c.separate[pair[0]][pair[1]] = true
				}
			}
		}
	}
	// Rules.pm create_implicit_positive_resource_affinity_node_affinity_rules
	for sid, partners := range c.together {
		if c.nodes[sid] == nil {
			continue
		}
		for p := range partners {
			if c.nodes[p] == nil {
				c.nodes[p] = c.nodes[sid]
			}
		}
	}
	return c
}

// preferred is get_node_affinity's preferred nodes of sid.
func (c compiledAffinity) preferred(sid string, all []string) map[string]bool {
	na := c.nodes[sid]
	out := map[string]bool{}
	if na == nil {
		for _, n := range all {
			out[n] = true
		}
		return out
	}
	best := 0
	first := true
	for _, p := range na {
		if first || p > best {
			best, first = p, false
		}
	}
	for n, p := range na {
		if p == best {
			out[n] = true
		}
	}
	return out
}

// placeRound is one CRM round of placement. Caller holds s.mu.
func (s *Sim) placeRound(cause string) {
	c := s.compileRules()
	all := s.nodeNamesLocked()
	where := map[string]string{} // sid -> node, as planned this round
	load := map[string]int{}
	for _, r := range s.haSorted() {
		if g := s.guests[r.vmid]; g != nil {
			where[r.sid] = g.node
			load[g.node]++
		}
	}
	for _, r := range s.haSorted() {
		g := s.guests[r.vmid]
		// Only a started resource is placed (next_state_started); a
		// stopped or disabled one stays where it is (next_state_stopped).
		if g == nil || r.requested() != "started" || g.lock() != "" {
			continue
		}
		pref := c.preferred(r.sid, all)
		cur := where[r.sid]
		why := "node-affinity"
		for p := range c.together[r.sid] {
			if n, ok := where[p]; ok && n != cur && pref[n] && p < r.sid {
				pref, why = map[string]bool{n: true}, "resource-affinity"
			}
		}
		for p := range c.separate[r.sid] {
			if n, ok := where[p]; ok && p < r.sid {
				delete(pref, n)
				if n == cur {
					why = "resource-affinity"
				}
			}
		}
		if pref[cur] || len(pref) == 0 {
			continue
		}
		if _, allowed := c.nodes[r.sid][cur]; r.opts["failback"] == 0 && hasOpt(r, "failback") && allowed && why == "node-affinity" {
			continue
		}
		target := ""
		for _, n := range all {
			if pref[n] && (target == "" || load[n] < load[target]) {
				target = n
			}
		}
		load[cur]--
		load[target]++
		where[r.sid] = target
		s.haStartMove(r, g, target, why, 0)
	}
}

func hasOpt(r *haResource, k string) bool { _, ok := r.opts[k]; return ok }

// haStartMove starts the migration the CRM orders, as haQueueMigrate
// does, and records it. Caller holds s.mu.
func (s *Sim) haStartMove(r *haResource, g *guest, target, cause string, round int) {
	n := s.nodeByName(target)
	if n == nil || g.node == target {
		return
	}
	s.haMoves = append(s.haMoves, HAMove{SID: r.sid, VMID: g.vmid, From: g.node, To: target, Cause: cause, Round: round})
	s.haMoving[g.vmid] = true
	s.haBegin()
	// The migration is an LRM worker of the guest's node (halrm.go).
	s.lrmSubmit(g.node, func() *task {
		if s.guests[g.vmid] != g || g.node == target {
			delete(s.haMoving, g.vmid)
			return nil
		}
		if g.kind == LXC {
			return s.startCTMigration(g, n, false, true, nil, DefaultUser)
		}
		return s.startVMMigration(g, n, true, nil, DefaultUser)
	})
}

func sortedSet(set map[string]bool) []string { return slices.Sorted(maps.Keys(set)) }
