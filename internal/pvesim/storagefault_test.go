package pvesim_test

import (
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pvesim"
)

// TestFaultStorageCloneLimit pins the storage lock contention fault: with
// storage_clone_limit full clones onto one storage running, the next full
// clone onto it fails with the storage lock's timeout (pmxcfs lock for
// shared storage, local flock otherwise) and leaves nothing behind; other
// storages and linked clones are unaffected.
func TestFaultStorageCloneLimit(t *testing.T) {
	s := startSim(t, pvesim.Options{DemoTemplates: true, Faults: pvesim.Faults{TaskLatency: pvesim.Duration(time.Hour)}})
	// set over the control API, as any client would
	res, body := raw(t, "PATCH", s.ControlURL()+"/faults", nil, `{"storage_clone_limit":2}`)
	if res.StatusCode != 200 || body["storage_clone_limit"] != float64(2) {
		t.Fatalf("PATCH storage_clone_limit: %s %v", res.Status, body)
	}
	if s.Faults().StorageCloneLimit != 2 {
		t.Fatalf("faults: %+v", s.Faults())
	}
	if res, _ := raw(t, "PATCH", s.ControlURL()+"/faults", nil, `{"storage_clone_limit":-1}`); res.StatusCode != 400 {
		t.Fatalf("negative limit: %s", res.Status)
	}
	u := s.URL() + "/nodes/pve1"
	clone := func(path, params string) string {
		t.Helper()
		res, body := raw(t, "POST", u+path, tokenHdr(), params)
		if res.StatusCode != 200 {
			t.Fatalf("clone %s %s: %s", path, params, res.Status)
		}
		return body["data"].(string)
	}
	ok := []string{
		clone("/qemu/9000/clone", "newid=150&full=1"),
		clone("/qemu/9000/clone", "newid=151&full=1"),
		clone("/qemu/9000/clone", "newid=152"),                     // linked: not counted
		clone("/qemu/9000/clone", "newid=153&full=1&storage=ceph"), // another storage
	}
	lost := map[string]int{
		clone("/qemu/9000/clone", "newid=160&full=1"): 160,
		clone("/lxc/9001/clone", "newid=161&full=1"):  161,
	}
	// the losers exist, locked, until their task ends; the CT source too
	if g, ok := s.Guest(160); !ok || g.Lock != "clone" {
		t.Fatalf("losing clone target while it waits: %+v", g)
	}
	if g, _ := s.Guest(9001); g.Lock != "disk" {
		t.Fatalf("CT source while its clone waits: %q", g.Lock)
	}
	s.CompleteRunningTasks()
	ctx := ctxT(t)
	for _, upid := range ok {
		if ti, err := s.WaitTask(ctx, upid); err != nil || ti.ExitStatus != "OK" {
			t.Fatalf("clone within the limit: %+v %v", ti, err)
		}
	}
	const want = "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout"
	for upid, id := range lost {
		ti, err := s.WaitTask(ctx, upid)
		if err != nil || ti.ExitStatus != want || ti.Log[len(ti.Log)-1] != "TASK ERROR: "+want {
			t.Fatalf("clone over the limit: %+v %v", ti, err)
		}
		if _, ok := s.Guest(id); ok {
			t.Fatalf("failed clone left target %d", id)
		}
	}
	if g, _ := s.Guest(9001); g.Lock != "" {
		t.Fatalf("failed CT clone left its source locked (%s)", g.Lock)
	}
	// shared storage: the pmxcfs lock's text
	if err := s.UpdateFaults(func(f *pvesim.Faults) { f.StorageCloneLimit = 1 }); err != nil {
		t.Fatal(err)
	}
	first := clone("/qemu/9000/clone", "newid=170&full=1&storage=ceph")
	second := clone("/qemu/9000/clone", "newid=171&full=1&storage=ceph")
	s.CompleteRunningTasks()
	if ti, _ := s.WaitTask(ctx, first); ti.ExitStatus != "OK" {
		t.Fatalf("first ceph clone: %q", ti.ExitStatus)
	}
	if ti, _ := s.WaitTask(ctx, second); ti.ExitStatus != "clone failed: cfs-lock 'storage-ceph' error: got lock request timeout" {
		t.Fatalf("second ceph clone: %q", ti.ExitStatus)
	}
	// once the others ended, a full clone gets the lock again
	again := clone("/qemu/9000/clone", "newid=172&full=1")
	s.CompleteRunningTasks()
	if ti, _ := s.WaitTask(ctx, again); ti.ExitStatus != "OK" {
		t.Fatalf("clone after contention: %q", ti.ExitStatus)
	}
}
