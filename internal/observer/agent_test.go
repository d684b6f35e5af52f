package observer_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
)

// agentPVE is countingPVE whose guests enable the QEMU guest agent, which
// answers with one address per guest (addr, when it names the guest) or,
// for the guests in silent, as Proxmox does for an agent not running.
type agentPVE struct {
	*countingPVE
	amu    sync.Mutex
	asks   map[int]int
	addr   map[int]string
	silent map[int]bool
}

func newAgentPVE(n int) *agentPVE {
	p := &agentPVE{countingPVE: newCountingPVE(n), asks: map[int]int{}, addr: map[int]string{}, silent: map[int]bool{}}
	for _, c := range p.cfg {
		c.Raw = map[string]string{"agent": "enabled=1"}
	}
	return p
}

func (p *agentPVE) AgentAddresses(_ context.Context, r pve.GuestRef) ([]events.GuestAddress, error) {
	p.amu.Lock()
	defer p.amu.Unlock()
	p.asks[r.VMID]++
	if p.silent[r.VMID] {
		return nil, fmt.Errorf("%w: QEMU guest agent is not running", pve.ErrAgentUnavailable)
	}
	a, ok := p.addr[r.VMID]
	if !ok {
		a = fmt.Sprintf("10.0.%d.%d", r.VMID/256, r.VMID%256)
	}
	return []events.GuestAddress{{Interface: "eth0", Address: a, Prefix: 24}}, nil
}

func (p *agentPVE) asked() (guests, reads int) {
	p.amu.Lock()
	defer p.amu.Unlock()
	for _, n := range p.asks {
		guests++
		reads += n
	}
	return guests, reads
}

func (p *agentPVE) setStatus(vmid int, status string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.inv {
		if p.inv[i].VMID == vmid {
			p.inv[i].Status = status
		}
	}
}

// addresses returns the addresses events appended after seq, in order.
func (m *memJournal) addresses(t *testing.T, after uint64) []events.Addresses {
	t.Helper()
	var out []events.Addresses
	for _, e := range m.Entries() {
		info, err := events.ParseSubject(e.Subject)
		if e.Seq <= after || err != nil || info.Kind != events.KindAddresses {
			continue
		}
		a, err := events.Decode[events.Addresses](e.Data)
		if err != nil || a.VMID != info.VMID {
			t.Fatalf("addresses on %s: %+v %v", e.Subject, a, err)
		}
		out = append(out, a)
	}
	return out
}

// TestAgentReadsWithinBudget: guest agent reads have a budget of their own,
// VerifyRate a second per node (here 20 on one node, a pass every 10 s:
// 200 a pass), apart from verification's (20 in any second on the node,
// so 20 a pass when passes alone verify). No pass reads more than either:
// agents never asked go first, so every agent is asked within a bounded
// number of passes; each guest's addresses are published once, and not
// again while they stay the same.
func TestAgentReadsWithinBudget(t *testing.T) {
	const guests = 1000
	px := newAgentPVE(guests)
	clk := newClock()
	o, j := memObserver(t, px, clk, func(c *observer.Config) { c.VerifyRate = 20 })
	st := pass(t, o) // every config read at once (not verification)
	if st.Verified != 0 || st.AgentReads != 200 {
		t.Fatalf("first pass: %+v", st)
	}
	passes := 1
	for {
		clk.Advance(10 * time.Second)
		st := pass(t, o)
		passes++
		if st.Verified > 20 || st.AgentReads > 200 {
			t.Fatalf("pass %d: %d verification and %d agent reads, over the budgets of 20 and 200", passes, st.Verified, st.AgentReads)
		}
		if asked, _ := px.asked(); asked == guests {
			break
		}
		if st.Verified < 20 || st.AgentReads < 200 {
			t.Fatalf("pass %d: %d verified, %d agents asked; want both budgets spent", passes, st.Verified, st.AgentReads)
		}
		if passes > 20 {
			t.Fatalf("after %d passes only %d agents asked", passes, func() int { n, _ := px.asked(); return n }())
		}
	}
	// 200 a pass.
	if passes != 5 {
		t.Fatalf("every agent asked after %d passes, want 5", passes)
	}
	all := j.addresses(t, 0)
	if len(all) != guests {
		t.Fatalf("%d addresses events for %d guests", len(all), guests)
	}
	seen := map[int]bool{}
	for _, a := range all {
		if seen[a.VMID] || !a.Known || len(a.Addresses) != 1 || a.Addresses[0].Interface != "eth0" || a.Cluster != events.DefaultCluster {
			t.Fatalf("addresses event %+v (seen before: %v)", a, seen[a.VMID])
		}
		seen[a.VMID] = true
	}
	// Unchanged addresses are not published again; the budget still holds.
	last := j.last()
	for range 5 {
		clk.Advance(10 * time.Second)
		if st := pass(t, o); st.Verified > 20 || st.AgentReads > 200 {
			t.Fatalf("steady pass: %+v", st)
		}
	}
	if got := j.addresses(t, last); len(got) != 0 {
		t.Fatalf("%d addresses published again unchanged", len(got))
	}
}

// TestAgentJustStartedAndSilent: a guest that stops has its addresses
// published unknown ("guest not running") without asking its agent; once
// it runs again its agent is asked on the next pass, before verification,
// even on an estate whose verification takes the whole budget. An agent
// that does not answer is no failure of the pass: the addresses become
// unknown with Proxmox's reason. Changed addresses are published.
func TestAgentJustStartedAndSilent(t *testing.T) {
	const guests = 400
	px := newAgentPVE(guests)
	clk := newClock()
	o, j := memObserver(t, px, clk, func(c *observer.Config) { c.VerifyRate = 20 })
	for range 4 { // every agent asked (200 + 50 + 50 + 50 + …)
		pass(t, o)
		clk.Advance(10 * time.Second)
	}
	for asked, _ := px.asked(); asked < guests; asked, _ = px.asked() {
		pass(t, o)
		clk.Advance(10 * time.Second)
	}
	last := j.last()
	px.setStatus(150, "stopped")
	_, before := px.asked()
	before150 := px.asks[150]
	pass(t, o)
	got := j.addresses(t, last)
	if len(got) != 1 || got[0].VMID != 150 || got[0].Known || got[0].Reason != "guest not running" || len(got[0].Addresses) != 0 {
		t.Fatalf("stopped guest: %+v", got)
	}
	if px.asks[150] != before150 {
		t.Fatalf("stopped guest's agent asked: %d times, %d before", px.asks[150], before150)
	}
	_, after := px.asked()
	last = j.last()

	clk.Advance(10 * time.Second)
	px.setStatus(150, "running")
	px.addr[150] = "192.0.2.150"
	st := pass(t, o)
	if st.AgentReads > 200 || st.Verified == 0 {
		t.Fatalf("pass: %+v", st)
	}
	if px.asks[150] != before150+1 {
		t.Fatalf("started guest's agent asked %d times, %d before it stopped; want once more", px.asks[150], before150)
	}
	got = j.addresses(t, last)
	slices.SortFunc(got, func(a, b events.Addresses) int { return a.VMID - b.VMID })
	if len(got) != 1 || got[0].VMID != 150 || !got[0].Known || got[0].Addresses[0].Address != "192.0.2.150" {
		t.Fatalf("after the start: %+v (asks before %d after %d)", got, before, after)
	}
	// 151's agent falls silent: its addresses become unknown when it is
	// next asked, with Proxmox's reason, and the pass does not fail.
	last = j.last()
	px.silent[151] = true
	for asks := px.asks[151]; px.asks[151] == asks; {
		clk.Advance(10 * time.Second)
		if _, err := o.Pass(tctx(t)); err != nil {
			t.Fatalf("pass with a silent agent: %v", err)
		}
	}
	got = j.addresses(t, last)
	if len(got) != 1 || got[0].VMID != 151 || got[0].Known || got[0].Reason != "QEMU guest agent is not running" {
		t.Fatalf("silent agent: %+v", got)
	}
	// A guest that is gone has its addresses published unknown.
	last = j.last()
	px.remove(152)
	clk.Advance(10 * time.Second)
	pass(t, o)
	got = j.addresses(t, last)
	if len(got) != 1 || got[0].VMID != 152 || got[0].Known || got[0].Reason != "guest gone" {
		t.Fatalf("gone guest: %+v", got)
	}
}
