package planner

import (
	"fmt"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// The creation limits (Limits.CloneConcurrency, CreateRate, MaxGuests), as
// the engine applies them to a clone it would publish. Like the node
// slots they are decided from the fold and settled across planners by the
// limits ledger (CreateKey, StorageKey).

// createWindow is CreateRate's window.
const createWindow = time.Minute

// maxGuestsRetry is when a clone that waits for --max-guests is planned
// again (a guest released or destroyed meanwhile makes room).
const maxGuestsRetry = 30 * time.Second

// CreateKey is a cluster's creation-rate ledger key.
func CreateKey(cluster string) string { return cluster + ".create" }

// StorageKey is a storage's clone ledger key.
func StorageKey(cluster, storage string) string { return cluster + ".storage." + storage }

// storageSlot is the storage slot a QEMU clone takes: the storage whose
// lock it needs (Limits.CloneConcurrency clones at once per storage). A
// container's clone takes none: its template clones one at a time
// (templateSlot), so each container template adds at most one
// allocation to its storage's lock queue, and a template's clones, the
// longest chain of a batch, never wait behind VM clones for a storage
// slot (converge bench --profile clones: the chain's gaps reached 109 s
// that way, 2.6 × the ideal). Proxmox
// takes a storage's lock (PVE::Storage::Plugin::cluster_lock_storage: a
// flock on a local storage, a cluster-wide pmxcfs lock on a shared one,
// 10 s to acquire, then the task fails "got timeout") for every volume a
// clone makes: a full clone's allocation on its target storage
// (vdisk_alloc, from qemu-server's clone_disk and pve-container's
// copy_volume; the copy itself runs outside the lock), a linked clone's
// whole vdisk_clone on its template's storage. So every clone, QEMU or
// LXC, full or linked, is counted where its lock is taken: a full clone's
// clone.storage, else its template's storage as observed; a linked
// clone's template storage; else a slot named after the template. The key
// is the storage's name across the cluster, which a shared storage's lock
// is; a local storage's lock is per node, so keying it cluster-wide
// errs on the safe side (converge does not observe storage.cfg's
// "shared"). "" for anything but a clone.
func storageSlot(a *events.Action) string {
	c := a.Clone
	switch {
	case a.Op != events.OpClone || c == nil || a.Kind == events.LXC:
		return ""
	case c.Full && c.Storage != "":
		return c.Storage
	case c.SourceStorage != "":
		return c.SourceStorage
	}
	return fmt.Sprintf("template-%d", c.From)
}

// templateSlot is the slot a container's clone takes, linked or full: its
// template's (Proxmox locks a container template, "disk", while it clones
// it, and refuses a second clone meanwhile). "" for anything else.
func templateSlot(a *events.Action) string {
	if a.Op != events.OpClone || a.Clone == nil || a.Kind != events.LXC {
		return ""
	}
	return fmt.Sprintf("ct-template-%d", a.Clone.From)
}

// admitCreate applies the creation limits to a clone step: waiting (with
// the reason, the limit and when to look again) or the claims the ledger
// must grant.
func (e *Engine) admitCreate(v *projector.View, d Decision, step Step, now time.Time) (_ Decision, claims []Claim, waiting bool) {
	lim := e.cfg.Limits
	wait := func(limit, why string, retry time.Time) (Decision, []Claim, bool) {
		d.Status.Reason = why + "; " + d.Status.Reason
		d.Status.Limit, d.Status.RetryAt = limit, retry
		d.Steps = nil
		return d, nil, true
	}
	if lim.MaxGuests > 0 {
		n := e.lim.existing.len()
		if e.lim.existing.has(v.VMID) {
			n--
		}
		if n >= lim.MaxGuests {
			return wait("max_guests", fmt.Sprintf("waiting: %d managed guests exist or are being created (--max-guests %d)", n, lim.MaxGuests), now.Add(maxGuestsRetry))
		}
	}
	if rate := lim.create(); rate > 0 {
		if n, oldest := e.createdRecently(now); n >= rate {
			return wait("create_rate", fmt.Sprintf("waiting: %d clones started within the last minute (--create-rate %d a minute)", n, rate), oldest.Add(createWindow))
		}
		claims = append(claims, Claim{Key: CreateKey(e.cfg.Cluster), Limit: rate, Window: createWindow})
	}
	a := events.Action{Op: step.Op, Clone: step.Clone, Kind: step.Kind}
	if key := templateSlot(&a); key != "" {
		if ok, _, ahead := e.tlim.admitNode(key, v.VMID, 1, false); !ok {
			return wait("storage", fmt.Sprintf("waiting for template %d: a container template is cloned once at a time (Proxmox locks it), %d guests ahead", step.Clone.From, ahead), time.Time{})
		}
		claims = append(claims, Claim{Key: StorageKey(e.cfg.Cluster, key), Limit: 1})
	}
	if key, slots := storageSlot(&a), lim.clone(); key != "" && slots > 0 {
		ok, inUse, ahead := e.slim.admitNode(key, v.VMID, slots, false)
		if !ok {
			return wait("storage", fmt.Sprintf("waiting for storage %s: %d of %d clones running on it (--clone-concurrency), %d guests ahead", key, inUse, slots, ahead), time.Time{})
		}
		claims = append(claims, Claim{Key: StorageKey(e.cfg.Cluster, key), Limit: slots})
	}
	return d, claims, false
}

// createdRecently is how many clones were folded within createWindow
// before now, or handed out and not yet folded, and the oldest's time.
func (e *Engine) createdRecently(now time.Time) (n int, oldest time.Time) {
	i := 0
	for i < len(e.lim.created) && now.Sub(e.lim.created[i].at) >= createWindow {
		i++
	}
	e.lim.created = e.lim.created[i:]
	for _, c := range e.lim.created {
		if oldest.IsZero() {
			oldest = c.at
		}
		n++
	}
	for id := range e.awaiting {
		if e.awaitingOp[id] == events.OpClone {
			n++
			if oldest.IsZero() {
				oldest = now
			}
		}
	}
	return n, oldest
}

// noteExisting keeps the count of managed guests that exist or are being
// created (MaxGuests): desired present (not absent), and observed to
// exist or with a clone in flight or handed out.
func (e *Engine) noteExisting(v *projector.View) {
	d, o := v.Desired, v.Observed
	exists := d != nil && !d.Absent && (o != nil && o.Exists ||
		v.InFlight != nil && v.InFlight.Op == events.OpClone || e.awaitingOp[v.VMID] == events.OpClone)
	if exists {
		e.lim.existing.add(v.VMID)
	} else {
		e.lim.existing.remove(v.VMID)
	}
}
