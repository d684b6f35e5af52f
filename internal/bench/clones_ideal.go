package bench

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// IdealClone is one clone of the clones profile, as the ideal schedule
// sees it: the Proxmox resources it contends for.
type IdealClone struct {
	// LXC: a container's clone locks its template ("disk", for the whole
	// copy: pve-container PVE/API2/LXC.pm clone_vm), so the clones of one
	// container template run one after another.
	LXC      bool
	Template int
	// Storage is where the clone takes the storage lock (a full clone's
	// target: PVE::Storage::vdisk_alloc; a linked clone's template
	// storage: vdisk_clone), held LockHold; Node is where it runs, whose
	// pvedaemon serves its synchronous config write.
	Storage, Node string
	// Shared: Storage is shared (storage.cfg), so its lock is the
	// cluster's (PVE::Cluster::cfs_lock_storage); a local storage's is
	// each node's own flock (PVE::Tools::lock_file), so clones on
	// different nodes do not queue for it.
	Shared bool
}

// lockKey names the lock c takes: a shared storage's across the
// cluster, a local one's per node.
func (c IdealClone) lockKey() string {
	if c.Shared {
		return c.Storage
	}
	return c.Storage + " on " + c.Node
}

// CloneIdealInput is what the ideal schedule of a batch of clones needs.
type CloneIdealInput struct {
	Clones []IdealClone
	// APILatency is one API call's; QEMUClone and LXCClone are how long a
	// clone task runs (qmclone, vzclone); LockHold how long it holds its
	// storage's lock (within the task); ConfigWrite how long the
	// synchronous config write after the clone takes (its pvedaemon
	// worker busy meanwhile).
	APILatency, QEMUClone, LXCClone, LockHold, ConfigWrite time.Duration
	// Workers is pvedaemon's workers per node (3 by default on Proxmox).
	Workers int
}

// CloneIdeal is the ideal makespan of a batch of clones under Proxmox's
// locks alone (no client limits), and the resource that sets it. It is
// the largest of these lower bounds:
//
//   - any clone: L + H + D + L + C (its clone call, its task: the
//     volume made under the storage's lock, then the rest of its work,
//     its config write call and the write's work);
//   - a container template t with n_t clones: L + n_t × (H + D_lxc) + L + C
//     (its clones, each a whole task, run back to back; the last one's
//     config write follows);
//   - a storage lock s that n_s clones take (a shared storage's, or a
//     local one's on one node): L + n_s × H + L + C (the
//     lock's holds run one after another; H ≤ D, so this never exceeds
//     what the task needs unless the lock is the bottleneck);
//   - a node's pvedaemon: L + L + m_node × C ÷ W (its m config writes on
//     W workers, after the first clone call at the earliest).
//
// L is APILatency, D a clone task's, H LockHold, C ConfigWrite. It
// does not count the time between a task's end and the client seeing it
// (polling): no client can go below these bounds.
func CloneIdeal(in CloneIdealInput) (time.Duration, string) {
	L, C := in.APILatency, in.ConfigWrite
	best, why := time.Duration(0), ""
	take := func(d time.Duration, w string) {
		if d > best {
			best, why = d, w
		}
	}
	tpl, sto, node := map[int]int{}, map[string]int{}, map[string]int{}
	for _, c := range in.Clones {
		d := in.QEMUClone
		if c.LXC {
			d = in.LXCClone
			tpl[c.Template]++
		}
		take(2*L+in.LockHold+d+C, "one clone")
		if c.Storage != "" {
			sto[c.lockKey()]++
		}
		node[c.Node]++
	}
	// In key order: of equal bounds, the first named is reported.
	for _, t := range slices.Sorted(maps.Keys(tpl)) {
		n := tpl[t]
		take(2*L+time.Duration(n)*(in.LockHold+in.LXCClone)+C, fmt.Sprintf("container template %d", t))
	}
	for _, s := range slices.Sorted(maps.Keys(sto)) {
		n := sto[s]
		take(2*L+time.Duration(n)*in.LockHold+C, fmt.Sprintf("storage %s's lock", s))
	}
	if w := max(in.Workers, 1); C > 0 {
		for _, nd := range slices.Sorted(maps.Keys(node)) {
			take(2*L+time.Duration(node[nd])*C/time.Duration(w), fmt.Sprintf("node %s's pvedaemon", nd))
		}
	}
	return best, why
}
