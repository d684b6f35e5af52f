package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
)

// warm waits until the planner has observed every guest.
func (r *run) warm(ctx context.Context) error {
	return waitFor(ctx, 5*time.Minute, "first observation of every guest", func() (int, int, bool) {
		n := int(r.observed.Load())
		r.o.Progress("observing guests", n, r.o.Guests)
		return n, r.o.Guests, n >= r.o.Guests
	})
}

func desiredBody(vmid int, desc string) []byte {
	return []byte(`{"vmid":` + strconv.Itoa(vmid) + `,"description":"` + desc + `"}`)
}

func (r *run) lastSeq(ctx context.Context) (uint64, error) {
	s, err := r.b.Stream(ctx)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// flow is what one throughput run measured.
type flow struct {
	changes, actions int
	writes           uint64
	elapsed          time.Duration
	cpu              time.Duration // the process's CPU (every in-process role, server, simulator)
	alloc            uint64        // bytes the process allocated
	calls            int64         // Proxmox calls the simulator answered
	// msgsIn and msgsOut are the messages the embedded server received
	// from its clients and sent to them: what the bus carried.
	msgsIn, msgsOut int64
}

// pipeline is the throughput run: one change per guest (Options.Changes,
// default Guests), so that every change is an action; then, labelled
// apart, the coalesced burst.
func (r *run) pipeline(ctx context.Context) error {
	f, err := r.flow(ctx, r.o.Changes, "bench change ", "throughput")
	if err != nil {
		return err
	}
	r.det.PipelineSeconds = f.elapsed.Seconds()
	r.det.StreamWrites = f.writes
	r.det.Actions = f.actions
	r.rep.PipelineChangesPerS = rate(f.changes, f.elapsed)
	r.rep.StreamWritesPerChange = float64(f.writes) / float64(f.changes)
	if f.actions > 0 {
		n := float64(f.actions)
		r.rep.ActionsPerS = rate(f.actions, f.elapsed)
		r.rep.CPUMsPerAction = float64(f.cpu.Microseconds()) / 1000 / n
		r.rep.PveCallsPerAction = float64(f.calls) / n
		r.rep.BytesAllocatedPerAction = float64(f.alloc) / n
		r.det.MsgsInPerAction, r.det.MsgsOutPerAction = float64(f.msgsIn)/n, float64(f.msgsOut)/n
	}
	if r.o.BurstChanges <= 0 {
		return nil
	}
	b, err := r.flow(ctx, r.o.BurstChanges, "burst change ", "burst")
	if err != nil {
		return err
	}
	r.rep.BurstChanges = b.changes
	r.rep.BurstChangesPerS = rate(b.changes, b.elapsed)
	r.rep.BurstWritesPerChange = float64(b.writes) / float64(b.changes)
	r.det.BurstSeconds, r.det.BurstActions = b.elapsed.Seconds(), b.actions
	return nil
}

// flow publishes n changes at once, round-robin over the guests, each a
// new description, and times full convergence; phase names its profiles
// (Options.PhaseProfiles).
func (r *run) flow(ctx context.Context, n int, label, phase string) (f flow, err error) {
	f = flow{changes: n}
	before, err := r.lastSeq(ctx)
	if err != nil {
		return f, err
	}
	actionsBefore := r.countActions()
	js := r.b.JS
	futures := make([]jetstream.PubAckFuture, n)
	settle()
	prof, err := r.startPhase(phase)
	if err != nil {
		return f, err
	}
	defer func() {
		if perr := prof.stop(); err == nil {
			err = perr
		}
	}()
	calls0, err := r.sim.Calls(ctx)
	if err != nil {
		return f, err
	}
	_, alloc0 := gcCounters()
	in0, out0 := r.busMsgs()
	cpu0 := processCPU()
	t0 := time.Now()
	for i := 0; i < n; i++ {
		vmid := 100 + i%r.o.Guests
		f, err := publishAsync(ctx, js, events.Subject(events.KindDesired, events.DefaultCluster, vmid), desiredBody(vmid, label+strconv.Itoa(i)))
		if err != nil {
			return flow{}, err
		}
		futures[i] = f
		if i%5000 == 0 {
			r.o.Progress("publishing changes", i, n)
		}
	}
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			atomic.StoreUint64(&r.target[i%r.o.Guests], max(atomic.LoadUint64(&r.target[i%r.o.Guests]), ack.Sequence))
		case err := <-f.Err():
			return flow{}, fmt.Errorf("bench: publish change %d: %w", i, err)
		case <-ctx.Done():
			return flow{}, ctx.Err()
		}
	}
	// The targets are final now and a guest's revision only grows: a guest
	// found converged stays so, and each poll checks only the others. The
	// polls are slow and cheap (scanning every guest every 10 ms took 4 %
	// of the CPU the pipeline is measured on); the end is advancedAt.
	touched := min(n, r.o.Guests)
	waiting := make([]int, touched)
	for i := range waiting {
		waiting[i] = i
	}
	err = waitForEvery(ctx, 50*time.Millisecond, 30*time.Minute, "pipeline convergence", func() (int, int, bool) {
		left := waiting[:0]
		for _, i := range waiting {
			if atomic.LoadUint64(&r.converged[i]) < atomic.LoadUint64(&r.target[i]) {
				left = append(left, i)
			}
		}
		waiting = left
		c := touched - len(waiting)
		r.o.Progress("converging", c, touched)
		return c, touched, c == touched
	})
	if err != nil {
		return f, err
	}
	// CPU, allocations and calls up to the moment it was seen converged:
	// the poll's lag adds an idle tail, not work.
	f.cpu = processCPU() - cpu0
	_, alloc1 := gcCounters()
	f.alloc = alloc1 - alloc0
	in1, out1 := r.busMsgs()
	f.msgsIn, f.msgsOut = in1-in0, out1-out0
	calls1, err := r.sim.Calls(ctx)
	if err != nil {
		return f, err
	}
	f.calls = calls1 - calls0
	f.elapsed = time.Unix(0, r.advancedAt.Load()).Sub(t0)
	if f.elapsed <= 0 { // nothing advanced: every guest was there already
		f.elapsed = time.Since(t0)
	}
	after, err := r.lastSeq(ctx)
	if err != nil {
		return f, err
	}
	f.writes = after - before
	f.actions = r.countActions() - actionsBefore
	return f, nil
}

// busMsgs are the messages the embedded server has received from and sent
// to its clients so far.
func (r *run) busMsgs() (in, out int64) {
	srv := r.app.Server()
	if srv == nil {
		return 0, 0
	}
	v, err := srv.Varz(nil)
	if err != nil {
		return 0, 0
	}
	return v.InMsgs, v.OutMsgs
}

func (r *run) countActions() int {
	s, err := r.b.Stream(context.Background())
	if err != nil {
		return 0
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter("pve.action.>"))
	if err != nil {
		return 0
	}
	n := 0
	for _, c := range info.State.Subjects {
		n += int(c)
	}
	return n
}
