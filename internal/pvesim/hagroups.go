package pvesim

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// ---- HA groups (ha/groups.cfg, src/PVE/HA/Groups.pm, API2/HA/Groups.pm) -----
//
// On PVE 7 and 8 groups are the HA stack's node preferences. On PVE 9
// they are deprecated: Config.pm have_groups_been_migrated is true once
// no group exists, and then every groups call and a resource's group
// option are refused. A cluster upgraded with groups still has them (the
// "mid-upgrade" state, Sim.AddHAGroup on Version 9): they work, rules
// list them as generated rules, and rules cannot be written until the
// CRM migrates them (Sim.MigrateHAGroups).

// haGroup is one section of ha/groups.cfg.
type haGroup struct {
	nodes      []string // entries as given, "node1:2"
	restricted bool
	nofailback bool
	comment    string
}

// groupsMigrated is Config.pm have_groups_been_migrated: PVE 9 with no
// group. Before 9 there is nothing to migrate to. Caller holds s.mu.
func (s *Sim) groupsMigrated() bool {
	return s.version.release >= "9" && len(s.haGroups) == 0
}

// migrateGroupsToRules is Groups.pm migrate_groups_to_rules: one
// node-affinity rule "ha-group-<name>" per existing group some resource
// uses. Caller holds s.mu.
func (s *Sim) migrateGroupsToRules(rules map[string]*haRule) {
	byGroup := map[string]map[string]bool{}
	for sid, r := range s.ha {
		if r.group == "" || s.haGroups[r.group] == nil {
			continue
		}
		if byGroup[r.group] == nil {
			byGroup[r.group] = map[string]bool{}
		}
		byGroup[r.group][sid] = true
	}
	for _, name := range slices.Sorted(maps.Keys(byGroup)) {
		g := s.haGroups[name]
		r := &haRule{id: "ha-group-" + name, typ: "node-affinity", resources: byGroup[name],
			nodes: decodeNodes(strings.Join(g.nodes, ",")), comment: g.comment}
		if g.restricted {
			r.strict = "1"
		}
		if r.comment == "" {
			r.comment = fmt.Sprintf("Generated from HA group '%s'.", name)
		}
		r.order = nextOrdinal(rules)
		rules[r.id] = r
	}
}

// AddHAGroup adds an HA group (nodes "node1:2,node2") as "ha-manager
// groupadd" did. On Version 9 it makes the cluster one whose groups are
// not migrated yet.
func (s *Sim) AddHAGroup(name, nodes string, restricted bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.haGroups[name] != nil {
		return fmt.Errorf("pvesim: ha group ID '%s' already defined", name)
	}
	if len(decodeNodes(nodes)) == 0 {
		return fmt.Errorf("pvesim: HA group %q needs nodes", name)
	}
	s.haGroups[name] = &haGroup{nodes: splitList(nodes), restricted: restricted}
	s.haPlaceAll("node-affinity")
	return nil
}

// SetHAGroup sets (or with "" clears) the group of a guest's HA resource,
// whatever the version allows over the API.
func (s *Sim) SetHAGroup(vmid int, group string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.guests[vmid]
	if g == nil || s.haOf(g) == nil {
		return fmt.Errorf("pvesim: guest %d is not HA managed", vmid)
	}
	if group != "" && s.haGroups[group] == nil {
		return fmt.Errorf("pvesim: HA group '%s' does not exist", group)
	}
	s.haOf(g).group = group
	s.haPlaceAll("node-affinity")
	return nil
}

// MigrateHAGroups does what the PVE 9 CRM does once every node runs a
// new enough pve-manager (Manager.pm try_persistent_group_migration,
// $migrate_group_persistently): the groups written out as rules, each
// resource's group replaced by failback (0 for a nofailback group), the
// groups config deleted. A no-op without groups or before Version 9.
func (s *Sim) MigrateHAGroups() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.version.release < "9" || len(s.haGroups) == 0 {
		return
	}
	s.migrateGroupsToRules(s.haRules)
	s.haRulesWrite()
	for _, r := range s.ha {
		if r.group == "" {
			continue
		}
		if g := s.haGroups[r.group]; g != nil && g.nofailback {
			if r.opts == nil {
				r.opts = map[string]int64{}
			}
			r.opts["failback"] = 0
		}
		r.group = ""
	}
	s.haGroups = map[string]*haGroup{}
}

func (s *Sim) haGroupRoutes(mux *http.ServeMux) {
	s.handle(mux, "GET /cluster/ha/groups", s.haGroupList)
	s.handle(mux, "POST /cluster/ha/groups", s.haGroupCreate)
	s.handle(mux, "GET /cluster/ha/groups/{group}", s.haGroupRead)
	s.handle(mux, "PUT /cluster/ha/groups/{group}", s.haGroupUpdate)
	s.handle(mux, "DELETE /cluster/ha/groups/{group}", s.haGroupDelete)
}

func (g *haGroup) json(name, digest string) map[string]any {
	m := map[string]any{"group": name, "type": "group", "digest": digest,
		"nodes": strings.Join(slices.Compact(slices.Sorted(slices.Values(g.nodes))), ",")}
	if g.restricted {
		m["restricted"] = 1
	}
	if g.nofailback {
		m["nofailback"] = 1
	}
	if g.comment != "" {
		m["comment"] = g.comment
	}
	return m
}

// haGroupsDigest is the SHA-1 of ha/groups.cfg. Caller holds s.mu.
func (s *Sim) haGroupsDigest() string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(s.haGroups)) {
		g := s.haGroups[name]
		fmt.Fprintf(&b, "group: %s\n\tnodes %s\n\tnofailback %d\n\trestricted %d\n\tcomment %s\n\n",
			name, strings.Join(g.nodes, ","), boolInt(g.nofailback), boolInt(g.restricted), g.comment)
	}
	return sha1Hex(b.String())
}

func (s *Sim) haGroupList(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groupsMigrated() {
		return nil, fail500("cannot index groups: ha groups have been migrated to rules")
	}
	digest := s.haGroupsDigest()
	out := []map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(s.haGroups)) {
		out = append(out, s.haGroups[name].json(name, digest))
	}
	return out, nil
}

func (s *Sim) haGroupRead(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groupsMigrated() {
		return nil, fail500("cannot read group: ha groups have been migrated to rules")
	}
	name := q.path("group")
	g := s.haGroups[name]
	if g == nil {
		return nil, fail500("no such ha group '%s'", name)
	}
	return g.json(name, s.haGroupsDigest()), nil
}

// applyGroupParams sets a group's options from a create or update.
func applyGroupParams(g *haGroup, q *req) {
	if q.has("nodes") {
		g.nodes = splitList(q.str("nodes"))
	}
	if b, ok := parseBool(q.str("restricted")); ok && q.has("restricted") {
		g.restricted = b
	}
	if b, ok := parseBool(q.str("nofailback")); ok && q.has("nofailback") {
		g.nofailback = b
	}
	if q.has("comment") {
		g.comment = q.str("comment")
	}
}

func (s *Sim) haGroupCreate(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groupsMigrated() {
		return nil, fail500("cannot create group: ha groups have been migrated to rules")
	}
	if t := q.str("type"); t != "" && t != "group" {
		return nil, fail500("types does not match")
	}
	if !q.has("nodes") {
		return nil, fail500("missing value for required option 'nodes'")
	}
	name := q.str("group")
	if err := s.haLockFault("create ha group failed"); err != nil {
		return nil, err
	}
	if s.haGroups[name] != nil {
		return nil, fail500("create ha group failed: ha group ID '%s' already defined", name)
	}
	g := &haGroup{}
	applyGroupParams(g, q)
	s.haGroups[name] = g
	return nil, nil
}

func (s *Sim) haGroupUpdate(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groupsMigrated() {
		return nil, fail500("cannot update group: ha groups have been migrated to rules")
	}
	if t := q.str("type"); t != "" && t != "group" {
		return nil, fail500("types does not match")
	}
	const prefix = "update ha group failed: "
	if err := s.haLockFault("update ha group failed"); err != nil {
		return nil, err
	}
	if d := q.str("digest"); d != "" && d != s.haGroupsDigest() {
		return nil, fail500(prefix + "detected modified configuration - file changed by other user? Try again.")
	}
	name := q.path("group")
	old := s.haGroups[name]
	if old == nil {
		return nil, fail500(prefix+"no such ha group '%s'", name)
	}
	g := *old
	g.nodes = slices.Clone(old.nodes)
	applyGroupParams(&g, q)
	for _, k := range splitList(q.str("delete")) {
		switch k {
		case "nodes":
			return nil, fail500(prefix+"unable to delete required option '%s'", k)
		case "restricted":
			g.restricted = false
		case "nofailback":
			g.nofailback = false
		case "comment":
			g.comment = ""
		default:
			return nil, fail500(prefix+"no such option '%s'", k)
		}
	}
	s.haGroups[name] = &g
	s.haPlaceAll("node-affinity")
	return nil, nil
}

func (s *Sim) haGroupDelete(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groupsMigrated() {
		return nil, fail500("cannot delete group: ha groups have been migrated to rules")
	}
	name := q.path("group")
	if err := s.haLockFault("delete ha group failed"); err != nil {
		return nil, err
	}
	for _, r := range s.haSorted() {
		if r.group == name {
			return nil, fail500("delete ha group failed: ha group is used by service '%s'", r.sid)
		}
	}
	delete(s.haGroups, name)
	return nil, nil
}

// groupParam checks a resource create's or update's group
// (API2/HA/Resources.pm). Caller holds s.mu.
func (s *Sim) groupParam(q *req, create bool) error {
	if !q.has("group") || (!create && q.str("group") == "") {
		return nil
	}
	if s.groupsMigrated() {
		return fail500("invalid parameter 'group': ha groups have been migrated to rules")
	}
	if !create && s.haGroups[q.str("group")] == nil {
		return fail500("HA group '%s' does not exist", q.str("group"))
	}
	return nil
}
