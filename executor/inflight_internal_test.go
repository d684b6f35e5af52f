package executor

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/pve"
)

// fakeMsg is one delivery of a stored message; it records what the
// executor did with it.
type fakeMsg struct {
	subject   string
	data      []byte
	seq       uint64
	delivered uint64

	acks, inProgress, naks, terms atomic.Int32
}

func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: m.seq}, NumDelivered: m.delivered}, nil
}
func (m *fakeMsg) Data() []byte                     { return m.data }
func (m *fakeMsg) Headers() nats.Header             { return nil }
func (m *fakeMsg) Subject() string                  { return m.subject }
func (m *fakeMsg) Reply() string                    { return "" }
func (m *fakeMsg) Ack() error                       { m.acks.Add(1); return nil }
func (m *fakeMsg) DoubleAck(context.Context) error  { m.acks.Add(1); return nil }
func (m *fakeMsg) Nak() error                       { m.naks.Add(1); return nil }
func (m *fakeMsg) NakWithDelay(time.Duration) error { m.naks.Add(1); return nil }
func (m *fakeMsg) InProgress() error                { m.inProgress.Add(1); return nil }
func (m *fakeMsg) Term() error                      { m.terms.Add(1); return nil }
func (m *fakeMsg) TermWithReason(string) error      { m.terms.Add(1); return nil }
func (m *fakeMsg) touched() bool {
	return m.acks.Load()+m.inProgress.Load()+m.naks.Load()+m.terms.Load() > 0
}
func (m *fakeMsg) redeliver() *fakeMsg {
	return &fakeMsg{subject: m.subject, data: m.data, seq: m.seq, delivered: m.delivered + 1}
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
	e, err := New(Config{Name: "inflight", AckWait: time.Minute, Logger: zerolog.New(zerolog.NewTestWriter(t))}, px, b)
	if err != nil {
		t.Fatal(err)
	}
	e.leases = nil // handled directly, outside any partition group: ownership is not checked
	if e.stream, err = b.Stream(ctx); err != nil {
		t.Fatal(err)
	}

	a := events.Action{Meta: events.NewMeta("planner", "c1", time.Now()), ID: "a1", VMID: 101, Cluster: "pve",
		Node: "pve1", Kind: events.QEMU, Op: events.OpStart}
	body, _ := json.Marshal(a)
	ack, err := b.Publish(ctx, events.Subject(events.KindAction, "pve", 101), body, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.stream.GetMsg(ctx, ack.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	first := &fakeMsg{subject: s.Subject, data: body, seq: ack.Sequence, delivered: 1}

	pt := &partition{p: 0, ctx: ctx, cancel: func() {}}
	e.dispatch(pt, first)
	select {
	case <-px.issued:
	case <-ctx.Done():
		t.Fatal("start never issued")
	}

	// The redelivery returns at once: it does not even wait for the guest.
	again := first.redeliver()
	done := make(chan struct{})
	go func() { e.handle(ctx, 0, again); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("redelivery handled instead of ignored")
	}
	if again.touched() {
		t.Fatal("the ignored redelivery was acked, nak'd, termed or kept alive")
	}

	close(px.gate)
	e.wg.Wait()
	if px.starts.Load() != 1 || first.acks.Load() != 1 {
		t.Fatalf("%d starts, %d acks of the first delivery; want 1 and 1", px.starts.Load(), first.acks.Load())
	}
	rec, err := journalRecord(ctx, e, 101, "a1", ack.Sequence)
	if err != nil || rec.final == nil || rec.final.Status != events.ResultSucceeded || rec.started == nil {
		t.Fatalf("journal: %+v, %v", rec, err)
	}
}
