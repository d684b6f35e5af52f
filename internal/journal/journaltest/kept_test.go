package journaltest_test

import (
	"context"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/journal/journaltest"
)

// TestTrimAndKept pins the in-memory journal's retention to the bus's:
// trimmed entries leave reads and fences (a subject whose newest entry is
// trimmed is empty), and Kept still has each subject's newest
// KeepPerSubject desired events, actions and results, in order, under
// their own sequences; observations and heartbeats are not kept.
func TestTrimAndKept(t *testing.T) {
	ctx := context.Background()
	j := journaltest.New(16, func() time.Time { return t0 })
	desired := j.Publish(msg(events.KindDesired, 101)) // 1
	action := j.Publish(msg(events.KindAction, 101))   // 2
	j.Publish(msg(events.KindObserved, 101))           // 3
	for range journaltest.KeepPerSubject + 1 {         // 4..12: 4 falls out of the keep
		j.Publish(msg(events.KindDesired, 102))
	}
	j.Trim(13)
	info, _ := j.Info(ctx)
	if info.FirstSeq != 13 || info.Msgs != 0 || info.LastSeq != 12 {
		t.Fatalf("info after trimming everything: %+v", info)
	}
	if e, _ := j.Get(ctx, desired); e != nil {
		t.Fatalf("trimmed entry %d still read", desired)
	}
	if ls, _ := j.Lasts(ctx, "pve", 101, events.KindDesired); ls[0] != nil {
		t.Fatalf("trimmed newest desired still read: %+v", ls[0])
	}
	// The action subject is empty now: a fence on the trimmed action is
	// refused, a fence on none accepted.
	if _, err := j.Append(ctx, msg(events.KindAction, 101), journal.FencedAt(action)); err == nil {
		t.Fatal("fence on a trimmed action accepted")
	}
	if _, err := j.Append(ctx, msg(events.KindAction, 101), journal.FencedAt(0)); err != nil {
		t.Fatalf("fence on none refused: %v", err)
	}
	kept, err := j.Kept(ctx, 0, 13)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, e := range kept {
		seqs = append(seqs, e.Seq)
	}
	want := []uint64{1, 2, 5, 6, 7, 8, 9, 10, 11, 12}
	if len(seqs) != len(want) {
		t.Fatalf("kept %v, want %v", seqs, want)
	}
	for i := range want {
		if seqs[i] != want[i] {
			t.Fatalf("kept %v, want %v", seqs, want)
		}
	}
	if kept, _ := j.Kept(ctx, 1, 6); len(kept) != 2 || kept[0].Seq != 2 || kept[1].Seq != 5 {
		t.Fatalf("kept in (1, 6): %+v", kept)
	}
}
