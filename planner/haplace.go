package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/converge-pve/converge/events"
)

// HA placement under PVE 9's HA rules (o.HAPlacement set). HA moves its
// guests by itself there (failover, the load balancer), so a migration
// converge asked for would be undone, or fight an operator's rule: a
// desired node is instead the node-affinity rule converge owns for the
// guest (events.HARuleName), non-strict so that HA can still recover the
// guest elsewhere when that node fails, and HA moves the guest. converge
// never edits an operator's rule and creates none beside it: a guest an
// operator's rule places waits for HA when that rule allows the desired
// node, and is blocked, naming the rule, when it does not.

// haPlacement is the step the desired node calls for under HA rules, or
// why none is planned now.
func haPlacement(d *events.Desired, o *events.Observed, restart restartConsent) (step Step, waiting string, ok bool) {
	p := o.HAPlacement
	own := events.HARuleName(o.VMID)
	if d.Node == nil {
		if !p.Owned(o.VMID) {
			return Step{}, "", false
		}
		// The rule stated a desired node; there is none now.
		return Step{Op: events.OpSetHARule, HARule: &events.HARuleOp{Rule: own},
			Reason: fmt.Sprintf("desired state names no node: delete converge's HA node-affinity rule %s (nodes %s), HA places the guest", own, strings.Join(p.Nodes, ","))}, "", true
	}
	want := *d.Node
	moves := o.Node != want && (p.Rule == "" || p.Owned(o.VMID) && !slices.Equal(p.Nodes, []string{want}))
	switch {
	case o.HA == "ignored":
		return Step{}, fmt.Sprintf("node %s waits: HA state ignored (an operator took the guest out of HA's hands)", want), false
	case moves && o.Kind == events.LXC && o.Status == "running":
		// HA relocates a running container: it restarts on the new node.
		if why := restart.refused("node " + want + " (HA moves a running container by restarting it)"); why != "" {
			return Step{}, why, false
		}
	}
	switch {
	case p.Rule == "":
		return Step{Op: events.OpSetHARule, HARule: &events.HARuleOp{Rule: own, Nodes: []string{want}, Create: true},
			Reason: fmt.Sprintf("desired node %s, guest runs on %s: HA rules are in force, create the HA node-affinity rule %s (nodes %s) and HA moves the guest", want, o.Node, own, want)}, "", true
	case p.Owned(o.VMID):
		if !slices.Equal(p.Nodes, []string{want}) {
			return Step{Op: events.OpSetHARule, HARule: &events.HARuleOp{Rule: own, Nodes: []string{want}},
				Reason: fmt.Sprintf("desired node %s: change the HA node-affinity rule %s from nodes %s to %s, and HA moves the guest", want, own, strings.Join(p.Nodes, ","), want)}, "", true
		}
		if o.Node != want {
			return Step{}, fmt.Sprintf("node %s: waiting for HA to move the guest from %s (HA node-affinity rule %s)", want, o.Node, own), false
		}
	case p.Allows(want) && o.Node != want:
		return Step{}, fmt.Sprintf("node %s: %s allows it, so HA places the guest; converge creates no rule of its own", want, ruleOf(p)), false
	}
	return Step{}, "", false
}

// haBlocked says why a guest's desired node cannot be had under HA rules
// ("" when it can): an operator's rule places the guest, and not there.
func haBlocked(d *events.Desired, o *events.Observed) string {
	if d == nil || d.Node == nil || o == nil || o.HA == "" || o.HA == "ignored" {
		return ""
	}
	p := o.HAPlacement
	if p == nil || p.Rule == "" || p.Owned(o.VMID) || p.Allows(*d.Node) {
		return ""
	}
	return fmt.Sprintf("desired node %s is not among the nodes of %s: converge does not edit an operator's HA rule; add %s to the rule or change the desired node",
		*d.Node, ruleOf(p), *d.Node)
}

// ruleOf names the rule that places a guest, for reasons.
func ruleOf(p *events.HAPlacement) string {
	s := fmt.Sprintf("the HA node-affinity rule %s (nodes %s", p.Rule, strings.Join(p.Nodes, ","))
	if p.Strict {
		s += ", strict"
	}
	s += ")"
	if p.Via != "" {
		s += fmt.Sprintf(" of %s, to which a positive resource-affinity rule binds this guest", p.Via)
	}
	return s
}

// nodeDrift is the drift a placement step or wait reports.
func nodeDrift(d *events.Desired, o *events.Observed) string {
	if d.Node == nil {
		return fmt.Sprintf("node: none desired, HA node-affinity rule %s places the guest", events.HARuleName(o.VMID))
	}
	return fmt.Sprintf("node: want %s, have %s", *d.Node, o.Node)
}
