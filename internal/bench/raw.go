package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
)

// sampleSize is the size of the events the pipeline writes per change.
func sampleSize() int {
	now := time.Now()
	d, _ := json.Marshal(map[string]any{"vmid": 4242, "description": "bench change 99999"})
	a, _ := json.Marshal(events.Action{Meta: events.NewMeta("bench-planner", "desired-pve-4242-123456", now), ID: "pve-4242-123456-1",
		VMID: 4242, Cluster: "pve", Node: "pve1", Kind: events.QEMU, Op: events.OpSetConfig,
		Set: map[string]string{"description": "bench change 99999"}, Digest: "0123456789abcdef0123456789abcdef01234567",
		Reason: "config drift: description", DesiredSeq: 123456, BasisSeq: 123400, Attempt: 1})
	o := &events.Observed{Meta: events.NewMeta("bench-executor", "", now), VMID: 4242, Cluster: "pve", Exists: true, Node: "pve1",
		Kind: events.QEMU, Status: "running", Digest: "0123456789abcdef0123456789abcdef01234567",
		Config: events.GuestConfig{Name: "vm-4242", Description: "bench change 99999", Tags: []string{"demo"}, Cores: 1, MemoryMiB: 512},
		ReadAt: now, Source: events.SourceExecutor}
	res, _ := json.Marshal(events.Result{Meta: events.NewMeta("bench-executor", "desired-pve-4242-123456", now),
		ActionID: "pve-4242-123456-1", VMID: 4242, Cluster: "pve", Op: events.OpSetConfig, Status: events.ResultSucceeded,
		Observed: o, Executor: "bench-executor"})
	return (len(d) + len(a) + len(res)) / 3
}

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// publishAsync publishes without waiting, and waits when the window of
// unacknowledged publishes is full and the server has not drained it within
// the client's stall wait: back-pressure, not a failure (the raw run and
// the pipeline meet it the same way).
func publishAsync(ctx context.Context, js jetstream.JetStream, subject string, data []byte) (jetstream.PubAckFuture, error) {
	for {
		f, err := js.PublishAsync(subject, data)
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return f, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// publishDesired publishes the desired state body(i) of guests 100 …
// 100+n-1 at once (asynchronously) and waits until the stream has every
// one, as a platform publishing a fleet change would.
func publishDesired(ctx context.Context, js jetstream.JetStream, n int, body func(i int) string) error {
	futures := make([]jetstream.PubAckFuture, n)
	for i := range futures {
		var err error
		if futures[i], err = publishAsync(ctx, js, events.Subject(events.KindDesired, events.DefaultCluster, 100+i), []byte(body(i))); err != nil {
			return err
		}
	}
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("bench: publish the desired state of %d: %w", 100+i, err)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// raw measures the bus alone with the pipeline's message count and size.
func (r *run) raw(ctx context.Context) error {
	n, size := r.o.Changes*3, sampleSize()
	r.det.RawMessages, r.det.RawMessageBytes = n, size
	js := r.b.JS
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCHRAW", Subjects: []string{"benchraw.>"},
		Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy})
	if err != nil {
		return err
	}
	defer func() { _ = js.DeleteStream(context.WithoutCancel(ctx), "BENCHRAW") }()
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	settle()
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if _, err := publishAsync(ctx, js, "benchraw."+strconv.Itoa(100+i%r.o.Guests), payload); err != nil {
			return err
		}
		if i%10000 == 0 {
			r.o.Progress("raw publish", i, n)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	r.rep.RawPublishMsgsPerS = rate(n, time.Since(t0))

	cons, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "benchraw", AckPolicy: jetstream.AckExplicitPolicy,
		MaxAckPending: 10000})
	if err != nil {
		return err
	}
	got := make(chan struct{})
	var cnt atomic.Int64
	settle()
	t0 = time.Now()
	cc, err := cons.Consume(func(m jetstream.Msg) {
		_ = m.Ack()
		if c := cnt.Add(1); c == int64(n) {
			close(got)
		} else if c%10000 == 0 {
			r.o.Progress("raw consume", int(c), n)
		}
	}, jetstream.PullMaxMessages(1000), jetstream.PullHeartbeat(bus.ConsumeHeartbeat), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		r.log.Warn().Err(err).Msg("raw consume")
	}))
	if err != nil {
		return err
	}
	<-got
	r.rep.RawConsumeMsgsPerS = rate(n, time.Since(t0))
	cc.Stop()

	settle()
	t0 = time.Now()
	cnt.Store(0)
	got = make(chan struct{})
	oc, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return err
	}
	cc, err = oc.Consume(func(m jetstream.Msg) {
		if c := cnt.Add(1); c == int64(n) {
			close(got)
		}
	}, jetstream.PullMaxMessages(1000), jetstream.PullHeartbeat(bus.ConsumeHeartbeat))
	if err != nil {
		return err
	}
	<-got
	r.rep.RawReplayMsgsPerS = rate(n, time.Since(t0))
	cc.Stop()
	return nil
}
