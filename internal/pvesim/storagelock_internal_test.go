package pvesim

import (
	"slices"
	"testing"
	"time"
)

// TestLockRunAllocCleanup pins what follows an allocation whose storage
// lock timed out: the callers free the volumes they allocated before it,
// each vdisk_free under its storage's lock again (pve-storage
// src/PVE/Storage.pm vdisk_free: cluster_lock_storage), and only print a
// free's failure (qemu-server src/PVE/API2/Qemu.pm create_disks and
// clone_vm, pve-container src/PVE/LXC.pm destroy_disks and
// src/PVE/API2/LXC.pm clone_vm: `eval { PVE::Storage::vdisk_free(...) };
// warn $@ if $@;`).
func TestLockRunAllocCleanup(t *testing.T) {
	const h = time.Hour
	s, err := New(Options{Nodes: 1, Faults: Faults{StorageLockHold: Duration(h), StorageLockTimeout: Duration(time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.lockRun("pve1")
	s.storeFree = map[string]time.Time{"ceph": r.start.Add(3 * h)} // another task's, until +3h
	// local-lvm +0..1h, local-zfs +1h..2h, ceph wanted at +2h: gives up at +2h1m.
	failed, cleanup, err := r.alloc([]string{"local-lvm", "local-zfs", "ceph"})
	if failed != 2 || err == nil || err.Error() != "cfs-lock 'storage-ceph' error: got lock request timeout" || cleanup != nil {
		t.Fatalf("alloc: failed %d, cleanup %v, err %v", failed, cleanup, err)
	}
	// The frees: local-lvm +2h1m..3h1m, local-zfs +3h1m..4h1m.
	if got, want := r.elapsed(), 4*h+time.Minute; got != want {
		t.Fatalf("the run took %v, want %v", got, want)
	}
	for key, want := range map[string]time.Duration{"pve1/local-lvm": 3*h + time.Minute, "pve1/local-zfs": 4*h + time.Minute} {
		if got := s.storeFree[key].Sub(r.start); got != want {
			t.Errorf("%s free at +%v, want +%v", key, got, want)
		}
	}

	// A free that cannot get the lock in time fails only itself.
	r = s.lockRun("pve1")
	s.storeFree = map[string]time.Time{"pve1/local-lvm": r.start.Add(5 * h)}
	if got := r.free([]string{"local-lvm", "local-zfs"}); !slices.Equal(got, []string{"can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout"}) {
		t.Fatalf("free: %v", got)
	}
	if got, want := r.elapsed(), h+time.Minute; got != want {
		t.Fatalf("the frees took %v, want %v", got, want)
	}

	// Hold 0 models no lock at all.
	s.faults.StorageLockHold = 0
	r = s.lockRun("pve1")
	if failed, _, err := r.alloc([]string{"local-lvm", "ceph"}); failed != -1 || err != nil || r.elapsed() != 0 {
		t.Fatalf("without a hold: failed %d, err %v, took %v", failed, err, r.elapsed())
	}
}

// TestConfigWriteLXCFreedKept: pve-container frees a deleted unusedN
// (src/PVE/LXC/Config.pm vmconfig_apply_pending →
// PVE::LXC::delete_mountpoint_volume → vdisk_free, under the storage's
// lock) before it allocates the new mount points; when an allocation's
// lock times out it writes nothing (src/PVE/API2/LXC/Config.pm
// update_vm: raise_param_exc before write_config), so the config still
// names the freed volume. The synchronous call waits for its holds.
func TestConfigWriteLXCFreedKept(t *testing.T) {
	s, err := New(Options{Nodes: 1, Faults: Faults{StorageLockHold: Duration(time.Hour), StorageLockTimeout: Duration(time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	const vol = "local-zfs:subvol-100-disk-1"
	if err := s.AddGuest(GuestSpec{VMID: 100, Kind: LXC, Config: map[string]string{"unused0": vol}}); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.storeFree = map[string]time.Time{"ceph": time.Now().Add(3 * time.Hour)}
	g := s.guests[100]
	res, err := s.putConfig(&req{params: map[string]string{"delete": "unused0", "mp0": "ceph:8,mp=/srv"}, user: "root@pam"}, g)
	iw, ok := res.(inlineWork)
	if err != nil || !ok || iw.d != time.Hour+time.Millisecond {
		t.Fatalf("putConfig: %#v, %v", res, err)
	}
	_, err = iw.then()
	ae, _ := err.(*apiError)
	if ae == nil || ae.status != 400 || len(ae.fields) != 1 || ae.fields["mp0"] != "unable to apply pending change mp0 : cfs-lock 'storage-ceph' error: got lock request timeout" {
		t.Fatalf("the write: %v", err)
	}
	if g.conf["unused0"] != vol || g.conf["mp0"] != "" || !s.volFreed(vol) {
		t.Fatalf("after the write: %v, %s freed: %v", g.conf, vol, s.volFreed(vol))
	}
}
