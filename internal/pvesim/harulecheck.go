package pvesim

import (
	"maps"
	"slices"
	"sort"
)

// ---- HA rules: feasibility (Rules.pm check_feasibility) -------------------------
//
// The checks run in their registration order: NodeAffinity.pm's, then
// ResourceAffinity.pm's, then Rules.pm's checks between types; each adds
// its messages to the rules it blames, by option. Disabled rules take no
// part (foreach_rule exclude_disabled_rules).

type ruleErrors map[string]map[string][]string

func (e ruleErrors) add(id, opt, msg string) {
	if e[id] == nil {
		e[id] = map[string][]string{}
	}
	e[id][opt] = append(e[id][opt], msg)
}

func enabledRules(rules map[string]*haRule, pred func(*haRule) bool) map[string]*haRule {
	out := map[string]*haRule{}
	for id, r := range rules {
		if r != nil && !r.disable && pred(r) {
			out[id] = r
		}
	}
	return out
}

func disjoint(a, b map[string]bool) bool {
	for k := range a {
		if b[k] {
			return false
		}
	}
	return true
}

func intersect(a, b map[string]bool) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		if b[k] {
			out[k] = true
		}
	}
	return out
}

type disjointSet struct {
	ruleids   []string
	resources map[string]bool
}

// findDisjointSets is Rules/Helpers.pm find_disjoint_rules_resource_sets:
// rules sorted by their lowest resource id (sort_by_lowest_resource_id),
// each joining the first set it overlaps.
func findDisjointSets(rules map[string]*haRule) []*disjointSet {
	ids := slices.Collect(maps.Keys(rules))
	low := func(id string) string { return slices.Min(append(slices.Sorted(maps.Keys(rules[id].resources)), "~")) }
	sort.Slice(ids, func(i, j int) bool {
		if li, lj := low(ids[i]), low(ids[j]); li != lj {
			return li < lj
		}
		return ids[i] < ids[j]
	})
	var sets []*disjointSet
	for _, id := range ids {
		found := false
		for _, e := range sets {
			if disjoint(rules[id].resources, e.resources) {
				continue
			}
			found = true
			e.ruleids = append(e.ruleids, id)
			maps.Copy(e.resources, rules[id].resources)
			break
		}
		if !found {
			sets = append(sets, &disjointSet{ruleids: []string{id}, resources: maps.Clone(rules[id].resources)})
		}
	}
	return sets
}

// checkFeasibility is Rules.pm check_feasibility over the cluster's nodes.
func checkFeasibility(rules map[string]*haRule, nodes []string) ruleErrors {
	errs := ruleErrors{}
	na := enabledRules(rules, func(r *haRule) bool { return r.typ == "node-affinity" })
	ra := enabledRules(rules, func(r *haRule) bool { return r.typ == "resource-affinity" })
	pos := enabledRules(ra, func(r *haRule) bool { return r.affinity == "positive" })
	neg := enabledRules(ra, func(r *haRule) bool { return r.affinity == "negative" })

	// NodeAffinity.pm check_single_resource_reference
	bySID := map[string][]string{}
	for id, r := range na {
		for sid := range r.resources {
			bySID[sid] = append(bySID[sid], id)
		}
	}
	type pair struct{ id, sid string }
	var dup []pair
	for sid, ids := range bySID {
		if len(ids) > 1 {
			for _, id := range ids {
				dup = append(dup, pair{id, sid})
			}
		}
	}
	sort.Slice(dup, func(i, j int) bool {
		return dup[i].id < dup[j].id || dup[i].id == dup[j].id && dup[i].sid < dup[j].sid
	})
	for _, c := range dup {
		errs.add(c.id, "resources", "resource '"+c.sid+"' is already used in another node affinity rule")
	}

	// ResourceAffinity.pm check_resource_affinity_resources_count
	for _, id := range slices.Sorted(maps.Keys(ra)) {
		if len(ra[id].resources) < 2 {
			errs.add(id, "resources", "rule is ineffective as there are less than two resources")
		}
	}
	// check_negative_resource_affinity_resources_count
	for _, id := range slices.Sorted(maps.Keys(neg)) {
		if len(neg[id].resources) > len(nodes) {
			errs.add(id, "resources", "rule defines more resources than available nodes")
		}
	}
	// check_inter_resource_affinity_rules_consistency
	var conflicts [][2]string
	for _, e := range findDisjointSets(pos) {
		for _, nid := range slices.Sorted(maps.Keys(neg)) {
			if len(intersect(e.resources, neg[nid].resources)) < 2 {
				continue
			}
			conflicts = append(conflicts, [2]string{"negative", nid})
			for _, pid := range e.ruleids {
				conflicts = append(conflicts, [2]string{"positive", pid})
			}
		}
	}
	for _, c := range sortConflicts(conflicts) {
		if c[0] == "positive" {
			errs.add(c[1], "resources", "rule shares two or more resources with a negative resource affinity rule")
		} else {
			errs.add(c[1], "resources", "rule shares two or more resources with a positive resource affinity rule")
		}
	}

	// Rules.pm check_single_priority_node_affinity_in_resource_affinity_rules
	conflicts = nil
	for _, rid := range slices.Sorted(maps.Keys(ra)) {
		multi := false
		var paired []string
		for _, nid := range slices.Sorted(maps.Keys(na)) {
			if disjoint(ra[rid].resources, na[nid].resources) {
				continue
			}
			if !multi {
				multi = multiplePriorities(na[nid])
			}
			paired = append(paired, nid)
		}
		if multi {
			conflicts = append(conflicts, [2]string{"resource-affinity", rid})
			for _, nid := range paired {
				conflicts = append(conflicts, [2]string{"node-affinity", nid})
			}
		}
	}
	for _, c := range sortConflicts(conflicts) {
		if c[0] == "node-affinity" {
			errs.add(c[1], "resources", "resources are in a resource affinity rule and cannot be in a node affinity rule with multiple priorities")
		} else {
			errs.add(c[1], "resources", "resources are in node affinity rules with multiple priorities")
		}
	}
	// check_single_node_affinity_per_positive_resource_affinity_rule
	conflicts = nil
	for _, e := range findDisjointSets(pos) {
		var paired []string
		for _, nid := range slices.Sorted(maps.Keys(na)) {
			if !disjoint(e.resources, na[nid].resources) {
				paired = append(paired, nid)
			}
		}
		if len(paired) > 1 {
			for _, pid := range e.ruleids {
				conflicts = append(conflicts, [2]string{"positive", pid})
			}
			for _, nid := range paired {
				conflicts = append(conflicts, [2]string{"node-affinity", nid})
			}
		}
	}
	for _, c := range sortConflicts(conflicts) {
		if c[0] == "positive" {
			errs.add(c[1], "resources", "resources are in multiple node affinity rules")
		} else {
			errs.add(c[1], "resources", "at least one resource is in a positive resource affinity rule and there are other resources in at least one other node affinity rule already")
		}
	}
	// check_negative_resource_affinity_node_affinity_consistency
	conflicts = nil
	for _, nid := range slices.Sorted(maps.Keys(neg)) {
		allowed, located := map[string]bool{}, map[string]bool{}
		var paired []string
		for _, aid := range slices.Sorted(maps.Keys(na)) {
			common := intersect(neg[nid].resources, na[aid].resources)
			if len(common) < 1 {
				continue
			}
			maps.Copy(located, common)
			for n := range na[aid].nodes {
				allowed[n] = true
			}
			paired = append(paired, aid)
		}
		if len(allowed) < len(located) {
			conflicts = append(conflicts, [2]string{"negative", nid})
			for _, aid := range paired {
				conflicts = append(conflicts, [2]string{"node-affinity", aid})
			}
		}
	}
	for _, c := range sortConflicts(conflicts) {
		if c[0] == "negative" {
			errs.add(c[1], "resources", "two or more resources are restricted to less nodes than available to the resources")
		} else {
			errs.add(c[1], "resources", "at least one resource is in a negative resource affinity rule and this rule would restrict these to less nodes than available to the resources")
		}
	}
	return errs
}

func sortConflicts(c [][2]string) [][2]string {
	sort.Slice(c, func(i, j int) bool {
		return c[i][0] < c[j][0] || c[i][0] == c[j][0] && c[i][1] < c[j][1]
	})
	return c
}

// multiplePriorities is Rules.pm $has_multiple_priorities.
func multiplePriorities(r *haRule) bool {
	first, set := 0, false
	for _, p := range r.nodes {
		if !set {
			first, set = p, true
		} else if p != first {
			return true
		}
	}
	return false
}
