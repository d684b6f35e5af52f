package observer_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
	ijournal "github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
)

// A guest's status in /cluster/resources is pvestatd's last broadcast
// (about every 10 s). These tests freeze it (ResourcesLag of an hour: the
// broadcast of the first inventory call is all there is), act on a guest
// as an executor does (the task, then a result carrying a read-back), and
// let the observer read the guest's config again, as a verification or a
// row change makes it do. Before status.go the observer journalled the
// lagging status with an AfterSeq after the read-back, the fold adopted it,
// and the planner repeated the finished action (issue 34: a second
// shutdown of guest 104, a second start of guest 127).

// lagWorld is a simulator with a frozen broadcast, a journal and an
// observer that re-reads every config every pass.
type lagWorld struct {
	s   *pvesim.Sim
	c   *pve.Client
	b   *bus.Bus
	clk *clock
	o   *observer.Observer
	j   *journal
}

func newLagWorld(t *testing.T) *lagWorld {
	t.Helper()
	s, c := demo(t)
	if err := s.UpdateFaults(func(f *pvesim.Faults) { f.ResourcesLag = pvesim.Duration(time.Hour) }); err != nil {
		t.Fatal(err)
	}
	w := &lagWorld{s: s, c: c, b: bustest.New(t), clk: newClock()}
	w.o = newObserver(t, c, w.b, w.clk, func(c *observer.Config) { c.ConfigRefresh = time.Second; c.VerifyRate = 1000 })
	w.j = newJournal(t, w.b)
	w.pass(t)
	return w
}

// pass runs an observer pass 10 s later and returns what it published.
func (w *lagWorld) pass(t *testing.T) batch {
	t.Helper()
	w.clk.Advance(10 * time.Second)
	pass(t, w.o)
	return w.j.next()
}

// readBack journals the result of an action on vmid as an executor does:
// the guest read back (status/current and its config) after the task.
func (w *lagWorld) readBack(t *testing.T, vmid int, op events.Op) {
	t.Helper()
	r := ref(t, w.s, vmid)
	st, err := w.c.GuestStatus(tctx(t), r)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := w.c.GuestConfig(tctx(t), r)
	if err != nil {
		t.Fatal(err)
	}
	now := w.clk.Now()
	res := events.Result{Meta: events.NewMeta("executor@test", "", now), ActionID: "a-" + string(op), VMID: vmid,
		Cluster: "pve", Op: op, Status: events.ResultSucceeded, Executor: "executor@test",
		Observed: &events.Observed{Meta: events.NewMeta("executor@test", "", now), VMID: vmid, Cluster: "pve", Exists: true,
			Node: r.Node, Kind: events.GuestKind(r.Kind), Status: st.Status, Digest: cfg.Digest, Config: cfg.Managed(),
			Pending: cfg.ManagedPending(), ReadAt: now, Source: events.SourceExecutor}}
	body, err := events.Encode(res)
	if err != nil {
		t.Fatal(err)
	}
	m := events.Message{Subject: events.Subject(events.KindResult, "pve", vmid), Data: body}
	if _, err := w.b.Append(tctx(t), m, ijournal.Expect{}); err != nil {
		t.Fatal(err)
	}
	w.j.seq = w.j.lastSeq() // what the test journalled is not the observer's
}

func (w *lagWorld) setCores(t *testing.T, vmid, cores int) {
	t.Helper()
	tr, err := w.c.UpdateConfig(tctx(t), ref(t, w.s, vmid), pve.ConfigChange{Set: map[string]string{"cores": strconv.Itoa(cores)}})
	if tr.UPID != "" || err != nil {
		mustTask(t, w.c, tr, err)
	}
}

// TestLaggingStatusAfterShutdown is guest 104's history: shutdown
// succeeded (read back stopped), cores written (read back stopped, 3
// cores), then the observer reads the config while the inventory still
// says running. The observation it journals must say stopped.
func TestLaggingStatusAfterShutdown(t *testing.T) {
	w := newLagWorld(t)
	const vmid = 104 // running, 1 core
	r := ref(t, w.s, vmid)
	tr, err := w.c.Shutdown(tctx(t), r, time.Minute, true)
	mustTask(t, w.c, tr, err)
	w.readBack(t, vmid, events.OpShutdown)
	w.setCores(t, vmid, 3)
	w.readBack(t, vmid, events.OpSetConfig)
	if rs, err := w.c.Inventory(tctx(t)); err != nil || statusOf(rs, vmid) != "running" {
		t.Fatalf("the inventory should still lag (running): %v %v", err, rs)
	}

	got := w.pass(t)
	ob, ok := got.observed[vmid]
	if !ok || ob.Config.Cores != 3 || ob.Status != "stopped" {
		t.Fatalf("observation after the read-backs: %s %+v; want cores 3, status stopped (not the inventory's running)", got, ob)
	}
	// The inventory still lags (a stuck pvestatd): the next check of the
	// guest (this world verifies every config every pass) reads its
	// status again, once, and journals nothing new.
	w.clk.Advance(10 * time.Second)
	st := pass(t, w.o)
	got = w.j.next()
	if _, again := got.observed[vmid]; again && got.observed[vmid].Status != "stopped" {
		t.Fatalf("second pass journalled %+v", got.observed[vmid])
	}
	if st.StatusReads != 1 {
		t.Fatalf("second pass: %d status reads, want the guest's one", st.StatusReads)
	}
}

// TestLaggingStatusAfterStart is guest 127's history with demo guest 103:
// start succeeded (read back running), cores written, then the observer
// reads the config while the inventory still says stopped.
func TestLaggingStatusAfterStart(t *testing.T) {
	w := newLagWorld(t)
	const vmid = 103 // stopped, 2 cores
	tr, err := w.c.Start(tctx(t), ref(t, w.s, vmid))
	mustTask(t, w.c, tr, err)
	w.readBack(t, vmid, events.OpStart)
	w.setCores(t, vmid, 3) // pending on a running VM: the config read shows it
	w.readBack(t, vmid, events.OpSetConfig)

	got := w.pass(t)
	ob, ok := got.observed[vmid]
	if !ok || ob.Status != "running" {
		t.Fatalf("observation after the read-backs: %s %+v; want status running (not the inventory's stopped)", got, ob)
	}
}

// TestStatusChangeConfirmed: a status the inventory shows that nothing
// journalled explains (a guest stopped by hand) is read from status/current
// before it is journalled, and journalled as read.
func TestStatusChangeConfirmed(t *testing.T) {
	w := newLagWorld(t)
	if err := w.s.UpdateFaults(func(f *pvesim.Faults) { f.ResourcesLag = 0 }); err != nil {
		t.Fatal(err)
	}
	const vmid = 100
	tr, err := w.c.Stop(tctx(t), ref(t, w.s, vmid))
	mustTask(t, w.c, tr, err)
	w.clk.Advance(10 * time.Second)
	st := pass(t, w.o)
	got := w.j.next()
	if got.observed[vmid].Status != "stopped" || st.StatusReads != 1 {
		t.Fatalf("%+v %s: want the stop journalled after one status read", st, got)
	}
}

// TestReadBackNoLongerTrue: the fold holds an executor's read-back
// (stopped) that the observer never journalled; the guest is started by
// hand before pvestatd ever broadcast it stopped, so the inventory shows
// running throughout, as the observer last journalled. The next read of
// the guest finds the read-back contradicted, confirms running and
// journals it, although it equals the observer's own last observation.
func TestReadBackNoLongerTrue(t *testing.T) {
	w := newLagWorld(t)
	const vmid = 100 // running
	r := ref(t, w.s, vmid)
	tr, err := w.c.Shutdown(tctx(t), r, time.Minute, true)
	mustTask(t, w.c, tr, err)
	w.readBack(t, vmid, events.OpShutdown)
	tr, err = w.c.Start(tctx(t), r) // by hand
	mustTask(t, w.c, tr, err)

	got := w.pass(t)
	if ob, ok := got.observed[vmid]; !ok || ob.Status != "running" {
		t.Fatalf("%s %+v: want running journalled over the read-back's stopped", got, ob)
	}
}

func statusOf(rs []pve.Resource, vmid int) string {
	for _, r := range rs {
		if r.VMID == vmid {
			return r.Status
		}
	}
	return ""
}

// TestLaggingStatusAfterReboot: a reboot that applied pending cores was
// read back running; pvestatd's cycle caught the guest in the reboot's
// stop, so the inventory says stopped while status/current says running.
// The observer's next read of the guest journals running: the lagging
// status plans nothing. (The simulator applies a reboot at once, so it
// cannot show this window; the inventory here is scripted.)
func TestLaggingStatusAfterReboot(t *testing.T) {
	px := newCountingPVE(1)
	clk := newClock()
	o, j := memObserver(t, px, clk, func(c *observer.Config) { c.ConfigRefresh = time.Second; c.VerifyRate = 100 })
	pass(t, o)
	const vmid = 100
	px.edit(vmid, func(c *pve.GuestConfig) { c.Cores = 4 }) // the reboot applied the pending cores
	after := memReadBack(t, j, vmid, events.OpReboot, "running", 4)
	px.mu.Lock()
	px.inv[0].Status, px.live = "stopped", map[int]string{vmid: "running"}
	px.mu.Unlock()

	clk.Advance(10 * time.Second)
	st := pass(t, o)
	obs := j.observed(t, after)
	if len(obs) != 1 || obs[0].Status != "running" || obs[0].Config.Cores != 4 || st.StatusReads != 1 {
		t.Fatalf("%+v: observed %+v, want running with 4 cores after one status read", st, obs)
	}
}

// TestStatusDecisionEndsWithItsRow: a status read directly while the
// inventory lagged (running, after converge's start, while the row still
// said stopped) stands only while the row shows what it showed then. The
// row catches up (running), then the guest is stopped by hand and the row
// says stopped again: that is news, read directly and journalled, not the
// old decision's running (found by e2e TestUpConvergesFiftyGuests: the
// drift was never corrected).
func TestStatusDecisionEndsWithItsRow(t *testing.T) {
	w := startedWhileLagging(t)
	o, j, clk, setRow := w.o, w.j, w.clk, w.setRow
	setRow("running", nil) // pvestatd caught up
	clk.Advance(10 * time.Second)
	pass(t, o)
	after := j.Entries()[len(j.Entries())-1].Seq
	setRow("stopped", nil) // stopped by hand; the row shows it
	clk.Advance(10 * time.Second)
	st := pass(t, o)
	obs := j.observed(t, after)
	if len(obs) != 1 || obs[0].Status != "stopped" || st.StatusReads != 1 {
		t.Fatalf("%+v: observed %+v, want the stop journalled after one status read", st, obs)
	}
}

// TestDecisionDoesNotHideALaterChange: a status read while the row lagged
// (running, after converge's start, the row still stopped) must not hide
// the guest stopping again before pvestatd ever broadcast it running: the
// row never changes, yet the next check of the guest compares the
// inventory's own status with the journal, reads it and journals the stop
// (found by review: the cached running agreed with the journal for good).
func TestDecisionDoesNotHideALaterChange(t *testing.T) {
	w := startedWhileLagging(t)
	o, j, clk, setRow := w.o, w.j, w.clk, w.setRow
	after := j.Entries()[len(j.Entries())-1].Seq
	setRow("stopped", nil) // it stopped again; the row never showed it running
	for range 3 {
		clk.Advance(10 * time.Second)
		pass(t, o)
	}
	var last *events.Observed
	for _, ob := range j.observed(t, after) {
		last = &ob
	}
	if last == nil || last.Status != "stopped" {
		t.Fatalf("after the guest stopped again: last observation %+v, want stopped", last)
	}
}

// TestContradictionConfirmed: the read-back a direct read contradicts was
// journalled during the pass (after its AfterSeq), so the projector keeps
// it over the contradiction; the observation equals the observer's last,
// yet the next pass publishes it once more with a newer AfterSeq (found by
// review: it was taken for confirmed, and the fold stayed wrong until the
// next verification).
func TestContradictionConfirmed(t *testing.T) {
	px := newCountingPVE(1)
	clk := newClock()
	// Verified at most every 15 s: the pass 5 s after the contradiction
	// reads the guest only because it is unconfirmed.
	o, j := memObserver(t, px, clk, func(c *observer.Config) { c.ConfigRefresh = 15 * time.Second; c.VerifyRate = 100 })
	const vmid = 100 // running, and the truth stays running
	pass(t, o)
	var readBackSeq uint64
	px.onRead = func(int) {
		if readBackSeq != 0 {
			return
		}
		// A read-back that says stopped (a stop that a start by hand
		// undid at once), journalled while this pass reads.
		readBackSeq = memReadBack(t, j, vmid, events.OpStop, "stopped", 3)
	}
	clk.Advance(20 * time.Second)
	pass(t, o)
	px.onRead = nil
	obs := j.observed(t, readBackSeq)
	if len(obs) != 1 || obs[0].Status != "running" || obs[0].AfterSeq >= readBackSeq {
		t.Fatalf("the contradiction: %+v, want running with an AfterSeq before the read-back %d", obs, readBackSeq)
	}
	clk.Advance(5 * time.Second)
	pass(t, o)
	obs = j.observed(t, readBackSeq)
	if len(obs) != 2 || obs[1].Status != "running" || obs[1].AfterSeq < readBackSeq {
		t.Fatalf("next pass: %+v, want running published again with an AfterSeq reaching the read-back %d", obs, readBackSeq)
	}
}

// lagged is a guest (100) that converge started while the inventory still
// said stopped: the observer read it running and journalled that.
type lagged struct {
	o      *observer.Observer
	j      *memJournal
	clk    *clock
	setRow func(status string, live map[int]string)
}

// startedWhileLagging: the guest listed stopped and observed so; an
// executor's start read back running; the row still says stopped while
// status/current says running, and a pass reads that.
func startedWhileLagging(t *testing.T) lagged {
	t.Helper()
	px := newCountingPVE(1)
	clk := newClock()
	o, j := memObserver(t, px, clk, func(c *observer.Config) { c.ConfigRefresh = time.Second; c.VerifyRate = 100 })
	const vmid = 100
	setRow := func(status string, live map[int]string) {
		px.mu.Lock()
		px.inv[0].Status, px.live = status, live
		px.mu.Unlock()
	}
	setRow("stopped", nil)
	pass(t, o)
	memReadBack(t, j, vmid, events.OpStart, "running", 3)
	setRow("stopped", map[int]string{vmid: "running"})
	clk.Advance(10 * time.Second)
	pass(t, o)
	return lagged{o: o, j: j, clk: clk, setRow: setRow}
}

// memReadBack journals an executor's successful result of op on a QEMU
// guest of pve1, read back with status and cores, and returns its
// sequence.
func memReadBack(t *testing.T, j *memJournal, vmid int, op events.Op, status string, cores int) uint64 {
	t.Helper()
	r := events.Result{ActionID: "a-" + string(op), VMID: vmid, Cluster: "pve", Op: op, Status: events.ResultSucceeded,
		Observed: &events.Observed{VMID: vmid, Cluster: "pve", Exists: true, Node: "pve1", Kind: events.QEMU, Status: status,
			Config: events.GuestConfig{Cores: cores, MemoryMiB: 512}, Source: events.SourceExecutor}}
	body, err := events.Encode(r)
	if err != nil {
		t.Error(err) // Error, not Fatal: it may run on a read's goroutine
		return 0
	}
	return j.Publish(events.Message{Subject: events.Subject(events.KindResult, "pve", vmid), Data: body})
}
