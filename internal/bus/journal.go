package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
)

// The journal roles of package journal, over JetStream.
var (
	_ journal.Reader        = (*Bus)(nil)
	_ journal.Appender      = (*Bus)(nil)
	_ journal.AsyncAppender = (*Async)(nil)
	_ journal.AsyncAppender = (*Bus)(nil)
	_ journal.Latest        = (*Bus)(nil)
	_ journal.Follower      = (*Bus)(nil)
)

// entryOf is a direct read's message as a journal entry.
func entryOf(m *jetstream.RawStreamMsg) *journal.Entry {
	if m == nil {
		return nil
	}
	return &journal.Entry{Seq: m.Sequence, Subject: m.Subject, Header: events.Header(m.Header), Data: m.Data, Time: m.Time}
}

// stream returns the journal stream's handle, looked up once and shared
// by copies of the Bus (a lookup is a request to the server).
func (b *Bus) stream(ctx context.Context) (jetstream.Stream, error) {
	b.sc.mu.Lock()
	defer b.sc.mu.Unlock()
	if b.sc.s != nil {
		return b.sc.s, nil
	}
	s, err := b.Stream(ctx)
	if err != nil {
		return nil, err
	}
	b.sc.s = s
	return s, nil
}

// Lasts implements journal.Reader with one batched direct get
// ("multi_last"): one round trip and one consistent view of the stream.
// From a server that cannot batch (nats-server < 2.11) it reads the
// subjects concurrently, one direct get each, and remembers to.
func (b *Bus) Lasts(ctx context.Context, cluster string, vmid int, kinds ...events.Kind) ([]*journal.Entry, error) {
	subjects := make([]string, len(kinds))
	for i, k := range kinds {
		subjects[i] = b.StoredSubject(k, cluster, vmid)
	}
	if !b.lasts.unsupported.Load() {
		out, err := b.lastEntries(ctx, subjects)
		switch {
		case err == nil:
			return out, nil
		case !errors.Is(err, ErrBatchGetUnsupported):
			return nil, fmt.Errorf("journal of %d: %w", vmid, err)
		}
		b.lasts.unsupported.Store(true)
		b.log.Info().Msg("the NATS server does not batch direct gets (nats-server < 2.11?); reading the journal one subject at a time")
	}
	s, err := b.stream(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*journal.Entry, len(kinds))
	errs := make([]error, len(kinds))
	var wg sync.WaitGroup
	for i := range subjects {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := s.GetLastMsgForSubject(ctx, subjects[i])
			switch {
			case errors.Is(err, jetstream.ErrMsgNotFound):
			case err != nil:
				errs[i] = fmt.Errorf("last %s of %d: %w", kinds[i], vmid, err)
			default:
				out[i] = entryOf(m)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// Next implements journal.Reader.
func (b *Bus) Next(ctx context.Context, kind events.Kind, cluster string, vmid int, seq uint64) (*journal.Entry, error) {
	s, err := b.stream(ctx)
	if err != nil {
		return nil, err
	}
	m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(b.StoredSubject(kind, cluster, vmid)))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s of %d at or after %d: %w", kind, vmid, seq, err)
	}
	return entryOf(m), nil
}

// NextOfKind implements journal.KindReader: one message get, the server
// finding the first stored subject of the kind's guests at or after seq.
func (b *Bus) NextOfKind(ctx context.Context, kind events.Kind, cluster string, seq uint64) (*journal.Entry, error) {
	s, err := b.stream(ctx)
	if err != nil {
		return nil, err
	}
	m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(events.ClusterSubject(kind, cluster)+".*.*")) // <vmid>.<partition>
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s at or after %d: %w", kind, seq, err)
	}
	return entryOf(m), nil
}

// Get implements journal.Reader.
func (b *Bus) Get(ctx context.Context, seq uint64) (*journal.Entry, error) {
	s, err := b.stream(ctx)
	if err != nil {
		return nil, err
	}
	m, err := s.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("entry %d: %w", seq, err)
	}
	return entryOf(m), nil
}

func natsMsg(m events.Message) *nats.Msg {
	return &nats.Msg{Subject: m.Subject, Data: m.Data, Header: nats.Header(m.Header)}
}

// expectHeaders sets on h (made if nil, else the caller's, as nats.go's
// publish options set them) the headers x stands for, with the values
// nats.go's WithMsgID, WithExpectLastSequencePerSubject and WithMsgTTL
// give them: the publish then needs no options, which nats.go would
// allocate and apply anew for every message.
func expectHeaders(h nats.Header, x journal.Expect) nats.Header {
	if h == nil {
		h = make(nats.Header, 3)
	}
	if x.MsgID != "" {
		h.Set(jetstream.MsgIDHeader, x.MsgID)
	}
	if x.Fenced {
		h.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(x.LastSubjectSeq, 10))
	}
	if x.TTL > 0 {
		h.Set(jetstream.MsgTTLHeader, x.TTL.String())
	}
	return h
}

// Append implements journal.Appender with Publish's retries while a
// replicated stream has no leader. A refused fence is journal.ErrFenced.
func (b *Bus) Append(ctx context.Context, m events.Message, x journal.Expect) (journal.Ack, error) {
	ack, err := b.Publish(ctx, m.Subject, m.Data, expectHeaders(nats.Header(m.Header), x))
	b.writes.note(err)
	if err != nil {
		if IsWrongLastSequence(err) {
			return journal.Ack{}, fmt.Errorf("%w: %w", journal.ErrFenced, err)
		}
		return journal.Ack{}, err
	}
	return journal.Ack{Seq: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

// Async publishes without waiting, on a JetStream context of its own: at
// most maxPending unacknowledged, each failing after timeout if no
// acknowledgement comes (a publish lost with a dying server is otherwise
// never resolved).
type Async struct {
	js     jetstream.JetStream
	writes *writeHealth
}

// Async returns an asynchronous appender on b's connection.
func (b *Bus) Async(maxPending int, timeout time.Duration) (*Async, error) {
	js, err := jetstream.New(b.NC, jetstream.WithPublishAsyncMaxPending(maxPending), jetstream.WithPublishAsyncTimeout(timeout))
	if err != nil {
		return nil, fmt.Errorf("bus: jetstream: %w", err)
	}
	return &Async{js: js, writes: b.writes}, nil
}

// AppendAsync implements journal.AsyncAppender.
func (a *Async) AppendAsync(m events.Message, x journal.Expect) (journal.Future, error) {
	return appendAsync(a.js, a.writes, m, x)
}

// AppendAsync implements journal.AsyncAppender on the connection's own
// JetStream context: at most 4,000 unacknowledged (nats.go's default), each
// failing after 30 s without an acknowledgement.
func (b *Bus) AppendAsync(m events.Message, x journal.Expect) (journal.Future, error) {
	return appendAsync(b.JS, b.writes, m, x)
}

func appendAsync(js jetstream.JetStream, w *writeHealth, m events.Message, x journal.Expect) (journal.Future, error) {
	msg := natsMsg(m)
	msg.Header = expectHeaders(msg.Header, x)
	f, err := js.PublishMsgAsync(msg)
	if err != nil {
		return nil, err
	}
	return future{f, w}, nil
}

// Complete is closed when every publish made so far is resolved.
func (a *Async) Complete() <-chan struct{} { return a.js.PublishAsyncComplete() }

type future struct {
	f jetstream.PubAckFuture
	w *writeHealth
}

func ackOf(a *jetstream.PubAck) journal.Ack {
	return journal.Ack{Seq: a.Sequence, Duplicate: a.Duplicate}
}

func fenced(err error) error {
	if IsWrongLastSequence(err) {
		return fmt.Errorf("%w: %w", journal.ErrFenced, err)
	}
	return err
}

func (f future) Poll() (journal.Ack, error, bool) {
	select {
	case a := <-f.f.Ok():
		f.w.note(nil)
		return ackOf(a), nil, true
	case err := <-f.f.Err():
		f.w.note(err)
		return journal.Ack{}, fenced(err), true
	default:
		return journal.Ack{}, nil, false
	}
}

func (f future) Wait(ctx context.Context) (journal.Ack, error) {
	select {
	case a := <-f.f.Ok():
		f.w.note(nil)
		return ackOf(a), nil
	case err := <-f.f.Err():
		f.w.note(err)
		return journal.Ack{}, fenced(err)
	case <-ctx.Done():
		return journal.Ack{}, ctx.Err()
	}
}

// Info implements journal.Follower, waiting through transient failures.
func (b *Bus) Info(ctx context.Context) (journal.Info, error) {
	_, info, err := b.WaitStream(ctx)
	if err != nil {
		return journal.Info{}, err
	}
	st := info.State
	return journal.Info{FirstSeq: st.FirstSeq, LastSeq: st.LastSeq, Msgs: st.Msgs, Created: info.Created}, nil
}
