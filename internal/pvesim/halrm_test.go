package pvesim_test

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pvesim"
)

// waitLRM polls the LRM's workers until node runs busy actions with
// waiting ones queued.
func waitLRM(t *testing.T, s *pvesim.Sim, node string, busy, waiting int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if w := s.LRMWorkers()[node]; w == [2]int{busy, waiting} {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("LRM of %s: %v, want %d running, %d waiting", node, s.LRMWorkers()[node], busy, waiting)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLRMMaxWorkers pins the LRM's max_workers (pve-ha-manager
// src/PVE/HA/LRM.pm run_workers, "next if $count >= $max_workers";
// src/PVE/HA/Env/PVE2.pm get_max_workers, datacenter.cfg max_workers or
// 4): six HA resources asked to start on one node run four qmstart
// workers; the other two wait and start as workers end.
func TestLRMMaxWorkers(t *testing.T) {
	s := startSim(t, pvesim.Options{Faults: pvesim.Faults{
		TaskLatencyByType: map[string]pvesim.Duration{"qmstart": pvesim.Duration(time.Hour)},
	}})
	for id := 100; id < 106; id++ {
		if err := s.AddGuest(pvesim.GuestSpec{VMID: id}); err != nil {
			t.Fatal(err)
		}
		if res, _ := raw(t, "POST", s.URL()+"/cluster/ha/resources", tokenHdr(), fmt.Sprintf("sid=vm:%d&state=started", id)); res.StatusCode != 200 {
			t.Fatalf("vm:%d: %s", id, res.Status)
		}
	}
	s.RunHA()
	waitLRM(t, s, "pve1", 4, 2)
	running := func() []string {
		var upids []string
		for _, ti := range s.Tasks() {
			if ti.Type == "qmstart" && ti.Running {
				upids = append(upids, ti.UPID)
			}
		}
		return upids
	}
	if r := running(); len(r) != 4 {
		t.Fatalf("qmstart tasks running: %d, want 4", len(r))
	}
	for _, upid := range running()[:2] {
		if res, _ := raw(t, "DELETE", s.URL()+"/nodes/pve1/tasks/"+url.PathEscape(upid), tokenHdr(), ""); res.StatusCode != 200 {
			t.Fatalf("stop %s: %s", upid, res.Status)
		}
	}
	waitLRM(t, s, "pve1", 4, 0)
	if r := running(); len(r) != 4 {
		t.Fatalf("qmstart tasks running after two ended: %d, want 4", len(r))
	}
}

// TestLRMUnlimited: a negative HAMaxWorkers runs every action at once.
func TestLRMUnlimited(t *testing.T) {
	s := startSim(t, pvesim.Options{HAMaxWorkers: -1, Faults: pvesim.Faults{
		TaskLatencyByType: map[string]pvesim.Duration{"qmstart": pvesim.Duration(time.Hour)},
	}})
	for id := 100; id < 106; id++ {
		if err := s.AddGuest(pvesim.GuestSpec{VMID: id}); err != nil {
			t.Fatal(err)
		}
		if res, _ := raw(t, "POST", s.URL()+"/cluster/ha/resources", tokenHdr(), fmt.Sprintf("sid=vm:%d&state=started", id)); res.StatusCode != 200 {
			t.Fatalf("vm:%d: %s", id, res.Status)
		}
	}
	s.RunHA()
	waitLRM(t, s, "pve1", 6, 0)
}
