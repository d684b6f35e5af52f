package planner

import (
	"fmt"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// createStep is the clone that creates a missing guest, or why it cannot
// be created (status error: nothing converge can do about it by itself).
func createStep(v *projector.View, c *projector.ClusterState) (Step, string) {
	d := v.Desired
	if d.Clone == nil {
		return Step{}, fmt.Sprintf("guest %d does not exist in Proxmox, and its desired state has no clone: give clone.from (a template) to create it, or desire it absent", v.VMID)
	}
	t, ok := c.Templates[d.Clone.From]
	if !ok {
		return Step{}, fmt.Sprintf("guest %d does not exist in Proxmox, and clone.from %d is not a template in the inventory", v.VMID, d.Clone.From)
	}
	if d.Kind != nil && *d.Kind != t.Kind {
		return Step{}, fmt.Sprintf("desired kind %s, but template %d is a %s", *d.Kind, d.Clone.From, t.Kind)
	}
	node := d.Clone.Node
	if node == "" {
		node = t.Node
	}
	op := &events.CloneOp{From: d.Clone.From, FromNode: t.Node, Full: d.Clone.IsFull(), Storage: d.Clone.Storage, Pool: d.Clone.Pool}
	if !op.Full || op.Storage == "" { // where the clone takes its storage's lock
		op.SourceStorage = t.Storage
	}
	if d.Name != nil {
		op.Name = *d.Name
	}
	how := "linked"
	if op.Full {
		how = "full"
	}
	return Step{Op: events.OpClone, Clone: op, Node: node, Kind: t.Kind,
		Reason: fmt.Sprintf("create guest %d: %s clone of template %d onto %s", v.VMID, how, d.Clone.From, node)}, ""
}

// isCreating reports a lock Proxmox holds on a guest while it is being
// made: QEMU's clone, LXC's create.
func isCreating(lock string) bool { return lock == "clone" || lock == "create" }

// cloneLeftover says why a guest is an error rather than one being made:
// converge's clone of it failed and left it locked ("" otherwise).
// Proxmox removes what a failed clone made; a clone killed hard may not.
func cloneLeftover(v *projector.View) string {
	o, r := v.Observed, v.LastResult
	// Only a clone task that ended failed: a failure to reach Proxmox or
	// to find the task says nothing of a clone that may still run.
	if o == nil || !isCreating(o.Lock) || r == nil || r.Op != events.OpClone || r.Status != events.ResultFailed || r.UPID == "" {
		return ""
	}
	return fmt.Sprintf("clone failed (%s) and left guest %d locked (%s): remove it in Proxmox (qm destroy %d / pct destroy %d) and converge creates it again",
		r.Error, v.VMID, o.Lock, v.VMID, v.VMID)
}

// destroySteps are the steps that destroy a guest desired absent: out of
// HA, shut down (forced after the timeout), deleted with its disks. The
// destroy gate decides first; when it is closed the decision says which
// condition holds it (blocked), and there are no steps.
func destroySteps(v *projector.View, p Policy) ([]Step, Decision) {
	o := v.Observed
	approved := v.DestroyApproved()
	switch {
	case o.Protected:
		return nil, decide(Blocked, "desired absent, but guest %d has Proxmox protection on: converge never destroys a protected guest (turn protection off in Proxmox to let it)", v.VMID)
	case !approved && !o.Owned():
		return nil, awaitsDestroy(decide(Blocked, "desired absent: guest %d was not created by converge, so only `converge approve %d` lets converge destroy it", v.VMID, v.VMID))
	case !approved && !p.AllowDestroy:
		return nil, awaitsDestroy(decide(Blocked, "desired absent: the destroy gate is closed (run the planner and executors with --allow-destroy, or `converge approve %d` for this guest)", v.VMID))
	}
	var steps []Step
	if o.HA != "" {
		steps = append(steps, Step{Op: events.OpRemoveHA,
			Reason: fmt.Sprintf("desired absent: remove guest %d from HA (state %s) first, so that HA does not start it again", v.VMID, o.HA)})
	}
	if o.Status != "stopped" {
		steps = append(steps, Step{Op: events.OpShutdown, Timeout: p.ShutdownTimeout,
			Reason: "desired absent: shut the guest down (forced after " + p.ShutdownTimeout.String() + ") before destroying it"})
	}
	steps = append(steps, Step{Op: events.OpDestroy,
		Reason: fmt.Sprintf("desired absent: destroy guest %d with its disks (purge)", v.VMID)})
	return steps, Decision{}
}

// awaitsDestroy marks a decision the destroy gate blocks and an approval
// would open (not a protected guest's: no approval lifts that).
func awaitsDestroy(d Decision) Decision {
	d.Status.Awaits = AwaitsDestroy
	return d
}

// checkExisting stops the plan of an existing guest that converge cannot
// manage as it is.
func checkExisting(v *projector.View) (Decision, bool) {
	d, o := v.Desired, v.Observed
	if d.Kind != nil && events.GuestKind(*d.Kind) != o.Kind {
		return decide(Error, "desired kind %s but guest %d is a %s container/VM in Proxmox", *d.Kind, v.VMID, o.Kind), true
	}
	if o.Status != "running" && o.Status != "stopped" && o.Status != "paused" {
		// New guests read "unknown" until pvestatd's next broadcast.
		return decide(Pending, "waiting for Proxmox to report the guest's power state (now %q)", o.Status), true
	}
	return Decision{}, false
}
