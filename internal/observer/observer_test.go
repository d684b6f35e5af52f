package observer_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
)

// Demo guests (pvesim.Options.Guests = 6, 2 nodes):
//
//	100 qemu pve1 running cores 1 mem  512   103 qemu pve2 stopped cores 2 mem  512
//	101 qemu pve2 stopped cores 2 mem 1024   104 qemu pve1 running cores 1 mem 1024
//	102 lxc  pve1 running cores 1 mem 2048   105 lxc  pve2 stopped cores 2 mem 2048
const demoGuests = 6

func demo(t *testing.T) (*pvesim.Sim, *pve.Client) {
	t.Helper()
	s := startSim(t, pvesim.Options{Nodes: 2, Guests: demoGuests})
	return s, newClient(t, s)
}

// TestFirstPassThenIdle: the first pass publishes every guest once and a
// heartbeat; an idle pass makes exactly one Proxmox call and publishes only
// a heartbeat.
func TestFirstPassThenIdle(t *testing.T) {
	s, c := demo(t)
	b := bustest.New(t)
	clk := newClock()
	o := newObserver(t, c, b, clk)
	j := newJournal(t, b)

	before := s.Calls()
	st := pass(t, o)
	if st.Pass != 1 || !st.Reachable || st.Guests != demoGuests || st.ConfigReads != demoGuests ||
		st.Published != demoGuests || st.Gone != 0 || st.ConfigErrors != 0 || st.PublishErrors != 0 {
		t.Fatalf("first pass stats %+v", st)
	}
	// The pending list carries applied values, pending ones and the
	// digest; the cluster's facts are two calls (GET /version and the HA
	// groups), read on the first pass and then every factsEvery passes.
	if calls := s.Calls() - before; calls != 1+2+demoGuests {
		t.Fatalf("first pass made %d calls, want inventory + facts + 1 per guest = %d", calls, 1+2+demoGuests)
	}
	got := j.next()
	if len(got.observed) != demoGuests || len(got.heartbeats) != 1 {
		t.Fatalf("first pass published %s", got)
	}
	hb := got.heartbeats[0]
	if !hb.Reachable || hb.Pass != 1 || hb.Guests != demoGuests || hb.Observer != "observer@test" ||
		hb.Interval != time.Hour || hb.Cluster != events.DefaultCluster || hb.Error != "" || hb.Publisher != "observer@test" {
		t.Fatalf("heartbeat %+v", hb)
	}

	vm := got.observed[101]
	want101 := events.Observed{VMID: 101, Cluster: "pve", Exists: true, Node: "pve2", Kind: events.QEMU,
		Status: "stopped", Config: events.GuestConfig{Name: "vm-101", Description: "", Tags: []string{"demo"},
			Cores: 2, MemoryMiB: 1024}, ReadAt: t0, Source: events.SourceObserver}
	if g, _ := s.Guest(101); vm.Digest != g.Digest || vm.Digest == "" {
		t.Fatalf("digest %q, simulator has %q", vm.Digest, g.Digest)
	}
	if vm.Publisher != "observer@test" || vm.Schema != events.SchemaVersion || !vm.Time.Equal(t0) {
		t.Fatalf("meta %+v", vm.Meta)
	}
	vm.Meta, vm.Digest = events.Meta{}, ""
	if !equalObserved(vm, want101) {
		t.Fatalf("observed 101:\n got %+v\nwant %+v", vm, want101)
	}
	ct := got.observed[102]
	if ct.Kind != events.LXC || ct.Status != "running" || ct.Config.Name != "ct-102" || ct.Config.MemoryMiB != 2048 ||
		ct.Config.Cores != 1 || ct.Pending != nil {
		t.Fatalf("observed 102: %+v", ct)
	}

	// Idle: exactly one Proxmox call, only a heartbeat.
	clk.Advance(10 * time.Second)
	before = s.Calls()
	st = pass(t, o)
	if calls := s.Calls() - before; calls != 1 {
		t.Fatalf("idle pass made %d Proxmox calls, want 1", calls)
	}
	if st.Pass != 2 || st.ConfigReads != 0 || st.Published != 0 || st.Guests != demoGuests {
		t.Fatalf("idle pass stats %+v", st)
	}
	if hb := onlyHeartbeat(t, j.next(), true); hb.Pass != 2 || !hb.Time.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("heartbeat %+v", hb)
	}
}

// TestChangesBehindOurBack: changes made directly in Proxmox are published
// on the next pass; one invisible in /cluster/resources (description) waits
// for the config refresh or a resync.
func TestChangesBehindOurBack(t *testing.T) {
	s, c := demo(t)
	b := bustest.New(t)
	clk := newClock()
	// Passes alone verify here (no rounds between them): a budget of
	// 100 a second per node lets each pass verify its share.
	o := newObserver(t, c, b, clk, func(c *observer.Config) { c.VerifyRate = 100 })
	j := newJournal(t, b)
	pass(t, o)
	j.next()

	// Power stop of a running VM.
	r100 := ref(t, s, 100)
	tr, err := c.Stop(tctx(t), r100)
	mustTask(t, c, tr, err)
	readAt := clk.Advance(10 * time.Second)
	st := pass(t, o)
	got := j.next()
	if st.ConfigReads != 1 || st.Published != 1 || len(got.observed) != 1 {
		t.Fatalf("after stop: %+v, %s", st, got)
	}
	if ob := got.observed[100]; ob.Status != "stopped" || !ob.ReadAt.Equal(readAt) || !ob.Exists {
		t.Fatalf("after stop: %+v", ob)
	}

	// Cores of a stopped VM: applied at once, visible as maxcpu.
	r101 := ref(t, s, 101)
	tr, err = c.UpdateConfig(tctx(t), r101, pve.ConfigChange{Set: map[string]string{"cores": "4"}})
	mustTask(t, c, tr, err)
	clk.Advance(10 * time.Second)
	pass(t, o)
	got = j.next()
	if ob, ok := got.observed[101]; !ok || len(got.observed) != 1 || ob.Config.Cores != 4 || ob.Pending != nil {
		t.Fatalf("after cores change: %s %+v", got, ob)
	}

	// Description: /cluster/resources does not show it, so an idle pass
	// misses it ...
	r103 := ref(t, s, 103)
	tr, err = c.UpdateConfig(tctx(t), r103, pve.ConfigChange{Set: map[string]string{"description": "hand edit\n"}})
	mustTask(t, c, tr, err)
	clk.Advance(10 * time.Second)
	before := s.Calls()
	pass(t, o)
	if calls := s.Calls() - before; calls != 1 {
		t.Fatalf("idle pass made %d calls", calls)
	}
	onlyHeartbeat(t, j.next(), true)

	// ... and the config refresh catches it: after a whole period every
	// guest has been re-read, and only the changed one is published.
	var reads int
	for range 4 {
		clk.Advance(refresh / 4)
		reads += pass(t, o).ConfigReads
	}
	got = j.next()
	if reads < demoGuests || len(got.observed) != 1 || got.observed[103].Config.Description != "hand edit" {
		t.Fatalf("refresh: %d reads, %s %+v", reads, got, got.observed[103])
	}

	// Resync re-reads everything at once.
	tr, err = c.UpdateConfig(tctx(t), r103, pve.ConfigChange{Set: map[string]string{"description": "second edit"}})
	mustTask(t, c, tr, err)
	o.Resync()
	o.Resync() // coalesced
	clk.Advance(time.Second)
	st = pass(t, o)
	got = j.next()
	if st.ConfigReads != demoGuests || len(got.observed) != 1 || got.observed[103].Config.Description != "second edit" {
		t.Fatalf("resync: %+v %s", st, got)
	}
	clk.Advance(time.Second)
	if st := pass(t, o); st.ConfigReads != 0 {
		t.Fatalf("a resync must apply to one pass only: %+v", st)
	}
}

// TestGoneAndUnreachable: a deleted guest is published as gone; an
// unreachable Proxmox yields heartbeats saying so and never "gone".
func TestGoneAndUnreachable(t *testing.T) {
	s, c := demo(t)
	b := bustest.New(t)
	clk := newClock()
	o := newObserver(t, c, b, clk)
	j := newJournal(t, b)
	pass(t, o)
	j.next()

	tr, err := c.Delete(tctx(t), ref(t, s, 101), true, false)
	mustTask(t, c, tr, err)
	readAt := clk.Advance(10 * time.Second)
	st := pass(t, o)
	got := j.next()
	ob, ok := got.observed[101]
	if !ok || len(got.observed) != 1 || st.Gone != 1 || st.Guests != demoGuests-1 {
		t.Fatalf("after delete: %+v %s", st, got)
	}
	if ob.Exists || ob.VMID != 101 || ob.Cluster != "pve" || !ob.ReadAt.Equal(readAt) || ob.Source != events.SourceObserver ||
		ob.Publisher != "observer@test" {
		t.Fatalf("gone event %+v", ob)
	}
	if hb := got.heartbeats[0]; hb.Guests != demoGuests-1 {
		t.Fatalf("heartbeat %+v", hb)
	}
	// Gone is said once.
	clk.Advance(10 * time.Second)
	pass(t, o)
	onlyHeartbeat(t, j.next(), true)

	// Proxmox unreachable; meanwhile guest 103 is deleted and 104 stopped.
	s.SetUnreachable(time.Hour)
	for i := range 3 {
		clk.Advance(10 * time.Second)
		st, err := o.Pass(tctx(t))
		if err == nil || st.Reachable {
			t.Fatalf("unreachable pass %d: %+v %v", i, st, err)
		}
		hb := onlyHeartbeat(t, j.next(), false)
		if hb.Error == "" || strings.Contains(hb.Error, simSecret) || hb.Guests != demoGuests-1 || hb.Pass != st.Pass {
			t.Fatalf("unreachable heartbeat %+v", hb)
		}
		if i == 0 {
			s.SetUnreachable(0)
			tr, err := c.Delete(tctx(t), ref(t, s, 103), true, false)
			mustTask(t, c, tr, err)
			tr, err = c.Stop(tctx(t), ref(t, s, 104))
			mustTask(t, c, tr, err)
			s.SetUnreachable(time.Hour)
		}
	}

	// Recovery: the changes made during the outage are published.
	s.SetUnreachable(0)
	clk.Advance(10 * time.Second)
	st = pass(t, o)
	got = j.next()
	if !st.Reachable || len(got.observed) != 2 || got.observed[103].Exists || got.observed[104].Status != "stopped" ||
		!got.heartbeats[0].Reachable || got.heartbeats[0].Error != "" {
		t.Fatalf("recovery: %+v %s %+v", st, got, got.observed)
	}
}

// TestPendingUntilReboot: a running VM's cores change waits for a restart;
// the observation says cores is still the old value, with the new one
// pending.
func TestPendingUntilReboot(t *testing.T) {
	s, c := demo(t)
	b := bustest.New(t)
	clk := newClock()
	// Passes alone verify here (no rounds between them): a budget of
	// 100 a second per node lets each pass verify its share.
	o := newObserver(t, c, b, clk, func(c *observer.Config) { c.VerifyRate = 100 })
	j := newJournal(t, b)
	pass(t, o)
	j.next()

	r104 := ref(t, s, 104) // running QEMU, 1 core
	tr, err := c.UpdateConfig(tctx(t), r104, pve.ConfigChange{Set: map[string]string{"cores": "3", "memory": "4096"}})
	mustTask(t, c, tr, err)
	if g, _ := s.Guest(104); g.Pending["cores"] != "3" {
		t.Fatalf("simulator did not keep cores pending: %+v", g)
	}
	// Invisible in /cluster/resources (maxcpu is the running value) ...
	clk.Advance(10 * time.Second)
	if st := pass(t, o); st.ConfigReads != 0 {
		t.Fatalf("%+v", st)
	}
	onlyHeartbeat(t, j.next(), true)
	// ... a resync shows it.
	o.Resync()
	pass(t, o)
	got := j.next()
	ob := got.observed[104]
	if len(got.observed) != 1 || ob.Config.Cores != 1 || ob.Config.MemoryMiB != 1024 ||
		ob.Pending["cores"] != "3" || ob.Pending["memory"] != "4096" || len(ob.Pending) != 2 {
		t.Fatalf("pending: %s %+v", got, ob)
	}

	// A reboot applies it: status stays running, but the row's maxcpu
	// changes, so the next pass reads and publishes the applied values.
	tr, err = c.Reboot(tctx(t), r104, 0)
	mustTask(t, c, tr, err)
	clk.Advance(10 * time.Second)
	pass(t, o)
	got = j.next()
	ob = got.observed[104]
	if len(got.observed) != 1 || ob.Config.Cores != 3 || ob.Config.MemoryMiB != 4096 || ob.Pending != nil || ob.Status != "running" {
		t.Fatalf("after reboot: %s %+v", got, ob)
	}
}

// TestLockVisible: a Proxmox lock is observed from the inventory and
// published, and so is its release.
func TestLockVisible(t *testing.T) {
	s, c := demo(t)
	b := bustest.New(t)
	clk := newClock()
	o := newObserver(t, c, b, clk)
	j := newJournal(t, b)
	pass(t, o)
	j.next()

	if err := s.LockGuest(102, "backup", 0); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	pass(t, o)
	got := j.next()
	locked, _ := s.Guest(102)
	if ob := got.observed[102]; len(got.observed) != 1 || ob.Lock != "backup" || ob.Digest != locked.Digest {
		t.Fatalf("lock: %s %+v", got, ob)
	}
	if err := s.UnlockGuest(102); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	pass(t, o)
	got = j.next()
	if ob := got.observed[102]; len(got.observed) != 1 || ob.Lock != "" || ob.Digest == locked.Digest {
		t.Fatalf("unlock: %s %+v", got, ob)
	}
}

// TestRestart: a new observer on the same journal publishes nothing for
// unchanged guests and says "gone" for a guest deleted while it was down.
func TestRestart(t *testing.T) {
	s, c := demo(t)
	b := bustest.New(t)
	clk := newClock()
	first := newObserver(t, c, b, clk)
	j := newJournal(t, b)
	pass(t, first)
	j.next()
	// A guest gone before the restart stays gone without being repeated.
	tr, err := c.Delete(tctx(t), ref(t, s, 101), true, false)
	mustTask(t, c, tr, err)
	clk.Advance(10 * time.Second)
	pass(t, first)
	if got := j.next(); len(got.observed) != 1 || got.observed[101].Exists {
		t.Fatalf("%s", got)
	}

	// Restart with nothing changed: the new observer reads every config
	// once but publishes only its heartbeat.
	second := newObserver(t, c, bustest.Connect(t, bustest.Server(t, b)), clk)
	clk.Advance(10 * time.Second)
	st := pass(t, second)
	if st.ConfigReads != demoGuests-1 || st.Published != 0 || st.Pass != 1 {
		t.Fatalf("restart pass: %+v", st)
	}
	onlyHeartbeat(t, j.next(), true)

	// Down again; meanwhile 105 is deleted and 103's cores changed.
	tr, err = c.Delete(tctx(t), ref(t, s, 105), true, false)
	mustTask(t, c, tr, err)
	tr, err = c.UpdateConfig(tctx(t), ref(t, s, 103), pve.ConfigChange{Set: map[string]string{"cores": "8"}})
	mustTask(t, c, tr, err)
	third := newObserver(t, c, b, clk)
	clk.Advance(10 * time.Second)
	st = pass(t, third)
	got := j.next()
	if len(got.observed) != 2 || got.observed[105].Exists || got.observed[103].Config.Cores != 8 || st.Gone != 1 {
		t.Fatalf("after restart: %+v %s", st, got)
	}
	// Observers of another cluster on the same journal are independent.
	other := newObserver(t, c, b, clk, func(cfg *observer.Config) { cfg.Cluster = "other" })
	if st := pass(t, other); st.Published != demoGuests-2 {
		t.Fatalf("other cluster: %+v", st)
	}
}

// flaky wraps a Proxmox client and fails config reads of chosen guests.
type flaky struct {
	observer.Proxmox
	mu   sync.Mutex
	fail map[int]error
}

func (f *flaky) GuestConfig(ctx context.Context, r pve.GuestRef) (*pve.GuestConfig, error) {
	f.mu.Lock()
	err := f.fail[r.VMID]
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return f.Proxmox.GuestConfig(ctx, r)
}

func (f *flaky) set(vmid int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.fail, vmid)
		return
	}
	f.fail[vmid] = err
}

// TestConfigReadFailure: a guest whose config cannot be read is skipped
// (its last snapshot stands) and read again next pass; the pass goes on.
func TestConfigReadFailure(t *testing.T) {
	s, c := demo(t)
	b := bustest.New(t)
	clk := newClock()
	px := &flaky{Proxmox: c, fail: map[int]error{}}
	o := newObserver(t, px, b, clk)
	j := newJournal(t, b)

	gone := &pve.Error{Class: pve.ClassGone, Op: pve.OpReadConfig, Message: "Configuration file 'nodes/pve1/qemu-server/100.conf' does not exist"}
	px.set(100, gone)
	st := pass(t, o)
	got := j.next()
	if st.ConfigErrors != 1 || st.Published != demoGuests-1 || len(got.observed) != demoGuests-1 {
		t.Fatalf("first pass: %+v %s", st, got)
	}
	if _, ok := got.observed[100]; ok {
		t.Fatal("a guest whose config could not be read must not be published")
	}
	// Retried next pass although its row did not change.
	px.set(100, nil)
	clk.Advance(10 * time.Second)
	st = pass(t, o)
	if got := j.next(); st.ConfigReads != 1 || len(got.observed) != 1 || !got.observed[100].Exists {
		t.Fatalf("retry: %+v %s", st, got)
	}

	// A changed guest whose re-read fails keeps its last snapshot: nothing
	// is published from a half-read state, and the change comes next pass.
	tr, err := c.Stop(tctx(t), ref(t, s, 102))
	mustTask(t, c, tr, err)
	px.set(102, &pve.Error{Class: pve.ClassTransient, Op: pve.OpReadConfig, Message: "got timeout"})
	clk.Advance(10 * time.Second)
	st = pass(t, o)
	if got := j.next(); st.ConfigErrors != 1 || len(got.observed) != 0 {
		t.Fatalf("failed re-read: %+v %s", st, got)
	}
	px.set(102, nil)
	clk.Advance(10 * time.Second)
	pass(t, o)
	if got := j.next(); len(got.observed) != 1 || got.observed[102].Status != "stopped" {
		t.Fatalf("after recovery: %s", got)
	}
}

// TestRunAndResync: Run passes at once, again on Resync, and returns nil
// when its context ends.
func TestRunAndResync(t *testing.T) {
	o, _, _, _, sub, stop := runDemo(t)
	next := func() events.Heartbeat {
		t.Helper()
		m, err := sub.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		hb, err := events.Decode[events.Heartbeat](m.Data)
		if err != nil {
			t.Fatal(err)
		}
		return hb
	}
	if hb := next(); hb.Pass != 1 || !hb.Reachable {
		t.Fatalf("first heartbeat %+v", hb)
	}
	o.Resync()
	if hb := next(); hb.Pass != 2 {
		t.Fatalf("resync heartbeat %+v", hb)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run returned %v", err)
	}
}

// fakePVE is an in-memory Proxmox for scale tests.
type fakePVE struct {
	mu    sync.Mutex
	inv   []pve.Resource
	reads int
}

func newFakePVE(n int) *fakePVE {
	f := &fakePVE{}
	for i := range n {
		f.inv = append(f.inv, pve.Resource{VMID: 100 + i, Kind: pve.KindQEMU, Node: "pve1", Status: "running",
			Name: "vm", Tags: []string{}, MaxCPU: 1, MaxMemMiB: 512})
	}
	return f
}

func (f *fakePVE) Inventory(context.Context) ([]pve.Resource, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.inv), nil
}

func (f *fakePVE) GuestConfig(_ context.Context, r pve.GuestRef) (*pve.GuestConfig, error) {
	f.mu.Lock()
	f.reads++
	f.mu.Unlock()
	return &pve.GuestConfig{Ref: r, Digest: "d", Name: "vm", Tags: []string{}, Cores: 1, MemoryMiB: 512}, nil
}

func (f *fakePVE) GuestStatus(_ context.Context, r pve.GuestRef) (*pve.GuestStatus, error) {
	return &pve.GuestStatus{Status: "running"}, nil
}

// TestManyGuests: 10,000 guests at once go out through the bounded async
// window, each exactly once.
func TestManyGuests(t *testing.T) {
	if testing.Short() {
		t.Skip("scale test")
	}
	const n = 10000
	b := bustest.New(t)
	f := newFakePVE(n)
	o := newObserver(t, f, b, newClock(), func(c *observer.Config) { c.MaxInFlight = 500; c.ReadConcurrency = 16 })
	st := pass(t, o)
	if st.Published != n || st.PublishErrors != 0 || f.reads != n {
		t.Fatalf("%+v, %d reads", st, f.reads)
	}
	stream, err := b.Stream(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(tctx(t), jetstream.WithSubjectFilter("pve.observed.pve.>"))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Subjects) != n || info.State.Msgs != n+1 {
		t.Fatalf("stream holds %d messages on %d observed subjects", info.State.Msgs, len(info.State.Subjects))
	}
	st = pass(t, o)
	if st.Published != 0 || st.ConfigReads != 0 {
		t.Fatalf("idle: %+v", st)
	}
	// A restart loads all 10,000 last observations (in several batches)
	// and republishes none; one guest gone meanwhile is said to be gone.
	f.mu.Lock()
	f.inv = f.inv[1:]
	f.mu.Unlock()
	restarted := newObserver(t, f, b, newClock())
	st = pass(t, restarted)
	if st.Published != 1 || st.Gone != 1 || st.Guests != n-1 {
		t.Fatalf("restart: %+v", st)
	}
}

// BenchmarkFirstPass10k measures a pass that publishes 10,000 new guests
// (in-memory Proxmox, embedded JetStream).
func BenchmarkFirstPass10k(b *testing.B) {
	const n = 10000
	for b.Loop() {
		b.StopTimer()
		bb := bustest.New(b)
		oc := observer.DefaultConfig()
		oc.Name, oc.ReadConcurrency, oc.Clock = "bench", 16, newClock().Fake
		o, err := observer.New(oc, newFakePVE(n), bb)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		st, err := o.Pass(context.Background())
		if err != nil || st.Published != n {
			b.Fatalf("%+v %v", st, err)
		}
	}
}

func equalObserved(a, b events.Observed) bool {
	return a.VMID == b.VMID && a.Cluster == b.Cluster && a.Exists == b.Exists && a.Node == b.Node &&
		a.Kind == b.Kind && a.Status == b.Status && a.Lock == b.Lock && a.Template == b.Template &&
		a.Digest == b.Digest && a.Config.Name == b.Config.Name && a.Config.Description == b.Config.Description &&
		slices.Equal(a.Config.Tags, b.Config.Tags) && (a.Config.Tags != nil) == (b.Config.Tags != nil) &&
		a.Config.Cores == b.Config.Cores && a.Config.MemoryMiB == b.Config.MemoryMiB &&
		a.Config.OnBoot == b.Config.OnBoot && len(a.Pending) == len(b.Pending) &&
		a.ReadAt.Equal(b.ReadAt) && a.Source == b.Source
}

// TestPublishFailureIsRetried: an observation the stream does not accept
// is not recorded as published, so the next pass publishes it again, with
// the time of the read that produced it.
func TestPublishFailureIsRetried(t *testing.T) {
	s, c := demo(t)
	b := bustest.New(t)
	clk := newClock()
	o := newObserver(t, c, b, clk)
	j := newJournal(t, b)
	pass(t, o)
	j.next()

	// The stream refuses new messages: full, discard new.
	ctx := tctx(t)
	cfg := b.StreamConfig()
	cfg.MaxMsgs, cfg.Discard = int64(j.seq), jetstream.DiscardNew
	if _, err := b.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	tr, err := c.Stop(tctx(t), ref(t, s, 100))
	mustTask(t, c, tr, err)
	readAt := clk.Advance(10 * time.Second)
	st, err := o.Pass(ctx)
	if err == nil || st.Published != 0 || st.PublishErrors != 1 || st.ConfigReads != 1 {
		t.Fatalf("refused publish: %+v %v", st, err)
	}
	if got := j.next(); len(got.observed)+len(got.heartbeats) != 0 {
		t.Fatalf("the stream was to refuse everything: %s", got)
	}

	// The stream accepts again: the observation goes out without re-reading.
	if err := b.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	st = pass(t, o)
	got := j.next()
	if st.Published != 1 || st.ConfigReads != 0 || len(got.observed) != 1 {
		t.Fatalf("retry: %+v %s", st, got)
	}
	if ob := got.observed[100]; ob.Status != "stopped" || !ob.ReadAt.Equal(readAt) {
		t.Fatalf("retried observation %+v, want ReadAt %s", ob, readAt)
	}
	clk.Advance(10 * time.Second)
	pass(t, o)
	onlyHeartbeat(t, j.next(), true)
}

// TestNewGuestWhileResourcesLag: a guest /cluster/resources lists before
// pvestatd's broadcast (status "unknown", no name) is published with the
// status read from its status/current (a power state is what the planner
// needs), and neither read nor published again once its row fills in
// with the same (the row caught up with its read, explain.go).
func TestNewGuestWhileResourcesLag(t *testing.T) {
	s, c := demo(t)
	b := bustest.New(t)
	clk := newClock()
	o := newObserver(t, c, b, clk)
	j := newJournal(t, b)
	if err := s.UpdateFaults(func(f *pvesim.Faults) { f.ResourcesLag = pvesim.Duration(time.Hour) }); err != nil {
		t.Fatal(err)
	}
	pass(t, o)
	j.next()

	if err := s.AddGuest(pvesim.GuestSpec{VMID: 200, Name: "late", Cores: 2, MemoryMiB: 2048, Running: true, Tags: []string{"New"}}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	pass(t, o)
	got := j.next()
	ob := got.observed[200]
	if len(got.observed) != 1 || ob.Status != "running" || ob.Config.Name != "late" || ob.Config.Cores != 2 ||
		len(ob.Config.Tags) != 1 || ob.Config.Tags[0] != "new" {
		t.Fatalf("new guest: %s %+v", got, ob)
	}

	if err := s.UpdateFaults(func(f *pvesim.Faults) { f.ResourcesLag = 0 }); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	st := pass(t, o)
	got = j.next()
	if st.ConfigReads != 0 || st.CaughtUp != 1 || st.StatusReads != 0 || len(got.observed) != 0 {
		t.Fatalf("after the broadcast: %+v %s", st, got)
	}
}
