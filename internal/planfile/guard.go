package planfile

import (
	"fmt"
	"strings"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// guard applies the engine's limits to the plans of a file, in order: the
// mass-change guard (planner.Limits.GuardThreshold of the managed guests,
// counting the guests disrupted within its window, those of the file
// included) and the task slots of each node. It counts from the views:
// what the planner wrote as in flight, or started within the guard's
// window.
type guard struct {
	p         *projector.Projector
	lim       planner.Limits
	now       time.Time
	disrupted map[int]bool   // guests disrupted within the window
	busy      map[string]int // tasks in flight per node
	lost      int            // managed guests gone within the window
	nManaged  int            // guests with desired state (managed)
}

func newGuard(p *projector.Projector, lim planner.Limits, now time.Time) *guard {
	g := &guard{p: p, lim: lim, now: now, disrupted: map[int]bool{}, busy: map[string]int{}}
	for id, v := range p.Views {
		if a := v.InFlight; a != nil {
			if planner.Disruptive(a.Op) {
				g.disrupted[id] = true
			}
			for _, n := range nodesOf(a.Node, a.Op, a.Migrate) {
				g.busy[n]++
			}
		}
		if a := v.LastAction; a != nil && planner.Disruptive(a.Op) && now.Sub(a.Time) < lim.GuardWindow {
			g.disrupted[id] = true
		}
	}
	g.nManaged = g.managed()
	for _, l := range p.State.Losses {
		if now.Sub(l.At) < lim.GuardWindow {
			g.lost++
		}
	}
	return g
}

// managedNow recounts nManaged after v's desired state changed from
// was (whether it had one).
func (g *guard) managedNow(v *projector.View, was bool) {
	switch is := v != nil && v.Desired != nil; {
	case is && !was:
		g.nManaged++
	case !is && was:
		g.nManaged--
	}
}

// managed is the number of guests with desired state, as the engine
// counts them when it plans the guest: the file's entries so far included.
func (g *guard) managed() int {
	n := 0
	for _, v := range g.p.Views {
		if v.Desired != nil {
			n++
		}
	}
	return n
}

// admit is Engine.admit for d, the plan of v: a disruptive first step
// beyond the guard becomes a hold, a step whose node has no free slot
// waits. What it lets through counts for the entries after it.
func (g *guard) admit(v *projector.View, d planner.Decision) planner.Decision {
	if len(d.Steps) == 0 {
		return d
	}
	step := d.Steps[0]
	node := step.Node
	if node == "" && v.Observed != nil {
		node = v.Observed.Node
	}
	guarded := unprotected(d.Steps)
	if planner.Disruptive(guarded[0].Op) {
		if _, released := v.HoldInForce(&g.p.State); !released {
			managed := g.nManaged
			threshold := g.lim.GuardThreshold(managed)
			held := d
			held.Steps = guarded
			if g.lost > threshold {
				return hold(held, fmt.Sprintf("mass-change guard: %d managed guests vanished from the observed inventory within %s (more than %d); nothing disruptive proceeds until approved (converge approve %d, or --all)",
					g.lost, g.lim.GuardWindow, threshold, v.VMID))
			}
			if used := len(g.disrupted); !g.disrupted[v.VMID] && used >= threshold {
				return hold(held, fmt.Sprintf("mass-change guard: %d guests already shut down, stopped, rebooted, migrated or destroyed within %s (limit %d: the larger of %g%% of %d managed guests and %d); %s waits for approval (converge approve %d, or --all)",
					used, g.lim.GuardWindow, threshold, g.lim.GuardShare*100, managed, g.lim.GuardMin, guarded[0].Op, v.VMID))
			}
		}
	}
	slots := g.lim.NodeConcurrency
	if g.lim.NodeConcurrencyUnlimited {
		slots = 0
	}
	nodes := nodesOf(node, step.Op, step.Migrate)
	if slots > 0 && node != "" {
		for _, n := range nodes {
			if g.busy[n] >= slots {
				d.Status.Reason = fmt.Sprintf("waiting for a task slot on node %s (%d of %d in use); %s", n, g.busy[n], slots, d.Status.Reason)
				d.Status.Limit = "node"
				d.Steps = nil
				return d
			}
		}
	}
	if planner.Disruptive(step.Op) {
		g.disrupted[v.VMID] = true
	}
	for _, n := range nodes {
		g.busy[n]++
	}
	return d
}

// hold is the engine's holdStep: the hold journalled in place of the
// disruptive step; then, once the hold is journalled, the config write
// the plan has goes meanwhile (never held), as planner.Plan has it.
func hold(d planner.Decision, why string) planner.Decision {
	step := d.Steps[0]
	reason := why + "; next: " + step.Reason
	alt, meanwhile := planner.Deferrable(d.Steps)
	d.Status.Kind, d.Status.Reason, d.Status.RetryAt = planner.Held, reason, time.Time{}
	d.Steps = []planner.Step{{Op: events.OpHold, Holds: step.Op, Reason: reason}}
	if meanwhile {
		alt.Reason = "meanwhile (a config write is never held): " + alt.Reason
		d.Steps = append(d.Steps, alt)
	}
	return d
}

// unprotected is the planner's: steps without a leading protective
// snapshot, whose step the guard judges.
func unprotected(steps []planner.Step) []planner.Step {
	if len(steps) > 1 && steps[0].Op == events.OpSnapshot && steps[0].Snapshot != nil && steps[0].Snapshot.Before == steps[1].Op {
		return steps[1:]
	}
	return steps
}

// nodesOf is the nodes an action's task runs on (a migration: both).
func nodesOf(node string, op events.Op, m *events.MigrateOp) []string {
	if op == events.OpMigrate && m != nil && m.Target != node {
		return []string{node, m.Target}
	}
	return []string{node}
}

// classify says what a decision waits for, and whether it restarts the
// guest.
func classify(d planner.Decision) (waits string, restart bool) {
	for _, s := range d.Steps {
		if s.Op == events.OpReboot || (s.Op == events.OpShutdown && strings.Contains(s.Reason, "restart")) {
			restart = true
		}
	}
	r := d.Status.Reason
	switch {
	case d.Status.Kind == planner.Held:
		waits = "guard"
	case d.Status.Limit != "":
		waits = d.Status.Limit
	case d.Status.Kind == planner.Blocked && strings.HasPrefix(r, "desired absent"):
		waits = "gate"
	case len(d.Steps) == 0 && strings.Contains(r, "waits for a restart"):
		waits = "restart"
	}
	return waits, restart
}
