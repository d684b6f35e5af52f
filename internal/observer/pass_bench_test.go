package observer_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	jrnl "github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
)

// benchProxmox answers the same inventory and configs every pass, without
// HTTP: what a pass costs the observer itself.
type benchProxmox struct {
	inv []pve.Resource
	cfg map[int]*pve.GuestConfig
}

func (p *benchProxmox) Inventory(context.Context) ([]pve.Resource, error) { return p.inv, nil }

func (p *benchProxmox) GuestConfig(_ context.Context, ref pve.GuestRef) (*pve.GuestConfig, error) {
	return p.cfg[ref.VMID], nil
}

func (p *benchProxmox) GuestStatus(_ context.Context, ref pve.GuestRef) (*pve.GuestStatus, error) {
	return &pve.GuestStatus{Status: "running"}, nil
}

// benchJournal acknowledges every publish at once and keeps nothing.
type benchJournal struct{ seq atomic.Uint64 }

type ack jrnl.Ack

func (a ack) Poll() (jrnl.Ack, error, bool)          { return jrnl.Ack(a), nil, true }
func (a ack) Wait(context.Context) (jrnl.Ack, error) { return jrnl.Ack(a), nil }

func (j *benchJournal) Append(context.Context, events.Message, jrnl.Expect) (jrnl.Ack, error) {
	return jrnl.Ack{Seq: j.seq.Add(1)}, nil
}

func (j *benchJournal) AppendAsync(events.Message, jrnl.Expect) (jrnl.Future, error) {
	return ack{Seq: j.seq.Add(1)}, nil
}

func (j *benchJournal) Lasts(_ context.Context, _ string, _ int, kinds ...events.Kind) ([]*jrnl.Entry, error) {
	return make([]*jrnl.Entry, len(kinds)), nil
}

func (j *benchJournal) NextOfKind(context.Context, events.Kind, string, uint64) (*jrnl.Entry, error) {
	return nil, nil
}

func (j *benchJournal) Next(context.Context, events.Kind, string, int, uint64) (*jrnl.Entry, error) {
	return nil, nil
}

func (j *benchJournal) LastPerSubject(context.Context, string, func(jrnl.Entry)) error { return nil }

func (j *benchJournal) Info(context.Context) (jrnl.Info, error) {
	return jrnl.Info{FirstSeq: 1, LastSeq: j.seq.Load()}, nil
}

func benchEstate(n int) *benchProxmox {
	p := &benchProxmox{inv: make([]pve.Resource, n), cfg: make(map[int]*pve.GuestConfig, n)}
	for i := range n {
		vmid := 100 + i
		node := fmt.Sprintf("pve%d", i%3+1)
		p.inv[i] = pve.Resource{VMID: vmid, Kind: pve.KindQEMU, Node: node, Name: fmt.Sprintf("vm-%d", vmid), Status: "running",
			Tags: []string{"prod", "web"}, MaxCPU: 2, MaxMemMiB: 2048, Uptime: 1000}
		p.cfg[vmid] = &pve.GuestConfig{Ref: p.inv[i].Ref(), Digest: fmt.Sprintf("%040x", vmid), Name: fmt.Sprintf("vm-%d", vmid),
			Description: "web frontend", Tags: []string{"prod", "web"}, Cores: 2, Sockets: 1, MemoryMiB: 2048,
			Raw: map[string]string{"name": fmt.Sprintf("vm-%d", vmid), "cores": "2", "memory": "2048", "scsi0": "local-lvm:vm-" + fmt.Sprint(vmid) + "-disk-0,size=8G", "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0"}}
	}
	return p
}

// BenchmarkPassIdle100k is a pass that finds nothing changed at 100,000
// guests, against in-memory Proxmox and journal: the observer's own
// standing cost every Interval (package pve's decoding excluded).
func BenchmarkPassIdle100k(b *testing.B) {
	const n = 100000
	oc := observer.DefaultConfig()
	oc.Name = "bench"
	oc.VerifyOff = true
	o, err := observer.New(oc, benchEstate(n), &benchJournal{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if st, err := o.Pass(ctx); err != nil || st.Published != n {
		b.Fatalf("first pass: %+v %v", st, err)
	}
	// The second pass confirms the first one's snapshots.
	if _, err := o.Pass(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if st, err := o.Pass(ctx); err != nil || st.Published != 0 || st.ConfigReads != 0 {
			b.Fatalf("idle pass: %+v %v", st, err)
		}
	}
}

// BenchmarkPassVerify100k is an idle pass at 100,000 guests that are all
// due for verification: choosing the few the budget lets it read.
func BenchmarkPassVerify100k(b *testing.B) {
	const n = 100000
	clk := newClock()
	oc2 := observer.DefaultConfig()
	oc2.Name, oc2.ConfigRefresh, oc2.VerifyRate, oc2.Clock = "bench", time.Second, 20, clk.Fake
	o, err := observer.New(oc2,
		benchEstate(n), &benchJournal{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		if _, err := o.Pass(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		clk.Advance(10 * time.Second) // every guest due, 200 reads of budget
		if st, err := o.Pass(ctx); err != nil || st.Verified != 200 {
			b.Fatalf("pass: %+v %v", st, err)
		}
	}
}
