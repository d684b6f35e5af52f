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
	e, err := New(Unverified(testConfig("stale", zerolog.New(zerolog.NewTestWriter(t)))), px, b, b.LeaseStore)
	if err != nil {
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
	msg := deliver(t, ctx, b, ack.Sequence, 1)
	info, _ := events.ParseSubject(msg.Entry().Subject)
	e.Handle(ctx, info.Partition, msg)
	if n := px.starts.Load(); n != 0 {
		t.Fatalf("%d starts issued without the partition's lease", n)
	}
	if a, terms, _ := msg.Counts(); a+terms != 0 {
		t.Fatal("the action was acknowledged or terminated: it must be left for the partition's owner")
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
	e, err := New(Unverified(testConfig("late", zerolog.New(zerolog.NewTestWriter(t)))), &gatedProxmox{}, b, b.LeaseStore)
	if err != nil {
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
	if _, err := e.publishResult(ctx, other, 0); err != nil {
		t.Fatal(err)
	}
	err = j.publish(ctx, j.result(events.ResultSucceeded))
	if !errors.Is(err, errFenced) {
		t.Fatalf("late result: %v, want errFenced", err)
	}
	// A job whose view is current writes, and its mark advances.
	j2 := &job{e: e, a: a, log: e.log}
	l, err := e.readLasts(ctx, 101)
	if err != nil {
		t.Fatal(err)
	}
	j2.resultSeq = seqOf(l.result)
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
