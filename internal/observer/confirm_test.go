package observer_test

import (
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
)

// TestConfirmationSparedPerGuest: a changed snapshot is confirmed (read
// and published once more on the next pass) only when something of its
// own guest may have come between its read and its publish: a result of
// the guest journalled after the read's AfterSeq, or another observation
// of it. Another guest's result on a busy journal (an estate's executors
// at work) spares it: the projector adopted the snapshot and holds it.
// Before, any other event did not: after a mass change, every guest the
// budget had just read and found changed was read again at once, outside
// the budget, a node's share in one burst.
func TestConfirmationSparedPerGuest(t *testing.T) {
	const vmid = 100
	for _, tc := range []struct {
		name    string
		during  func(t *testing.T, j *memJournal) // while the changed guest is read
		confirm bool
	}{
		{"another guest's result", func(t *testing.T, j *memJournal) { foreign(t, j, 101) }, false},
		{"its own result", func(t *testing.T, j *memJournal) { foreign(t, j, vmid) }, true},
		{"another observation of it", func(t *testing.T, j *memJournal) {
			ob := events.Observed{Meta: events.NewMeta("someone", "", t0), VMID: vmid, Cluster: events.DefaultCluster, Exists: true}
			body, err := events.Encode(ob)
			if err != nil {
				t.Fatal(err)
			}
			j.Publish(events.Message{Subject: events.Subject(events.KindObserved, events.DefaultCluster, vmid), Data: body})
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			px := newCountingPVE(3)
			clk := newClock()
			o, j := memObserver(t, px, clk, func(c *observer.Config) { c.VerifyOff = true })
			foreign(t, j, 999) // a journal that is not empty: reads carry an AfterSeq
			pass(t, o)
			// Renamed: the row shows it, so the next pass reads it at once.
			px.edit(vmid, func(c *pve.GuestConfig) { c.Name = "renamed" })
			px.mu.Lock()
			px.inv[0].Name = "renamed"
			px.mu.Unlock()
			px.onRead = func(v int) {
				if v == vmid {
					tc.during(t, j)
				}
			}
			clk.Advance(10 * time.Second)
			if st := pass(t, o); st.ConfigReads != 1 || st.Published != 1 {
				t.Fatalf("the change: %+v", st)
			}
			px.onRead = nil
			last := j.last()
			clk.Advance(10 * time.Second)
			st := pass(t, o)
			confirmed := len(j.observed(t, last)) == 1
			if confirmed != tc.confirm || st.ConfigReads != map[bool]int{false: 0, true: 1}[tc.confirm] {
				t.Fatalf("next pass: %+v, confirmed %v; want confirmed %v", st, confirmed, tc.confirm)
			}
		})
	}
}
