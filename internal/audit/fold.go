package audit

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/projector"
)

// foldBatch is how many events are decoded together: large enough to keep
// every core busy in projector.Predecode, small enough to fold while the
// next batch arrives.
const foldBatch = 1024

// FoldUntil folds every event of the journal up to until (the whole stream
// when until is zero, as the stream stood when the call began) into a new
// projector for cluster. progress, if not nil, is called on the caller's
// goroutine after each batch with the events folded so far and the events
// to fold in all.
//
// auth, if given, checks desired events' signatures as the planner does
// (its --trusted-keys, --require-signed): a replay must reject what live
// rejected.
func FoldUntil(ctx context.Context, js jetstream.JetStream, stream, cluster string, until Point, progress func(done, total uint64),
	auth ...*projector.Auth) (*projector.Projector, error) {
	p := projector.New(cluster)
	p.Auth = firstAuth(auth)
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("journal: stream %s: %w", stream, err)
	}
	// As the planner does, events stored under another partition than
	// their guest's are not folded.
	if n, err := Partitions(s.CachedInfo().Config); err == nil {
		p.Partitions = n
	}
	st := s.CachedInfo().State
	last, err := target(ctx, s, st, until)
	if err != nil || last == 0 {
		return p, err
	}
	first := max(st.FirstSeq, 1)
	total := last - first + 1
	// No subject filter: the projector ignores other clusters' events, and
	// a filter would cost the server a subject-tree search per message.
	oc, release, err := bus.ReadOnce(ctx, s, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, fmt.Errorf("journal: consumer: %w", err)
	}
	defer release() // after cc.Stop below (defers run last first)

	// The consumer's callback batches messages; this goroutine decodes and
	// folds them, so receiving overlaps folding.
	batches := make(chan []projector.Event, 4)
	stop := make(chan struct{})
	var once sync.Once
	finish := func() { once.Do(func() { close(batches) }) }
	batch := make([]projector.Event, 0, foldBatch)
	send := func() bool {
		select {
		case batches <- batch:
			batch = make([]projector.Event, 0, foldBatch)
			return true
		case <-stop:
			return false
		}
	}
	done := false // read and written on the callback's goroutine only
	cc, err := oc.Consume(func(m jetstream.Msg) {
		if done {
			return
		}
		md, err := m.Metadata()
		if err != nil {
			return
		}
		seq := md.Sequence.Stream
		if seq <= last {
			batch = append(batch, projector.Event{Seq: seq, Subject: m.Subject(), Header: events.Header(m.Headers()), Data: m.Data(), Time: md.Timestamp})
		}
		end := seq >= last || md.NumPending == 0
		if (len(batch) == foldBatch || end) && len(batch) > 0 && !send() {
			done = true
			return
		}
		if end {
			done = true
			finish()
		}
	}, jetstream.PullMaxMessages(foldBatch), jetstream.PullHeartbeat(bus.ConsumeHeartbeat))
	if err != nil {
		return nil, fmt.Errorf("journal: consume: %w", err)
	}
	defer cc.Stop()
	defer close(stop) // releases a callback blocked on a batch nobody takes

	workers := runtime.GOMAXPROCS(0)
	var folded uint64
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case evs, ok := <-batches:
			if !ok {
				if progress != nil {
					progress(total, total)
				}
				return p, nil
			}
			projector.Predecode(evs, workers)
			for _, ev := range evs {
				p.Apply(ev)
			}
			folded += uint64(len(evs))
			if progress != nil {
				progress(min(folded, total), total)
			}
		}
	}
}

func firstAuth(a []*projector.Auth) *projector.Auth {
	if len(a) > 0 {
		return a[0]
	}
	return nil
}
