package bus

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
)

// consumerStall is how long a feed may stay behind the stream without
// progress before its consumer is re-created; lagCheck how often the
// stream's end is sampled for that.
const (
	consumerStall = 15 * time.Second
	lagCheck      = 5 * time.Second
)

// feed is a Follow in progress: an ordered consumer, re-created when it
// stalls.
type feed struct {
	b       *Bus
	ctx     context.Context
	cancel  context.CancelFunc
	s       jetstream.Stream
	c       chan journal.Entry
	lastSeq atomic.Uint64 // of the last entry handed on
	done    chan struct{}
}

func (f *feed) C() <-chan journal.Entry { return f.c }

func (f *feed) Stop() {
	f.cancel()
	<-f.done
}

// Follow implements journal.Follower with an ordered consumer from the
// entry after seq. No subject filter: a multi-subject filter costs the
// server a subject-tree search per message, and followers skip what they
// do not fold.
//
// An ordered consumer can stall for good when the server that held it dies
// (nats.go re-creates it under the same name, on the dead peer): behind the
// stream with no progress for consumerStall, the feed goes on through a new
// one from the last entry it delivered. Entries may then come twice.
func (b *Bus) Follow(ctx context.Context, after uint64) (journal.Feed, error) {
	s, err := b.stream(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &feed{b: b, ctx: ctx, cancel: cancel, s: s, c: make(chan journal.Entry, 1024), done: make(chan struct{})}
	f.lastSeq.Store(after)
	cc, err := f.consume(after)
	if err != nil {
		cancel()
		return nil, err
	}
	go f.watch(cc)
	return f, nil
}

// consume starts an ordered consumer at the entry after seq.
func (f *feed) consume(seq uint64) (jetstream.ConsumeContext, error) {
	occ := jetstream.OrderedConsumerConfig{}
	if seq > 0 {
		occ.DeliverPolicy, occ.OptStartSeq = jetstream.DeliverByStartSequencePolicy, seq+1
	}
	cons, err := f.s.OrderedConsumer(f.ctx, occ)
	if err != nil {
		return nil, err
	}
	return cons.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			f.b.log.Error().Str("subject", m.Subject()).Msg("journal message without metadata; skipped")
			return
		}
		e := journal.Entry{Seq: md.Sequence.Stream, Subject: m.Subject(), Header: events.Header(m.Headers()), Data: m.Data(),
			Time: md.Timestamp, Pending: md.NumPending}
		select {
		case f.c <- e:
			f.lastSeq.Store(e.Seq)
		case <-f.ctx.Done():
		}
	}, jetstream.PullMaxMessages(1000), jetstream.PullHeartbeat(ConsumeHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if f.ctx.Err() == nil { // the server going away at shutdown is no news
				f.b.log.Warn().Err(err).Msg("journal consumer")
			}
		}))
}

// watch samples the stream's end and re-creates a stalled consumer, until
// the feed stops.
func (f *feed) watch(cc jetstream.ConsumeContext) {
	defer close(f.done)
	defer func() { cc.Stop() }()
	t := time.NewTicker(lagCheck)
	defer t.Stop()
	var stalledSince time.Time
	var stalledAt uint64
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-t.C:
		}
		ictx, cancel := context.WithTimeout(f.ctx, lagCheck)
		info, err := f.s.Info(ictx)
		cancel()
		if err != nil {
			continue
		}
		at := f.lastSeq.Load()
		last := info.State.LastSeq
		switch {
		case last <= at:
			stalledSince = time.Time{}
		case stalledSince.IsZero() || at != stalledAt:
			stalledSince, stalledAt = time.Now(), at
		case time.Since(stalledSince) >= consumerStall:
			f.b.log.Warn().Uint64("delivered", at).Uint64("stream_last", last).Dur("stalled", time.Since(stalledSince)).
				Msg("journal consumer made no progress; re-creating it")
			if ncc, err := f.consume(at); err != nil {
				f.b.log.Warn().Err(err).Msg("journal consumer not re-created; will retry")
			} else {
				cc.Stop()
				cc = ncc
			}
			stalledSince = time.Time{}
		}
	}
}
