package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
)

// LastPerSubject implements journal.Latest with one short-lived consumer
// that delivers the newest message of each stored subject matching filter,
// in memory and unacknowledged; it is deleted when done (or expires a
// minute after).
func (b *Bus) LastPerSubject(ctx context.Context, filter string, fn func(journal.Entry)) error {
	s, err := b.stream(ctx)
	if err != nil {
		return err
	}
	cons, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Description:       "converge: last entry per subject",
		FilterSubject:     filter,
		DeliverPolicy:     jetstream.DeliverLastPerSubjectPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		return fmt.Errorf("consumer on %s: %w", filter, err)
	}
	name := cons.CachedInfo().Name
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.DeleteConsumer(dctx, name) // else it expires after InactiveThreshold
	}()
	want := cons.CachedInfo().NumPending
	var got uint64
	for got < want {
		batch, err := cons.Fetch(int(min(want-got, 1000)), jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			return err
		}
		n := 0
		last := false
		for m := range batch.Messages() {
			n++
			got++
			md, err := m.Metadata()
			if err != nil {
				return err
			}
			last = md.NumPending == 0
			fn(journal.Entry{Seq: md.Sequence.Stream, Subject: m.Subject(), Header: events.Header(m.Headers()), Data: m.Data(),
				Time: md.Timestamp})
		}
		if err := batch.Error(); err != nil {
			return err
		}
		if last {
			break
		}
		if n == 0 {
			return fmt.Errorf("read %d of %d last entries, then nothing more arrived", got, want)
		}
	}
	return nil
}
