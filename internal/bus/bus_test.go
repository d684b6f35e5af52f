package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
)

func TestProvisionAndPartitionTransform(t *testing.T) {
	b := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Provision is idempotent.
	if err := b.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	ack, err := b.Publish(ctx, events.Subject(events.KindDesired, "pve", 101), []byte(`{"vmid":101}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := b.Stream(ctx)
	m, err := s.GetMsg(ctx, ack.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	info, err := events.ParseSubject(m.Subject)
	if err != nil || info.VMID != 101 || info.Partition < 0 || info.Partition >= 16 {
		t.Fatalf("stored subject %q: %+v %v", m.Subject, info, err)
	}
	// The client computes the same partition as the server's transform.
	for vmid := 100; vmid < 400; vmid++ {
		for _, cl := range []string{"pve", "lab-2"} {
			a, err := b.Publish(ctx, events.Subject(events.KindResult, cl, vmid), []byte(`{}`), nil)
			if err != nil {
				t.Fatal(err)
			}
			m, _ := s.GetMsg(ctx, a.Sequence)
			if want := b.StoredSubject(events.KindResult, cl, vmid); m.Subject != want {
				t.Fatalf("server stored %q, client computes %q", m.Subject, want)
			}
		}
	}
	// Every event of a guest lands in the same partition.
	for _, k := range []events.Kind{events.KindObserved, events.KindAction, events.KindResult} {
		a, err := b.Publish(ctx, events.Subject(k, "pve", 101), []byte(`{}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := s.GetMsg(ctx, a.Sequence)
		if i, _ := events.ParseSubject(m.Subject); i.Partition != info.Partition {
			t.Fatalf("%s landed in partition %d, desired in %d", k, i.Partition, info.Partition)
		}
	}
	// Cluster-wide subjects are stored unchanged.
	a, err := b.Publish(ctx, events.ClusterSubject(events.KindHeartbeat, "pve"), []byte(`{}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := s.GetMsg(ctx, a.Sequence); m.Subject != "pve.heartbeat.pve" {
		t.Fatalf("heartbeat stored as %q", m.Subject)
	}
	// Direct get of a guest's last event by wildcard over its partition.
	last, err := b.LastMsg(ctx, events.KindDesired, "pve", 101)
	if err != nil || last == nil || last.Sequence != ack.Sequence {
		t.Fatalf("LastMsg: %+v %v", last, err)
	}
	if none, err := b.LastMsg(ctx, events.KindDesired, "pve", 999); none != nil || err != nil {
		t.Fatalf("LastMsg of an unknown guest: %+v %v", none, err)
	}
	// Re-provisioning with another partition count is refused.
	bc := bus.DefaultConfig()
	bc.InProcess, bc.Partitions = bustest.Server(t, b), 32
	other, err := bus.Connect(ctx, bc)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Provision(ctx); err == nil {
		t.Fatal("changing the partition count must be refused")
	}
}

// TestFencedPublishThroughTransform: the expected-last-subject-sequence
// check applies to the stored (transformed) subject, so it fences per guest.
func TestFencedPublishThroughTransform(t *testing.T) {
	b := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	subj := events.Subject(events.KindAction, "pve", 101)
	first, err := b.Publish(ctx, subj, []byte(`1`), nil, jetstream.WithExpectLastSequencePerSubject(0))
	if err != nil {
		t.Fatalf("first publish expecting 0: %v", err)
	}
	// Another guest's action does not disturb 101's fence.
	if _, err := b.Publish(ctx, events.Subject(events.KindAction, "pve", 102), []byte(`x`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, subj, []byte(`2`), nil, jetstream.WithExpectLastSequencePerSubject(0)); !bus.IsWrongLastSequence(err) {
		t.Fatalf("stale fence must fail with wrong last sequence, got %v", err)
	}
	if _, err := b.Publish(ctx, subj, []byte(`2`), nil, jetstream.WithExpectLastSequencePerSubject(first.Sequence)); err != nil {
		t.Fatalf("current fence: %v", err)
	}
	// Msg-id dedupe returns the original sequence.
	hdr := nats.Header{}
	a1, err := b.Publish(ctx, subj+"", []byte(`3`), hdr, jetstream.WithMsgID("act-1"))
	if err != nil {
		t.Fatal(err)
	}
	a2, err := b.Publish(ctx, subj, []byte(`3`), nil, jetstream.WithMsgID("act-1"))
	if err != nil || !a2.Duplicate || a2.Sequence != a1.Sequence {
		t.Fatalf("dedupe: %+v %v", a2, err)
	}
}
