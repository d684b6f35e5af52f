package pvesim_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pvesim"
)

// snapList reads GET …/snapshot as plain maps.
func snapList(t *testing.T, s *pvesim.Sim, path string) map[string]map[string]any {
	t.Helper()
	data, err := callData(t, s, "GET", path+"/snapshot", nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, e := range data.([]any) {
		m := e.(map[string]any)
		out[m["name"].(string)] = m
	}
	return out
}

func wantTask(t *testing.T, ti pvesim.TaskInfo, typ, exit string) {
	t.Helper()
	if ti.Type != typ || ti.ExitStatus != exit {
		t.Fatalf("task %s %q, want %s %q (log %q)", ti.Type, ti.ExitStatus, typ, exit, ti.Log)
	}
}

// TestSnapshotQEMU follows qemu-server's snapshot API: a qmsnapshot task
// that records the config in a section and sets parent, the list with
// its "current" entry, the worker's refusals, rollback (which stops the
// VM and restores the recorded config) and qmdelsnapshot relinking
// parents.
func TestSnapshotQEMU(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Cores: 2}); err != nil {
		t.Fatal(err)
	}
	path := "/nodes/pve1/qemu/100"
	data, err := callData(t, s, "POST", path+"/snapshot", map[string]any{"snapname": "s1", "description": "first"})
	if err != nil {
		t.Fatal(err)
	}
	ti := waitUPID(t, s, data)
	wantTask(t, ti, "qmsnapshot", "OK")
	if ti.ID != "100" || !slices.Contains(ti.Log, "snapshotting 'drive-scsi0' (local-lvm:vm-100-disk-0)") {
		t.Fatalf("task %+v", ti)
	}
	if _, err := callData(t, s, "PUT", path+"/config", map[string]any{"cores": 4}); err != nil {
		t.Fatal(err)
	}
	data, _ = callData(t, s, "POST", path+"/snapshot", map[string]any{"snapname": "s2", "vmstate": 1})
	wantTask(t, waitUPID(t, s, data), "qmsnapshot", "OK")
	l := snapList(t, s, path)
	if len(l) != 3 || l["s1"]["description"] != "first" || l["s1"]["parent"] != nil || l["s2"]["parent"] != "s1" ||
		l["s2"]["vmstate"] != float64(0) || l["current"]["parent"] != "s2" ||
		l["current"]["description"] != "You are here!" || l["current"]["running"] != float64(0) {
		t.Fatalf("list %v", l)
	}
	g, _ := s.Guest(100)
	if l["current"]["digest"] != g.Digest || g.Config["parent"] != "s2" || g.Lock != "" {
		t.Fatalf("guest %+v, list %v", g, l["current"])
	}
	// Refusals: format (400), reserved names (500), then in the worker.
	if _, err := callData(t, s, "POST", path+"/snapshot", map[string]any{"snapname": "1st"}); err == nil ||
		!strings.Contains(err.Error(), "400") {
		t.Fatalf("bad name: %v", err)
	}
	_, err = callData(t, s, "POST", path+"/snapshot", map[string]any{"snapname": "current"})
	errContains(t, err, "unable to use snapshot name 'current' (reserved name)")
	data, _ = callData(t, s, "POST", path+"/snapshot", map[string]any{"snapname": "s1"})
	wantTask(t, waitUPID(t, s, data), "qmsnapshot", "snapshot name 's1' already used")
	if err := s.LockGuest(100, "backup", 0); err != nil {
		t.Fatal(err)
	}
	data, _ = callData(t, s, "POST", path+"/snapshot", map[string]any{"snapname": "s3"})
	wantTask(t, waitUPID(t, s, data), "qmsnapshot", "VM is locked (backup)")
	if err := s.UnlockGuest(100); err != nil {
		t.Fatal(err)
	}
	// Rollback of a running VM: stopped, the section's config back.
	data, _ = callData(t, s, "POST", path+"/status/start", nil)
	waitUPID(t, s, data)
	data, _ = callData(t, s, "POST", path+"/snapshot/s1/rollback", nil)
	wantTask(t, waitUPID(t, s, data), "qmrollback", "OK")
	g, _ = s.Guest(100)
	if g.Status != "stopped" || g.Config["cores"] != "2" || g.Config["parent"] != "s1" || g.Lock != "" {
		t.Fatalf("after rollback %+v", g)
	}
	conf, err := callData(t, s, "GET", path+"/snapshot/s2/config", nil)
	if err != nil || conf.(map[string]any)["cores"] != float64(4) || conf.(map[string]any)["parent"] != "s1" {
		t.Fatalf("s2 config %v %v", conf, err)
	}
	// Deleting s1: s2 and the current config lose their parent.
	data, _ = callData(t, s, "DELETE", path+"/snapshot/s1", nil)
	wantTask(t, waitUPID(t, s, data), "qmdelsnapshot", "OK")
	snaps := s.Snapshots(100)
	if len(snaps) != 1 || snaps[0].Name != "s2" || snaps[0].Parent != "" {
		t.Fatalf("snapshots %+v", snaps)
	}
	if g, _ := s.Guest(100); g.Config["parent"] != "" {
		t.Fatalf("parent %q", g.Config["parent"])
	}
	data, _ = callData(t, s, "DELETE", path+"/snapshot/zz", nil)
	wantTask(t, waitUPID(t, s, data), "qmdelsnapshot", "snapshot 'zz' does not exist")
	if _, err := callData(t, s, "PUT", path+"/snapshot/s2/config", map[string]any{"description": "second"}); err != nil {
		t.Fatal(err)
	}
	if idx, _ := callData(t, s, "GET", path+"/snapshot/s2", nil); len(idx.([]any)) != 2 || snapList(t, s, path)["s2"]["description"] != "second" {
		t.Fatalf("index %v, list %v", idx, snapList(t, s, path))
	}
	data, _ = callData(t, s, "POST", path+"/clone", map[string]any{"newid": 150})
	waitUPID(t, s, data)
	if c, _ := s.Guest(150); c.Config["parent"] != "" || len(s.Snapshots(150)) != 0 {
		t.Fatalf("clone %+v", c)
	}
	_, err = callData(t, s, "POST", path+"/template", nil)
	errContains(t, err, "unable to create template, because VM contains snapshots")
	// A guest with snapshots is destroyed like any other.
	data, _ = callData(t, s, "DELETE", path, nil)
	wantTask(t, waitUPID(t, s, data), "qmdestroy", "OK")
}

// TestSnapshotRAMAndLock: a running VM's snapshot with vmstate saves its
// RAM and is resumed running on rollback; the VM is locked "snapshot"
// while the task runs, and a stopped task leaves nothing behind.
func TestSnapshotRAMAndLock(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Running: true}); err != nil {
		t.Fatal(err)
	}
	path := "/nodes/pve1/qemu/100"
	data, _ := callData(t, s, "POST", path+"/snapshot", map[string]any{"snapname": "ram", "vmstate": true})
	ti := waitUPID(t, s, data)
	wantTask(t, ti, "qmsnapshot", "OK")
	if ti.Log[0] != "saving VM state and RAM using storage 'local-lvm'" {
		t.Fatalf("log %q", ti.Log)
	}
	if l := snapList(t, s, path); l["ram"]["vmstate"] != float64(1) || l["current"]["running"] != float64(1) {
		t.Fatalf("list %v", l)
	}
	if sn := s.Snapshots(100); sn[0].VMState != "local-lvm:vm-100-state-ram" || sn[0].Config["runningmachine"] == "" {
		t.Fatalf("snapshot %+v", sn[0])
	}
	data, _ = callData(t, s, "POST", path+"/snapshot/ram/rollback", nil)
	wantTask(t, waitUPID(t, s, data), "qmrollback", "OK")
	if g, _ := s.Guest(100); g.Status != "running" || g.Config["runningmachine"] != "" {
		t.Fatalf("after RAM rollback %+v", g)
	}
	if err := s.UpdateFaults(func(f *pvesim.Faults) { f.TaskLatency = pvesim.Duration(time.Hour) }); err != nil {
		t.Fatal(err)
	}
	data, _ = callData(t, s, "POST", path+"/snapshot", map[string]any{"snapname": "slow"})
	if g, _ := s.Guest(100); g.Lock != "snapshot" {
		t.Fatalf("lock while running %q", g.Lock)
	}
	if l := snapList(t, s, path); l["slow"]["snapstate"] != "prepare" {
		t.Fatalf("list while running %v", l)
	}
	_, err := callData(t, s, "PUT", path+"/config", map[string]any{"cores": 2})
	errContains(t, err, "VM is locked (snapshot)")
	rb, _ := callData(t, s, "POST", path+"/snapshot/slow/rollback", nil)
	if err := s.FinishTask(rb.(string)); err != nil {
		t.Fatal(err)
	}
	wantTask(t, waitUPID(t, s, rb), "qmrollback", "unable to rollback to incomplete snapshot (snapstate = prepare)")
	if _, err := callData(t, s, "DELETE", "/nodes/pve1/tasks/"+data.(string), nil); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(100); g.Lock != "" || len(s.Snapshots(100)) != 1 {
		t.Fatalf("after stop %+v %+v", g, s.Snapshots(100))
	}
}

// TestSnapshotLXC: vzsnapshot (no vmstate parameter), a rollback with
// start, vzdelsnapshot.
func TestSnapshotLXC(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 101, Kind: pvesim.LXC, Running: true}); err != nil {
		t.Fatal(err)
	}
	path := "/nodes/pve1/lxc/101"
	_, err := callData(t, s, "POST", path+"/snapshot", map[string]any{"snapname": "a", "vmstate": 1})
	errContains(t, err, "400")
	_, err = callData(t, s, "POST", path+"/snapshot", map[string]any{"snapname": "vzdump"})
	errContains(t, err, "unable to use snapshot name 'vzdump' (reserved name)")
	data, _ := callData(t, s, "POST", path+"/snapshot", map[string]any{"snapname": "before", "description": "pre"})
	wantTask(t, waitUPID(t, s, data), "vzsnapshot", "OK")
	if l := snapList(t, s, path); l["before"]["description"] != "pre\n" || l["before"]["vmstate"] != nil ||
		l["current"]["parent"] != "before" {
		t.Fatalf("list %v", l)
	}
	if _, err := callData(t, s, "PUT", path+"/config", map[string]any{"memory": 1024}); err != nil {
		t.Fatal(err)
	}
	data, _ = callData(t, s, "POST", path+"/snapshot/before/rollback", map[string]any{"start": 1})
	wantTask(t, waitUPID(t, s, data), "vzrollback", "OK")
	if g, _ := s.Guest(101); g.Status != "running" || g.Config["memory"] != "512" {
		t.Fatalf("after rollback %+v", g)
	}
	data, _ = callData(t, s, "DELETE", path+"/snapshot/before", nil)
	wantTask(t, waitUPID(t, s, data), "vzdelsnapshot", "OK")
	if l := snapList(t, s, path); len(l) != 1 || l["current"]["parent"] != nil {
		t.Fatalf("list %v", l)
	}
}
