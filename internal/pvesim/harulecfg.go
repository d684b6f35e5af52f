package pvesim

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ---- ha/rules.cfg: values, order and digest (Rules.pm, NodeAffinity.pm) -------

func (r *haRule) clone() *haRule {
	c := *r
	c.resources = maps.Clone(r.resources)
	c.nodes = maps.Clone(r.nodes)
	return &c
}

// encodeResources is Rules.pm encode_value for resources.
func encodeResources(set map[string]bool) string {
	return strings.Join(slices.Sorted(maps.Keys(set)), ",")
}

// encodeNodes is NodeAffinity.pm encode_plugin_value for nodes: sorted,
// a priority only when not 0.
func encodeNodes(nodes map[string]int) string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(nodes)) {
		if p := nodes[n]; p != 0 {
			out = append(out, n+":"+strconv.Itoa(p))
		} else {
			out = append(out, n)
		}
	}
	return strings.Join(out, ",")
}

// nodeNameRe is the node part of parse_node_priority.
var nodeNameRe = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?$`)

// decodeNodes is NodeAffinity.pm decode_plugin_value: entries that
// parse_node_priority rejects are skipped.
func decodeNodes(v string) map[string]int {
	out := map[string]int{}
	for _, e := range splitList(v) {
		name, prio, _ := strings.Cut(e, ":")
		p, err := strconv.Atoi(prio)
		if prio == "" {
			p, err = 0, nil
		}
		if err == nil && nodeNameRe.MatchString(name) {
			out[name] = p
		}
	}
	return out
}

// decodeResources is Rules.pm decode_value for resources.
func decodeResources(v string) map[string]bool {
	out := map[string]bool{}
	for _, sid := range splitList(v) {
		if sidParts.MatchString(sid) {
			out[sid] = true
		}
	}
	return out
}

// haRulesSorted is the rules in their file order (order, then id).
func haRulesSorted(rules map[string]*haRule) []*haRule {
	out := slices.Collect(maps.Values(rules))
	sort.Slice(out, func(i, j int) bool {
		if out[i].order != out[j].order {
			return out[i].order < out[j].order
		}
		return out[i].id < out[j].id
	})
	return out
}

// haRulesWrite writes ha/rules.cfg: sections in order; read back, each
// rule's order is its position from 1 (PVE::SectionConfig parse_config).
// Caller holds s.mu.
func (s *Sim) haRulesWrite() {
	for i, r := range haRulesSorted(s.haRules) {
		r.order = i + 1
	}
}

// haRulesDigest is the SHA-1 of ha/rules.cfg. Caller holds s.mu.
func (s *Sim) haRulesDigest() string {
	var b strings.Builder
	for _, r := range haRulesSorted(s.haRules) {
		fmt.Fprintf(&b, "%s: %s\n", r.typ, r.id)
		if r.affinity != "" {
			fmt.Fprintf(&b, "\taffinity %s\n", r.affinity)
		}
		if r.comment != "" {
			fmt.Fprintf(&b, "\tcomment %s\n", r.comment)
		}
		if r.disable {
			b.WriteString("\tdisable 1\n")
		}
		if r.typ == "node-affinity" {
			fmt.Fprintf(&b, "\tnodes %s\n", encodeNodes(r.nodes))
		}
		fmt.Fprintf(&b, "\tresources %s\n", encodeResources(r.resources))
		if r.strict != "" {
			fmt.Fprintf(&b, "\tstrict %s\n", r.strict)
		}
		b.WriteString("\n")
	}
	return sha1Hex(b.String())
}

func sha1Hex(text string) string {
	sum := sha1.Sum([]byte(text))
	return hex.EncodeToString(sum[:])
}

// nextOrdinal is Rules.pm get_next_ordinal: the lowest order plus one.
func nextOrdinal(rules map[string]*haRule) int {
	low := 0
	for _, r := range rules {
		if low == 0 || r.order < low {
			low = r.order
		}
	}
	return low + 1
}
