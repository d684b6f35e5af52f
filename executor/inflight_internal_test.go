package executor

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/journal/journaltest"
	"github.com/converge-pve/converge/internal/pve"
)

// deliver is the n-th delivery of the entry stored at seq.
func deliver(t *testing.T, ctx context.Context, b *bus.Bus, seq, n uint64) *journaltest.Delivery {
	t.Helper()
	e, err := b.Get(ctx, seq)
	if err != nil || e == nil {
		t.Fatalf("entry %d: %v %v", seq, e, err)
	}
	return journaltest.Deliver(*e, n)
}

// touched reports whether the worker acknowledged, terminated or kept the
// delivery alive.
func touched(d *journaltest.Delivery) bool {
	acks, terms, inProgress := d.Counts()
	return acks+terms+inProgress > 0
}

func acks(d *journaltest.Delivery) int {
	n, _, _ := d.Counts()
	return n
}

// gatedProxmox is a stopped guest whose start task ends when gate closes.
type gatedProxmox struct {
	Proxmox
	gate    chan struct{}
	issued  chan struct{}
	starts  atomic.Int32
	running atomic.Bool
}

func (p *gatedProxmox) GuestStatus(context.Context, pve.GuestRef) (*pve.GuestStatus, error) {
	if p.running.Load() {
		return &pve.GuestStatus{Status: "running"}, nil
	}
	return &pve.GuestStatus{Status: "stopped"}, nil
}

func (p *gatedProxmox) GuestConfig(_ context.Context, ref pve.GuestRef) (*pve.GuestConfig, error) {
	return &pve.GuestConfig{Ref: ref, Digest: "d", Cores: 1, MemoryMiB: 512, Tags: []string{}}, nil
}

func (p *gatedProxmox) Start(context.Context, pve.GuestRef) (pve.TaskRef, error) {
	p.starts.Add(1)
	close(p.issued)
	return pve.TaskRef{UPID: "UPID:pve1:000003E9:000003E8:6B028C04:qmstart:101:root@pam:", Node: "pve1"}, nil
}

func (p *gatedProxmox) WaitTask(ctx context.Context, t pve.TaskRef, _ pve.WaitOptions) (pve.TaskResult, error) {
	select {
	case <-p.gate:
		p.running.Store(true)
		return pve.TaskResult{UPID: t.UPID, ExitStatus: "OK", OK: true}, nil
	case <-ctx.Done():
		return pve.TaskResult{}, ctx.Err()
	}
}

// TestRedeliveryWhileInProgress: a redelivery of an action this process is
// still handling is ignored (neither run nor acknowledged); the running
// handler finishes and acknowledges.
func TestRedeliveryWhileInProgress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := bustest.New(t)
	px := &gatedProxmox{gate: make(chan struct{}), issued: make(chan struct{})}
	cfg := testConfig("inflight", zerolog.New(zerolog.NewTestWriter(t)))
	cfg.AckWait = time.Minute
	e, err := New(Unverified(cfg), px, b, b.LeaseStore)
	if err != nil {
		t.Fatal(err)
	}
	e.owner = nil // handled directly, outside any partition group: ownership is not checked

	a := events.Action{Meta: events.NewMeta("planner", "c1", time.Now()), ID: "a1", VMID: 101, Cluster: "pve",
		Node: "pve1", Kind: events.QEMU, Op: events.OpStart}
	body, _ := json.Marshal(a)
	ack, err := b.Publish(ctx, events.Subject(events.KindAction, "pve", 101), body, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := deliver(t, ctx, b, ack.Sequence, 1)

	pt := &partition{p: 0, ctx: ctx, cancel: func() {}}
	e.dispatch(pt, first)
	select {
	case <-px.issued:
	case <-ctx.Done():
		t.Fatal("start never issued")
	}

	// The redelivery returns at once: it does not even wait for the guest.
	again := deliver(t, ctx, b, ack.Sequence, 2)
	done := make(chan struct{})
	go func() { e.Handle(ctx, 0, again); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("redelivery handled instead of ignored")
	}
	if touched(again) {
		t.Fatal("the ignored redelivery was acked, nak'd, termed or kept alive")
	}

	close(px.gate)
	e.wg.Wait()
	if px.starts.Load() != 1 || acks(first) != 1 {
		t.Fatalf("%d starts, %d acks of the first delivery; want 1 and 1", px.starts.Load(), acks(first))
	}
	rec, err := journalRecord(ctx, e, 101, "a1", ack.Sequence)
	if err != nil || rec.final == nil || rec.final.Status != events.ResultSucceeded || rec.started == nil {
		t.Fatalf("journal: %+v, %v", rec, err)
	}
}
