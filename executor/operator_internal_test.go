package executor

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/control"
	"github.com/converge-pve/converge/internal/journal"
)

// nextCounter counts the journal walks (Next) an executor makes.
type nextCounter struct {
	Journal
	next atomic.Int64
}

func (c *nextCounter) Next(ctx context.Context, kind events.Kind, cluster string, vmid int, seq uint64) (*journal.Entry, error) {
	c.next.Add(1)
	return c.Journal.Next(ctx, kind, cluster, vmid, seq)
}

// TestOperatorRequestsReadWithTheLasts: the guest's first journal read
// (readLasts, against a real JetStream) carries the cluster's newest
// operator's request, so an action with no request after its plan is
// checked without a walk of the control subject; one with a pause after
// its plan is still stopped, by a walk.
func TestOperatorRequestsReadWithTheLasts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := bustest.New(t)
	j := &nextCounter{Journal: b}
	e, err := New(testConfig("ops", zerolog.New(zerolog.NewTestWriter(t))), &gatedProxmox{}, j, b.LeaseStore)
	if err != nil {
		t.Fatal(err)
	}
	publish := func(cmd string, vmids ...int) uint64 {
		t.Helper()
		seq, err := control.Publish(ctx, b, "pve", events.Control{Meta: events.NewMeta("alice", "", time.Now()), Command: cmd, VMIDs: vmids})
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	first := publish(events.CommandPause, 102) // another guest's, before the plan
	a := events.Action{ID: "a1", VMID: 101, Cluster: "pve", Op: events.OpStart, FoldSeq: first}

	l, err := e.readLasts(ctx, 101)
	if err != nil {
		t.Fatal(err)
	}
	if seqOf(l.control) != first {
		t.Fatalf("the lasts' control entry is %d, want the newest request %d", seqOf(l.control), first)
	}
	why, err := e.operatorStop(ctx, a, l.control)
	if err != nil || why != "" {
		t.Fatalf("no request after the plan: %q, %v", why, err)
	}
	if n := j.next.Load(); n != 0 {
		t.Errorf("%d walks of the journal with no request after the plan, want 0", n)
	}

	pause := publish(events.CommandPause, 101)
	if l, err = e.readLasts(ctx, 101); err != nil {
		t.Fatal(err)
	}
	if seqOf(l.control) != pause {
		t.Fatalf("the lasts' control entry is %d, want %d", seqOf(l.control), pause)
	}
	why, err = e.operatorStop(ctx, a, l.control)
	if err != nil || !strings.HasPrefix(why, "paused by alice") {
		t.Fatalf("a pause after the plan: %q, %v", why, err)
	}
	if j.next.Load() == 0 {
		t.Error("a request after the plan was not read")
	}
}
