package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/journal"
)

// NextOfKind finds a cluster's first entry of one kind at or after a
// sequence, whatever the guest and its partition, and nothing of another
// kind or cluster.
func TestNextOfKind(t *testing.T) {
	b := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	put := func(kind events.Kind, cluster string, vmid int) uint64 {
		t.Helper()
		ack, err := b.Append(ctx, events.Message{Subject: events.Subject(kind, cluster, vmid), Data: []byte(`{}`)}, journal.Expect{})
		if err != nil {
			t.Fatal(err)
		}
		return ack.Seq
	}
	put(events.KindObserved, "pve", 100)
	d1 := put(events.KindDesired, "pve", 101)
	put(events.KindDesired, "lab", 102)
	d2 := put(events.KindDesired, "pve", 9999)
	for _, c := range []struct{ from, want uint64 }{{1, d1}, {d1, d1}, {d1 + 1, d2}, {d2 + 1, 0}} {
		e, err := b.NextOfKind(ctx, events.KindDesired, "pve", c.from)
		switch {
		case err != nil:
			t.Fatalf("from %d: %v", c.from, err)
		case c.want == 0 && e != nil, c.want != 0 && (e == nil || e.Seq != c.want):
			t.Errorf("from %d: %+v, want #%d", c.from, e, c.want)
		}
	}
}
