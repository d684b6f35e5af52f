package pvesim

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// ---- HA rules (pve-ha-manager 5.x, PVE 9) ----------------------------------------
//
// ha/rules.cfg as src/PVE/HA/Rules.pm and its plugins
// (Rules/NodeAffinity.pm, Rules/ResourceAffinity.pm) keep it, served as
// src/PVE/API2/HA/Rules.pm serves it. PVE 7 and 8 have no rules: their
// paths are not registered there and answer 501 as any unknown path.

// haRule is one section of ha/rules.cfg.
type haRule struct {
	id, typ   string
	resources map[string]bool
	// nodes are a node-affinity rule's nodes and their priorities
	// (PVE::HA::Tools::parse_node_priority: 0 when not given).
	nodes    map[string]int
	strict   string // "", "0" or "1": kept as given (its default 0 is never set)
	disable  bool   // kept only when set (create and update drop a false one)
	comment  string
	affinity string // resource-affinity: positive | negative
	order    int
}

// haFullRules is API2/HA/Rules.pm $get_full_rules_config: the rules plus,
// while groups are not migrated, one generated rule per group in use
// (Groups.pm migrate_groups_to_rules), in memory. Caller holds s.mu.
func (s *Sim) haFullRules() map[string]*haRule {
	rules := map[string]*haRule{}
	for id, r := range s.haRules {
		rules[id] = r.clone()
	}
	s.migrateGroupsToRules(rules)
	return rules
}

func (s *Sim) haRuleRoutes(mux *http.ServeMux) {
	if s.version.release < "9" {
		return
	}
	s.handle(mux, "GET /cluster/ha/rules", s.haRuleList)
	s.handle(mux, "POST /cluster/ha/rules", s.haRuleCreate)
	s.handle(mux, "GET /cluster/ha/rules/{rule}", s.haRuleRead)
	s.handle(mux, "PUT /cluster/ha/rules/{rule}", s.haRuleUpdate)
	s.handle(mux, "DELETE /cluster/ha/rules/{rule}", s.haRuleDelete)
}

// ruleJSON is $get_api_ha_rule.
func ruleJSON(r *haRule, digest string, errs map[string][]string) map[string]any {
	m := map[string]any{"rule": r.id, "type": r.typ, "digest": digest, "order": r.order,
		"resources": encodeResources(r.resources)}
	if len(r.nodes) > 0 {
		m["nodes"] = encodeNodes(r.nodes)
	}
	if r.strict != "" {
		m["strict"] = atoiDef(r.strict, 0)
	}
	if r.disable {
		m["disable"] = 1
	}
	if r.comment != "" {
		m["comment"] = r.comment
	}
	if r.affinity != "" {
		m["affinity"] = r.affinity
	}
	if len(errs) > 0 {
		e := map[string]string{}
		for k, v := range errs {
			e[k] = strings.Join(v, ", ")
		}
		m["errors"] = e
	}
	return m
}

func (s *Sim) haRuleList(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rules := s.haFullRules()
	errs := checkFeasibility(rules, s.nodeNamesLocked())
	digest := s.haRulesDigest()
	out := []map[string]any{}
	for _, r := range haRulesSorted(rules) {
		if t := q.str("type"); t != "" && t != r.typ {
			continue
		}
		if q.has("resource") && !r.resources[q.str("resource")] {
			continue
		}
		out = append(out, ruleJSON(r, digest, errs[r.id]))
	}
	return out, nil
}

func (s *Sim) haRuleRead(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rules := s.haFullRules()
	id := q.path("rule")
	r := rules[id]
	if r == nil {
		return nil, fail500("no such ha rule '%s'", id)
	}
	errs := checkFeasibility(rules, s.nodeNamesLocked())
	return ruleJSON(r, s.haRulesDigest(), errs[id]), nil
}

func (s *Sim) nodeNamesLocked() []string {
	out := make([]string, 0, len(s.nodes))
	for _, n := range s.nodes {
		out = append(out, n.name)
	}
	return out
}

// ruleOptions are the options a rule type has (the plugins' options).
var ruleOptions = map[string][]string{
	"node-affinity":     {"resources", "nodes", "strict", "disable", "comment"},
	"resource-affinity": {"resources", "affinity", "disable", "comment"},
}

// checkRuleConfig is PVE::SectionConfig check_config on a rule's
// parameters: options of another type are unexpected; a create needs the
// type's required options.
func checkRuleConfig(typ string, q *req, create bool) error {
	allowed := ruleOptions[typ]
	for _, k := range []string{"resources", "nodes", "strict", "affinity", "disable", "comment"} {
		if q.has(k) && !slices.Contains(allowed, k) {
			return fail500("unexpected property '%s'", k)
		}
	}
	if create {
		for _, k := range allowed {
			required := k == "resources" || k == "nodes" || k == "affinity"
			if required && !q.has(k) {
				return fail500("missing value for required option '%s'", k)
			}
		}
	}
	return nil
}

// applyRuleParams sets a rule's options from a create or update.
func applyRuleParams(r *haRule, q *req) {
	if q.has("resources") {
		r.resources = decodeResources(q.str("resources"))
	}
	if q.has("nodes") {
		r.nodes = decodeNodes(q.str("nodes"))
	}
	if q.has("strict") {
		b, _ := parseBool(q.str("strict"))
		r.strict = strconv.Itoa(boolInt(b))
	}
	if b, _ := parseBool(q.str("disable")); q.has("disable") && b {
		r.disable = true
	}
	if q.has("comment") {
		r.comment = q.str("comment")
	}
	if q.has("affinity") {
		r.affinity = q.str("affinity")
	}
}

// assertRuleRefs is $assert_valid_resources_param and
// $assert_valid_nodes_param. Caller holds s.mu.
func (s *Sim) assertRuleRefs(prefix string, r *haRule, q *req) error {
	if q.has("resources") {
		if len(r.resources) == 0 {
			return fail500("%sno resources were specified", prefix)
		}
		var bad []string
		for _, sid := range slices.Sorted(maps.Keys(r.resources)) {
			if s.ha[sid] == nil {
				bad = append(bad, sid)
			}
		}
		if len(bad) > 0 {
			return fail500("%scannot use unmanaged resource(s) %s.", prefix, strings.Join(bad, ", "))
		}
	}
	if q.has("nodes") {
		if len(r.nodes) == 0 {
			return fail500("%sno nodes were specified", prefix)
		}
		var bad []string
		for _, n := range slices.Sorted(maps.Keys(r.nodes)) {
			if s.nodeByName(n) == nil {
				bad = append(bad, n)
			}
		}
		if len(bad) > 0 {
			return fail500("%scannot use non-existent node(s) %s.", prefix, strings.Join(bad, ", "))
		}
	}
	return nil
}

// assertFeasibility is $assert_feasibility: the rule's errors among all
// rules (groups' generated ones included) make a PVE::Exception with code
// 400, "Rule '…' is invalid." and the errors by option. It is raised
// inside lock_ha_domain, which dies with "$errmsg: $err": the exception
// stringified (PVE::Exception stringify: "400 <msg>\n<option>: <errors>")
// behind the call's prefix, a plain error, hence a 500.
// Caller holds s.mu.
func (s *Sim) assertFeasibility(prefix string, rules map[string]*haRule, id string) error {
	full := maps.Clone(rules)
	s.migrateGroupsToRules(full)
	errs := checkFeasibility(full, s.nodeNamesLocked())[id]
	if len(errs) == 0 {
		return nil
	}
	msg := fmt.Sprintf("%s400 Rule '%s' is invalid.", prefix, id)
	for _, opt := range slices.Sorted(maps.Keys(errs)) {
		msg += "\n" + opt + ": " + strings.Join(errs[opt], ", ")
	}
	return fail500("%s", msg)
}

func (s *Sim) haRuleCreate(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.groupsMigrated() {
		return nil, fail500("cannot create ha rule: ha groups have not been migrated yet")
	}
	typ, id := q.str("type"), q.str("rule")
	if err := checkRuleConfig(typ, q, true); err != nil {
		return nil, err
	}
	r := &haRule{id: id, typ: typ}
	applyRuleParams(r, q)
	const prefix = "create ha rule failed: "
	if err := s.haLockFault("create ha rule failed"); err != nil {
		return nil, err
	}
	if s.haRules[id] != nil {
		return nil, fail500(prefix+"HA rule '%s' already defined", id)
	}
	if err := s.assertRuleRefs(prefix, r, q); err != nil {
		return nil, err
	}
	r.order = nextOrdinal(s.haRules)
	return nil, s.commitRule(prefix, id, r)
}

// commitRule writes rule id as r if the rules stay feasible with it
// ($assert_feasibility before write_rules_config in Rules.pm's create and
// update). Caller holds s.mu.
func (s *Sim) commitRule(prefix, id string, r *haRule) error {
	next := maps.Clone(s.haRules)
	next[id] = r
	if err := s.assertFeasibility(prefix, next, id); err != nil {
		return err
	}
	s.haRules = next
	s.haRulesWrite()
	s.haRulesChanged()
	return nil
}

func (s *Sim) haRuleUpdate(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.groupsMigrated() {
		return nil, fail500("cannot update ha rule: ha groups have not been migrated yet")
	}
	id := q.path("rule")
	const prefix = "update HA rules failed: "
	if err := s.haLockFault("update HA rules failed"); err != nil {
		return nil, err
	}
	if d := q.str("digest"); d != "" && d != s.haRulesDigest() {
		return nil, fail500(prefix + "detected modified configuration - file changed by other user? Try again.")
	}
	old := s.haRules[id]
	if old == nil {
		return nil, fail500(prefix+"HA rule '%s' does not exist", id)
	}
	// SectionConfig check_value takes "type" only as the rule's own.
	if q.str("type") != old.typ {
		return nil, fail500(prefix + "unexpected property 'type'")
	}
	if err := checkRuleConfig(old.typ, q, false); err != nil {
		return nil, fail500("%s%s", prefix, err.(*apiError).msg)
	}
	r := old.clone()
	applyRuleParams(r, q)
	if err := s.assertRuleRefs(prefix, r, q); err != nil {
		return nil, err
	}
	for _, k := range splitList(q.str("delete")) {
		if !slices.Contains(ruleOptions[r.typ], k) {
			return nil, fail500(prefix+"no such option '%s'", k)
		}
		switch k {
		case "resources", "nodes", "affinity":
			return nil, fail500(prefix+"unable to delete required option '%s'", k)
		case "strict":
			r.strict = ""
		case "disable":
			r.disable = false
		case "comment":
			r.comment = ""
		}
	}
	return nil, s.commitRule(prefix, id, r)
}

// haRuleDelete deletes a rule; an unknown one is no error (Rules.pm
// delete_rule only deletes the id).
func (s *Sim) haRuleDelete(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.haLockFault("delete ha rule failed"); err != nil {
		return nil, err
	}
	delete(s.haRules, q.path("rule"))
	s.haRulesWrite()
	s.haRulesChanged()
	return nil, nil
}
