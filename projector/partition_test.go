package projector_test

import (
	"strconv"
	"testing"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// TestWrongPartitionNotFolded: an event stored under another partition
// than its guest's (published on a five-token subject before the journal
// refused them, so it skipped the partition transform) is not folded
// when the projector knows the partition count: no partition's reader and
// no executor's fence would see it.
func TestWrongPartitionNotFolded(t *testing.T) {
	const n = 16
	good := events.Partition("pve", 102, n)
	for _, part := range []int{99999, (good + 1) % n} {
		p := projector.New("pve")
		p.Partitions = n
		ch := p.Apply(projector.Event{Seq: 1, Subject: "pve.desired.pve.102." + strconv.Itoa(part), Data: []byte(`{"vmid":102,"power":"running"}`), Time: at(1)})
		if ch.Err == nil || p.Views[102] != nil {
			t.Fatalf("partition %d (want %d): folded, change %+v, view %+v", part, good, ch, p.Views[102])
		}
	}
	p := projector.New("pve")
	p.Partitions = n
	ch := p.Apply(projector.Event{Seq: 1, Subject: events.StoredSubject(events.KindDesired, "pve", 102, n), Data: []byte(`{"vmid":102,"power":"running"}`), Time: at(1)})
	if ch.Err != nil || p.Views[102] == nil || p.Views[102].Desired == nil {
		t.Fatalf("the right partition: %+v", ch)
	}
	// As published (no partition) and without a partition count, events fold as before.
	p = projector.New("pve")
	if ch := p.Apply(desiredEv(1, 102, `{"vmid":102}`, nil)); ch.Err != nil {
		t.Fatal(ch.Err)
	}
}
