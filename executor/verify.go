package executor

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// managedKeys are the Proxmox config keys converge writes. An action that
// names any other key (hookscript, protection, startup…) was not planned
// by converge, whatever else it says.
var managedKeys = map[string]bool{"name": true, "description": true, "tags": true, "cores": true, "memory": true, "onboot": true}

// plannedOps are the operations the planner plans; a hard stop is only
// ever the end of a graceful shutdown, never an action of its own.
var plannedOps = map[events.Op]bool{events.OpStart: true, events.OpShutdown: true, events.OpReboot: true, events.OpSetConfig: true,
	events.OpClone: true, events.OpRemoveHA: true, events.OpDestroy: true, events.OpResize: true, events.OpMigrate: true,
	events.OpSetPool: true, events.OpSnapshot: true, events.OpSetHAState: true, events.OpSetHARule: true}

// notFromJournal is the reason prefix of an action that does not follow
// from the journal.
const notFromJournal = "does not follow from the journal: "

// newVerifier is the one projector the executor folds an action's basis
// through, so that it accepts and refuses desired events exactly as the
// planner does.
func newVerifier(cluster string, auth *projector.Auth) *projector.Projector {
	p := projector.New(cluster)
	p.Auth = auth
	return p
}

// verify says why an action does not follow from the journal ("" when it
// does): the guest's desired state at the action's DesiredSeq is an
// accepted desired event of this guest, its basis is an observation of
// this guest, the operation and its keys are ones converge plans, and
// planner.Plan, run on that desired state and that observation, produces
// exactly this action. It reads the two entries by sequence unless lasts
// already holds them (the common case: no extra journal round trip).
//
// leads, if not nil, is set when the plan has a node task after this
// action (a config write before its reboot): the write is one a task
// waits on.
func (e *Executor) verify(ctx context.Context, a events.Action, lasts guestLasts, leads *bool) (*events.Observed, string, error) {
	if !plannedOps[a.Op] {
		return nil, notFromJournal + fmt.Sprintf("operation %q is not one converge plans", a.Op), nil
	}
	for _, k := range slices.Concat(slices.Sorted(maps.Keys(a.Set)), a.Delete, a.Revert) {
		if !managedKey(a.Kind, k) {
			return nil, notFromJournal + fmt.Sprintf("config key %q is not one converge manages", k), nil
		}
	}
	if a.Op != events.OpSetConfig && (len(a.Set) > 0 || len(a.Delete) > 0 || len(a.Revert) > 0) {
		return nil, notFromJournal + fmt.Sprintf("a %s carries config", a.Op), nil
	}
	if why := paramsMatch(a); why != "" {
		return nil, notFromJournal + why, nil
	}
	desired, err := e.entryAt(ctx, a.DesiredSeq, lasts.desired)
	if err != nil {
		return nil, "", err
	}
	if why := e.isGuestEntry(desired, a.VMID, events.KindDesired); why != "" {
		return nil, notFromJournal + fmt.Sprintf("desired #%d %s", a.DesiredSeq, why), nil
	}
	p := newVerifier(e.cfg.Cluster, e.cfg.Auth)
	if ch := p.Apply(projector.Event{Seq: desired.Seq, Subject: desired.Subject, Header: desired.Header, Data: desired.Data,
		Time: desired.Time}); ch.Err != nil {
		return nil, notFromJournal + fmt.Sprintf("desired #%d does not fold: %v", desired.Seq, ch.Err), nil
	}
	v := p.Views[a.VMID]
	switch {
	case v == nil || v.Rejected != nil && v.Rejected.Seq == a.DesiredSeq:
		return nil, notFromJournal + fmt.Sprintf("desired #%d was rejected", a.DesiredSeq), nil
	case v.Desired == nil || v.DesiredSeq != a.DesiredSeq:
		return nil, notFromJournal + fmt.Sprintf("no accepted desired state at #%d", a.DesiredSeq), nil
	}
	now := e.clk.Now()
	if a.Op == events.OpClone {
		return nil, verifyClone(v, a, e.cfg, now), nil
	}
	if v.Desired.Absent {
		// The destroy gate: an approval naming the guest after its absent
		// revision, journalled before the plan was made.
		if v.Approved, err = e.approvalOf(ctx, a); err != nil {
			return nil, "", err
		}
		if v.Approved != nil {
			// An approval is for the guest that existed when it was given.
			if v.GoneSeq, err = e.goneAfter(ctx, a, v.Approved.Seq); err != nil {
				return nil, "", err
			}
		}
	}
	// The reading of the guest the plan used: the observation the fold
	// had adopted (ObservationSeq), which the basis may postdate.
	obsSeq := a.ObservationSeq
	if obsSeq == 0 {
		obsSeq = a.BasisSeq
	}
	if obsSeq > a.BasisSeq {
		return nil, notFromJournal + fmt.Sprintf("observation #%d is newer than the basis #%d", obsSeq, a.BasisSeq), nil
	}
	obs, why, err := e.readingAt(ctx, a.VMID, obsSeq, lasts)
	if err != nil || why != "" {
		return nil, why, err
	}
	v.Observed, v.ObservedSeq = obs, obsSeq
	// Cluster health is the planner's to judge (and fenced by time): here
	// only what the guest's desired state and observation call for.
	st := projector.ClusterState{Cluster: e.cfg.Cluster, HeartbeatAt: now, Reachable: true}
	d := planner.Plan(v, st, e.cfg.Policy, now)
	if len(d.Steps) == 0 {
		return nil, notFromJournal + fmt.Sprintf("the plan from desired #%d and observation #%d has no action (%s: %s)",
			a.DesiredSeq, a.BasisSeq, d.Status.Kind, d.Status.Reason), nil
	}
	diff := stepDiff(d.Steps[0], a, v.Observed)
	if alt, ok := planner.Deferrable(d.Steps); diff != "" && ok && stepDiff(alt, a, v.Observed) == "" {
		diff = "" // the config write the planner puts ahead of a step the mass-change guard holds
	}
	if diff != "" && len(d.Steps) > 1 && d.Steps[0].Op == events.OpSnapshot && stepDiff(d.Steps[1], a, v.Observed) == "" {
		// The step after a protective snapshot the planner saw taken (the
		// guest's last action, which this fold of the desired state alone
		// does not hold): the journal must show it taken.
		why, err := e.snapshotBefore(ctx, a, lasts)
		if err != nil {
			return nil, "", err
		}
		if why != "" {
			return nil, notFromJournal + "snapshot_before asks for a snapshot before " + string(a.Op) + ": " + why, nil
		}
		diff = ""
	}
	if diff != "" {
		return nil, notFromJournal + fmt.Sprintf("the plan from desired #%d and observation #%d is %s, the action %s",
			a.DesiredSeq, a.BasisSeq, describeStep(d.Steps[0]), diff), nil
	}
	if leads != nil {
		*leads = len(d.Steps) > 1 && planner.NodeTask(d.Steps[1].Op)
	}
	return obs, "", nil
}

// verifyClone says why a clone does not follow from the desired state
// ("" when it does): Plan, for a guest a pass found missing and the
// template where the action says (the executor reads Proxmox before
// cloning: the guest must be free, the template there), produces exactly
// this clone.
func verifyClone(v *projector.View, a events.Action, cfg Config, now time.Time) string {
	v.Observed = nil
	st := projector.ClusterState{Cluster: cfg.Cluster, HeartbeatAt: now, Reachable: true, PassAfterSeq: a.DesiredSeq,
		Templates: map[int]projector.Template{a.Clone.From: {Node: a.Clone.FromNode, Kind: a.Kind, Storage: a.Clone.SourceStorage}}}
	d := planner.Plan(v, st, cfg.Policy, now)
	if len(d.Steps) == 0 {
		return notFromJournal + fmt.Sprintf("the plan from desired #%d has no clone (%s: %s)", a.DesiredSeq, d.Status.Kind, d.Status.Reason)
	}
	if s := d.Steps[0]; s.Op != events.OpClone || *s.Clone != *a.Clone || s.Node != a.Node || s.Kind != a.Kind {
		return notFromJournal + fmt.Sprintf("the plan from desired #%d is %s, the action a clone of %d onto %s", a.DesiredSeq, describeStep(s), a.Clone.From, a.Node)
	}
	return ""
}

// readingAt is the reading of guest vmid journalled at seq: an
// observer's snapshot or an executor's read-back in a result, refused as
// the fold refuses it (stamped too far ahead of the journal).
func (e *Executor) readingAt(ctx context.Context, vmid int, seq uint64, lasts guestLasts) (*events.Observed, string, error) {
	en, err := e.entryAt(ctx, seq, lasts.observed, lasts.result)
	if err != nil {
		return nil, "", err
	}
	if why := e.isGuestEntry(en, vmid, events.KindObserved, events.KindResult); why != "" {
		return nil, notFromJournal + fmt.Sprintf("observation #%d %s", seq, why), nil
	}
	info, _ := events.ParseSubject(en.Subject)
	var o *events.Observed
	if info.Kind == events.KindResult {
		r, err := events.Decode[events.Result](en.Data)
		if err != nil || r.VMID != vmid {
			return nil, notFromJournal + fmt.Sprintf("result #%d is not a result of guest %d", seq, vmid), nil
		}
		o = r.Observed
	} else if ob, err := events.Decode[events.Observed](en.Data); err == nil {
		o = &ob
	}
	switch {
	case o == nil || o.VMID != vmid:
		return nil, notFromJournal + fmt.Sprintf("#%d holds no reading of guest %d", seq, vmid), nil
	case !o.Exists:
		return nil, notFromJournal + fmt.Sprintf("guest %d did not exist at #%d", vmid, seq), nil
	case !en.Time.IsZero() && o.ReadAt.After(en.Time.Add(projector.MaxReadAhead)):
		return nil, notFromJournal + fmt.Sprintf("observation #%d was read in the future (%s)", seq, o.ReadAt.Format(time.RFC3339)), nil
	}
	return o, "", nil
}

// entryAt is the journal entry at seq: one of known when it is, else read.
func (e *Executor) entryAt(ctx context.Context, seq uint64, known ...*journal.Entry) (*journal.Entry, error) {
	if seq == 0 {
		return nil, nil
	}
	for _, k := range known {
		if k != nil && k.Seq == seq {
			return k, nil
		}
	}
	en, err := e.j.Get(ctx, seq)
	if en != nil || err != nil {
		return en, err
	}
	// Retention may have dropped it from the journal; the keep stream
	// holds every guest's newest desired events and results
	// (docs/retention.md).
	if k, ok := e.j.(journal.Kept); ok {
		kept, err := k.Kept(ctx, seq-1, seq+1)
		if err != nil {
			return nil, err
		}
		for i := range kept {
			if kept[i].Seq == seq {
				return &kept[i], nil
			}
		}
	}
	return nil, nil
}

// isGuestEntry says why en is not an entry of one of kinds for this
// cluster's guest vmid ("" when it is).
func (e *Executor) isGuestEntry(en *journal.Entry, vmid int, kinds ...events.Kind) string {
	if en == nil {
		return "is not in the journal"
	}
	info, err := events.ParseSubject(en.Subject)
	switch {
	case err != nil:
		return "has a malformed subject"
	case !slices.Contains(kinds, info.Kind) || info.Cluster != e.cfg.Cluster || info.VMID != vmid:
		names := make([]string, len(kinds))
		for i, k := range kinds {
			names[i] = map[events.Kind]string{events.KindDesired: "desired event", events.KindObserved: "observation",
				events.KindResult: "result"}[k]
		}
		return fmt.Sprintf("is %s, not guest %d's %s", en.Subject, vmid, strings.Join(names, " or "))
	}
	return ""
}

// stepDiff says how the action differs from the planned step ("" when it
// does not).
func stepDiff(s planner.Step, a events.Action, o *events.Observed) string {
	var d []string
	if s.Op != a.Op {
		d = append(d, fmt.Sprintf("is %s", a.Op))
	}
	if !maps.Equal(s.Set, a.Set) {
		d = append(d, fmt.Sprintf("sets %s", formatSet(a.Set)))
	}
	if !slices.Equal(s.Delete, a.Delete) {
		d = append(d, fmt.Sprintf("deletes %v", a.Delete))
	}
	if !slices.Equal(s.Revert, a.Revert) {
		d = append(d, fmt.Sprintf("reverts %v", a.Revert))
	}
	if s.Timeout != a.Timeout {
		d = append(d, fmt.Sprintf("has timeout %s", a.Timeout))
	}
	if a.Node != o.Node || a.Kind != o.Kind {
		d = append(d, fmt.Sprintf("targets %s %s, the guest is a %s on %s", a.Kind, a.Node, o.Kind, o.Node))
	}
	if a.Digest != o.Digest {
		d = append(d, "carries another config digest")
	}
	if !eqPtr(s.Resize, a.Resize) || !eqPtr(s.Migrate, a.Migrate) || !eqPtr(s.Pool, a.Pool) || s.HAState != a.HAState ||
		!sameHARule(s.HARule, a.HARule) {
		d = append(d, "has other parameters")
	}
	if s.Snapshot != nil && a.Snapshot != nil && (s.Snapshot.Before != a.Snapshot.Before || s.Snapshot.Keep != a.Snapshot.Keep) {
		d = append(d, fmt.Sprintf("snapshots before %s keeping %d", a.Snapshot.Before, a.Snapshot.Keep))
	}
	return strings.Join(d, ", ")
}

func describeStep(s planner.Step) string {
	out := string(s.Op)
	if len(s.Set) > 0 {
		out += " setting " + formatSet(s.Set)
	}
	if len(s.Delete) > 0 {
		out += fmt.Sprintf(" deleting %v", s.Delete)
	}
	if len(s.Revert) > 0 {
		out += fmt.Sprintf(" reverting %v", s.Revert)
	}
	if s.Timeout > 0 {
		out += " within " + s.Timeout.String()
	}
	return out
}

func formatSet(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + events.TruncateReason(fmt.Sprintf("%q", m[k]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// verifyTask says why a journalled task is not the action's to wait on
// ("" when it is): a started result read back names a task of this
// guest's operation on the action's node, or it is not resumed.
func verifyTask(a events.Action, r *events.Result) string {
	if r.ActionID != a.ID || r.VMID != a.VMID || r.Op != a.Op {
		return notFromJournal + fmt.Sprintf("the started result is for action %s (%s of %d)", r.ActionID, r.Op, r.VMID)
	}
	u, err := pve.ParseUPID(r.UPID)
	if err != nil {
		return notFromJournal + "the started result's task id: " + err.Error()
	}
	kind := pve.Kind(a.Kind)
	id, node := a.VMID, a.Node
	if a.Op == events.OpClone && a.Clone != nil {
		id, node = a.Clone.From, a.Clone.FromNode // a clone's task is its template's
	}
	if u.ID != fmt.Sprint(id) || (node != "" && u.Node != node) || (r.Node != "" && u.Node != r.Node) ||
		!slices.Contains(pve.TaskTypes(kind, pveOp(a.Op)), u.Type) {
		return notFromJournal + fmt.Sprintf("task %s is not a %s of guest %d on %s", r.UPID, a.Op, a.VMID, a.Node)
	}
	return ""
}

// eqPtr reports whether two optional parameters are both absent or equal.
func eqPtr[T comparable](a, b *T) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// sameHARule compares two HA rule parameters.
func sameHARule(a, b *events.HARuleOp) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Rule == b.Rule && a.Create == b.Create && slices.Equal(a.Nodes, b.Nodes)
}
