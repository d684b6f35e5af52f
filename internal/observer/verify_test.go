package observer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	ijournal "github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/journal/journaltest"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
)

// These tests run the observer on an in-memory journal and an in-memory
// Proxmox that counts its calls, on a fake clock: milliseconds each.

// memJournal is journaltest's journal as the observer's port. It holds no
// earlier observations (LastPerSubject finds none); Info fails on demand.
type memJournal struct {
	*journaltest.Journal
	mu      sync.Mutex
	infoErr error
	onInfo  func() // called before each Info answers (a journal call's latency)
}

func (m *memJournal) LastPerSubject(context.Context, string, func(ijournal.Entry)) error { return nil }

func (m *memJournal) Info(ctx context.Context) (ijournal.Info, error) {
	m.mu.Lock()
	err, hook := m.infoErr, m.onInfo
	m.mu.Unlock()
	if hook != nil {
		hook()
	}
	if err != nil {
		return ijournal.Info{}, err
	}
	return m.Journal.Info(ctx)
}

// observed returns the observations appended after seq, in order.
func (m *memJournal) observed(t *testing.T, after uint64) []events.Observed {
	t.Helper()
	var out []events.Observed
	entries := m.Entries()
	for _, e := range entries[min(int(after), len(entries)):] { // sequences start at 1
		info, err := events.ParseSubject(e.Subject)
		if e.Seq <= after || err != nil || info.Kind != events.KindObserved {
			continue
		}
		ob, err := events.Decode[events.Observed](e.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ob)
	}
	return out
}

func (m *memJournal) last() uint64 {
	info, _ := m.Journal.Info(context.Background())
	return info.LastSeq
}

// countingPVE is an in-memory Proxmox of running QEMU guests that counts
// its calls. onRead, if set, runs during each config read (a concurrent
// event).
type countingPVE struct {
	mu          sync.Mutex
	inv         []pve.Resource
	cfg         map[int]*pve.GuestConfig
	inventories int
	reads       map[int]int
	statusReads int
	// live, when it names a guest, is its status/current where the
	// inventory (pvestatd's broadcast) says otherwise.
	live   map[int]string
	onRead func(vmid int)
}

func newCountingPVE(n int) *countingPVE { return newCountingPVEOn(n, 1) }

// newCountingPVEOn spreads n guests over nodes nodes, pve1, pve2, … in turn.
func newCountingPVEOn(n, nodes int) *countingPVE {
	p := &countingPVE{cfg: map[int]*pve.GuestConfig{}, reads: map[int]int{}}
	for i := range n {
		vmid := 100 + i
		node := fmt.Sprint("pve", 1+i%nodes)
		p.inv = append(p.inv, pve.Resource{VMID: vmid, Kind: pve.KindQEMU, Node: node, Status: "running",
			Name: fmt.Sprint("vm", vmid), Tags: []string{}, MaxCPU: 3, MaxMemMiB: 512})
		p.cfg[vmid] = &pve.GuestConfig{Ref: pve.GuestRef{Kind: pve.KindQEMU, Node: node, VMID: vmid}, Digest: "d0",
			Name: fmt.Sprint("vm", vmid), Tags: []string{}, Cores: 3, MemoryMiB: 512, Pending: map[string]string{}}
	}
	return p
}

func (p *countingPVE) Inventory(context.Context) ([]pve.Resource, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inventories++
	return slices.Clone(p.inv), nil
}

func (p *countingPVE) GuestConfig(_ context.Context, r pve.GuestRef) (*pve.GuestConfig, error) {
	p.mu.Lock()
	p.reads[r.VMID]++
	c, hook := *p.cfg[r.VMID], p.onRead
	p.mu.Unlock()
	if hook != nil {
		hook(r.VMID)
	}
	return &c, nil
}

// GuestStatus answers the inventory's status: this Proxmox has no
// pvestatd lag.
func (p *countingPVE) GuestStatus(_ context.Context, r pve.GuestRef) (*pve.GuestStatus, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.statusReads++
	if st, ok := p.live[r.VMID]; ok {
		return &pve.GuestStatus{Status: st}, nil
	}
	for _, res := range p.inv {
		if res.VMID == r.VMID {
			return &pve.GuestStatus{Status: res.Status}, nil
		}
	}
	return nil, &pve.Error{Class: pve.ClassGone, Op: pve.OpReadStatus, Ref: r, Message: "does not exist"}
}

// edit changes a guest's config behind the observer's back, as a person
// in the web UI would: nothing in the inventory row changes.
// setLive sets the guests' status/current (live).
func (p *countingPVE) setLive(live map[int]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live = live
}

func (p *countingPVE) edit(vmid int, fn func(*pve.GuestConfig)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := *p.cfg[vmid]
	c.Pending = map[string]string{}
	for k, v := range p.cfg[vmid].Pending {
		c.Pending[k] = v
	}
	fn(&c)
	c.Digest += "'"
	p.cfg[vmid] = &c
}

func (p *countingPVE) remove(vmid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inv = slices.DeleteFunc(p.inv, func(r pve.Resource) bool { return r.VMID == vmid })
}

func (p *countingPVE) totalReads() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.reads {
		n += c
	}
	return n
}

func memObserver(t *testing.T, px observer.Proxmox, clk *clock, mod ...func(*observer.Config)) (*observer.Observer, *memJournal) {
	t.Helper()
	j := &memJournal{Journal: journaltest.New(16, clk.Now)}
	cfg := observer.DefaultConfig()
	cfg.Name, cfg.Interval, cfg.Clock, cfg.Logger = "observer@test", 10*time.Second, clk.Fake, zerolog.Nop()
	for _, m := range mod {
		m(&cfg)
	}
	o, err := observer.New(cfg, px, j)
	if err != nil {
		t.Fatal(err)
	}
	return o, j
}

// foreign appends an event another role published (an executor's result).
func foreign(t *testing.T, j *memJournal, vmid int) uint64 {
	t.Helper()
	return j.Publish(events.Message{Subject: events.Subject(events.KindResult, events.DefaultCluster, vmid), Data: []byte(`{}`)})
}

// TestAfterSeqStamped: every observation of a pass, gone ones included,
// carries the journal's last sequence read before the pass's inventory;
// without it (the journal's extent unknown) the pass goes on with 0.
func TestAfterSeqStamped(t *testing.T) {
	px := newCountingPVE(3)
	clk := newClock()
	o, j := memObserver(t, px, clk)
	for range 5 {
		foreign(t, j, 100)
	}
	pass(t, o)
	obs := j.observed(t, 5)
	if len(obs) != 3 {
		t.Fatalf("first pass published %d observations, want 3", len(obs))
	}
	for _, ob := range obs {
		if ob.AfterSeq != 5 {
			t.Fatalf("guest %d: after_seq %d, want 5", ob.VMID, ob.AfterSeq)
		}
	}

	before := foreign(t, j, 101) // the journal moves on
	px.remove(102)
	clk.Advance(10 * time.Second)
	st := pass(t, o)
	if st.AfterSeq != before {
		t.Fatalf("pass after_seq %d, want %d", st.AfterSeq, before)
	}
	gone := j.observed(t, before)
	if len(gone) != 1 || gone[0].VMID != 102 || gone[0].Exists || gone[0].AfterSeq != before {
		t.Fatalf("gone: %+v", gone)
	}

	j.mu.Lock()
	j.infoErr = errors.New("journal unreachable")
	j.mu.Unlock()
	px.edit(100, func(c *pve.GuestConfig) { c.Description = "edited" })
	px.mu.Lock()
	px.inv[0].Name = "renamed" // a row change: read at once
	px.mu.Unlock()
	last := j.last()
	clk.Advance(10 * time.Second)
	if st := pass(t, o); st.AfterSeq != 0 || st.Published != 1 {
		t.Fatalf("pass with the journal's extent unknown: %+v", st)
	}
	if obs := j.observed(t, last); len(obs) != 1 || obs[0].AfterSeq != 0 || obs[0].Config.Description != "edited" {
		t.Fatalf("observations without an extent: %+v", obs)
	}
}

// TestConfirmationRepublish: an executor's result journalled while a pass
// reads Proxmox is newer than that pass's snapshot (after_seq below it),
// so the projector keeps the result's read-back. The observer published
// the snapshot all the same and would never publish it again: a real
// change would hide. It reads the guest again next pass and publishes it
// once more, unchanged, with an after_seq past the result; then it stops.
// The same holds for a guest that is gone.
func TestConfirmationRepublish(t *testing.T) {
	px := newCountingPVE(3)
	clk := newClock()
	o, j := memObserver(t, px, clk)
	pass(t, o)

	// A hand edit of 101 the inventory does not show, verified next pass;
	// an executor's result lands while the config is read.
	px.edit(101, func(c *pve.GuestConfig) { c.Description = "by hand" })
	var result uint64
	px.onRead = func(vmid int) {
		if vmid == 101 && result == 0 {
			result = foreign(t, j, 101)
		}
	}
	last := j.last()
	clk.Advance(10 * time.Second)
	pass(t, o)
	px.onRead = nil
	obs := j.observed(t, last)
	if len(obs) != 1 || obs[0].VMID != 101 || obs[0].AfterSeq >= result {
		t.Fatalf("changed snapshot: %+v (result at %d)", obs, result)
	}

	last = j.last()
	reads := px.reads[101]
	clk.Advance(time.Second) // before any verification is due
	st := pass(t, o)
	obs = j.observed(t, last)
	if px.reads[101] != reads+1 || len(obs) != 1 || obs[0].VMID != 101 || obs[0].AfterSeq < result ||
		obs[0].Config.Description != "by hand" {
		t.Fatalf("confirmation: %+v, %+v", st, obs)
	}

	last = j.last()
	clk.Advance(time.Second)
	if st := pass(t, o); st.Published != 0 || st.ConfigReads != 0 {
		t.Fatalf("a confirmation is confirmed once: %+v %+v", st, j.observed(t, last))
	}

	// Gone, with a result journalled during the pass (after its inventory).
	px.remove(102)
	last = j.last()
	clk.Advance(time.Second)
	px.mu.Lock()
	px.inv[0].Status = "stopped" // a row change: a read, during which the result lands
	px.mu.Unlock()
	result = 0
	px.onRead = func(vmid int) {
		if result == 0 {
			result = foreign(t, j, 102)
		}
	}
	pass(t, o)
	px.onRead = nil
	gone := func(after uint64) []events.Observed {
		var out []events.Observed
		for _, ob := range j.observed(t, after) {
			if ob.VMID == 102 {
				out = append(out, ob)
			}
		}
		return out
	}
	if g := gone(last); len(g) != 1 || g[0].Exists || g[0].AfterSeq >= result {
		t.Fatalf("gone: %+v (result at %d)", g, result)
	}
	last = j.last()
	clk.Advance(time.Second)
	pass(t, o)
	if g := gone(last); len(g) != 1 || g[0].Exists || g[0].AfterSeq < result {
		t.Fatalf("gone confirmation: %+v (result at %d)", g, result)
	}
	last = j.last()
	clk.Advance(time.Second)
	pass(t, o)
	if g := gone(last); len(g) != 0 {
		t.Fatalf("gone confirmed twice: %+v", g)
	}
}
