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

// pipeline publishes every change at once and times full convergence.
func (r *run) pipeline(ctx context.Context) error {
	before, err := r.lastSeq(ctx)
	if err != nil {
		return err
	}
	actionsBefore := r.countActions()
	js := r.b.JS
	futures := make([]jetstream.PubAckFuture, r.o.Changes)
	settle()
	t0 := time.Now()
	for i := 0; i < r.o.Changes; i++ {
		vmid := 100 + i%r.o.Guests
		f, err := publishAsync(ctx, js, events.Subject(events.KindDesired, events.DefaultCluster, vmid), desiredBody(vmid, "bench change "+strconv.Itoa(i)))
		if err != nil {
			return err
		}
		futures[i] = f
		if i%5000 == 0 {
			r.o.Progress("publishing changes", i, r.o.Changes)
		}
	}
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			atomic.StoreUint64(&r.target[i%r.o.Guests], max(atomic.LoadUint64(&r.target[i%r.o.Guests]), ack.Sequence))
		case err := <-f.Err():
			return fmt.Errorf("bench: publish change %d: %w", i, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// The targets are final now and a guest's revision only grows: a guest
	// found converged stays so, and each poll checks only the others. The
	// polls are slow and cheap (scanning every guest every 10 ms took 4 %
	// of the CPU the pipeline is measured on); the end is advancedAt.
	touched := min(r.o.Changes, r.o.Guests)
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
		n := touched - len(waiting)
		r.o.Progress("converging", n, touched)
		return n, touched, n == touched
	})
	if err != nil {
		return err
	}
	elapsed := time.Unix(0, r.advancedAt.Load()).Sub(t0)
	if elapsed <= 0 { // nothing advanced: every guest was there already
		elapsed = time.Since(t0)
	}
	after, err := r.lastSeq(ctx)
	if err != nil {
		return err
	}
	r.det.PipelineSeconds = elapsed.Seconds()
	r.det.StreamWrites = after - before
	r.det.Actions = r.countActions() - actionsBefore
	r.rep.PipelineChangesPerS = rate(r.o.Changes, elapsed)
	r.rep.StreamWritesPerChange = float64(after-before) / float64(r.o.Changes)
	return nil
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
