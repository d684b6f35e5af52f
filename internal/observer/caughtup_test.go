package observer_test

import (
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pve"
)

// TestRowCaughtUpAdopted: the budget reads a guest after an executor's
// read-back of it was journalled, before pvestatd's broadcast shows the
// action; when the broadcast comes, the row says what that read and the
// journal already say. It is adopted without a read (before, it was read
// again at once, outside the budget: right after a mass change, a node's
// share in one burst), and nothing is published. A row that says anything
// else is read at once.
func TestRowCaughtUpAdopted(t *testing.T) {
	for _, tc := range []struct {
		name  string
		row   func(r *pve.Resource) // the broadcast, after the read
		adopt bool
	}{
		{"the broadcast", func(r *pve.Resource) { r.Status, r.MaxMemMiB = "stopped", 1024 }, true},
		{"a status neither says", func(r *pve.Resource) { r.Status, r.MaxMemMiB = "paused", 1024 }, false},
		{"memory the read did not find", func(r *pve.Resource) { r.Status, r.MaxMemMiB = "stopped", 2048 }, false},
		{"a lock", func(r *pve.Resource) { r.Status, r.MaxMemMiB, r.Lock = "stopped", 1024, "backup" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newExplainWorld(t, nil)
			// The executor's config write and shutdown, read back; the
			// broadcast has not come.
			w.px.edit(explainVMID, func(c *pve.GuestConfig) { c.MemoryMiB = 1024 })
			w.result(t, w.readBack(explainVMID, "stopped"))
			// Verified after the read-back, its stopped status confirmed
			// by status/current, and published.
			w.px.setLive(map[int]string{explainVMID: "stopped"})
			for i := 0; w.reads(explainVMID) < 2; i++ {
				if i == 5 {
					t.Fatalf("%d not verified", explainVMID)
				}
				w.clk.Advance(time.Second)
				w.o.VerifyRound(tctx(t))
			}
			last := w.j.last()
			pass(t, w.o)
			if obs := w.published(t, last, explainVMID); len(obs) != 1 || obs[0].Status != "stopped" || obs[0].Config.MemoryMiB != 1024 {
				t.Fatalf("after the read: published %+v", obs)
			}
			// The broadcast.
			w.row(explainVMID, tc.row)
			last = w.j.last()
			before := w.reads(explainVMID)
			st := pass(t, w.o)
			atOnce := w.reads(explainVMID) - before
			switch {
			case tc.adopt && (st.CaughtUp != 1 || st.Deferred != 0 || atOnce != 0 || len(w.published(t, last, explainVMID)) != 0):
				t.Fatalf("%+v, %d reads at once, published %+v; want the row adopted", st, atOnce, w.published(t, last, explainVMID))
			case !tc.adopt && (st.CaughtUp != 0 || atOnce != 1):
				t.Fatalf("%+v, %d reads at once; want it read at once", st, atOnce)
			}
		})
	}
}
