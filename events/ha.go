package events

import (
	"slices"
	"strconv"
	"strings"
)

// HA placement under Proxmox VE 9's HA rules. On PVE 9, once the HA
// groups are migrated, HA places its guests by node-affinity rules (and
// moves them itself: failover, the load balancer). converge then never
// migrates an HA guest: it states a desired node as a node-affinity rule
// it owns, named after the guest (HARuleName), and lets HA move it.

// HAPlacement is how HA places an HA-managed guest, as the observer read
// it. Groups says HA groups place it (PVE 7/8, or a PVE 9 cluster
// mid-upgrade): converge asks HA to migrate it. Otherwise HA rules are in
// force (PVE 9, groups migrated) and the rest says which rule places it.
// An HA-managed guest observed without a placement (nil) is one whose
// cluster's HA mode the observer could not read: converge then moves it
// neither way, since a migration under rules fights HA.
type HAPlacement struct {
	Groups bool `json:"groups,omitempty"`
	// Rule is the enabled node-affinity rule that places the guest, ""
	// when none does. Via is the guest, "vm:101" or "ct:101", whose rule
	// it is when the guest is in none itself but a positive
	// resource-affinity rule binds it to one that is: HA moves the two
	// together.
	Rule string `json:"rule,omitempty"`
	Via  string `json:"via,omitempty"`
	// Nodes are the rule's nodes as Proxmox writes them, "node" or
	// "node:priority", sorted by name; Strict keeps the guest on them
	// even when none is online.
	Nodes  []string `json:"nodes,omitempty"`
	Strict bool     `json:"strict,omitempty"`
	// Inactive says why converge's own rule places nothing: "disabled"
	// (an operator disabled it) or "infeasible" (Proxmox's checks between
	// rules refuse it). Only converge's rule is kept when inactive: an
	// operator's inactive rule places nothing and is left out.
	Inactive string `json:"inactive,omitempty"`
	// NoFailback: the guest's HA resource has failback 0, so HA leaves it
	// on any node its rule allows, even one of lower priority
	// (Manager.pm select_service_node).
	NoFailback bool `json:"no_failback,omitempty"`
}

// HARulePrefix starts the name of every HA rule converge creates: it
// edits and deletes no other.
const HARulePrefix = "converge-"

// HARuleName is the name of the node-affinity rule converge owns for
// guest vmid.
func HARuleName(vmid int) string { return HARulePrefix + strconv.Itoa(vmid) }

// Owned reports whether the rule placing the guest is the one converge
// owns for guest vmid (and binds the guest itself, not through another).
func (p *HAPlacement) Owned(vmid int) bool {
	return p != nil && !p.Groups && p.Via == "" && p.Rule == HARuleName(vmid)
}

// Allows reports whether node is among the rule's nodes.
func (p *HAPlacement) Allows(node string) bool {
	for _, n := range p.Nodes {
		if name, _, _ := strings.Cut(n, ":"); name == node {
			return true
		}
	}
	return false
}

// Equal reports whether two placements are the same.
func (p *HAPlacement) Equal(q *HAPlacement) bool {
	if p == nil || q == nil {
		return p == q
	}
	return p.Groups == q.Groups && p.Rule == q.Rule && p.Via == q.Via && p.Strict == q.Strict &&
		p.Inactive == q.Inactive && p.NoFailback == q.NoFailback && slices.Equal(p.Nodes, q.Nodes)
}

// HARuleOp is the parameter of OpSetHARule: the node-affinity rule Rule
// (always HARuleName of the guest) placing the guest on Nodes; Create
// when the plan saw no such rule; no Nodes deletes the rule.
type HARuleOp struct {
	Rule   string   `json:"rule"`
	Nodes  []string `json:"nodes,omitempty"`
	Create bool     `json:"create,omitempty"`
}

// HA modes: how the cluster's HA stack places guests.
const (
	// HAGroups: HA groups (PVE 7/8, or PVE 9 before its groups are
	// migrated to rules: a cluster mid-upgrade). converge migrates an HA
	// guest by asking HA to.
	HAGroups = "groups"
	// HARules: HA rules are in force (PVE 9, groups migrated). converge
	// places an HA guest by a node-affinity rule and never migrates it.
	HARules = "rules"
)

// PVEFacts are what the cluster does, not only what one node says: the
// release GET /version answers and how HA places guests, from the rules
// and groups endpoints.
type PVEFacts struct {
	Version string `json:"version,omitempty"` // pve-manager version, "9.2.4"
	Release string `json:"release,omitempty"` // "9.2"
	// HA is HAGroups or HARules, "" when unknown (not read).
	HA string `json:"ha,omitempty"`
}
