package planner

import (
	"fmt"
	"strings"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// Limits are the cluster-wide safety limits on actions (docs/architecture.md, "Safety limits across processes").
// The engine applies them from its fold, which holds every planner's
// actions; what two planners decide at the same moment is settled by the
// limits ledger its loop asks before publishing (Publish.Claims).
type Limits struct {
	// NodeConcurrency is the most node tasks in flight per Proxmox node
	// (power tasks, destroys, snapshots, resizes, migrations;
	// NodeTask), unless NodeConcurrencyUnlimited. A migration counts on
	// its source and its target. Config writes and clones take no slot
	// (a clone waits for its storage and template instead).
	NodeConcurrency          int  `json:"node_concurrency"`
	NodeConcurrencyUnlimited bool `json:"node_concurrency_unlimited,omitempty"`
	// GuardWindow, GuardShare and GuardMin are the mass-change guard:
	// within GuardWindow at most max(GuardShare × managed guests,
	// GuardMin) guests may be shut down, stopped, rebooted, migrated or destroyed; beyond that
	// such actions are held until approved. When more than that many
	// managed guests vanish from the observed inventory within the
	// window, nothing disruptive proceeds until approved.
	GuardWindow time.Duration `json:"guard_window_ns"`
	GuardShare  float64       `json:"guard_share"`
	GuardMin    int           `json:"guard_min"`
	// CloneConcurrency is the most clones at once on one storage: the
	// one whose lock each takes (a full clone's target, where it
	// allocates; a linked clone's template's, where it clones the base),
	// unless CloneConcurrencyUnlimited.
	CloneConcurrency          int  `json:"clone_concurrency"`
	CloneConcurrencyUnlimited bool `json:"clone_concurrency_unlimited,omitempty"`
	// CreateRate is the most clones started per minute across the
	// cluster, unless CreateRateUnlimited.
	CreateRate          int  `json:"create_rate"`
	CreateRateUnlimited bool `json:"create_rate_unlimited,omitempty"`
	// MaxGuests caps the managed guests that exist (or are being
	// created): beyond it, creations wait. 0: no cap.
	MaxGuests int `json:"max_guests,omitempty"`
}

// Limit defaults, each with its reason.
const (
	// DefaultNodeConcurrency is a boot-storm-safe default: Proxmox's own
	// bulk guest actions (pve-manager 9.1, max-workers) and HA's LRM
	// (max_workers) run 4 tasks at a time per node.
	DefaultNodeConcurrency = 4
	// DefaultGuardWindow, DefaultGuardShare and DefaultGuardMin let a
	// routine change of a few guests through and stop a fleet file that
	// would take down a tenth of the estate at once.
	DefaultGuardWindow = 5 * time.Minute
	DefaultGuardShare  = 0.10
	DefaultGuardMin    = 5
	// DefaultCloneConcurrency is the most clones at once per storage
	// (storageSlot). Every clone takes the storage's lock once per volume
	// (PVE::Storage vdisk_alloc for a full clone, the copy outside it;
	// vdisk_clone for a linked one), and a waiter fails after 10 s
	// (cluster_lock_storage: PVE::Tools::lock_file_full, PVE::Cluster
	// cfs_lock): with 4 clones at once an allocation queues behind at
	// most 3, so none times out while one under the lock takes under
	// 3.3 s (an lvcreate, rbd create or qemu-img create takes well under
	// one). More would not add lock throughput, only copies sharing the
	// storage's disks; 1 serialised the copies, which do not hold the
	// lock (qemu-server clone_disk), and made clone batches minutes longer.
	// Container templates have their own slot (templateSlot).
	DefaultCloneConcurrency = 4
	// DefaultCreateRate is a safety brake, like the mass-change guard,
	// not a throughput limit (those are CloneConcurrency and the
	// container template's slot, keyed to Proxmox's locks): a desired
	// file that would create an estate by mistake creates 20 guests a
	// minute, which an operator sees and stops. A planned batch raises
	// it (--create-rate unlimited), as the clones bench does.
	DefaultCreateRate = 20
	// claimGrace is how long a limits ledger entry for an action not yet
	// folded counts: the publish that follows a claim lands in
	// milliseconds; one that never comes (its planner died) frees the
	// room after this.
	claimGrace = 30 * time.Second
	// refusedRetry is when a guest the ledger refused is planned again.
	refusedRetry = time.Second
)

// DefaultLimits returns the defaults above (no cap on guests).
func DefaultLimits() Limits {
	return Limits{NodeConcurrency: DefaultNodeConcurrency, GuardWindow: DefaultGuardWindow, GuardShare: DefaultGuardShare,
		GuardMin: DefaultGuardMin, CloneConcurrency: DefaultCloneConcurrency, CreateRate: DefaultCreateRate}
}

// Validate refuses Limits that make no sense, naming the field. A limit of
// 0 would let nothing through: no limit is its Unlimited field.
func (l Limits) Validate() error {
	const f = "planner.Limits."
	switch {
	case !l.NodeConcurrencyUnlimited && l.NodeConcurrency < 1:
		return fmt.Errorf(f+"NodeConcurrency: must be >= 1 (or unlimited), got %d", l.NodeConcurrency)
	case !l.CloneConcurrencyUnlimited && l.CloneConcurrency < 1:
		return fmt.Errorf(f+"CloneConcurrency: must be >= 1 (or unlimited), got %d", l.CloneConcurrency)
	case !l.CreateRateUnlimited && l.CreateRate < 1:
		return fmt.Errorf(f+"CreateRate: must be >= 1 (or unlimited), got %d", l.CreateRate)
	case l.GuardWindow <= 0:
		return fmt.Errorf(f+"GuardWindow: must be > 0, got %v", l.GuardWindow)
	case !(l.GuardShare > 0 && l.GuardShare <= 1): // NaN too
		return fmt.Errorf(f+"GuardShare: must be within (0, 1], got %v", l.GuardShare)
	case l.GuardMin < 1:
		return fmt.Errorf(f+"GuardMin: must be >= 1, got %d", l.GuardMin)
	case l.MaxGuests < 0:
		return fmt.Errorf(f+"MaxGuests: must be >= 0 (0: no cap), got %d", l.MaxGuests)
	}
	return nil
}

// The limits as the engine counts them: 0 is no limit there.
func (l Limits) node() int   { return unlimited(l.NodeConcurrency, l.NodeConcurrencyUnlimited) }
func (l Limits) clone() int  { return unlimited(l.CloneConcurrency, l.CloneConcurrencyUnlimited) }
func (l Limits) create() int { return unlimited(l.CreateRate, l.CreateRateUnlimited) }

func unlimited(n int, off bool) int {
	if off {
		return 0
	}
	return n
}

// Disruptive reports whether an operation interrupts the guest (or, a
// migration, may): the mass-change guard counts it.
func Disruptive(op events.Op) bool {
	switch op {
	case events.OpShutdown, events.OpStop, events.OpReboot, events.OpDestroy, events.OpMigrate,
		events.OpSetHARule: // HA then moves the guest
		return true
	}
	return false
}

// Deferrable is the step that may go ahead when a plan's first step is
// disruptive and held by the mass-change guard: its config write (never
// held), if it has one.
func Deferrable(steps []Step) (Step, bool) {
	if len(steps) < 2 || !Disruptive(steps[0].Op) {
		return Step{}, false
	}
	for _, s := range steps[1:] {
		if s.Op == events.OpSetConfig {
			return s, true
		}
	}
	return Step{}, false
}

// Claim asks the limits ledger for room for an action before it is
// published (see [Publish]).
type Claim struct {
	// Key names the limit: NodeKey(node) or GuardKey.
	Key   string `json:"key"`
	Limit int    `json:"limit"`
	// Window: an entry of the guard counts for this long; a node entry
	// (0) counts while its action is in flight.
	Window time.Duration `json:"window_ns,omitempty"`
}

// GuardKey is the mass-change guard's ledger key for a cluster: several
// Proxmox clusters may share one NATS, each with its own guard.
func GuardKey(cluster string) string { return cluster + ".guard" }

// NodeKey is a node's ledger key (node names repeat across clusters:
// "pve" is the installer's default).
func NodeKey(cluster, node string) string { return cluster + ".node." + node }

// IsGuardKey reports whether a ledger key is a cluster's guard.
func IsGuardKey(key string) bool { return strings.HasSuffix(key, ".guard") }

// Entry is one admitted action in the limits ledger.
type Entry struct {
	VMID int    `json:"vmid"`
	ID   string `json:"id"`
	// After is the guest's newest folded action when this one was
	// planned: once the fold is past it, the action is in the journal.
	After uint64    `json:"after"`
	At    time.Time `json:"at"`
}

// Live reports whether a ledger entry of claim c still takes room, as
// this engine's fold sees it: a guard entry for its window; a node entry
// while its action is in flight, or, not yet folded, for claimGrace.
func (e *Engine) Live(c Claim, en Entry, now time.Time) bool {
	if c.Window > 0 {
		return now.Sub(en.At) < c.Window
	}
	if e.awaiting[en.VMID] == en.ID {
		return true
	}
	v := e.proj.Views[en.VMID]
	switch {
	case v != nil && v.InFlight != nil && v.InFlight.ID == en.ID:
		return true
	case v != nil && v.LastActionSeq > en.After:
		return false // folded and finished, or superseded
	}
	return now.Sub(en.At) < claimGrace
}

// guardUsed is the distinct guests disrupted within the window ending at
// now (folded, or handed out and not yet folded), and whether vmid is one
// of them.
func (e *Engine) guardUsed(vmid int, now time.Time) (used int, mine bool) {
	e.lim.expireDisrupted(now, e.cfg.Limits.GuardWindow)
	used, mine = len(e.lim.disruptedN), e.lim.disruptedN[vmid] > 0
	for id := range e.awaiting {
		if Disruptive(e.awaitingOp[id]) && e.lim.disruptedN[id] == 0 {
			used++
			mine = mine || id == vmid
		}
	}
	return used, mine
}

// GuardThreshold is how many guests the mass-change guard lets be
// disrupted within its window, out of managed guests.
func (l Limits) GuardThreshold(managed int) int {
	return max(int(l.GuardShare*float64(managed)), l.GuardMin)
}

// managed is the number of guests with desired state, as last planned.
func (e *Engine) managed() int { return e.lim.managed.len() }

// losses is how many managed guests the observer found gone within the
// guard's window.
func (e *Engine) losses(now time.Time) int {
	n := 0
	for _, l := range e.proj.State.Losses {
		if now.Sub(l.At) < e.cfg.Limits.GuardWindow {
			n++
		}
	}
	return n
}

// admit applies the limits to a decision whose first step this planner
// would publish. A disruptive step beyond the mass-change guard is not
// published: a hold is, in its place (holdStep), and it stands until an
// operator approves it. A released hold passes the guard. Any other step
// waits for its node (waiting). It returns the claims the ledger must
// grant.
func (e *Engine) admit(v *projector.View, d Decision, now time.Time) (_ Decision, claims []Claim, waiting bool) {
	lim := e.cfg.Limits
	step := d.Steps[0]
	node := step.Node // a clone's target: there is no observation yet
	if node == "" {
		node = v.Observed.Node
	}
	if step.Op == events.OpClone {
		var waiting bool
		if d, claims, waiting = e.admitCreate(v, d, step, now); waiting {
			return d, nil, true
		}
	}
	// A protective snapshot is judged as the step it protects.
	if guarded := unprotected(d.Steps); Disruptive(guarded[0].Op) {
		if _, released := v.HoldInForce(&e.proj.State); !released {
			threshold := lim.GuardThreshold(e.managed())
			held := d
			held.Steps = guarded
			if lost := e.losses(now); lost > threshold {
				return holdStep(held, fmt.Sprintf("mass-change guard: %d managed guests vanished from the observed inventory within %s (more than %d); nothing disruptive proceeds until approved (converge approve %d, or --all)",
					lost, lim.GuardWindow, threshold, v.VMID)), nil, false
			}
			if used, mine := e.guardUsed(v.VMID, now); !mine && used >= threshold {
				return holdStep(held, e.guardFull(used, threshold, guarded[0].Op, v.VMID)), nil, false
			}
			if Disruptive(step.Op) { // a snapshot disrupts nothing: it claims no room
				claims = append(claims, Claim{Key: GuardKey(e.cfg.Cluster), Limit: threshold, Window: lim.GuardWindow})
			}
		}
	}
	if slots := lim.node(); slots > 0 && node != "" {
		if leadsTo(d.Steps) {
			// A change whose node task is to come: begun when the node's
			// slots are near (begun.go).
			if ok, inUse, begun, ahead := e.lim.admitLead(node, v.VMID, slots, continuing(v)); !ok {
				d.Status.Reason = fmt.Sprintf("waiting for a task slot on node %s (%d of %d in use, %d guests begun before it, %d guests ahead); %s",
					node, inUse, slots, begun, ahead, d.Status.Reason)
				d.Status.Limit = "node"
				d.Steps = nil
				return d, nil, true
			}
			d.Status.Limit = ""
			return d, claims, false
		}
		var nodeClaims []Claim
		// A begun guest goes first, as one part-way through its change.
		first := continuing(v) || e.lim.begunNode[v.VMID] != ""
		for _, n := range actionNodes(node, step.Op, step.Migrate) {
			ok, inUse, ahead := e.lim.admitNode(n, v.VMID, slots, first)
			if !ok {
				if e.lim.begunNode[v.VMID] == n {
					ahead = e.lim.begunAhead(n, v.VMID)
				} else {
					ahead += len(e.lim.begun[n])
				}
				d.Status.Reason = fmt.Sprintf("waiting for a task slot on node %s (%d of %d in use, %d guests ahead); %s",
					n, inUse, slots, ahead, d.Status.Reason)
				d.Status.Limit = "node"
				d.Steps = nil
				return d, nil, true
			}
			nodeClaims = append(nodeClaims, Claim{Key: NodeKey(e.cfg.Cluster, n), Limit: slots})
		}
		if len(nodeClaims) > 0 {
			e.lim.unbegin(v.VMID) // it holds a slot now
		}
		// Nodes first: the ledger grants them before the guard's entry, so
		// a refused node never spends the guard's budget.
		claims = append(nodeClaims, claims...)
		d.Status.Limit = ""
	}
	return d, claims, false
}

// guardFull says why the guard holds a step.
func (e *Engine) guardFull(used, threshold int, op events.Op, vmid int) string {
	lim := e.cfg.Limits
	return fmt.Sprintf("mass-change guard: %d guests already shut down, stopped, rebooted, migrated or destroyed within %s (limit %d: the larger of %g%% of %d managed guests and %d); %s waits for approval (converge approve %d, or --all)",
		used, lim.GuardWindow, threshold, lim.GuardShare*100, e.managed(), lim.GuardMin, op, vmid)
}

// holdStep turns a decision whose disruptive first step the guard holds
// into the hold to journal in its place.
func holdStep(d Decision, why string) Decision {
	step := d.Steps[0]
	reason := why + "; next: " + step.Reason
	d.Status.Kind, d.Status.Reason, d.Status.RetryAt, d.Status.Awaits = Held, reason, time.Time{}, AwaitsGuard
	d.Steps = []Step{{Op: events.OpHold, Holds: step.Op, Reason: reason}}
	return d
}

// heldDecision is a decision whose disruptive first step stands held (its
// hold journalled, reason as journalled): nothing disruptive goes, but a
// config write the plan has (never held) does.
func heldDecision(d Decision, reason string) Decision {
	alt, ok := Deferrable(d.Steps)
	d.Status.Kind, d.Status.Reason, d.Status.RetryAt, d.Status.Awaits = Held, reason, time.Time{}, AwaitsGuard
	d.Steps = nil
	if ok {
		d.Status.Reason += "; meanwhile " + alt.Reason
		d.Steps = []Step{alt}
	}
	return d
}

// continuing reports whether the guest is part-way through its desired
// revision's steps: its last action, for this revision, succeeded. Its
// next step takes the node slot that one freed ahead of the guests in
// line, so that a guest changed halfway (config written, its restart to
// come) is finished before another one is begun: fewer guests sit
// half-changed, each is done sooner, and a node's writes and restarts
// interleave instead of all writes going first.
func continuing(v *projector.View) bool {
	a, r := v.LastAction, v.LastResult
	return v.InFlight == nil && a != nil && r != nil && r.ActionID == a.ID && a.DesiredSeq == v.DesiredSeq &&
		r.Status == events.ResultSucceeded
}
