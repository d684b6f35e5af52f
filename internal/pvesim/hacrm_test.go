package pvesim_test

import (
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pvesim"
)

// TestHAStateDrivesGuest follows pve-ha-manager: PUT state only writes
// resources.cfg and answers null; the HA stack starts or stops the guest
// in its next round (a qmshutdown/qmstart task as root@pam).
func TestHAStateDrivesGuest(t *testing.T) {
	s := startSim(t, pvesim.Options{HADelay: time.Hour})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Running: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddHAResource(100, "started"); err != nil {
		t.Fatal(err)
	}
	data, err := callData(t, s, "PUT", "/cluster/ha/resources/vm:100", map[string]any{"state": "stopped"})
	if err != nil || data != nil {
		t.Fatalf("answer %v, %v", data, err)
	}
	if g, _ := s.Guest(100); g.Status != "running" {
		t.Fatal("the API call stopped the guest itself")
	}
	s.RunHA()
	if err := s.WaitHA(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(100); g.Status != "stopped" {
		t.Fatalf("HA did not stop it: %+v", g)
	}
	tasks := s.Tasks()
	if last := tasks[len(tasks)-1]; last.Type != "qmshutdown" || last.User != "root@pam" {
		t.Fatalf("task %+v", last)
	}
	if _, err := callData(t, s, "PUT", "/cluster/ha/resources/100", map[string]any{"state": "started"}); err != nil {
		t.Fatal(err)
	}
	s.RunHA()
	if err := s.WaitHA(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(100); g.Status != "running" {
		t.Fatalf("HA did not start it: %+v", g)
	}
}

// TestHAMigrate: POST …/{sid}/migrate queues a CRM command and answers
// before the guest moves (null on PVE 8, {sid, requested-node} on 9); a
// migrate API call on an HA-managed guest is an "hamigrate" task that
// only requests it; an unmanaged sid is refused.
func TestHAMigrate(t *testing.T) {
	for _, v := range []string{"8", "9"} {
		s := startSim(t, pvesim.Options{Nodes: 2, Version: v, HADelay: time.Hour})
		for _, g := range []pvesim.GuestSpec{{VMID: 100, Running: true}, {VMID: 101, Kind: pvesim.LXC, Running: true}, {VMID: 102}} {
			if err := s.AddGuest(g); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range []int{100, 101} {
			if err := s.AddHAResource(id, "started"); err != nil {
				t.Fatal(err)
			}
		}
		data, err := callData(t, s, "POST", "/cluster/ha/resources/vm:100/migrate", map[string]any{"node": "pve2"})
		if err != nil {
			t.Fatal(err)
		}
		if v == "8" && data != nil {
			t.Fatalf("PVE 8 answer %v", data)
		}
		if m, _ := data.(map[string]any); v == "9" && (m["sid"] != "vm:100" || m["requested-node"] != "pve2") {
			t.Fatalf("PVE 9 answer %v", data)
		}
		if g, _ := s.Guest(100); g.Node != "pve1" || g.Lock != "" {
			t.Fatalf("moved with the API call: %+v", g)
		}
		data, err = callData(t, s, "POST", "/nodes/pve1/lxc/101/migrate", map[string]any{"target": "pve2", "restart": 1})
		if err != nil {
			t.Fatal(err)
		}
		if ti := waitUPID(t, s, data); ti.Type != "hamigrate" || ti.ExitStatus != "OK" {
			t.Fatalf("hamigrate %+v", ti)
		}
		if g, _ := s.Guest(101); g.Node != "pve1" || g.Status != "running" {
			t.Fatalf("moved by the hamigrate task itself: %+v", g)
		}
		s.RunHA()
		if err := s.WaitHA(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		for _, id := range []int{100, 101} {
			if g, _ := s.Guest(id); g.Node != "pve2" || g.Status != "running" || g.Lock != "" {
				t.Fatalf("after the HA round: %+v", g)
			}
		}
		_, err = callData(t, s, "POST", "/cluster/ha/resources/vm:102/migrate", map[string]any{"node": "pve2"})
		errContains(t, err, "500 resource 'vm:102' is not HA managed")
	}
}
