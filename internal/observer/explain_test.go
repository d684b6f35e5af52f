package observer_test

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
)

// A guest an executor changed has its inventory row change some seconds
// later (pvestatd's broadcast), after the executor journalled its
// read-back. When that read-back explains the new row, the observer does
// not read the guest at once (at an estate's scale, every changed guest
// of a node at once): it reads it first within the node's verification
// budget (explain.go).

// explainWorld is 40 running guests on one node (a verification period
// of 20 s at 2 reads a second, ConfigRefresh 10 s), all read by a first
// pass, then verified for a round 11 s later: every guest is due, none is
// past its period, and this second's budget is spent.
type explainWorld struct {
	px  *countingPVE
	clk *clock
	o   *observer.Observer
	j   *memJournal
	reg *prometheus.Registry
}

const explainVMID = 105

func newExplainWorld(t *testing.T, mod func(*observer.Config)) *explainWorld {
	t.Helper()
	w := &explainWorld{px: newCountingPVE(40), clk: newClock(), reg: prometheus.NewRegistry()}
	var verifyOff bool
	w.o, w.j = memObserver(t, w.px, w.clk, func(c *observer.Config) {
		c.Registerer = w.reg
		if mod != nil {
			mod(c)
		}
		verifyOff = c.VerifyOff
	})
	// Not an empty journal: a read with after_seq 0 (an unknown extent
	// gives it too) defers nothing.
	w.j.Publish(events.Message{Subject: events.Subject(events.KindDesired, events.DefaultCluster, 999), Data: []byte(`{}`)})
	pass(t, w.o)
	w.clk.Advance(11 * time.Second)
	if n, _ := w.o.VerifyRound(tctx(t)); n != 2 && !verifyOff {
		t.Fatalf("first round verified %d, want 2", n)
	}
	return w
}

// act changes the guest as an executor's config write and shutdown do:
// memory 1024, stopped, and the inventory row shows it (the broadcast
// came). It returns the read-back the executor would journal.
func (w *explainWorld) act(vmid int) *events.Observed {
	w.px.edit(vmid, func(c *pve.GuestConfig) { c.MemoryMiB = 1024 })
	w.row(vmid, func(r *pve.Resource) { r.Status, r.MaxMemMiB = "stopped", 1024 })
	return w.readBack(vmid, "stopped")
}

// readBack is what an executor reads back of the guest: its config as
// it is and status.
func (w *explainWorld) readBack(vmid int, status string) *events.Observed {
	w.px.mu.Lock()
	defer w.px.mu.Unlock()
	c := w.px.cfg[vmid]
	return &events.Observed{Meta: events.NewMeta("executor@test", "", w.clk.Now()), VMID: vmid, Cluster: events.DefaultCluster,
		Exists: true, Node: c.Ref.Node, Kind: events.QEMU, Status: status, Digest: c.Digest, Config: c.Managed(),
		ReadAt: w.clk.Now(), Source: events.SourceExecutor}
}

// row changes the guest's inventory row (out of band, or as a broadcast).
func (w *explainWorld) row(vmid int, fn func(*pve.Resource)) {
	w.px.mu.Lock()
	defer w.px.mu.Unlock()
	fn(&w.px.inv[vmid-100])
}

// result journals an executor's result carrying ob (nil: none, for
// explainVMID) and returns its sequence.
func (w *explainWorld) result(t *testing.T, ob *events.Observed) uint64 {
	t.Helper()
	vmid := explainVMID
	if ob != nil {
		vmid = ob.VMID
	}
	r := events.Result{Meta: events.NewMeta("executor@test", "", w.clk.Now()), ActionID: "a1", VMID: vmid,
		Cluster: events.DefaultCluster, Op: events.OpSetConfig, Status: events.ResultSucceeded, Executor: "executor@test", Observed: ob}
	body, err := events.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	return w.j.Publish(events.Message{Subject: events.Subject(events.KindResult, events.DefaultCluster, vmid), Data: body})
}

func (w *explainWorld) reads(vmid int) int {
	w.px.mu.Lock()
	defer w.px.mu.Unlock()
	return w.px.reads[vmid]
}

func (w *explainWorld) published(t *testing.T, after uint64, vmid int) []events.Observed {
	t.Helper()
	var out []events.Observed
	for _, ob := range w.j.observed(t, after) {
		if ob.VMID == vmid {
			out = append(out, ob)
		}
	}
	return out
}

// TestExplainedChangeReadByBudget: the executor's read-back explains the
// new row, so the pass reads nothing at once and publishes nothing of the
// guest (the fold holds the read-back, which says what the row says); the
// next verification round reads it first, ahead of the other guests due,
// and the pass after publishes it with an after_seq past the read-back.
func TestExplainedChangeReadByBudget(t *testing.T) {
	w := newExplainWorld(t, nil)
	seq := w.result(t, w.act(explainVMID))

	last := w.j.last()
	st := pass(t, w.o) // at the round's instant: this second's budget is spent
	if st.ConfigReads != 0 || st.Deferred != 1 || w.reads(explainVMID) != 1 {
		t.Fatalf("pass after the executor's change: %+v, %d reads of %d; want none at once, one deferred",
			st, w.reads(explainVMID), explainVMID)
	}
	if obs := w.published(t, last, explainVMID); len(obs) != 0 {
		t.Fatalf("a deferred guest published %+v; want nothing until it is read", obs)
	}

	w.clk.Advance(time.Second)
	if n, _ := w.o.VerifyRound(tctx(t)); n != 2 || w.reads(explainVMID) != 2 || w.reads(102) != 2 || w.reads(103) != 1 {
		t.Fatalf("next round: %d reads, %d of %d, %d of 102, %d of 103; want %d first, then the longest unverified (102)",
			n, w.reads(explainVMID), explainVMID, w.reads(102), w.reads(103), explainVMID)
	}

	w.clk.Advance(time.Second)
	last = w.j.last()
	st = pass(t, w.o)
	obs := w.published(t, last, explainVMID)
	if st.ConfigReads != st.Verified || len(obs) != 1 || obs[0].AfterSeq < seq || obs[0].Status != "stopped" ||
		obs[0].Config.MemoryMiB != 1024 {
		t.Fatalf("pass after the round: %+v, published %+v; want the read published with after_seq >= %d", st, obs, seq)
	}
	if got := readsMetric(t, w.reg, "deferred"); got != 1 {
		t.Fatalf("converge_observer_config_reads_total{reason=deferred} = %v, want 1", got)
	}
}

// TestUnexplainedChangeReadAtOnce: a row change the read-back does not
// account for (out of band) is read at once, as is every row change
// without a read-back journalled after the guest's last read, one the
// fold may not hold, or with verification off.
func TestUnexplainedChangeReadAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*observer.Config)
		// change acts on the world and journals what it wants; it
		// returns whether the row change is explained.
		change func(t *testing.T, w *explainWorld) bool
	}{
		{"explained", nil, func(t *testing.T, w *explainWorld) bool {
			w.result(t, w.act(explainVMID))
			return true
		}},
		{"maxmem", nil, func(t *testing.T, w *explainWorld) bool {
			w.result(t, w.act(explainVMID))
			w.row(explainVMID, func(r *pve.Resource) { r.MaxMemMiB = 2048 })
			return false
		}},
		{"maxcpu", nil, func(t *testing.T, w *explainWorld) bool {
			w.result(t, w.act(explainVMID))
			w.row(explainVMID, func(r *pve.Resource) { r.MaxCPU = 4 })
			return false
		}},
		{"node", nil, func(t *testing.T, w *explainWorld) bool {
			w.result(t, w.act(explainVMID))
			w.row(explainVMID, func(r *pve.Resource) { r.Node = "pve2" })
			return false
		}},
		{"lock", nil, func(t *testing.T, w *explainWorld) bool {
			w.result(t, w.act(explainVMID))
			w.row(explainVMID, func(r *pve.Resource) { r.Lock = "backup" })
			return false
		}},
		{"tags", nil, func(t *testing.T, w *explainWorld) bool {
			w.result(t, w.act(explainVMID))
			w.row(explainVMID, func(r *pve.Resource) { r.Tags = []string{"web"} })
			return false
		}},
		{"status", nil, func(t *testing.T, w *explainWorld) bool {
			w.result(t, w.act(explainVMID))
			w.row(explainVMID, func(r *pve.Resource) { r.Status = "running" })
			return false
		}},
		{"no result", nil, func(t *testing.T, w *explainWorld) bool {
			w.act(explainVMID)
			return false
		}},
		{"result without read-back", nil, func(t *testing.T, w *explainWorld) bool {
			w.act(explainVMID)
			w.result(t, nil)
			return false
		}},
		{"read-back before the last read", nil, func(t *testing.T, w *explainWorld) bool {
			// A rename the broadcast has not shown yet, read and published
			// (a maxcpu change makes the pass read it).
			w.px.edit(explainVMID, func(c *pve.GuestConfig) { c.Name = "renamed" })
			w.row(explainVMID, func(r *pve.Resource) { r.MaxCPU = 4 })
			if st := pass(t, w.o); st.ConfigReads != 1 || st.Published != 1 {
				t.Fatalf("rename: %+v", st)
			}
			w.result(t, w.readBack(explainVMID, "running"))
			// Read again after the read-back (it does not explain the
			// row: the name), publishing nothing new.
			w.row(explainVMID, func(r *pve.Resource) { r.MaxCPU = 3 })
			if st := pass(t, w.o); st.ConfigReads != 1 || st.Published != 0 {
				t.Fatalf("read after the read-back: %+v", st)
			}
			// The broadcast, and a stop: the read-back says the name, but
			// the observer's last read came after it, and neither says
			// the status (caughtup_test.go has the row without the stop).
			w.row(explainVMID, func(r *pve.Resource) { r.Name, r.Status = "renamed", "stopped" })
			return false
		}},
		{"an observation journalled after the read-back", func(c *observer.Config) { c.ObservedTTL = 40 * time.Second }, func(t *testing.T, w *explainWorld) bool {
			ob := w.readBack(explainVMID, "stopped")
			ob.Config.MemoryMiB = 1024
			w.result(t, ob) // the row still lags
			// Half the TTL since the first pass: every snapshot published
			// again as it is, 105's after the read-back.
			w.clk.Advance(10 * time.Second)
			if st := pass(t, w.o); st.Published != 40 {
				t.Fatalf("republish: %+v", st)
			}
			w.act(explainVMID)
			return false
		}},
		{"last read without a known extent", nil, func(t *testing.T, w *explainWorld) bool {
			w.j.mu.Lock()
			w.j.infoErr = errors.New("journal unreachable")
			w.j.mu.Unlock()
			// A row change the snapshot does not show: read at once with
			// after_seq 0, nothing published (so nothing to confirm).
			w.row(explainVMID, func(r *pve.Resource) { r.MaxCPU = 4 })
			if st := pass(t, w.o); st.ConfigReads != 1 || st.Published != 0 {
				t.Fatalf("read without an extent: %+v", st)
			}
			w.j.mu.Lock()
			w.j.infoErr = nil
			w.j.mu.Unlock()
			w.row(explainVMID, func(r *pve.Resource) { r.MaxCPU = 3 })
			w.result(t, w.act(explainVMID))
			return false
		}},
		{"derived, an observation journalled after its basis", nil, func(t *testing.T, w *explainWorld) bool {
			ob := w.act(explainVMID)
			ob.AfterSeq, ob.Digest = 1, "" // the first pass's observations came later
			w.result(t, ob)
			return false
		}},
		{"derived, nothing observed after its basis", nil, func(t *testing.T, w *explainWorld) bool {
			ob := w.act(explainVMID)
			ob.AfterSeq, ob.Digest = w.j.last(), ""
			w.result(t, ob)
			return true
		}},
		{"snapshot due again", func(c *observer.Config) { c.ObservedTTL = 40 * time.Second }, func(t *testing.T, w *explainWorld) bool {
			w.clk.Advance(10 * time.Second) // half the TTL since the first pass
			w.result(t, w.act(explainVMID))
			return false
		}},
		{"verification off", func(c *observer.Config) { c.VerifyOff = true }, func(t *testing.T, w *explainWorld) bool {
			w.result(t, w.act(explainVMID))
			return false
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newExplainWorld(t, tc.mod)
			explained := tc.change(t, w)
			before := w.reads(explainVMID)
			st := pass(t, w.o)
			atOnce := w.reads(explainVMID) - before
			switch {
			case explained && (st.Deferred != 1 || atOnce != 0):
				t.Fatalf("%+v, %d reads at once; want the change deferred", st, atOnce)
			case !explained && (st.Deferred != 0 || atOnce != 1 || st.ConfigReads-st.Verified != 1):
				t.Fatalf("%+v, %d reads at once; want it read at once", st, atOnce)
			}
		})
	}
}

// readsMetric is converge_observer_config_reads_total{reason}.
func readsMetric(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "converge_observer_config_reads_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestLaggingRowExplainedByEarlierReadBack: a change of two steps (a
// config write, then a shutdown) whose broadcast shows the first step
// after the second's read-back was journalled: the row (memory 1024,
// still running) is what the write's read-back says, not the newest
// (stopped). It is the broadcast trailing the executor, not news: the
// guest is verified within the budget, not read at once. A row no
// read-back since the last read explains is still read at once.
func TestLaggingRowExplainedByEarlierReadBack(t *testing.T) {
	for _, tc := range []struct {
		name   string
		maxmem int64
		defer_ bool
	}{{"lagging", 1024, true}, {"unexplained", 2048, false}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newExplainWorld(t, nil)
			w.px.edit(explainVMID, func(c *pve.GuestConfig) { c.MemoryMiB = 1024 })
			w.result(t, w.readBack(explainVMID, "running"))      // the write's
			w.result(t, w.readBack(explainVMID, "stopped"))      // the shutdown's
			w.px.setLive(map[int]string{explainVMID: "stopped"}) // the truth; the row trails it
			w.row(explainVMID, func(r *pve.Resource) { r.MaxMemMiB = tc.maxmem })
			wantDeferred(t, w, tc.defer_)
		})
	}
}

// TestLaggingRowShowsLastRead: the budget read the guest between the two
// steps of a change (after the write, before the shutdown); the broadcast
// then shows the write, what that read found, after the shutdown's
// read-back was journalled. Trailing, not news: verified within the
// budget, not read at once.
func TestLaggingRowShowsLastRead(t *testing.T) {
	w := newExplainWorld(t, nil)
	w.writeReadThenShutdown(t)
	w.px.setLive(map[int]string{explainVMID: "stopped"})
	w.row(explainVMID, func(r *pve.Resource) { r.MaxMemMiB = 1024 }) // the write, at last
	reads := w.reads(explainVMID)
	if st := pass(t, w.o); st.Deferred != 1 || w.reads(explainVMID) != reads {
		t.Fatalf("pass: %+v, %d reads of %d (was %d); want it deferred, not read", st, w.reads(explainVMID), explainVMID, reads)
	}
}

// TestReadFromEmptyJournalDefers: a guest last read when the journal was
// still empty (after_seq 0, the extent known) has a row change its
// read-back explains verified within the budget like any other; only a
// read whose extent was unknown defers nothing. At an estate's end, the
// guests a change reached last had been read only by the first pass, and
// their broadcasts were read at once: 10 reads to one node in a second.
func TestReadFromEmptyJournalDefers(t *testing.T) {
	w := &explainWorld{px: newCountingPVE(40), clk: newClock(), reg: prometheus.NewRegistry()}
	w.o, w.j = memObserver(t, w.px, w.clk, func(c *observer.Config) { c.Registerer = w.reg })
	if st := pass(t, w.o); st.AfterSeq != 0 || st.ConfigReads != 40 {
		t.Fatalf("first pass: %+v; want every guest read with after_seq 0", st)
	}
	w.clk.Advance(time.Second)
	w.result(t, w.act(explainVMID))
	// The budget has room: the deferred guest is its first read.
	if st := pass(t, w.o); st.Deferred != 1 || st.ConfigReads != st.Verified || st.DeferredReads != 1 {
		t.Fatalf("pass after the executor's change: %+v; want it deferred, read within the budget", st)
	}
}

// TestRowOfWriteWhileTaskRuns: the broadcast shows a config write (memory
// 1024) while the guest's next action, its shutdown, runs (its newest
// result says the task started, no read-back): the write's read-back,
// which the fold holds, explains the row, so the guest is verified within
// the budget, not read at once. A row it does not explain is read.
func TestRowOfWriteWhileTaskRuns(t *testing.T) {
	for _, tc := range []struct {
		name   string
		maxmem int64
		defer_ bool
	}{{"explained", 1024, true}, {"unexplained", 2048, false}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newExplainWorld(t, nil)
			w.px.edit(explainVMID, func(c *pve.GuestConfig) { c.MemoryMiB = 1024 })
			w.result(t, w.readBack(explainVMID, "running")) // the write's
			w.result(t, nil)                                // the shutdown's task started
			w.row(explainVMID, func(r *pve.Resource) { r.MaxMemMiB = tc.maxmem })
			wantDeferred(t, w, tc.defer_)
		})
	}
}

// wantDeferred checks the next pass: the guest deferred to the budget,
// nothing read at once, or read at once and not deferred.
func wantDeferred(t *testing.T, w *explainWorld, deferred bool) {
	t.Helper()
	st := pass(t, w.o)
	if deferred && (st.ConfigReads != 0 || st.Deferred != 1) || !deferred && (st.ConfigReads != 1 || st.Deferred != 0) {
		t.Fatalf("pass: %+v; want deferred %v", st, deferred)
	}
}

// writeReadThenShutdown journals a write's read-back (memory 1024,
// running), lets the budget read the guest and a pass publish it, then
// journals a shutdown's read-back (stopped): the broadcast has shown
// neither yet.
func (w *explainWorld) writeReadThenShutdown(t *testing.T) {
	t.Helper()
	w.px.edit(explainVMID, func(c *pve.GuestConfig) { c.MemoryMiB = 1024 })
	w.result(t, w.readBack(explainVMID, "running")) // the write's
	for w.reads(explainVMID) < 2 {                  // the budget reads it: memory 1024, running
		w.clk.Advance(time.Second)
		if _, failed := w.o.VerifyRound(tctx(t)); failed != 0 {
			t.Fatal("verification read failed")
		}
	}
	pass(t, w.o)                                    // publishes what it read
	w.result(t, w.readBack(explainVMID, "stopped")) // the shutdown's
}
