package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/clock"
	"github.com/converge-pve/converge/internal/pve"
)

// The whole guest: resize, migration, HA state, pools, protective
// snapshots, and the cloud-init drive after a cloud-init write.

// managedKey reports whether a config write of key is one converge plans
// for a guest of kind: the basic keys, interfaces, a new disk, and (VMs)
// the cloud-init keys.
func managedKey(kind events.GuestKind, key string) bool {
	switch {
	case managedKeys[key], events.IsIndexed(key, "net", 31):
		return true
	case events.IsDiskKey(key, kind):
		return true
	}
	return kind == events.QEMU && events.IsCloudInitKey(key)
}

// paramsMatch says why the action's parameters do not fit its operation
// ("" when they do): each operation carries its own and no other's.
func paramsMatch(a events.Action) string {
	type p struct {
		op  events.Op
		has bool
	}
	for _, c := range []p{{events.OpClone, a.Clone != nil}, {events.OpResize, a.Resize != nil}, {events.OpMigrate, a.Migrate != nil},
		{events.OpSetPool, a.Pool != nil}, {events.OpSnapshot, a.Snapshot != nil}, {events.OpSetHAState, a.HAState != ""},
		{events.OpSetHARule, a.HARule != nil}} {
		if (a.Op == c.op) != c.has {
			return fmt.Sprintf("a %s with %s parameters %v", a.Op, c.op, c.has)
		}
	}
	if r := a.HARule; r != nil && r.Rule != events.HARuleName(a.VMID) {
		return fmt.Sprintf("HA rule %q is not the one converge owns for the guest", r.Rule)
	}
	if s := a.Snapshot; s != nil && s.Name != events.SnapshotName(a.ID) {
		return fmt.Sprintf("snapshot %q is not named after its action", s.Name)
	}
	return ""
}

// migrateHATimeout bounds the wait for the HA manager to move a guest it
// was asked to move.
const migrateHATimeout = 15 * time.Minute

// mutateWhole issues the whole-guest operations.
func (j *job) mutateWhole(ctx context.Context) (pve.TaskRef, error, bool) {
	px, a := j.e.px, j.a
	switch a.Op {
	case events.OpResize:
		t, err := px.Resize(ctx, j.ref, a.Resize.Disk, fmt.Sprintf("%dG", a.Resize.SizeGiB))
		return t, err, true
	case events.OpMigrate:
		m := a.Migrate
		if m.HA {
			return pve.TaskRef{}, px.HAMigrate(ctx, j.ref, m.Target), true
		}
		// with-local-disks lets local disks move along a live migration
		// and changes nothing for shared ones, as Proxmox's own dialog
		// sets it.
		t, err := px.Migrate(ctx, j.ref, pve.MigrateSpec{Target: m.Target, Online: m.Online, WithLocalDisks: m.Online,
			Restart: m.Restart, Timeout: j.e.cfg.Policy.ShutdownTimeout})
		return t, err, true
	case events.OpSetHAState:
		return pve.TaskRef{}, px.HASetState(ctx, j.ref, a.HAState), true
	case events.OpSetHARule:
		r := a.HARule
		return pve.TaskRef{}, px.SetHARule(ctx, j.ref, r.Rule, r.Nodes, r.Create), true
	case events.OpSetPool:
		return pve.TaskRef{}, j.setPool(ctx), true
	case events.OpSnapshot:
		t, err := px.Snapshot(ctx, j.ref, a.Snapshot.Name,
			fmt.Sprintf("converge: before %s (action %s, desired revision %d)", a.Snapshot.Before, a.ID, a.DesiredSeq))
		return t, err, true
	}
	return pve.TaskRef{}, nil, false
}

// setPool moves the guest into its desired pool (out of its old one:
// Proxmox's allow-move), or out of its pool. Each call is idempotent: a
// guest already where it should be is already done.
func (j *job) setPool(ctx context.Context) error {
	p := j.a.Pool
	if p.To == "" {
		return j.e.px.SetPool(ctx, p.From, j.a.VMID, true)
	}
	err := j.e.px.SetPool(ctx, p.To, j.a.VMID, false)
	missing := err != nil && pve.Classify(err) == pve.ClassTerminal && strings.Contains(err.Error(), "does not exist")
	switch {
	case missing && p.Create:
		// Created only when missing: one call for every other move.
		if err := j.e.px.CreatePool(ctx, p.To, "created by converge"); err != nil && pve.Classify(err) != pve.ClassAlreadyDone {
			return err
		}
		return j.e.px.SetPool(ctx, p.To, j.a.VMID, false)
	case missing:
		// Say how to get on.
		return fmt.Errorf("%w (create pool %q in Proxmox, or run planners and executors with --create-pools)", err, p.To)
	}
	return err
}

// pruneSnapshots keeps the guest's newest keep converge snapshots
// (SnapshotPrefix), deleting older ones one task at a time; it says what
// it deleted. Snapshots converge did not take are never touched.
func (j *job) pruneSnapshots(ctx context.Context, keep int) (string, error) {
	all, err := j.e.px.Snapshots(ctx, j.ref)
	if err != nil {
		return "", err
	}
	var ours []string
	for _, s := range all {
		if strings.HasPrefix(s.Name, events.SnapshotPrefix) {
			ours = append(ours, s.Name) // oldest first
		}
	}
	var gone []string
	for len(ours) > keep {
		name := ours[0]
		ours = ours[1:]
		t, err := j.e.px.DeleteSnapshot(ctx, j.ref, name)
		if err == nil && !t.IsZero() {
			_, err = j.e.px.WaitTask(ctx, t, pve.WaitOptions{OnPoll: j.hb.touch})
		}
		if err != nil && pve.Classify(err) != pve.ClassAlreadyDone {
			return strings.Join(gone, ", "), fmt.Errorf("pruning snapshot %s: %w", name, err)
		}
		gone = append(gone, name)
	}
	return strings.Join(gone, ", "), nil
}

// migrateCheck runs before a migration: a guest already on the target
// (moved by a predecessor of this action, or by HA) is done.
func (j *job) migrateCheck(ctx context.Context) (outcome, bool) {
	target := j.ref
	target.Node = j.a.Migrate.Target
	if _, err := j.e.px.GuestStatus(ctx, target); err == nil {
		j.ref = target
		r := j.result(events.ResultSucceeded)
		r.Reason, r.ErrorClass, r.Node = "already on "+target.Node, events.ClassAlreadyDone, target.Node
		return j.finish(ctx, r), true
	}
	if ctx.Err() != nil {
		return abandon, true
	}
	return abandon, false
}

// afterSuccess completes a succeeded action before it is read back: the
// guest is read where the action left it (a migration's target, once the
// HA manager moved it); a cloud-init write regenerates the drive. A
// failure here is the action's.
func (j *job) afterSuccess(ctx context.Context, r *events.Result) error {
	a := j.a
	switch {
	case a.Op == events.OpMigrate && r.ErrorClass != events.ClassAlreadyDone:
		target := j.ref
		target.Node = a.Migrate.Target
		// The HA manager's task ends before the guest moves: wait on the
		// guest, not the task. So does a plain migration of a guest HA
		// took over since it was observed (Proxmox turns it into an HA
		// request); after a real migration the guest is there at once.
		if err := j.awaitOn(ctx, target); err != nil {
			return err
		}
		j.ref = target
		r.Node = target.Node
	case a.Op == events.OpSetConfig && a.Kind == events.QEMU && events.HasCloudInitKey(a.Set):
		if err := j.e.px.RegenerateCloudInit(ctx, j.ref); err != nil {
			return fmt.Errorf("config written, cloud-init drive not regenerated: %w", err)
		}
		r.Reason = "cloud-init drive regenerated; it reaches the guest at its next boot"
	case a.Op == events.OpSnapshot:
		r.Reason = fmt.Sprintf("snapshot %s taken before %s; roll back with: qm rollback %d %s", a.Snapshot.Name, a.Snapshot.Before, a.VMID, a.Snapshot.Name)
		if a.Kind == events.LXC {
			r.Reason = fmt.Sprintf("snapshot %s taken before %s; roll back with: pct rollback %d %s", a.Snapshot.Name, a.Snapshot.Before, a.VMID, a.Snapshot.Name)
		}
		if a.Snapshot.Keep > 0 {
			gone, err := j.pruneSnapshots(ctx, a.Snapshot.Keep)
			if gone != "" {
				r.Reason += "; pruned " + gone
			}
			if err != nil {
				// The snapshot is taken: the action succeeded; pruning is
				// retried with the next one.
				j.log.Warn().Err(err).Msg("snapshot pruning failed")
				r.Reason += "; pruning failed: " + err.Error()
			}
		}
	}
	return nil
}

// awaitOn waits until the guest is found on ref.Node and not locked by
// the migration.
func (j *job) awaitOn(ctx context.Context, ref pve.GuestRef) error {
	deadline := j.e.clk.Now().Add(migrateHATimeout)
	wait := 250 * time.Millisecond
	for {
		st, err := j.e.px.GuestStatus(ctx, ref)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil && st.Lock != "migrate":
			return nil
		case err != nil && pve.Classify(err) != pve.ClassGone && pve.Classify(err) != pve.ClassTransient:
			return err
		case !j.e.clk.Now().Before(deadline):
			return &pve.Error{Class: pve.ClassTransient, Message: fmt.Sprintf("the HA manager did not move the guest to %s within %s", ref.Node, migrateHATimeout),
				Err: errors.New("HA migration not done")}
		}
		j.hb.touch()
		if clock.Sleep(ctx, j.e.clk, wait) != nil {
			return ctx.Err()
		}
		wait = min(wait*2, 5*time.Second)
	}
}

// carryInventory fills what a read-back does not read (the HA state and
// pool, which the inventory shows) from the reading the action was
// planned from, changed by what the action did when it succeeded. An HA
// guest's placement under HA rules is read (readPlacement).
func (j *job) carryInventory(ctx context.Context, o *events.Observed, r *events.Result) {
	defer j.readPlacement(ctx, o)
	if o == nil || !o.Exists {
		return
	}
	if b := j.basis; b != nil {
		o.HA, o.HAPlacement, o.Pool = b.HA, b.HAPlacement, b.Pool
	}
	if r.Status != events.ResultSucceeded {
		return
	}
	switch j.a.Op {
	case events.OpSetHAState:
		o.HA = j.a.HAState
	case events.OpRemoveHA:
		o.HA, o.HAPlacement = "", nil
	case events.OpSetHARule:
		// The rule as written (HA moves the guest after, which the
		// observer sees); the resource's failback as the basis read it.
		p := &events.HAPlacement{}
		if r := j.a.HARule; len(r.Nodes) > 0 {
			p = &events.HAPlacement{Rule: r.Rule, Nodes: slices.Clone(r.Nodes)}
		}
		if b := j.basis; b != nil && b.HAPlacement != nil {
			p.NoFailback = b.HAPlacement.NoFailback
		}
		o.HAPlacement = p
	case events.OpSetPool:
		o.Pool = j.a.Pool.To
	}
}

// snapshotCheck runs before a protective snapshot: one of this action's
// name already taken (by a predecessor killed before it journalled the
// task) is done, never taken twice.
func (j *job) snapshotCheck(ctx context.Context) (outcome, bool) {
	snaps, err := j.e.px.Snapshots(ctx, j.ref)
	switch {
	case ctx.Err() != nil:
		return abandon, true
	case err != nil:
		return outcome{result: j.failed(err, pve.Classify(err))}, true
	}
	for _, s := range snaps {
		if s.Name == j.a.Snapshot.Name {
			r := j.result(events.ResultSucceeded)
			r.ErrorClass = events.ClassAlreadyDone
			return j.finish(ctx, r), true
		}
	}
	return abandon, false
}

// snapshotBefore says why the step after a protective snapshot does not
// follow from the journal ("" when it does): the guest's newest result
// must be that snapshot's success, for the same desired revision (the
// planner's action ids are CLUSTER-VMID-REVISION-N).
func (e *Executor) snapshotBefore(ctx context.Context, a events.Action, lasts guestLasts) (string, error) {
	if lasts.result == nil {
		return "no protective snapshot was taken before it", nil
	}
	r, err := events.Decode[events.Result](lasts.result.Data)
	if err != nil {
		return "", err
	}
	prefix := fmt.Sprintf("%s-%d-%d-", e.cfg.Cluster, a.VMID, a.DesiredSeq)
	if r.Op != events.OpSnapshot || r.Status != events.ResultSucceeded || !strings.HasPrefix(r.ActionID, prefix) {
		return fmt.Sprintf("the guest's last result (%s %s of action %s) is not the protective snapshot before it", r.Op, r.Status, r.ActionID), nil
	}
	return "", nil
}

// readPlacement replaces the HA placement carried from the basis by the
// one Proxmox has now: the rules may have changed since the basis was
// read (an operator, converge's own rule), or the cluster finished its
// move from groups to rules, or the basis knew neither; a read-back
// journalled after the observer's newer snapshot would otherwise roll
// the fold back. Under rules (as the basis saw it) the rules and
// resources are read; otherwise the groups endpoint first says which. A
// failed read keeps the carried one. The Proxmox port reads placements
// optionally (pve.PlacementReader): without, the basis's is carried.
func (j *job) readPlacement(ctx context.Context, o *events.Observed) {
	hr, ok := j.e.px.(pve.PlacementReader)
	if !ok || o == nil || !o.Exists || o.HA == "" {
		return
	}
	mode := ""
	if p := o.HAPlacement; p != nil && !p.Groups {
		mode = events.HARules
	}
	mode, placements, err := pve.ReadPlacements(ctx, hr, mode)
	switch {
	case err != nil:
		j.log.Debug().Err(err).Msg("HA placement not read back; carried from the basis")
	case mode == events.HAGroups:
		o.HAPlacement = &events.HAPlacement{Groups: true}
	case placements[o.VMID] != nil:
		o.HAPlacement = placements[o.VMID]
	}
}
