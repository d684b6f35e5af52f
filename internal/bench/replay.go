package bench

import (
	"context"
	"runtime"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/projector"
)

// idle measures Proxmox calls of observer passes with nothing changed.
func (r *run) idle(ctx context.Context) error {
	r.app.StopRole("observer") // the benchmark drives passes itself from here on
	obs := r.app.Observer()
	if _, err := obs.Pass(ctx); err != nil {
		return err
	}
	const passes = 3
	before, err := r.sim.Calls(ctx)
	if err != nil {
		return err
	}
	for i := 0; i < passes; i++ {
		if _, err := obs.Pass(ctx); err != nil {
			return err
		}
	}
	after, err := r.sim.Calls(ctx)
	if err != nil {
		return err
	}
	r.rep.PveCallsPerIdlePass = float64(after-before) / passes
	return nil
}

// replay folds the whole journal into a fresh projector.
func (r *run) replay(ctx context.Context) error {
	s, err := r.b.Stream(ctx)
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	total := int(info.State.Msgs)
	p := projector.New(events.DefaultCluster)
	oc, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return err
	}
	// As the planner catches up: batches decoded in parallel, folded in order.
	var cnt int
	done := make(chan struct{})
	batch := make([]projector.Event, 0, 1024)
	settle()
	apply := func() {
		projector.Predecode(batch, runtime.GOMAXPROCS(0))
		for _, ev := range batch {
			p.Apply(ev)
		}
		cnt += len(batch)
		batch = batch[:0]
	}
	t0 := time.Now()
	cc, err := oc.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			return
		}
		batch = append(batch, projector.Event{Seq: md.Sequence.Stream, Subject: m.Subject(), Header: events.Header(m.Headers()), Data: m.Data(), Time: md.Timestamp})
		last := md.Sequence.Stream >= info.State.LastSeq
		if len(batch) == cap(batch) || last {
			apply()
			r.o.Progress("replaying", cnt, total)
		}
		if last {
			close(done)
		}
	}, jetstream.PullMaxMessages(1000), jetstream.PullHeartbeat(bus.ConsumeHeartbeat))
	if err != nil {
		return err
	}
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	cc.Stop()
	r.det.ReplayEvents = cnt
	r.rep.ReplayEventsPerS = rate(cnt, time.Since(t0))
	return nil
}
