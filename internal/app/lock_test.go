package app_test

import (
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/planner"
)

// results reads every result journalled for vmid.
func (p *pipeline) results(t *testing.T, vmid int) []events.Result {
	t.Helper()
	return journalled[events.Result](t, p, events.KindResult, vmid)
}

// A guest locked by a backup for 10 s: the change waits for the lock (the
// actions that meet it are skipped, class locked, and backed off; the
// first one meets the config digest the lock changed), then converges; no
// action fails.
func TestBackupLockWaitedOut(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a 10 s lock")
	}
	p := startPipeline(t, pvesim.Options{}, verifyOff)
	const vmid = 303
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vmid, Cores: 1}); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	if err := p.sim.LockGuest(vmid, "backup", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	locked := time.Now()
	running, cores := events.PowerRunning, 2
	seq := p.desire(t, &events.Desired{VMID: vmid, Power: &running, Cores: &cores})
	// The planner has not seen the lock yet: its first action meets it.
	if !until(10*time.Second, func() bool { return len(p.results(t, vmid)) > 0 }) {
		t.Fatal("no action reached the locked guest")
	}
	var doc = p.waitState(t, vmid, seq, planner.Converged, 0)
	until(40*time.Second, func() bool {
		p.pass(t) // the observer sees the lock, then sees it go
		doc = p.waitState(t, vmid, seq, planner.Converged, 500*time.Millisecond)
		return doc != nil && doc.Status.Kind == planner.Converged
	})
	if doc == nil || doc.Status.Kind != planner.Converged {
		t.Fatalf("not converged 40 s after a 10 s lock: %+v", doc)
	}
	if took := time.Since(locked); took < 10*time.Second {
		t.Fatalf("converged after %s, inside the lock", took)
	}
	p.settle(t, vmid) // every action's result journalled
	skipped := 0
	for _, r := range p.results(t, vmid) {
		switch {
		case r.Status == events.ResultFailed:
			t.Errorf("failed action: %+v", r)
		case r.Status == events.ResultSkipped && r.ErrorClass == events.ClassLocked:
			skipped++
		}
	}
	if skipped == 0 {
		t.Error("no action met the lock")
	}
	if g, _ := p.sim.Guest(vmid); g.Status != "running" || g.Config["cores"] != "2" {
		t.Fatalf("guest %+v", g)
	}
	t.Logf("converged %s after the lock was taken; %d actions met the lock and waited", time.Since(locked).Round(100*time.Millisecond), skipped)
}
