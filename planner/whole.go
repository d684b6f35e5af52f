package planner

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// The whole guest: interfaces, cloud-init and new disks are config keys
// (fields of the config write); growing a disk, moving the guest, its
// pool, its HA state and protective snapshots are steps of their own.

// wholeFields adds the whole-guest config keys the desired state manages.
func wholeFields(d *events.Desired, o *events.Observed, add func(key, label, want, have string)) {
	for _, k := range sortedKeys(d.Net) {
		have := o.Config.Net[k]
		// A pending value (a new interface a running VM without network
		// hotplug keeps for its restart) holds the MAC Proxmox generated:
		// the desired value is built on it, or each write would read as
		// drift and make a new MAC.
		base := have
		if q := o.Pending[k]; q != "" {
			base = q
		}
		add(k, "net."+k, events.EditNIC(o.Kind, k, base, d.Net[k]), have)
	}
	ci := d.CloudInit
	if ci == nil || o.Kind != events.QEMU {
		return
	}
	str := func(key, label string, want *string, norm func(string) (string, error)) {
		if want == nil {
			return
		}
		w := strings.TrimSpace(*want)
		if norm != nil {
			if n, err := norm(w); err == nil {
				w = n
			}
		}
		add(key, "cloudinit."+label, w, o.Config.CloudInit[key])
	}
	str("ciuser", "user", ci.User, nil)
	if ci.SSHKeys != nil {
		add("sshkeys", "cloudinit.ssh_keys", events.EncodeSSHKeys(*ci.SSHKeys), o.Config.CloudInit["sshkeys"])
	}
	for _, k := range sortedKeys(ci.IPConfig) {
		v := ci.IPConfig[k]
		str(k, "ipconfig."+k, &v, events.NormaliseIPConfig)
	}
	str("nameserver", "nameserver", ci.Nameserver, events.NormaliseNameserver)
	str("searchdomain", "searchdomain", ci.SearchDomain, nil)
	str("cicustom", "custom", ci.Custom, nil)
}

// diskPlan is what the desired disks call for: disks to grow, new disks to
// allocate (config keys), additions Proxmox keeps pending, and a reason
// the plan cannot go on (a shrink).
type diskPlan struct {
	resize         []Step
	revert         []string
	add            map[string]string
	pending, drift []string
	refuse         string
}

func planDisks(d *events.Desired, o *events.Observed) diskPlan {
	var p diskPlan
	for _, k := range sortedKeys(d.Disks) {
		w := d.Disks[k]
		want := int64(w.SizeGiB) * events.GiB
		have, ok := o.Config.Disks[k]
		switch {
		case ok && have.SizeBytes < 0:
			p.refuse = fmt.Sprintf("disks.%s: Proxmox's value %q does not read as a disk; converge leaves it alone", k, have.Volume)
			return p
		case ok && have.Media == "cdrom":
			p.refuse = fmt.Sprintf("disks.%s is a CD-ROM drive; converge sizes disks only", k)
			return p
		case ok && have.SizeBytes > want:
			p.refuse = fmt.Sprintf("disks.%s: desired %d GiB is smaller than the disk's %s; Proxmox cannot shrink a disk and converge never tries (raise size_gib to at least %d or leave the disk out)",
				k, w.SizeGiB, formatGiB(have.SizeBytes), events.SizeGiB(have.SizeBytes))
			return p
		case ok && have.SizeBytes < want:
			p.drift = append(p.drift, fmt.Sprintf("disks.%s: want %d GiB, have %s", k, w.SizeGiB, formatGiB(have.SizeBytes)))
			p.resize = append(p.resize, Step{Op: events.OpResize, Resize: &events.ResizeOp{Disk: k, SizeGiB: int64(w.SizeGiB)},
				Reason: fmt.Sprintf("grow %s from %s to %d GiB", k, formatGiB(have.SizeBytes), w.SizeGiB)})
		case ok && hasKey(o.Pending, k) && o.Pending[k] == "":
			// Detached at the next restart: the pending deletion goes.
			p.drift = append(p.drift, fmt.Sprintf("disks.%s: want %d GiB, pending removal at next restart", k, w.SizeGiB))
			p.revert = append(p.revert, k)
		case ok:
		case o.Pending[k] != "":
			p.drift = append(p.drift, fmt.Sprintf("disks.%s: added, applies at next restart", k))
			p.pending = append(p.pending, "disks."+k)
		case w.Storage == "":
			p.refuse = fmt.Sprintf("disks.%s does not exist; give its storage to add it", k)
			return p
		case o.Kind == events.LXC:
			p.refuse = fmt.Sprintf("disks.%s does not exist; converge does not add container mount points (they need a path): add it in Proxmox and converge sizes it", k)
			return p
		default:
			if p.add == nil {
				p.add = map[string]string{}
			}
			// Proxmox allocates "STORAGE:SIZE_GIB" as a new volume.
			p.add[k] = fmt.Sprintf("%s:%d", w.Storage, w.SizeGiB)
			p.drift = append(p.drift, fmt.Sprintf("disks.%s: missing, add %d GiB on %s", k, w.SizeGiB, w.Storage))
		}
	}
	return p
}

func formatGiB(b int64) string {
	if b%events.GiB == 0 {
		return fmt.Sprintf("%d GiB", b/events.GiB)
	}
	return fmt.Sprintf("%.2f GiB", float64(b)/float64(events.GiB))
}

// hotKey reports whether a running guest takes a new value of key at once,
// as Proxmox decides (qemu-server vmconfig_hotplug_pending and the
// guest's hotplug setting; containers take every key converge writes).
func hotKey(o *events.Observed, key string) bool {
	if o.Kind != events.QEMU {
		return true
	}
	feats := map[string]bool{"disk": true, "network": true, "usb": true}
	switch o.Config.Hotplug {
	case "":
	case "none":
		feats = map[string]bool{}
	default:
		feats = map[string]bool{}
		for _, f := range strings.Split(o.Config.Hotplug, ",") {
			feats[f] = true
		}
	}
	switch {
	case key == "cores" || key == "sockets":
		return false // never hot: vcpus is
	case key == "vcpus":
		return feats["cpu"]
	case key == "memory":
		return feats["memory"] && o.Config.NUMA
	case strings.HasPrefix(key, "net"):
		return feats["network"]
	case events.IsDiskKey(key, events.QEMU):
		return feats["disk"] && !strings.HasPrefix(key, "ide") && !strings.HasPrefix(key, "sata") &&
			key != "efidisk0" && key != "tpmstate0"
	}
	return true
}

// restartKeys are the keys of a config write that a running guest will
// keep pending until a restart, by their labels (the desired fields that
// reasons name).
func restartKeys(o *events.Observed, set map[string]string, fields []field) []string {
	if len(set) == 0 {
		return nil
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if !hotKey(o, k) {
			out = append(out, labelOf(k, fields))
		}
	}
	slices.Sort(out)
	return out
}

// labelOf is the label of a key a plan writes: its managed field's, or a
// new disk's.
func labelOf(key string, fields []field) string {
	for _, f := range fields {
		if f.key == key {
			return f.label
		}
	}
	return "disks." + key
}

// placement is the migration step the desired node calls for, if any;
// waiting says why one is not planned now. A migration that restarts the
// guest (a running container's: restart migration, also through HA)
// needs the owner's consent to a restart, as a reboot does.
func placement(d *events.Desired, o *events.Observed, restart restartConsent) (step Step, waiting string, ok bool) {
	if o.HA != "" {
		switch p := o.HAPlacement; {
		case p == nil:
			if d.Node != nil && *d.Node != o.Node {
				return Step{}, fmt.Sprintf("node %s waits: whether HA rules or groups place HA guests is not known (not read yet, or the read failed: reading them needs Sys.Audit on /): converge moves no HA guest until it knows", *d.Node), false
			}
			return Step{}, "", false
		case !p.Groups:
			return haPlacement(d, o, restart)
		}
	}
	if d.Node == nil || *d.Node == o.Node {
		return Step{}, "", false
	}
	if o.HA == "ignored" {
		// The HA manager drops every request for an ignored resource, and
		// a plain migration would hand it back to HA.
		return Step{}, fmt.Sprintf("node %s waits: HA state ignored (an operator took the guest out of HA's hands)", *d.Node), false
	}
	m := &events.MigrateOp{Target: *d.Node, HA: o.HA != ""}
	how := "offline"
	switch {
	case m.HA && o.Kind == events.LXC && o.Status == "running":
		how = "through the HA manager (the container restarts on " + *d.Node + ")"
	case m.HA:
		how = "through the HA manager"
	case o.Status == "running" && o.Kind == events.QEMU:
		m.Online, how = true, "online (live)"
	case o.Status == "running":
		m.Restart, how = true, "by restart migration (the container restarts on "+*d.Node+")"
	}
	if o.Kind == events.LXC && o.Status == "running" {
		if why := restart.refused("node " + *d.Node + " (a running container's migration restarts it)"); why != "" {
			return Step{}, why, false
		}
	}
	return Step{Op: events.OpMigrate, Migrate: m,
		Reason: fmt.Sprintf("desired node %s, guest runs on %s: migrate %s", *d.Node, o.Node, how)}, "", true
}

// restartConsent is whether the guest may be restarted now: its desired
// restart (or the deployment's), and the restart window.
type restartConsent struct {
	allowed bool
	window  Window
	now     time.Time
}

func consent(d *events.Desired, p Policy, now time.Time) restartConsent {
	r := p.Restart
	if d.Restart != nil {
		r = *d.Restart
	}
	w, _ := ParseWindow(p.RestartWindow) // checked by Validate
	loc := p.Location
	if loc == nil {
		loc = time.Local
	}
	return restartConsent{allowed: r == events.RestartAllowed, window: w, now: now.In(loc)}
}

// refused says why what (a change that restarts the guest) waits, "" when
// it may go now.
func (c restartConsent) refused(what string) string {
	switch {
	case !c.allowed:
		return what + " waits for a restart (restart: never; desired restart \"allowed\" or --restart allowed lets converge restart the guest)"
	case !c.window.Open(c.now):
		return fmt.Sprintf("%s waits for a restart: allowed only in the restart window %s (next opens %s)",
			what, c.window, c.window.Next(c.now).Format(time.RFC3339))
	}
	return ""
}

// poolStep is the pool change the desired pool calls for, if any.
func poolStep(d *events.Desired, o *events.Observed, p Policy) (Step, bool) {
	if d.Pool == nil || *d.Pool == o.Pool {
		return Step{}, false
	}
	op := &events.PoolOp{From: o.Pool, To: *d.Pool, Create: p.CreatePools && *d.Pool != ""}
	why := fmt.Sprintf("desired pool %q, guest is in %q", *d.Pool, o.Pool)
	if o.Pool == "" {
		why = fmt.Sprintf("desired pool %q, guest is in none", *d.Pool)
	}
	return Step{Op: events.OpSetPool, Pool: op, Reason: why}, true
}

// haState is the HA state that keeps a guest in power state want.
func haState(want string) string {
	if want == "running" {
		return "started"
	}
	return "stopped"
}

// haPower plans the power of an HA-managed guest: its HA state is set,
// and HA starts or stops it; converge never starts or stops it itself,
// so it never fights the HA manager.
func haPower(o *events.Observed, want string) (step *Step, waiting string) {
	target := haState(want)
	if o.HA == "ignored" {
		// An operator took the guest out of HA's hands (maintenance):
		// a start or stop through Proxmox would hand it back to HA, so
		// converge waits for the operator.
		if o.Status == want {
			return nil, ""
		}
		return nil, fmt.Sprintf("HA state ignored: an operator took the guest out of HA's hands; converge leaves its power (%s, desired %s) until HA manages it again", o.Status, want)
	}
	// disabled keeps the guest stopped too (and, unlike stopped, where it
	// is): an operator's choice that desired power stopped does not undo.
	if o.HA != target && !(target == "stopped" && o.HA == "disabled") {
		return &Step{Op: events.OpSetHAState, HAState: target,
			Reason: fmt.Sprintf("desired power %s: HA-managed guest (ha: %s), ask the HA manager for state %s", want, o.HA, target)}, ""
	}
	if o.Status != want {
		return nil, fmt.Sprintf("waiting for the HA manager to make the guest %s (ha: %s)", want, o.HA)
	}
	return nil, ""
}

// withSnapshots puts a protective snapshot before the first step the
// desired snapshot_before names, unless the guest's last action, for this
// desired revision, was that snapshot (taken: the step goes now).
func withSnapshots(v *projector.View, steps []Step, keep int) []Step {
	if len(steps) == 0 || len(v.Desired.SnapshotBefore) == 0 {
		return steps
	}
	s := steps[0]
	var what string
	switch s.Op {
	case events.OpReboot:
		what = events.SnapshotRestart
	case events.OpMigrate:
		what = events.SnapshotMigrate
	case events.OpResize:
		what = events.SnapshotResize
	}
	if what == "" || !v.Desired.Snapshots(what) || snapshotTaken(v, s.Op) {
		return steps
	}
	snap := Step{Op: events.OpSnapshot, Snapshot: &events.SnapshotOp{Before: s.Op, Keep: keep},
		Reason: fmt.Sprintf("protective snapshot before %s (snapshot_before: %s)", s.Op, what)}
	return append([]Step{snap}, steps...)
}

// unprotected is steps without a leading protective snapshot: the step it
// protects is what the mass-change guard judges and holds (a snapshot
// taken for a step the guard holds would be stale, or repeated, by the
// time it is approved).
func unprotected(steps []Step) []Step {
	if len(steps) > 1 && steps[0].Op == events.OpSnapshot && steps[0].Snapshot != nil && steps[0].Snapshot.Before == steps[1].Op {
		return steps[1:]
	}
	return steps
}

// snapshotTaken reports whether the guest's last action for the current
// desired revision was a protective snapshot before op that succeeded, or
// op itself that failed: its retry is protected by the snapshot its first
// attempt had (a new one each time would also, succeeding, reset the
// failure count the retries back off by).
func snapshotTaken(v *projector.View, op events.Op) bool {
	a, r := v.LastAction, v.LastResult
	if a == nil || a.DesiredSeq != v.DesiredSeq || r == nil || r.ActionID != a.ID {
		return false
	}
	if a.Op == op {
		return r.Status == events.ResultFailed
	}
	return a.Op == events.OpSnapshot && a.Snapshot != nil && a.Snapshot.Before == op && r.Status == events.ResultSucceeded
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}
