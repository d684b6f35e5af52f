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
	moves := o.Node != want && (p.Rule == "" || p.Owned(o.VMID) && p.Inactive == "" && !slices.Equal(p.Nodes, []string{want}))
	switch {
	case moves && p.NoFailback:
		// HA would not move it by the rule (blocked: haBlocked); the rule
		// is written once the guest is there, or failback is back on.
		return Step{}, "", false
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
	case p.Owned(o.VMID) && p.Inactive != "":
		// Blocked (haBlocked): written again, it would stay inactive.
	case p.Owned(o.VMID):
		if !slices.Equal(p.Nodes, []string{want}) {
			return Step{Op: events.OpSetHARule, HARule: &events.HARuleOp{Rule: own, Nodes: []string{want}},
				Reason: fmt.Sprintf("desired node %s: change the HA node-affinity rule %s from nodes %s to %s, and HA moves the guest", want, own, strings.Join(p.Nodes, ","), want)}, "", true
		}
		if o.Node != want && !p.NoFailback {
			return Step{}, fmt.Sprintf("node %s: waiting for HA to move the guest from %s (HA node-affinity rule %s)", want, o.Node, own), false
		}
	case p.Allows(want) && o.Node != want:
		return Step{}, fmt.Sprintf("node %s: %s allows it, so HA places the guest; converge creates no rule of its own", want, ruleOf(p)), false
	}
	return Step{}, "", false
}

// haBlocked says why a guest's desired node cannot be had under HA rules
// ("" when it can): an operator's rule places the guest, and not there;
// converge's own rule is inactive; or HA will not move the guest to it.
func haBlocked(d *events.Desired, o *events.Observed) string {
	if d == nil || d.Node == nil || o == nil || o.HA == "" || o.HA == "ignored" || o.Node == *d.Node {
		return ""
	}
	p, want := o.HAPlacement, *d.Node
	ours := p != nil && !p.Groups && (p.Rule == "" || p.Owned(o.VMID) && p.Inactive == "")
	switch {
	case ours && p.NoFailback:
		return fmt.Sprintf("node %s: HA leaves the guest on %s: its HA resource has failback 0, so HA would not move it by a node-affinity rule (converge's rules are not strict, so that HA can recover the guest elsewhere); set failback 1 (ha-manager set vm:%d --failback 1), or move it yourself",
			want, o.Node, o.VMID)
	case p == nil || p.Groups || p.Rule == "":
		return ""
	case p.Owned(o.VMID) && p.Inactive == "disabled":
		return fmt.Sprintf("node %s: converge's HA rule %s is disabled in Proxmox: converge does not enable a rule someone disabled; enable it, or delete it and converge writes it anew", want, p.Rule)
	case p.Owned(o.VMID) && p.Inactive != "":
		return fmt.Sprintf("node %s: Proxmox's checks between HA rules refuse converge's rule %s (another rule places the guest or a guest bound to it): the rule places nothing", want, p.Rule)
	case p.Owned(o.VMID):
		return ""
	case p.Allows(want):
		return ""
	case p.Via != "":
		return fmt.Sprintf("desired node %s is not among the nodes of %s: HA moves the two together, so the guest takes %s's node; change either desired node or the affinity rule",
			want, ruleOf(p), p.Via)
	}
	return fmt.Sprintf("desired node %s is not among the nodes of %s: converge does not edit an operator's HA rule; add %s to the rule or change the desired node",
		want, ruleOf(p), want)
}

// ruleOf names the rule that places a guest, for reasons.
func ruleOf(p *events.HAPlacement) string {
	whose := "the"
	if strings.HasPrefix(p.Rule, events.HARulePrefix) {
		whose = "converge's"
	}
	s := fmt.Sprintf("%s HA node-affinity rule %s (nodes %s", whose, p.Rule, strings.Join(p.Nodes, ","))
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
