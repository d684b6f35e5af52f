package app_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
)

// A test that asserts that nothing happened (no task, no mutation, no
// second action) asserts it once the system has settled: the observer
// passes it makes first are folded by the planner, and whatever they made
// it plan has been carried out and its result folded (settleIn). Those
// assertions are shown able to fail by a test-only fault, the late fault
// (TestNegativeAssertionsCanFail runs the tests with it).

// lateFaultEnv switches the late fault on: CONVERGE_TEST_LATE_FAULT=n.
//   - The n-th settle of a pipeline (settleIn, settle, quiet) journals,
//     right after its last observer pass, a desired state that turns the
//     guest's power over (running → stopped, anything else → running): the
//     planner and the executor then do something the test says must not
//     happen, and do it after the pass returned, as they would if a bug
//     made them act on the pass itself. Only an assertion that waits for
//     them sees the shutdown or start in Proxmox.
//   - The observer reads a guest the test marks with lagReads as it was
//     before the mark for the next reads: a change made by hand is seen,
//     and corrected, late.
//
// It is read by startPipeline; without it neither happens.
const lateFaultEnv = "CONVERGE_TEST_LATE_FAULT"

// lateFault reads lateFaultEnv: the ordinal of the settle to fault, 0 when
// the fault is off.
func lateFault(t *testing.T) int {
	t.Helper()
	v := os.Getenv(lateFaultEnv)
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want the ordinal (1, 2, …) of the settle to fault", lateFaultEnv, v)
	}
	return n
}

// settleIn runs three observer passes, then waits until the system has
// settled on the guest (caughtUp) and returns its document, whatever its
// state: a test asserts what must not have happened first, then the
// state.
func (p *pipeline) settleIn(t *testing.T, vmid int) *views.GuestDoc {
	t.Helper()
	return p.settleWhen(t, vmid, nil)
}

// settle is settleIn for a guest that must settle converged.
func (p *pipeline) settle(t *testing.T, vmid int) *views.GuestDoc {
	t.Helper()
	return p.settleWhen(t, vmid, func(d *views.GuestDoc) bool { return d.Status.Kind == planner.Converged })
}

func (p *pipeline) settleWhen(t *testing.T, vmid int, state func(*views.GuestDoc) bool) *views.GuestDoc {
	t.Helper()
	p.settles++
	for range 3 {
		p.pass(t)
	}
	if p.late == p.settles {
		p.lateAction(t, vmid)
	}
	return p.caughtUp(t, vmid, state)
}

// caughtUp waits until the planner has folded the journal up to where it
// ends now (its cluster document is written at or past that sequence:
// every guest's document reflects those events, and the time-based work
// their heartbeats run), and nothing acts on the guest or is about to:
// no action in flight, no next step in its document (the planner records
// the step it hands out before it publishes it; a retry or a restart
// window waits with none). Whatever the journal up to now called for has
// then been carried out, and its result folded. If state is given, the
// guest must also be in it.
func (p *pipeline) caughtUp(t *testing.T, vmid int, state func(*views.GuestDoc) bool) *views.GuestDoc {
	t.Helper()
	ctx := pvesimtest.Context(t)
	info, err := p.a.Bus().Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var cd *views.ClusterDoc
	var doc *views.GuestDoc
	if !until(30*time.Second, func() bool {
		c, err := p.rd.ClusterDoc(ctx)
		if err != nil || c == nil {
			return false
		}
		cd = c
		if cd.Seq < info.LastSeq {
			return false
		}
		d, err := p.rd.Guest(ctx, vmid)
		if err != nil || d == nil || d.View == nil {
			return false
		}
		doc = d
		return doc.View.InFlight == nil && len(doc.Next) == 0 && (state == nil || state(doc))
	}) {
		seq := uint64(0)
		if cd != nil {
			seq = cd.Seq
		}
		t.Fatalf("guest %d did not settle: the planner folded to #%d of #%d; document %+v", vmid, seq, info.LastSeq, doc)
	}
	return doc
}

// lateAction is the late fault's wrong action: a desired state for vmid
// that turns its power over, journalled after the settle's last pass.
func (p *pipeline) lateAction(t *testing.T, vmid int) {
	t.Helper()
	power := events.PowerRunning
	if g, ok := p.sim.Guest(vmid); ok && g.Status == "running" {
		power = events.PowerStopped
	}
	m, err := events.DesiredMessage(&events.Desired{VMID: vmid, Power: &power}, events.PublishOptions{Publisher: "late-fault"})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := p.a.Bus().Append(pvesimtest.Context(t), m, journal.Expect{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("late fault: settle #%d journalled desired power %s for guest %d (#%d) after its last pass", p.settles, power, vmid, ack.Seq)
}

// lateReads is the observer's Proxmox under the late fault: the configs
// of the guests lagReads marked are read as they were at the mark, for
// the reads it gives them.
type lateReads struct {
	observer.Proxmox
	t      *testing.T
	mu     sync.Mutex
	frozen map[int]*frozenConfig
}

type frozenConfig struct {
	cfg   *pve.GuestConfig
	reads int
}

func (l *lateReads) GuestConfig(ctx context.Context, ref pve.GuestRef) (*pve.GuestConfig, error) {
	l.mu.Lock()
	f := l.frozen[ref.VMID]
	if f != nil && f.reads > 0 {
		f.reads--
		c := copyConfig(f.cfg)
		l.mu.Unlock()
		l.t.Logf("late fault: guest %d's config read as at the mark (%d such reads left)", ref.VMID, f.reads)
		return c, nil
	}
	l.mu.Unlock()
	return l.Proxmox.GuestConfig(ctx, ref)
}

func copyConfig(g *pve.GuestConfig) *pve.GuestConfig {
	c := *g
	c.Tags, c.PendingDelete = slices.Clone(g.Tags), slices.Clone(g.PendingDelete)
	c.Raw, c.Pending = maps.Clone(g.Raw), maps.Clone(g.Pending)
	return &c
}

// lagReads marks the guest under the late fault: the observer's next
// reads of its config return the config as it is now. Without the fault
// it does nothing.
func (p *pipeline) lagReads(t *testing.T, ref pve.GuestRef, reads int) {
	t.Helper()
	if p.reads == nil {
		return
	}
	cfg, err := p.reads.Proxmox.GuestConfig(pvesimtest.Context(t), ref)
	if err != nil {
		t.Fatal(err)
	}
	p.reads.mu.Lock()
	p.reads.frozen[ref.VMID] = &frozenConfig{cfg: cfg, reads: reads}
	p.reads.mu.Unlock()
	t.Logf("late fault: the observer reads guest %d as it is now for its next %d config reads", ref.VMID, reads)
}

// journalled reads every event of kind journalled for vmid.
func journalled[T any](t *testing.T, p *pipeline, kind events.Kind, vmid int) []T {
	t.Helper()
	ctx := pvesimtest.Context(t)
	st, err := p.a.Bus().Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.StoredFilter(kind, events.DefaultCluster, vmid)}})
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	for {
		batch, err := c.FetchNoWait(100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			v, err := events.Decode[T](m.Data())
			if err != nil {
				t.Fatal(fmt.Errorf("%s of guest %d: %w", kind, vmid, err))
			}
			out = append(out, v)
		}
		if n == 0 {
			return out
		}
	}
}
