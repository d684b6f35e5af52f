package pvesim

import (
	"maps"
	"slices"
)

// ---- HA resource motion info (Config.pm get_resource_motion_info) ------------

// haMotionInfo is Config.pm get_resource_motion_info: the resources in
// positive affinity with sid (which move along), and by node the ones in
// negative affinity on it (cause resource-affinity; pve-ha-manager 5.2.0
// reports no other cause). Caller holds s.mu.
func (s *Sim) haMotionInfo(sid string) ([]string, map[string][]map[string]any) {
	c := s.compileRules()
	dependent := []string{}
	for _, p := range slices.Sorted(maps.Keys(c.together[sid])) {
		if r := s.ha[p]; r != nil && r.requested() != "ignored" {
			dependent = append(dependent, p)
		}
	}
	blocking := map[string][]map[string]any{}
	for _, p := range slices.Sorted(maps.Keys(c.separate[sid])) {
		r := s.ha[p]
		if r == nil || r.requested() == "ignored" {
			continue
		}
		if g := s.guests[r.vmid]; g != nil {
			blocking[g.node] = append(blocking[g.node], map[string]any{"sid": p, "cause": "resource-affinity"})
		}
	}
	return dependent, blocking
}

// migrateTargets are a guest's migration targets as both preconditions
// answer them: the other nodes, those holding a blocking HA resource not
// allowed, and an HA resource's dependent-ha-resources (PVE 9:
// get_resource_motion_info). Caller holds s.mu.
func (s *Sim) migrateTargets(g *guest) (allowed []string, notAllowed map[string]any, dependent []string) {
	var blocking map[string][]map[string]any
	if r := s.haOf(g); r != nil && r.requested() != "ignored" {
		dependent, blocking = s.haMotionInfo(r.sid)
	}
	allowed, notAllowed = []string{}, map[string]any{}
	for _, n := range s.nodes {
		switch {
		case n.name == g.node:
		case len(blocking[n.name]) > 0:
			notAllowed[n.name] = map[string]any{"blocking-ha-resources": blocking[n.name]}
		default:
			allowed = append(allowed, n.name)
		}
	}
	return allowed, notAllowed, dependent
}

// ctMigratePrecondition is GET /nodes/{node}/lxc/{vmid}/migrate, from
// pve-container 6 (PVE 9; src/PVE/API2/LXC.pm migrate_vm_precondition):
// running, allowed-nodes, not-allowed-nodes (only blocking HA resources)
// and an HA resource's dependent-ha-resources.
func (s *Sim) ctMigratePrecondition(q *req, g *guest) (any, error) {
	if g.lock() != "" {
		return nil, fail500("%s", lockedErr(g))
	}
	allowed, notAllowed, dependent := s.migrateTargets(g)
	res := map[string]any{"running": boolInt(g.running()), "allowed-nodes": allowed, "not-allowed-nodes": notAllowed}
	if dependent != nil {
		res["dependent-ha-resources"] = dependent
	}
	return res, nil
}
