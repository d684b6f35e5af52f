package pvesim_test

import (
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pvesim"
)

func longTasks() pvesim.Faults { return pvesim.Faults{TaskLatency: pvesim.Duration(time.Hour)} }

// TestMigrateVMChecks follows qemu-server's migrate_vm up front: the
// target must be another node (400), a cluster member, the VM unlocked,
// and a running VM needs online.
func TestMigrateVMChecks(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 2})
	for _, g := range []pvesim.GuestSpec{{VMID: 100, Running: true}, {VMID: 101}} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	p := "/nodes/pve1/qemu/"
	_, err := callData(t, s, "POST", p+"100/migrate", map[string]any{"target": "pve1", "online": 1})
	errContains(t, err, "400")
	_, err = callData(t, s, "POST", p+"100/migrate", map[string]any{"target": "pve9", "online": 1})
	errContains(t, err, "500 no such cluster node 'pve9'")
	_, err = callData(t, s, "POST", p+"100/migrate", map[string]any{"target": "pve2"})
	errContains(t, err, "500 can't migrate running VM without --online")
	_, err = callData(t, s, "POST", p+"100/migrate", map[string]any{"target": "pve2", "online": 1, "targetstorage": "nosuch"})
	errContains(t, err, "500 storage 'nosuch' does not exist")
	if err := s.LockGuest(101, "backup", 0); err != nil {
		t.Fatal(err)
	}
	_, err = callData(t, s, "POST", p+"101/migrate", map[string]any{"target": "pve2"})
	errContains(t, err, "500 VM is locked (backup)")
	// A live migration of local disks without with-local-disks fails in
	// phase 1: the lock goes again, the VM stays.
	data, err := callData(t, s, "POST", p+"100/migrate", map[string]any{"target": "pve2", "online": 1})
	if err != nil {
		t.Fatal(err)
	}
	ti := waitUPID(t, s, data)
	if ti.Type != "qmigrate" || ti.ExitStatus != "migration aborted" ||
		!strings.Contains(strings.Join(ti.Log, "\n"), "can't live migrate attached local disks without with-local-disks option") {
		t.Fatalf("task %+v", ti)
	}
	if g, _ := s.Guest(100); g.Node != "pve1" || g.Lock != "" || g.Status != "running" {
		t.Fatalf("after an aborted migration: %+v", g)
	}
	// The precondition check lists the local disk and the other node.
	pre, err := callData(t, s, "GET", p+"100/migrate", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := pre.(map[string]any)
	if m["running"] != float64(1) || len(m["allowed_nodes"].([]any)) != 1 || len(m["local_disks"].([]any)) != 1 {
		t.Fatalf("precondition %v", m)
	}
}

// TestMigrateVMOnline: lock "migrate" while the qmigrate task runs, the VM
// on its node; when it ends it runs on the target, its local volumes on
// the mapped storage.
func TestMigrateVMOnline(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 3, Faults: longTasks()})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Running: true}); err != nil {
		t.Fatal(err)
	}
	data, err := callData(t, s, "POST", "/nodes/pve1/qemu/100/migrate",
		map[string]any{"target": "pve3", "online": 1, "with-local-disks": 1, "targetstorage": "ceph"})
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(100); g.Lock != "migrate" || g.Node != "pve1" {
		t.Fatalf("during the task: %+v", g)
	}
	_, err = callData(t, s, "PUT", "/nodes/pve1/qemu/100/config", map[string]any{"cores": 2})
	errContains(t, err, "VM is locked (migrate)")
	if err := s.FinishTask(data.(string)); err != nil {
		t.Fatal(err)
	}
	ti := waitUPID(t, s, data)
	if ti.ExitStatus != "OK" || ti.Node != "pve1" {
		t.Fatalf("task %+v", ti)
	}
	g, _ := s.Guest(100)
	if g.Node != "pve3" || g.Lock != "" || g.Status != "running" || g.Config["scsi0"] != "ceph:vm-100-disk-0,iothread=1,size=32G" {
		t.Fatalf("after: %+v", g)
	}
	if _, err := callData(t, s, "GET", "/nodes/pve3/qemu/100/status/current", nil); err != nil {
		t.Fatal(err)
	}
	_, err = callData(t, s, "GET", "/nodes/pve1/qemu/100/status/current", nil)
	errContains(t, err, "does not exist")
}

// TestMigrateCT follows pve-container: a running container needs restart
// (500), online fails in the worker ("lxc live migration is currently not
// implemented"); restart mode shuts it down, locks it "migrate", and
// starts it on the target when the task ends, or on the source again
// when the task is stopped.
func TestMigrateCT(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 2, Faults: longTasks()})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 200, Kind: pvesim.LXC, Running: true}); err != nil {
		t.Fatal(err)
	}
	p := "/nodes/pve1/lxc/200/migrate"
	_, err := callData(t, s, "POST", p, map[string]any{"target": "pve2"})
	errContains(t, err, "500 can't migrate running container without --online or --restart")
	data, err := callData(t, s, "POST", p, map[string]any{"target": "pve2", "online": 1})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.FinishTask(data.(string))
	if ti := waitUPID(t, s, data); ti.Type != "vzmigrate" || ti.ExitStatus != "migration aborted" ||
		!strings.Contains(strings.Join(ti.Log, "\n"), "lxc live migration is currently not implemented") {
		t.Fatalf("online: %+v", ti)
	}
	data, err = callData(t, s, "POST", p, map[string]any{"target": "pve2", "restart": 1, "timeout": 30})
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(200); g.Status != "stopped" || g.Lock != "migrate" || g.Node != "pve1" {
		t.Fatalf("during: %+v", g)
	}
	if ti := finishNow(t, s, data.(string)); ti.ExitStatus != "interrupted by signal" {
		t.Fatalf("stopped: %+v", ti)
	}
	if g, _ := s.Guest(200); g.Status != "running" || g.Lock != "" || g.Node != "pve1" {
		t.Fatalf("after a stopped migration: %+v", g)
	}
	data, err = callData(t, s, "POST", p, map[string]any{"target": "pve2", "restart": 1})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.FinishTask(data.(string))
	if ti := waitUPID(t, s, data); ti.ExitStatus != "OK" {
		t.Fatalf("restart migration: %+v", ti)
	}
	if g, _ := s.Guest(200); g.Status != "running" || g.Lock != "" || g.Node != "pve2" {
		t.Fatalf("after: %+v", g)
	}
}

// TestMigrateStoppedVM is an offline migration: local disks are copied
// without with-local-disks.
func TestMigrateStoppedVM(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 2})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100}); err != nil {
		t.Fatal(err)
	}
	data, err := callData(t, s, "POST", "/nodes/pve1/qemu/100/migrate", map[string]any{"target": "pve2"})
	if err != nil {
		t.Fatal(err)
	}
	if ti := waitUPID(t, s, data); ti.ExitStatus != "OK" {
		t.Fatalf("task %+v", ti)
	}
	if g, _ := s.Guest(100); g.Node != "pve2" || g.Status != "stopped" || g.Config["scsi0"] != "local-lvm:vm-100-disk-0,iothread=1,size=32G" {
		t.Fatalf("after: %+v", g)
	}
}
