package bus

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ReadInactive is how long the server keeps the consumer of a one-off read
// after its last pull. The reader deletes it when it is done; this bounds
// what a reader that died leaves behind.
const ReadInactive = 30 * time.Second

// ReadOnce opens an ordered consumer for one read of a stream (a history,
// a replay, the keep stream) and returns it with its release, which the
// caller runs once it has stopped consuming: release deletes the server's
// consumer. nats.go's ordered consumers are not deleted when they stop
// and live on for five minutes, and nats-server 2.15 refuses more than
// 1,000 consumers per stream by default: a few hundred `converge history`
// calls, or a client polling the journal, would otherwise lock every
// role out of creating its consumers.
func ReadOnce(ctx context.Context, s jetstream.Stream, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, func(), error) {
	if cfg.InactiveThreshold == 0 {
		cfg.InactiveThreshold = ReadInactive
	}
	oc, err := s.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	release := func() {
		info := oc.CachedInfo()
		if info == nil {
			return // never consumed: no server consumer exists
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.DeleteConsumer(dctx, info.Name) // if this fails, ReadInactive does it
	}
	return oc, release, nil
}
