package pve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/converge-pve/converge/events"
)

// PVE 9's HA rules (pve-ha-manager 5.x, src/PVE/API2/HA/Rules.pm) and what
// the cluster runs. Under HA rules converge never migrates an HA guest: it
// writes the node-affinity rule it owns for the guest and HA moves it.

// Op values of these calls.
const (
	OpReadVersion Op = "read-version"
	OpReadHARules Op = "read-ha-rules"
	OpSetHARule   Op = "set-ha-rule"
)

// ClusterFacts reads what the cluster runs (GET /version) and how its HA
// stack places guests. HA groups answer 500 "cannot index groups: ha groups
// have been migrated to rules" once a PVE 9 cluster has migrated them (or
// never had any: PVE::HA::Config::have_groups_been_migrated), and a list on
// PVE 7/8 and on a PVE 9 cluster mid-upgrade, whose rules cannot be
// created yet ("ha groups have not been migrated yet").
func (c *Client) ClusterFacts(ctx context.Context) (events.PVEFacts, error) {
	var f events.PVEFacts
	err := c.do(ctx, OpReadVersion, GuestRef{}, http.MethodGet, "/version", nil, func(b []byte) error {
		v, err := decodeAnswer[struct {
			Version Value `json:"version"`
			Release Value `json:"release"`
		}](b)
		f.Version, f.Release = v.Version.Text(), v.Release.Text()
		return err
	})
	if err != nil {
		return f, err
	}
	f.HA, err = c.HAMode(ctx)
	return f, err
}

// HAMode is how the cluster's HA stack places guests, from one read of
// the groups endpoint: events.HAGroups or events.HARules (see
// ClusterFacts).
func (c *Client) HAMode(ctx context.Context) (string, error) {
	err := c.do(ctx, OpReadHA, GuestRef{}, http.MethodGet, "/cluster/ha/groups", nil, nil)
	var pe *Error
	switch {
	case err == nil:
		return events.HAGroups, nil
	case errors.As(err, &pe) && strings.Contains(pe.Message, "have been migrated to rules"):
		return events.HARules, nil
	}
	return "", err
}

// HARule is an HA rule as GET /cluster/ha/rules lists it.
type HARule struct {
	Rule string
	Type string // node-affinity | resource-affinity
	// Resources are the rule's sids ("vm:100"), sorted; Nodes its nodes
	// as written ("node" or "node:prio"), sorted.
	Resources []string
	Nodes     []string
	Strict    bool
	Disabled  bool
	Affinity  string // positive | negative (resource-affinity)
	// Errors are Proxmox's feasibility errors: a rule with any is not
	// applied by the HA stack.
	Errors bool
}

type haRuleItem struct {
	Rule      Value `json:"rule"`
	Type      Value `json:"type"`
	Resources Value `json:"resources"`
	Nodes     Value `json:"nodes"`
	Strict    Value `json:"strict"`
	Disable   Value `json:"disable"`
	Affinity  Value `json:"affinity"`
	Errors    Value `json:"errors"`
}

// HARules lists the cluster's HA rules (PVE 9) with one call.
func (c *Client) HARules(ctx context.Context) ([]HARule, error) {
	var out []HARule
	err := c.do(ctx, OpReadHARules, GuestRef{}, http.MethodGet, "/cluster/ha/rules", nil, func(b []byte) error {
		items, err := decodeAnswer[[]haRuleItem](b)
		for _, it := range items {
			strict, _ := it.Strict.Bool()
			disabled, _ := it.Disable.Bool()
			out = append(out, HARule{Rule: it.Rule.Text(), Type: it.Type.Text(),
				Resources: splitList(it.Resources.Text()), Nodes: splitList(it.Nodes.Text()),
				Strict: strict, Disabled: disabled, Affinity: it.Affinity.Text(),
				Errors: !it.Errors.IsNull()})
		}
		return err
	})
	return out, err
}

func splitList(s string) []string {
	out := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' || r == ' ' })
	slices.Sort(out)
	return out
}

// HAPlacements are the placements of the HA guests by vmid under the
// rules: each guest's enabled node-affinity rule, or the one a positive
// resource-affinity rule binds it to (HA moves them together). Disabled
// rules, and rules with feasibility errors, place nothing. ha are the
// cluster's HA resources: every one gets a placement, empty when no
// rule places it.
func HAPlacements(rules []HARule, ha []HAResource) map[int]*events.HAPlacement {
	out := make(map[int]*events.HAPlacement, len(ha))
	bySID := map[string]*events.HAPlacement{}
	for _, r := range ha {
		p := &events.HAPlacement{NoFailback: r.NoFailback}
		out[r.VMID], bySID[r.SID] = p, p
	}
	active := func(r HARule) bool { return !r.Disabled && !r.Errors }
	own := map[string]HARule{} // sid → its node-affinity rule
	for _, r := range rules {
		if r.Type != "node-affinity" {
			continue
		}
		for _, sid := range r.Resources {
			p := bySID[sid]
			switch {
			case p == nil:
			case active(r):
				own[sid] = r
				p.Rule, p.Nodes, p.Strict, p.Inactive = r.Rule, r.Nodes, r.Strict, ""
			case p.Rule == "" && ownedBy(r.Rule, sid):
				// converge's own rule, inactive: kept, so that converge
				// neither writes it again nor takes it as placing.
				p.Rule, p.Nodes, p.Strict, p.Inactive = r.Rule, r.Nodes, r.Strict, "infeasible"
				if r.Disabled {
					p.Inactive = "disabled"
				}
			}
		}
	}
	for _, r := range rules {
		if r.Type != "resource-affinity" || r.Affinity != "positive" || !active(r) {
			continue
		}
		for _, sid := range r.Resources {
			p := bySID[sid]
			if p == nil || p.Rule != "" {
				continue
			}
			for _, other := range r.Resources {
				if na, ok := own[other]; ok && other != sid {
					p.Rule, p.Via, p.Nodes, p.Strict = na.Rule, other, na.Nodes, na.Strict
					break
				}
			}
		}
	}
	return out
}

// ownedBy reports whether rule is the one converge owns for sid.
func ownedBy(rule, sid string) bool {
	_, id, _ := strings.Cut(sid, ":")
	n, err := strconv.Atoi(id)
	return err == nil && rule == events.HARuleName(n)
}

// haRuleName is a rule id converge writes: its own names only.
var haRuleName = regexp.MustCompile(`^` + regexp.QuoteMeta(events.HARulePrefix) + `[1-9][0-9]{2,8}$`)

// SetHARule writes the node-affinity rule placing guest ref on nodes:
// created when create (POST /cluster/ha/rules), else changed (PUT);
// deleted when nodes is empty. Only rules named after the guest
// (events.HARuleName) are written: converge never edits an operator's
// rule. A rule that exists already on create is changed instead, and one
// already gone on delete is done.
func (c *Client) SetHARule(ctx context.Context, ref GuestRef, rule string, nodes []string, create bool) error {
	if err := ref.Validate(); err != nil || rule != events.HARuleName(ref.VMID) || !haRuleName.MatchString(rule) {
		err := fmt.Errorf("HA rule %q for %s: not the rule converge owns for the guest", rule, haSID(ref))
		return &Error{Class: ClassTerminal, Op: OpSetHARule, Ref: ref, Message: err.Error(), Err: err}
	}
	for _, n := range nodes {
		name, prio, _ := strings.Cut(n, ":")
		if _, err := strconv.Atoi(prio); !nodeNameRE.MatchString(name) || prio != "" && err != nil {
			err := fmt.Errorf("HA rule %s: node %q is not a node name", rule, n)
			return &Error{Class: ClassTerminal, Op: OpSetHARule, Ref: ref, Message: err.Error(), Err: err}
		}
	}
	path := "/cluster/ha/rules/" + rule
	if len(nodes) == 0 {
		return c.do(ctx, OpSetHARule, ref, http.MethodDelete, path, nil, nil)
	}
	list := strings.Join(nodes, ",")
	post := func() error {
		return c.do(ctx, OpSetHARule, ref, http.MethodPost, "/cluster/ha/rules", map[string]any{
			"type": "node-affinity", "rule": rule, "resources": haSID(ref), "nodes": list, "strict": 0,
			"comment": fmt.Sprintf("converge: desired node of guest %d", ref.VMID)}, nil)
	}
	put := func() error {
		return c.do(ctx, OpSetHARule, ref, http.MethodPut, path, map[string]any{
			"type": "node-affinity", "resources": haSID(ref), "nodes": list}, nil)
	}
	// The rule may have come or gone since the plan: a predecessor
	// created it and was lost before journalling, or someone deleted it.
	// Either way the rule this action states is written.
	if create {
		if err := post(); !haRuleMessage(err, "already defined") {
			return err
		}
		return put()
	}
	if err := put(); !haRuleMessage(err, "does not exist") {
		return err
	}
	return post()
}

// haRuleMessage reports whether err is Proxmox's refusal saying what.
func haRuleMessage(err error, what string) bool {
	var pe *Error
	return err != nil && errors.As(err, &pe) && strings.Contains(pe.Message, what)
}

// PlacementReader reads how the cluster's HA stack places guests
// (*Client is one).
type PlacementReader interface {
	HAMode(ctx context.Context) (string, error)
	HARules(ctx context.Context) ([]HARule, error)
	HAResources(ctx context.Context) ([]HAResource, error)
}

var _ PlacementReader = (*Client)(nil)

// ReadPlacements reads the HA mode (unless mode already gives it) and,
// under HA rules, every HA guest's placement (HAPlacements of the rules
// and resources, failback included); under HA groups the placements are
// nil: each HA guest's is events.HAPlacement{Groups: true}.
func ReadPlacements(ctx context.Context, r PlacementReader, mode string) (string, map[int]*events.HAPlacement, error) {
	if mode == "" {
		var err error
		if mode, err = r.HAMode(ctx); err != nil {
			return "", nil, err
		}
	}
	if mode != events.HARules {
		return mode, nil, nil
	}
	rules, err := r.HARules(ctx)
	if err != nil {
		return mode, nil, err
	}
	res, err := r.HAResources(ctx)
	if err != nil {
		return mode, nil, err
	}
	return mode, HAPlacements(rules, res), nil
}

// HasHA reports whether the inventory lists an HA-managed guest.
func HasHA(inv []Resource) bool {
	for i := range inv {
		if inv[i].HAState != "" {
			return true
		}
	}
	return false
}
