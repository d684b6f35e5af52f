package executor

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus/bustest"
)

// TestLostPartitionNeverMutates: an executor that does not hold the
// action's partition (its lease expired while it stalled, and another
// executor may own it) leaves the action alone: no Proxmox mutation, no
// result, no acknowledgement.
func TestLostPartitionNeverMutates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := bustest.New(t)
	px := &gatedProxmox{gate: make(chan struct{}), issued: make(chan struct{})}
	e, err := New(Config{Name: "stale", Logger: zerolog.New(zerolog.NewTestWriter(t))}, px, b)
	if err != nil {
		t.Fatal(err)
	}
	if e.stream, err = b.Stream(ctx); err != nil {
		t.Fatal(err)
	}
	// The lease manager never ran: no partition is held.
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
	msg := &fakeMsg{subject: s.Subject, data: body, seq: ack.Sequence, delivered: 1}
	info, _ := events.ParseSubject(s.Subject)
	e.handle(ctx, info.Partition, msg)
	if n := px.starts.Load(); n != 0 {
		t.Fatalf("%d starts issued without the partition's lease", n)
	}
	if msg.acks.Load()+msg.naks.Load()+msg.terms.Load() != 0 {
		t.Fatal("the action was acknowledged, nak'd or terminated: it must be left for the partition's owner")
	}
	if rec, err := journalRecord(ctx, e, 101, "a1", ack.Sequence); err != nil || rec.final != nil || rec.started != nil {
		t.Fatalf("journal after the fenced handler: %+v, %v", rec, err)
	}
}

// TestLateResultRefused: a result written after another executor journalled
// a result for the same guest (this job's view of the journal is stale) is
// refused by the stream, and the job learns it was fenced.
func TestLateResultRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := bustest.New(t)
	e, err := New(Config{Name: "late", Logger: zerolog.New(zerolog.NewTestWriter(t))}, &gatedProxmox{}, b)
	if err != nil {
		t.Fatal(err)
	}
	if e.stream, err = b.Stream(ctx); err != nil {
		t.Fatal(err)
	}
	a := events.Action{Meta: events.NewMeta("planner", "c1", time.Now()), ID: "a1", VMID: 101, Cluster: "pve", Op: events.OpStart}
	body, _ := json.Marshal(a)
	if _, err := b.Publish(ctx, events.Subject(events.KindAction, "pve", 101), body, nil); err != nil {
		t.Fatal(err)
	}
	// This job read the journal when the guest had no result (resultSeq 0)
	// ...and meanwhile the partition's new owner journalled one.
	j := &job{e: e, a: a, log: e.log}
	other := j.result(events.ResultStarted)
	other.Executor, other.UPID = "new-owner", "UPID:pve1:1:1:1:qmstart:101:root@pam:"
	if _, err := e.publishResult(ctx, other); err != nil {
		t.Fatal(err)
	}
	err = j.publish(ctx, j.result(events.ResultSucceeded))
	if !errors.Is(err, errFenced) {
		t.Fatalf("late result: %v, want errFenced", err)
	}
	// A job whose view is current writes, and its mark advances.
	j2 := &job{e: e, a: a, log: e.log}
	if j2.resultSeq, err = e.lastSeq(ctx, events.KindResult, 101); err != nil {
		t.Fatal(err)
	}
	if err := j2.publish(ctx, j2.result(events.ResultSucceeded)); err != nil {
		t.Fatalf("current result refused: %v", err)
	}
}

// journalRecord reads what the journal says about an action, as a job does.
func journalRecord(ctx context.Context, e *Executor, vmid int, actionID string, seq uint64) (record, error) {
	l, err := e.readLasts(ctx, vmid)
	if err != nil {
		return record{}, err
	}
	return e.readRecord(ctx, vmid, actionID, seq, seqOf(l.action), seqOf(l.result))
}

// TestReadLastsBatchedAndOneByOne: the batched read of a guest's newest
// entries and the one-subject-at-a-time reads (servers that cannot batch)
// agree.
func TestReadLastsBatchedAndOneByOne(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := bustest.New(t)
	e, err := New(Config{Name: "x", Logger: zerolog.New(zerolog.NewTestWriter(t))}, &gatedProxmox{}, b)
	if err != nil {
		t.Fatal(err)
	}
	if e.stream, err = b.Stream(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range []events.Kind{events.KindDesired, events.KindAction, events.KindDesired, events.KindResult} {
		if _, err := b.Publish(ctx, events.Subject(k, "pve", 101), []byte(`{"vmid":101}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	batched, err := e.readLasts(ctx, 101)
	if err != nil || e.noBatchGet.Load() {
		t.Fatalf("batched: %v (fell back: %v)", err, e.noBatchGet.Load())
	}
	e.noBatchGet.Store(true)
	single, err := e.readLasts(ctx, 101)
	if err != nil {
		t.Fatal(err)
	}
	if seqOf(batched.action) != 2 || seqOf(batched.result) != 4 || seqOf(batched.desired) != 3 || batched.observed != nil {
		t.Fatalf("batched %d %d %d %v", seqOf(batched.action), seqOf(batched.result), seqOf(batched.desired), batched.observed)
	}
	if seqOf(single.action) != 2 || seqOf(single.result) != 4 || seqOf(single.desired) != 3 || single.observed != nil {
		t.Fatalf("one by one %d %d %d %v", seqOf(single.action), seqOf(single.result), seqOf(single.desired), single.observed)
	}
}
