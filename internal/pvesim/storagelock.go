package pvesim

import "time"

// ---- the storage lock ---------------------------------------------------------
//
// pve-storage runs vdisk_alloc, vdisk_clone and vdisk_create_base (and
// vdisk_free) under the storage's lock (PVE::Storage::Plugin::
// cluster_lock_storage): a local storage's is a flock on
// /var/lock/pve-manager/pve-storage-<id> on the node (PVE::Tools::lock_file,
// 10 s to acquire: "can't lock file '…' - got timeout"), a shared
// storage's a cluster-wide pmxcfs lock (PVE::Cluster::cfs_lock_storage:
// 10 s to acquire, "cfs-lock 'storage-<id>' error: got lock request
// timeout"; the work under it is cut off after 60 s with
// "'storage-<id>'-locked command timed out - aborting").
//
// A clone takes it once per volume, one volume after another, at the
// start of its task: a full clone for the allocation of the new volume on
// the target storage (qemu-server PVE::QemuServer::clone_disk →
// vdisk_alloc; pve-container PVE::LXC::copy_volume → vdisk_alloc), the
// copy that follows running without it; a linked clone for the whole
// vdisk_clone on the base volume's storage. Each hold lasts
// Faults.StorageLockHold (0, the default, models none: the lock is
// never waited for); the task's own latency runs after its holds. Waiters
// are served in arrival order, and one that would wait longer than
// Faults.StorageLockTimeout (default 10 s) fails its task after that
// long. The lock is modelled by when each storage's lock is free next:
// a task stopped while it holds it does not free it early.

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

// storageLocks takes, one after another from now, the locks of the
// storages the task's volume operations run on (sids, one per volume)
// from node. It returns how long the task spends on them and, if one
// times out, the error that fails the task at that point. Caller holds
// s.mu.
func (s *Sim) storageLocks(node string, sids []string) (time.Duration, error) {
	hold := time.Duration(s.faults.StorageLockHold)
	if hold <= 0 || len(sids) == 0 {
		return 0, nil
	}
	timeout := time.Duration(s.faults.StorageLockTimeout)
	if timeout <= 0 {
		timeout = DefaultStorageLockTimeout
	}
	if s.storeFree == nil {
		s.storeFree = map[string]time.Time{}
	}
	now := time.Now()
	at := now
	for _, sid := range sids {
		st := storageByName(sid)
		if st == nil {
			continue
		}
		key := storageLockKey(node, st)
		grant := at
		if free := s.storeFree[key]; free.After(grant) {
			grant = free
		}
		if grant.Sub(at) > timeout {
			return at.Add(timeout).Sub(now), taskError(storageLockTimeout(st))
		}
		if st.shared && hold > cfsLockWorkLimit {
			s.storeFree[key] = grant.Add(cfsLockWorkLimit)
			return grant.Add(cfsLockWorkLimit).Sub(now), taskFail("'storage-%s'-locked command timed out - aborting", st.name)
		}
		at = grant.Add(hold)
		s.storeFree[key] = at
	}
	return at.Sub(now), nil
}
