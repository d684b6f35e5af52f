package pvesim

import "time"

// ---- the storage lock ---------------------------------------------------------
//
// pve-storage runs vdisk_alloc, vdisk_clone, vdisk_create_base and
// vdisk_free under the storage's lock (src/PVE/Storage.pm: each calls
// $plugin->cluster_lock_storage($storeid, $scfg->{shared}, undef, sub
// {...}); PVE::Storage::Plugin::cluster_lock_storage): a local storage's
// is a flock on /var/lock/pve-manager/pve-storage-<id> on the node
// (PVE::Tools::lock_file, 10 s to acquire: "can't lock file '…' - got
// timeout"), a shared storage's a cluster-wide pmxcfs lock
// (PVE::Cluster::cfs_lock_storage: 10 s to acquire, "cfs-lock
// 'storage-<id>' error: got lock request timeout"; the work under it is
// cut off after 60 s with "'storage-<id>'-locked command timed out -
// aborting"). vdisk_free frees under the lock; only a plugin whose
// free_image returns a cleanup worker (thick LVM's, none of the
// simulated storages') goes on in an "imgdel" task without it.
//
// A task takes the locks its volume operations need one after another
// from its start, each for Faults.StorageLockHold (0, the default,
// models none: the lock is never waited for), and its own latency runs
// after its holds (lockRun). Waiters are served in arrival order, and one
// that would wait longer than Faults.StorageLockTimeout (default 10 s)
// gives up after that long with pve-storage's error. The lock is modelled
// by when each storage's lock is free next: a task stopped while it
// holds it does not free it early.
//
// Who takes it: a clone per volume (clone.go: a full clone's vdisk_alloc
// on the target, a linked clone's vdisk_clone on the base's storage), a
// create per volume it allocates (create.go), a config write per volume it
// allocates and per unusedN it frees (configlock.go), a template
// conversion per volume (vdisk_create_base, destroy.go), a disk move for
// the new volume, a template's base conversion and, with delete, the
// source's vdisk_free (diskmove.go), a destroy per volume it frees
// (destroy.go) and the storage API's volume deletion (volumes.go).

// DefaultStorageLockTimeout is how long cluster_lock_storage waits for the
// lock (lock_file's and cfs_lock's default timeout).
const DefaultStorageLockTimeout = 10 * time.Second

// cfsLockWorkLimit is how long pmxcfs lets work run under a cfs lock
// (PVE::Cluster $cfs_lock: alarm(60)).
const cfsLockWorkLimit = 60 * time.Second

// storageLockKey is the lock of storage sid as taken on node: one per
// node for a local storage, one for the cluster for a shared one.
func storageLockKey(node string, st *storageDef) string {
	if st.shared {
		return st.name
	}
	return node + "/" + st.name
}

// lockRun is the storage locks one task (or one API call doing the work
// itself) takes from node, one after another from its start. Every
// method needs the caller to hold s.mu.
type lockRun struct {
	s             *Sim
	node          string
	hold, timeout time.Duration
	start, at     time.Time
}

// lockRun starts the storage locks of a task of node's that starts now.
// Caller holds s.mu.
func (s *Sim) lockRun(node string) *lockRun {
	timeout := time.Duration(s.faults.StorageLockTimeout)
	if timeout <= 0 {
		timeout = DefaultStorageLockTimeout
	}
	now := time.Now()
	return &lockRun{s: s, node: node, hold: time.Duration(s.faults.StorageLockHold), timeout: timeout, start: now, at: now}
}

// elapsed is how long the task has spent on its locks so far.
func (r *lockRun) elapsed() time.Duration { return r.at.Sub(r.start) }

// taskDelay is how long before a task of type typ finishes: its locks
// first, then its own latency (Faults.TaskLatencyFor) unless a lock
// failed it (err).
func (r *lockRun) taskDelay(typ string, err error) time.Duration {
	d := r.elapsed()
	if err == nil {
		d += r.s.faults.TaskLatencyFor(typ)
	}
	return d
}

// take waits its turn for storage sid's lock after what the task did
// before and holds it for one volume operation. It fails with
// pve-storage's error if the lock is not free within the timeout (the
// task then gave up at the timeout), or if a shared storage's work
// outlasts pmxcfs's limit.
func (r *lockRun) take(sid string) error {
	st := storageByName(sid)
	if r.hold <= 0 || st == nil {
		return nil
	}
	if r.s.storeFree == nil {
		r.s.storeFree = map[string]time.Time{}
	}
	key := storageLockKey(r.node, st)
	grant := r.at
	if free := r.s.storeFree[key]; free.After(grant) {
		grant = free
	}
	if grant.Sub(r.at) > r.timeout {
		r.at = r.at.Add(r.timeout)
		return taskError(storageLockTimeout(st))
	}
	if st.shared && r.hold > cfsLockWorkLimit {
		r.at = grant.Add(cfsLockWorkLimit)
		r.s.storeFree[key] = r.at
		return taskFail("'storage-%s'-locked command timed out - aborting", st.name)
	}
	r.at = grant.Add(r.hold)
	r.s.storeFree[key] = r.at
	return nil
}

// alloc takes the locks of allocations (vdisk_alloc, vdisk_clone) on
// sids, one per volume, in order, up to the first that fails. The
// volumes allocated before that one are then freed again, each under its
// storage's lock, as the callers' cleanup does (qemu-server create_disks
// and clone_vm, pve-container create_disks/destroy_disks and clone_vm:
// vdisk_free in an eval, a failure only printed). It returns the index of
// the failed allocation (-1: none), the cleanup's failures and the
// allocation's error.
func (r *lockRun) alloc(sids []string) (failed int, cleanup []string, err error) {
	for i, sid := range sids {
		if err := r.take(sid); err != nil {
			return i, r.free(sids[:i]), err
		}
	}
	return -1, nil, nil
}

// free takes the locks of vdisk_free calls whose failure does not stop
// the task, and returns those failures' messages.
func (r *lockRun) free(sids []string) []string {
	var failed []string
	for _, sid := range sids {
		if err := r.take(sid); err != nil {
			failed = append(failed, err.Error())
		}
	}
	return failed
}
