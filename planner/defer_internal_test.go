package planner

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/projector"
)

// fakeMsg is a journal message as the ordered consumer delivers it: what
// toEvent and pendingAfter read, nothing else.
type fakeMsg struct {
	jetstream.Msg
	subject string
	data    []byte
	md      jetstream.MsgMetadata
}

func (m *fakeMsg) Subject() string                           { return m.subject }
func (m *fakeMsg) Data() []byte                              { return m.data }
func (m *fakeMsg) Headers() nats.Header                      { return nil }
func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) { return &m.md, nil }

// TestBehindPlansEachGuestOnceOnItsNewestDesired: a caught-up planner that
// finds itself more than behindBy events behind the journal folds a batch
// without planning, and plans each touched guest once, on its newest
// desired revision, once a batch leaves it close behind (after that
// batch's own guests); caught up, it plans as it folds.
func TestBehindPlansEachGuestOnceOnItsNewestDesired(t *testing.T) {
	type plan struct {
		vmid int
		seq  uint64
	}
	var plans []plan
	svc, err := NewService(ServiceConfig{Name: "t", Policy: Policy{ObserveOnly: true},
		OnDecision: func(v *projector.View, _ Decision) { plans = append(plans, plan{v.VMID, v.DesiredSeq}) }}, bustest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	svc.now = func() time.Time { return t0 }
	svc.caughtUp = true
	seq := uint64(0)
	desired := func(vmid int, pending uint64) jetstream.Msg {
		seq++
		return &fakeMsg{subject: events.Subject(events.KindDesired, "pve", vmid) + ".1",
			data: []byte(fmt.Sprintf(`{"vmid":%d,"description":"rev %d"}`, vmid, seq)),
			md:   jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: seq}, NumPending: pending, Timestamp: t0}}
	}
	ctx := context.Background()

	// Far behind: three revisions of 101 and two of 102 fold, nothing is planned.
	svc.handleBatch(ctx, []jetstream.Msg{desired(101, 5000), desired(102, 5000), desired(101, 5000)})
	svc.handleBatch(ctx, []jetstream.Msg{desired(102, 4000), desired(101, behindBy+1)})
	if len(plans) != 0 {
		t.Fatalf("planned while %d behind: %+v", behindBy+1, plans)
	}
	// Close behind again: the batch is planned as it folds, then the
	// deferred guests, each once, on its newest revision, first touched first.
	svc.handleBatch(ctx, []jetstream.Msg{desired(103, behindBy)})
	want := []plan{{103, 6}, {101, 5}, {102, 4}}
	if fmt.Sprint(plans) != fmt.Sprint(want) {
		t.Fatalf("plans %+v, want %+v", plans, want)
	}
	// Caught up: every event is planned as it folds.
	plans = nil
	svc.handleBatch(ctx, []jetstream.Msg{desired(101, 1), desired(101, 0)})
	if want := []plan{{101, 7}, {101, 8}}; fmt.Sprint(plans) != fmt.Sprint(want) {
		t.Fatalf("caught up: plans %+v, want %+v", plans, want)
	}
	// Behind for longer than maxDefer: the deferred guests are planned anyway.
	plans = nil
	svc.handleBatch(ctx, []jetstream.Msg{desired(104, 9000)})
	svc.now = func() time.Time { return t0.Add(maxDefer) }
	svc.handleBatch(ctx, []jetstream.Msg{desired(105, 9000)})
	if want := []plan{{104, 9}, {105, 10}}; fmt.Sprint(plans) != fmt.Sprint(want) {
		t.Fatalf("behind past maxDefer: plans %+v, want %+v", plans, want)
	}
}
